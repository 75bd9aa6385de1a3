//! One game route: its state (liveness, page visibility, pending outputs,
//! dialogue), the page signals it takes, its public state and the archive built
//! when it ends.

use std::collections::VecDeque;
use std::time::Instant;

use companiond_core::now_secs;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::config::GamesConfig;

/// Pending outputs kept per route (oldest dropped first).
pub const MAX_PENDING_OUTPUTS: usize = 50;
/// Dialogue items kept per route (oldest dropped first).
pub const MAX_DIALOG_ITEMS: usize = 500;
/// Dialogue items copied into the archive's `last_full_dialogues`.
pub const LAST_FULL_DIALOGUES: usize = 8;
/// Page visibility values that use the hidden-page timeout.
const HIDDEN_STATES: &[&str] = &["hidden", "prerender", "unloaded"];

/// One game route.
#[derive(Debug, Clone)]
pub struct GameRoute {
    pub instance: u64,
    pub game_type: String,
    pub session_id: String,
    pub persona_name: String,
    pub active: bool,
    pub created_at: f64,
    pub last_activity: f64,
    pub last_heartbeat_at: f64,
    pub(super) liveness: Instant,
    pub page_visible: bool,
    pub visibility_state: String,
    /// Queued outputs. Items stay open JSON objects: each producer (user input,
    /// assistant line, game event from the page) adds its own keys to the
    /// `seq`/`id`/`ts` the route stamps.
    pub pending: VecDeque<Value>,
    output_seq: u64,
    /// The dialogue log; open JSON objects as [`GameRoute::pending`] is.
    pub dialog: VecDeque<Value>,
    dialog_seq: u64,
    pub input_mode: &'static str,
    pub input_count: u64,
    /// The page's own game state and score: open objects the page owns.
    pub last_state: Value,
    pub final_score: Value,
    pub game_started: bool,
    pub game_started_at: Option<f64>,
    pub mode: Option<String>,
    pub pre_game_context: Value,
    pub exit_reason: Option<String>,
    pub exit_started_at: Option<f64>,
    pub(super) ended: Option<Instant>,
    pub archive: Option<Archive>,
    pub(super) transcript_ids: VecDeque<String>,
}

/// What a route lookup found when it found no usable route.
#[derive(Debug, Clone)]
pub enum Miss {
    /// No active route of this game type for the character.
    Inactive,
    /// An active route exists but for another session; its public state.
    Mismatch(RouteState),
}

/// The public state of (character, game type): `state` in the route answers.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RouteState {
    /// A route exists (active or ended).
    Route(Box<PublicRoute>),
    /// No route: `{game_route_active:false}`.
    NoRoute { game_route_active: bool },
}

impl RouteState {
    /// The state reported when no route exists.
    pub fn none() -> RouteState {
        RouteState::NoRoute {
            game_route_active: false,
        }
    }

    /// The route's session, when there is a route.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            RouteState::Route(r) => Some(&r.session_id),
            RouteState::NoRoute { .. } => None,
        }
    }
}

/// `anyOf` a route or `{game_route_active:false}`: the variants overlap (a
/// route has `game_route_active` too), so the derive's `oneOf` would not hold.
impl utoipa::PartialSchema for RouteState {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, Type};
        use utoipa::openapi::Ref;
        let none = ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some("no route of this game type for the character"))
            .property(
                "game_route_active",
                ObjectBuilder::new()
                    .schema_type(Type::Boolean)
                    .enum_values(Some([false])),
            )
            .required("game_route_active");
        Schema::AnyOf(
            AnyOfBuilder::new()
                .item(Ref::from_schema_name("PublicRoute"))
                .item(none)
                .build(),
        )
        .into()
    }
}

impl utoipa::ToSchema for RouteState {
    fn schemas(
        out: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        use utoipa::PartialSchema;
        out.push(("PublicRoute".into(), PublicRoute::schema()));
        <PublicRoute as utoipa::ToSchema>::schemas(out);
    }
}

/// The public state of one route (fields beyond the interface's are documented
/// in docs/games.md).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PublicRoute {
    /// The route is active (an ended route is kept a while, inactive).
    pub game_route_active: bool,
    pub game_type: String,
    pub session_id: String,
    pub persona_name: String,
    /// `route_<n>`, unique in this process.
    pub route_instance_id: String,
    /// Unix seconds (so are the two below).
    pub created_at: f64,
    pub last_activity: f64,
    pub last_heartbeat_at: f64,
    /// The page must send heartbeats (while active).
    pub heartbeat_enabled: bool,
    /// Seconds: the heartbeat interval, the timeout in force for the page's
    /// visibility, the foreground and the hidden-page timeout.
    pub heartbeat_interval_seconds: f64,
    pub heartbeat_timeout_seconds: f64,
    pub foreground_heartbeat_timeout_seconds: f64,
    pub hidden_heartbeat_timeout_seconds: f64,
    /// The page's last reported visibility.
    pub page_visible: bool,
    pub visibility_state: String,
    /// Main-chat text and voice go into the game (while active).
    pub game_external_text_route_active: bool,
    pub game_external_voice_route_active: bool,
    /// `none`, `text` or `voice`: the last input's source, and how many inputs.
    pub game_input_mode: &'static str,
    pub game_input_count: u64,
    /// Sizes of the dialogue log and the output queue.
    pub dialog_count: usize,
    pub pending_output_count: usize,
    /// The newest dialogue items.
    pub last_dialogues: Vec<Value>,
    /// The page's own state and score, as it last sent them.
    pub last_state: Value,
    #[serde(rename = "finalScore")]
    pub final_score: Value,
    pub game_started: bool,
    /// Unix seconds; null until the page reports the start.
    pub game_started_at: Option<f64>,
    /// What the character and user said before the game.
    #[serde(rename = "preGameContext")]
    pub pre_game_context: Value,
    /// The game's mode (badminton), when the start named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Present once the route has ended (both fields, or neither).
    #[serde(flatten)]
    #[schema(value_type = Exit)]
    pub exit: Option<Exit>,
}

/// Why and when a route ended.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Exit {
    /// Why it ended (`route_end`, `heartbeat_timeout`, ...); absent while active.
    #[schema(required = false)]
    pub exit_reason: String,
    pub exit_started_at: Option<f64>,
}

/// What an ended route leaves: its dialogue, last state and score.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Archive {
    pub game_type: String,
    pub session_id: String,
    pub persona_name: String,
    /// The whole dialogue log, and its newest items.
    pub dialog_count: usize,
    pub full_dialogues: Vec<Value>,
    pub last_full_dialogues: Vec<Value>,
    /// One sentence naming the game and its final result.
    pub summary: String,
    /// The newest 20 `game_event` items of the dialogue.
    pub key_events: Vec<Value>,
    pub last_state: Value,
    /// The page's final score, else the score in its last state.
    #[serde(rename = "finalScore")]
    pub final_score: Value,
    pub game_started: bool,
    /// Unix seconds.
    pub created_at: f64,
    pub ended_at: f64,
    pub exit_reason: String,
}

/// A route that was just finalized, for the caller's side effects.
#[derive(Debug, Clone)]
pub struct Finalized {
    pub persona_name: String,
    pub game_type: String,
    pub session_id: String,
    pub reason: String,
    pub archive: Archive,
    pub state: RouteState,
    pub final_score: Value,
    pub mode: Option<String>,
}

/// The page's signals of a start / heartbeat / voice-transcript / end call
/// (read by `http::body::PageSignals`).
#[derive(Debug, Default, Clone)]
pub struct Signals {
    pub visibility_state: Option<String>,
    pub page_visible: Option<bool>,
    pub game_started: Option<bool>,
    pub game_started_elapsed_ms: Option<f64>,
    pub current_state: Option<Value>,
    pub final_score: Option<Value>,
}

impl GameRoute {
    pub(super) fn new(
        instance: u64,
        persona: &str,
        game_type: &str,
        session_id: &str,
    ) -> GameRoute {
        let now = now_secs();
        GameRoute {
            instance,
            game_type: game_type.into(),
            session_id: session_id.into(),
            persona_name: persona.into(),
            active: true,
            created_at: now,
            last_activity: now,
            last_heartbeat_at: now,
            liveness: Instant::now(),
            page_visible: true,
            visibility_state: "visible".into(),
            pending: VecDeque::new(),
            output_seq: 0,
            dialog: VecDeque::new(),
            dialog_seq: 0,
            input_mode: "none",
            input_count: 0,
            last_state: json!({}),
            final_score: json!({}),
            game_started: false,
            game_started_at: None,
            mode: None,
            pre_game_context: json!({}),
            exit_reason: None,
            exit_started_at: None,
            ended: None,
            archive: None,
            transcript_ids: VecDeque::new(),
        }
    }

    fn timeout(&self, cfg: &GamesConfig) -> std::time::Duration {
        if self.page_visible {
            cfg.heartbeat_timeout
        } else {
            cfg.hidden_heartbeat_timeout
        }
    }

    pub(super) fn expired(&self, now: Instant, cfg: &GamesConfig) -> bool {
        self.active && now.saturating_duration_since(self.liveness) > self.timeout(cfg)
    }

    pub(super) fn apply(&mut self, s: &Signals) {
        if let Some(v) = &s.visibility_state {
            self.visibility_state = v.clone();
            self.page_visible = !HIDDEN_STATES.contains(&v.as_str());
        }
        if let Some(p) = s.page_visible {
            self.page_visible = p;
            if s.visibility_state.is_none() {
                self.visibility_state = if p { "visible" } else { "hidden" }.into();
            }
        }
        if let Some(true) = s.game_started {
            if !self.game_started {
                let elapsed = s.game_started_elapsed_ms.unwrap_or(0.0) / 1000.0;
                self.game_started_at = Some(now_secs() - elapsed);
            }
            self.game_started = true;
        }
        if let Some(cs) = &s.current_state {
            self.last_state = cs.clone();
        }
        if let Some(fs) = &s.final_score {
            self.final_score = fs.clone();
        }
    }

    pub(super) fn touch(&mut self) {
        self.last_activity = now_secs();
    }

    /// Queue an output for `/route/drain`.
    pub fn push_output(&mut self, mut item: Map<String, Value>) -> Value {
        self.output_seq += 1;
        item.insert("seq".into(), json!(self.output_seq));
        item.insert("id".into(), json!(format!("gout_{:04}", self.output_seq)));
        item.insert("ts".into(), json!(now_secs()));
        let v = Value::Object(item);
        self.pending.push_back(v.clone());
        while self.pending.len() > MAX_PENDING_OUTPUTS {
            self.pending.pop_front();
        }
        v
    }

    /// Append a dialogue item (user input, assistant line, game event).
    pub fn push_dialog(&mut self, mut item: Map<String, Value>) {
        self.dialog_seq += 1;
        item.insert("id".into(), json!(format!("glog_{:04}", self.dialog_seq)));
        item.insert("ts".into(), json!(now_secs()));
        self.dialog.push_back(Value::Object(item));
        while self.dialog.len() > MAX_DIALOG_ITEMS {
            self.dialog.pop_front();
        }
    }

    /// The public route state (fields beyond the interface's are documented in docs/games.md).
    /// The newest [`LAST_FULL_DIALOGUES`] dialogue items.
    fn last_dialogues(&self) -> Vec<Value> {
        self.dialog
            .iter()
            .skip(self.dialog.len().saturating_sub(LAST_FULL_DIALOGUES))
            .cloned()
            .collect()
    }

    /// The public route state.
    pub fn public_state(&self, cfg: &GamesConfig) -> RouteState {
        RouteState::Route(Box::new(self.public_route(cfg)))
    }

    /// The public fields of this route.
    pub fn public_route(&self, cfg: &GamesConfig) -> PublicRoute {
        PublicRoute {
            game_route_active: self.active,
            game_type: self.game_type.clone(),
            session_id: self.session_id.clone(),
            persona_name: self.persona_name.clone(),
            route_instance_id: format!("route_{}", self.instance),
            created_at: self.created_at,
            last_activity: self.last_activity,
            last_heartbeat_at: self.last_heartbeat_at,
            heartbeat_enabled: self.active,
            heartbeat_interval_seconds: cfg.heartbeat_interval.as_secs_f64(),
            heartbeat_timeout_seconds: self.timeout(cfg).as_secs_f64(),
            foreground_heartbeat_timeout_seconds: cfg.heartbeat_timeout.as_secs_f64(),
            hidden_heartbeat_timeout_seconds: cfg.hidden_heartbeat_timeout.as_secs_f64(),
            page_visible: self.page_visible,
            visibility_state: self.visibility_state.clone(),
            game_external_text_route_active: self.active,
            game_external_voice_route_active: self.active,
            game_input_mode: self.input_mode,
            game_input_count: self.input_count,
            dialog_count: self.dialog.len(),
            pending_output_count: self.pending.len(),
            last_dialogues: self.last_dialogues(),
            last_state: self.last_state.clone(),
            final_score: self.final_score.clone(),
            game_started: self.game_started,
            game_started_at: self.game_started_at,
            pre_game_context: self.pre_game_context.clone(),
            mode: self.mode.clone(),
            exit: self.exit_reason.as_ref().map(|r| Exit {
                exit_reason: r.clone(),
                exit_started_at: self.exit_started_at,
            }),
        }
    }

    fn build_archive(&self, reason: &str, ended_at: f64) -> Archive {
        let key_events: Vec<Value> = {
            let events: Vec<&Value> = self
                .dialog
                .iter()
                .filter(|d| d.get("type").and_then(Value::as_str) == Some("game_event"))
                .collect();
            events[events.len().saturating_sub(20)..]
                .iter()
                .map(|v| (*v).clone())
                .collect()
        };
        let final_score = if self.final_score.as_object().is_some_and(|m| !m.is_empty()) {
            self.final_score.clone()
        } else {
            self.last_state.get("score").cloned().unwrap_or(json!({}))
        };
        let score_text = if final_score.as_object().is_some_and(|m| !m.is_empty()) {
            final_score.to_string()
        } else {
            "none".into()
        };
        Archive {
            game_type: self.game_type.clone(),
            session_id: self.session_id.clone(),
            persona_name: self.persona_name.clone(),
            dialog_count: self.dialog.len(),
            full_dialogues: self.dialog.iter().cloned().collect(),
            last_full_dialogues: self.last_dialogues(),
            summary: format!(
                "{} game ended. Final result: {}.",
                self.game_type, score_text
            ),
            key_events,
            last_state: self.last_state.clone(),
            final_score,
            game_started: self.game_started,
            created_at: self.created_at,
            ended_at,
            exit_reason: reason.to_string(),
        }
    }

    /// Mark inactive and build the archive (once).
    pub(super) fn finalize(&mut self, reason: &str, cfg: &GamesConfig) -> Finalized {
        let now = now_secs();
        self.active = false;
        self.exit_reason = Some(reason.to_string());
        self.exit_started_at = Some(now);
        self.ended = Some(Instant::now());
        let archive = self.build_archive(reason, now);
        self.archive = Some(archive.clone());
        Finalized {
            persona_name: self.persona_name.clone(),
            game_type: self.game_type.clone(),
            session_id: self.session_id.clone(),
            reason: reason.to_string(),
            archive,
            state: self.public_state(cfg),
            final_score: self.final_score.clone(),
            mode: self.mode.clone(),
        }
    }
}

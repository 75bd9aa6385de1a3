//! The game-route table. A *game route* (`/api/game/{game_type}/route/*`, not
//! an HTTP route) binds a character to one running game round: main-chat and
//! voice input of the character go into the game while it is active. Per
//! character at most one active route; a start supersedes every other active route of the
//! character; heartbeats keep a route alive, a lapse ends it; ended routes are
//! kept (inactive) for a while so `/route/state` and a repeated `/end` can
//! report them. Pure in-memory state; the side effects of a finalized route
//! (WebSocket frame, model session, log) are done by the caller.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use companiond_core::now_secs;
use companiond_core::state::InputSource;
use serde_json::{json, Map, Value};

use crate::config::GamesConfig;

/// Pending outputs kept per route (oldest dropped first).
pub const MAX_PENDING_OUTPUTS: usize = 50;
/// Dialogue items kept per route (oldest dropped first).
pub const MAX_DIALOG_ITEMS: usize = 500;
/// Dialogue items copied into the archive's `last_full_dialogues`.
pub const LAST_FULL_DIALOGUES: usize = 8;
/// Voice-transcript request ids remembered for de-duplication.
const MAX_TRANSCRIPT_IDS: usize = 64;
/// Ended route records kept per character.
const MAX_ENDED_PER_CHARACTER: usize = 8;
/// Ended route records kept in all (oldest dropped first).
const MAX_ENDED_TOTAL: usize = 512;
/// Active routes at once (all characters); beyond it the least recently active
/// route is finalized with reason `evicted`.
const MAX_ACTIVE_TOTAL: usize = 256;

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
    liveness: Instant,
    pub page_visible: bool,
    pub visibility_state: String,
    pub pending: VecDeque<Value>,
    output_seq: u64,
    pub dialog: VecDeque<Value>,
    dialog_seq: u64,
    pub input_mode: &'static str,
    pub input_count: u64,
    pub last_state: Value,
    pub final_score: Value,
    pub game_started: bool,
    pub game_started_at: Option<f64>,
    pub mode: Option<String>,
    pub pre_game_context: Value,
    pub exit_reason: Option<String>,
    pub exit_started_at: Option<f64>,
    ended: Option<Instant>,
    pub archive: Option<Value>,
    transcript_ids: VecDeque<String>,
}

/// What a route lookup found when it found no usable route.
#[derive(Debug, Clone)]
pub enum Miss {
    /// No active route of this game type for the character.
    Inactive,
    /// An active route exists but for another session; its public state.
    Mismatch(Value),
}

/// A route that was just finalized, for the caller's side effects.
#[derive(Debug, Clone)]
pub struct Finalized {
    pub persona_name: String,
    pub game_type: String,
    pub session_id: String,
    pub reason: String,
    pub archive: Value,
    pub state: Value,
    pub final_score: Value,
    pub mode: Option<String>,
}

/// Longest `gameStartedElapsedMs` taken into account (30 days).
const MAX_ELAPSED_MS: f64 = 30.0 * 24.0 * 3600.0 * 1000.0;

/// Options read from a start / heartbeat / end body.
#[derive(Debug, Default, Clone)]
pub struct Signals {
    pub visibility_state: Option<String>,
    pub page_visible: Option<bool>,
    pub game_started: Option<bool>,
    pub game_started_elapsed_ms: Option<f64>,
    pub current_state: Option<Value>,
    pub final_score: Option<Value>,
}

impl Signals {
    /// Read the optional signals of a body (camelCase and snake_case accepted;
    /// values of the wrong type are ignored).
    pub fn from_body(b: &Map<String, Value>) -> Signals {
        let s = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| b.get(*k).and_then(Value::as_str))
                .map(|v| {
                    v.trim()
                        .to_ascii_lowercase()
                        .chars()
                        .take(32)
                        .collect::<String>()
                })
        };
        let flag = |keys: &[&str]| keys.iter().find_map(|k| b.get(*k).and_then(Value::as_bool));
        let obj = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| b.get(*k).filter(|v| v.is_object()).cloned())
        };
        Signals {
            visibility_state: s(&["visibilityState", "visibility_state"]),
            page_visible: flag(&["pageVisible", "page_visible"]),
            game_started: flag(&["gameStarted", "game_started"]),
            game_started_elapsed_ms: ["gameStartedElapsedMs", "game_started_elapsed_ms"]
                .iter()
                .find_map(|k| b.get(*k).and_then(Value::as_f64))
                // 0 to 30 days; anything else (NaN, negative, 1e308) is ignored
                // like a value of the wrong type.
                .filter(|v| v.is_finite() && (0.0..=MAX_ELAPSED_MS).contains(v)),
            current_state: obj(&["currentState", "current_state"]),
            final_score: obj(&["finalScore", "final_score"]),
        }
    }
}

impl GameRoute {
    fn new(instance: u64, persona: &str, game_type: &str, session_id: &str) -> GameRoute {
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

    fn expired(&self, now: Instant, cfg: &GamesConfig) -> bool {
        self.active && now.saturating_duration_since(self.liveness) > self.timeout(cfg)
    }

    fn apply(&mut self, s: &Signals) {
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

    fn touch(&mut self) {
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
    pub fn public_state(&self, cfg: &GamesConfig) -> Value {
        let last: Vec<&Value> = self
            .dialog
            .iter()
            .skip(self.dialog.len().saturating_sub(LAST_FULL_DIALOGUES))
            .collect();
        let mut m = json!({
            "game_route_active": self.active,
            "game_type": self.game_type,
            "session_id": self.session_id,
            "persona_name": self.persona_name,
            "route_instance_id": format!("route_{}", self.instance),
            "created_at": self.created_at,
            "last_activity": self.last_activity,
            "last_heartbeat_at": self.last_heartbeat_at,
            "heartbeat_enabled": self.active,
            "heartbeat_interval_seconds": cfg.heartbeat_interval.as_secs_f64(),
            "heartbeat_timeout_seconds": self.timeout(cfg).as_secs_f64(),
            "foreground_heartbeat_timeout_seconds": cfg.heartbeat_timeout.as_secs_f64(),
            "hidden_heartbeat_timeout_seconds": cfg.hidden_heartbeat_timeout.as_secs_f64(),
            "page_visible": self.page_visible,
            "visibility_state": self.visibility_state,
            "game_external_text_route_active": self.active,
            "game_external_voice_route_active": self.active,
            "game_input_mode": self.input_mode,
            "game_input_count": self.input_count,
            "dialog_count": self.dialog.len(),
            "pending_output_count": self.pending.len(),
            "last_dialogues": last,
            "last_state": self.last_state,
            "finalScore": self.final_score,
            "game_started": self.game_started,
            "game_started_at": self.game_started_at,
            "preGameContext": self.pre_game_context,
        });
        if let Some(mode) = &self.mode {
            m["mode"] = json!(mode);
        }
        if let Some(r) = &self.exit_reason {
            m["exit_reason"] = json!(r);
            m["exit_started_at"] = json!(self.exit_started_at);
        }
        m
    }

    fn build_archive(&self, reason: &str, ended_at: f64) -> Value {
        let dialogues: Vec<&Value> = self.dialog.iter().collect();
        let last: Vec<&Value> = self
            .dialog
            .iter()
            .skip(self.dialog.len().saturating_sub(LAST_FULL_DIALOGUES))
            .collect();
        let key_events: Vec<&Value> = {
            let events: Vec<&Value> = self
                .dialog
                .iter()
                .filter(|d| d.get("type").and_then(Value::as_str) == Some("game_event"))
                .collect();
            events[events.len().saturating_sub(20)..].to_vec()
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
        json!({
            "game_type": self.game_type,
            "session_id": self.session_id,
            "persona_name": self.persona_name,
            "dialog_count": self.dialog.len(),
            "full_dialogues": dialogues,
            "last_full_dialogues": last,
            "summary": format!("{} game ended. Final result: {}.", self.game_type, score_text),
            "key_events": key_events,
            "last_state": self.last_state,
            "finalScore": final_score,
            "game_started": self.game_started,
            "created_at": self.created_at,
            "ended_at": ended_at,
            "exit_reason": reason,
        })
    }

    /// Mark inactive and build the archive (once).
    fn finalize(&mut self, reason: &str, cfg: &GamesConfig) -> Finalized {
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

/// What `/end` found.
#[derive(Debug)]
pub enum EndOutcome {
    /// A matching active route was finalized now.
    Finalized(Finalized),
    /// The matching route had already ended: its cached archive and state.
    AlreadyEnded { archive: Value, state: Value },
    /// No route of that game type and session.
    NoRoute,
}

/// Every game route of every character.
pub struct GameRouteTable {
    cfg: GamesConfig,
    map: Mutex<HashMap<(String, String), GameRoute>>,
    next: AtomicU64,
}

impl GameRouteTable {
    pub fn new(cfg: GamesConfig) -> Self {
        GameRouteTable {
            cfg,
            map: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), GameRoute>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn key(persona: &str, game_type: &str) -> (String, String) {
        (persona.to_string(), game_type.to_string())
    }

    /// Start a route: every active route of the character is finalized first
    /// (`superseded_by_route_start`). Returns the new public state and the superseded routes.
    pub fn start(
        &self,
        persona: &str,
        game_type: &str,
        session_id: &str,
        mode: Option<String>,
        pre_game_context: Value,
        signals: &Signals,
    ) -> (Value, Vec<Finalized>) {
        let mut map = self.lock();
        let mut superseded = Vec::new();
        for r in map.values_mut() {
            if r.persona_name == persona && r.active {
                superseded.push(r.finalize("superseded_by_route_start", &self.cfg));
            }
        }
        let mut evicted = Vec::new();
        while map.values().filter(|r| r.active).count() >= MAX_ACTIVE_TOTAL {
            let Some(r) = map
                .values_mut()
                .filter(|r| r.active)
                .min_by(|a, b| a.last_activity.total_cmp(&b.last_activity))
            else {
                break;
            };
            evicted.push(r.finalize("evicted", &self.cfg));
        }
        let mut route = GameRoute::new(
            self.next.fetch_add(1, Ordering::Relaxed),
            persona,
            game_type,
            session_id,
        );
        route.mode = mode;
        route.pre_game_context = pre_game_context;
        route.apply(signals);
        let state = route.public_state(&self.cfg);
        map.insert(Self::key(persona, game_type), route);
        prune_ended(&mut map, persona);
        superseded.extend(evicted);
        (state, superseded)
    }

    /// The active route of a character, any game type: (game_type, session_id).
    pub fn active_of(&self, persona: &str) -> Option<(String, String)> {
        self.lock()
            .values()
            .find(|r| r.persona_name == persona && r.active)
            .map(|r| (r.game_type.clone(), r.session_id.clone()))
    }

    /// The most recently ended route of a character: (game_type, session_id, exit_reason).
    pub fn last_ended_of(&self, persona: &str) -> Option<Value> {
        self.lock()
            .values()
            .filter(|r| r.persona_name == persona && !r.active)
            .max_by(|a, b| {
                a.exit_started_at
                    .unwrap_or(0.0)
                    .total_cmp(&b.exit_started_at.unwrap_or(0.0))
            })
            .map(|r| {
                json!({"game_type": r.game_type, "session_id": r.session_id,
                       "exit_reason": r.exit_reason, "ended_at": r.exit_started_at})
            })
    }

    /// The public state of (character, game type): the route's (active or ended), or
    /// `{game_route_active:false}`.
    pub fn state(&self, persona: &str, game_type: &str) -> Value {
        self.lock()
            .get(&Self::key(persona, game_type))
            .map(|r| r.public_state(&self.cfg))
            .unwrap_or_else(inactive_state)
    }

    /// Run `f` on the active route of (character, game type) whose session matches
    /// (`None` adopts the active route's session).
    pub fn with_active<R>(
        &self,
        persona: &str,
        game_type: &str,
        session_id: Option<&str>,
        f: impl FnOnce(&mut GameRoute, &GamesConfig) -> R,
    ) -> Result<R, Miss> {
        let mut map = self.lock();
        match map.get_mut(&Self::key(persona, game_type)) {
            Some(r) if r.active => {
                if session_id.is_some_and(|s| s != r.session_id) {
                    return Err(Miss::Mismatch(r.public_state(&self.cfg)));
                }
                Ok(f(r, &self.cfg))
            }
            _ => Err(Miss::Inactive),
        }
    }

    /// Pop up to `limit` pending outputs (FIFO).
    pub fn drain(
        &self,
        persona: &str,
        game_type: &str,
        session_id: Option<&str>,
        limit: usize,
    ) -> (Vec<Value>, Value) {
        match self.with_active(persona, game_type, session_id, |r, cfg| {
            let n = limit.min(r.pending.len());
            let out: Vec<Value> = r.pending.drain(..n).collect();
            (out, r.public_state(cfg))
        }) {
            Ok(x) => x,
            Err(Miss::Mismatch(state)) => (Vec::new(), state),
            Err(Miss::Inactive) => (Vec::new(), inactive_state()),
        }
    }

    /// A heartbeat: refresh liveness and apply the page signals.
    pub fn heartbeat(
        &self,
        persona: &str,
        game_type: &str,
        session_id: Option<&str>,
        signals: &Signals,
    ) -> Result<Value, Miss> {
        self.with_active(persona, game_type, session_id, |r, cfg| {
            r.liveness = Instant::now();
            r.last_heartbeat_at = now_secs();
            r.touch();
            r.apply(signals);
            r.public_state(cfg)
        })
    }

    /// A voice transcript for the game: queued as an output and a dialogue item.
    /// `Ok((handled, state))`; handled is false for a repeated `request_id`.
    pub fn transcript(
        &self,
        persona: &str,
        game_type: &str,
        session_id: Option<&str>,
        text: &str,
        request_id: Option<&str>,
        signals: &Signals,
    ) -> Result<(bool, Value), Miss> {
        self.with_active(persona, game_type, session_id, |r, cfg| {
            r.apply(signals);
            if let Some(id) = request_id {
                if r.transcript_ids.iter().any(|x| x == id) {
                    return (false, r.public_state(cfg));
                }
                r.transcript_ids.push_back(id.to_string());
                while r.transcript_ids.len() > MAX_TRANSCRIPT_IDS {
                    r.transcript_ids.pop_front();
                }
            }
            take_input(r, text, "voice", "voice_transcript");
            (true, r.public_state(cfg))
        })
    }

    /// Main-chat input of a character: taken by its active route, if any.
    pub fn route_input(&self, persona: &str, text: &str, source: InputSource) -> Option<Value> {
        let mut map = self.lock();
        let r = map
            .values_mut()
            .find(|r| r.persona_name == persona && r.active)?;
        let src = match source {
            InputSource::Text => "text",
            InputSource::Voice => "voice",
        };
        let output = take_input(r, text, src, "main_chat");
        Some(json!({
            "routed": true,
            "game_type": r.game_type,
            "session_id": r.session_id,
            "persona_name": r.persona_name,
            "source": src,
            "text": text,
            "output_id": output.get("id").cloned().unwrap_or(Value::Null),
        }))
    }

    /// End the route of (character, game type, session).
    pub fn end(
        &self,
        persona: &str,
        game_type: &str,
        session_id: &str,
        reason: &str,
        signals: &Signals,
    ) -> EndOutcome {
        let mut map = self.lock();
        match map.get_mut(&Self::key(persona, game_type)) {
            Some(r) if r.session_id == session_id && r.active => {
                r.apply(signals);
                EndOutcome::Finalized(r.finalize(reason, &self.cfg))
            }
            Some(r) if r.session_id == session_id => EndOutcome::AlreadyEnded {
                archive: r.archive.clone().unwrap_or(Value::Null),
                state: r.public_state(&self.cfg),
            },
            _ => EndOutcome::NoRoute,
        }
    }

    /// Finalize lapsed routes (`heartbeat_timeout`) and purge old ended records.
    pub fn sweep(&self) -> Vec<Finalized> {
        let now = Instant::now();
        let mut map = self.lock();
        let mut out = Vec::new();
        for r in map.values_mut() {
            if r.expired(now, &self.cfg) {
                out.push(r.finalize("heartbeat_timeout", &self.cfg));
            }
        }
        let ttl = self.cfg.ended_route_ttl;
        map.retain(|_, r| {
            r.active
                || r.ended
                    .is_none_or(|e| now.saturating_duration_since(e) < ttl)
        });
        out
    }
}

/// Queue an input for the game and record it in the dialogue log.
fn take_input(r: &mut GameRoute, text: &str, source: &'static str, via: &str) -> Value {
    r.input_mode = source;
    r.input_count += 1;
    r.touch();
    let mut d = Map::new();
    d.insert("type".into(), json!("user"));
    d.insert("source".into(), json!(source));
    d.insert("text".into(), json!(text));
    r.push_dialog(d);
    let mut o = Map::new();
    o.insert("type".into(), json!("user_input"));
    o.insert("source".into(), json!(source));
    o.insert("via".into(), json!(via));
    o.insert("text".into(), json!(text));
    r.push_output(o)
}

/// Keep at most a few ended records per character.
fn prune_ended(map: &mut HashMap<(String, String), GameRoute>, persona: &str) {
    let oldest_first = |map: &HashMap<(String, String), GameRoute>, only: Option<&str>| {
        let mut ended: Vec<((String, String), f64)> = map
            .iter()
            .filter(|(_, r)| !r.active && only.is_none_or(|p| r.persona_name == p))
            .map(|(k, r)| (k.clone(), r.exit_started_at.unwrap_or(0.0)))
            .collect();
        ended.sort_by(|a, b| a.1.total_cmp(&b.1));
        ended
    };
    for (only, cap) in [
        (Some(persona), MAX_ENDED_PER_CHARACTER),
        (None, MAX_ENDED_TOTAL),
    ] {
        let ended = oldest_first(map, only);
        let excess = ended.len().saturating_sub(cap);
        for (k, _) in ended.into_iter().take(excess) {
            map.remove(&k);
        }
    }
}

/// The state reported when no route exists.
pub fn inactive_state() -> Value {
    json!({"game_route_active": false})
}

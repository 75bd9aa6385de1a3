//! The game-route table. A *game route* (`/api/game/{game_type}/route/*`, not
//! an HTTP route) binds a character to one running game round: main-chat and
//! voice input of the character go into the game while it is active. Per
//! character at most one active route; a start supersedes every other active route of the
//! character; heartbeats keep a route alive, a lapse ends it; ended routes are
//! kept (inactive) for a while so `/route/state` and a repeated `/end` can
//! report them. Pure in-memory state; the side effects of a finalized route
//! (WebSocket frame, model session, log) are done by the caller.

mod route;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use companiond_core::now_secs;
use companiond_core::state::InputSource;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::config::GamesConfig;

pub use route::{Archive, Finalized, GameRoute, Miss, PublicRoute, RouteState, Signals};

/// Voice-transcript request ids remembered for de-duplication.
const MAX_TRANSCRIPT_IDS: usize = 64;
/// Ended route records kept per character.
const MAX_ENDED_PER_CHARACTER: usize = 8;
/// Ended route records kept in all (oldest dropped first).
const MAX_ENDED_TOTAL: usize = 512;
/// Active routes at once (all characters); beyond it the least recently active
/// route is finalized with reason `evicted`.
const MAX_ACTIVE_TOTAL: usize = 256;

/// What `/end` found.
#[derive(Debug)]
pub enum EndOutcome {
    /// A matching active route was finalized now.
    Finalized(Finalized),
    /// The matching route had already ended: its cached archive and state.
    AlreadyEnded {
        archive: Option<Archive>,
        state: RouteState,
    },
    /// No route of that game type and session.
    NoRoute,
}

/// The most recently ended route of a character (`ended_route` of `/route/active`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndedRoute {
    pub game_type: String,
    pub session_id: String,
    /// Why it ended (`route_end`, `heartbeat_timeout`, …).
    pub exit_reason: Option<String>,
    /// Unix seconds.
    pub ended_at: Option<f64>,
}

/// Main-chat input a route took.
#[derive(Debug, Serialize)]
pub struct RoutedInput {
    /// Always true.
    pub routed: bool,
    /// The route that took it.
    pub game_type: String,
    pub session_id: String,
    pub persona_name: String,
    /// `text` or `voice`.
    pub source: &'static str,
    pub text: String,
    /// The id of the queued output.
    pub output_id: Value,
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
    ) -> (RouteState, Vec<Finalized>) {
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

    /// The most recently ended route of a character.
    pub fn last_ended_of(&self, persona: &str) -> Option<EndedRoute> {
        self.lock()
            .values()
            .filter(|r| r.persona_name == persona && !r.active)
            .max_by(|a, b| {
                a.exit_started_at
                    .unwrap_or(0.0)
                    .total_cmp(&b.exit_started_at.unwrap_or(0.0))
            })
            .map(|r| EndedRoute {
                game_type: r.game_type.clone(),
                session_id: r.session_id.clone(),
                exit_reason: r.exit_reason.clone(),
                ended_at: r.exit_started_at,
            })
    }

    /// The public state of (character, game type): the route's (active or ended), or
    /// `{game_route_active:false}`.
    pub fn state(&self, persona: &str, game_type: &str) -> RouteState {
        self.lock()
            .get(&Self::key(persona, game_type))
            .map(|r| r.public_state(&self.cfg))
            .unwrap_or_else(RouteState::none)
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
    ) -> (Vec<Value>, RouteState) {
        match self.with_active(persona, game_type, session_id, |r, cfg| {
            let n = limit.min(r.pending.len());
            let out: Vec<Value> = r.pending.drain(..n).collect();
            (out, r.public_state(cfg))
        }) {
            Ok(x) => x,
            Err(Miss::Mismatch(state)) => (Vec::new(), state),
            Err(Miss::Inactive) => (Vec::new(), RouteState::none()),
        }
    }

    /// A heartbeat: refresh liveness and apply the page signals.
    pub fn heartbeat(
        &self,
        persona: &str,
        game_type: &str,
        session_id: Option<&str>,
        signals: &Signals,
    ) -> Result<RouteState, Miss> {
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
    ) -> Result<(bool, RouteState), Miss> {
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
    pub fn route_input(
        &self,
        persona: &str,
        text: &str,
        source: InputSource,
    ) -> Option<RoutedInput> {
        let mut map = self.lock();
        let r = map
            .values_mut()
            .find(|r| r.persona_name == persona && r.active)?;
        let src = match source {
            InputSource::Text => "text",
            InputSource::Voice => "voice",
        };
        let output = take_input(r, text, src, "main_chat");
        Some(RoutedInput {
            routed: true,
            game_type: r.game_type.clone(),
            session_id: r.session_id.clone(),
            persona_name: r.persona_name.clone(),
            source: src,
            text: text.to_string(),
            output_id: output.get("id").cloned().unwrap_or(Value::Null),
        })
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
                archive: r.archive.clone(),
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

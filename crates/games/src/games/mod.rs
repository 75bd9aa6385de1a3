//! Mini-games (`/api/game`): the game-route table and the life of a route, the
//! dialogue through the model, the delivery of lines to the chat, the
//! diagnostic logs and the leaderboard, tied together by [`Games`]. The
//! handlers are in `crate::http`.

pub(crate) mod character;
pub(crate) mod chat;
pub(crate) mod delivery;
pub(crate) mod game_routes;
pub(crate) mod kind;
pub mod leaderboard;
pub(crate) mod lifecycle;
pub(crate) mod logs;
pub(crate) mod passive_guard;
pub(crate) mod quick_lines;

use companiond_core::frames::ServerFrame;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use companiond_core::llm::ChatMessage;
use companiond_core::state::{Inner, InputRouter, InputSource};
use companiond_core::AppState;
use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::config::GamesConfig;
use game_routes::{Finalized, GameRouteTable};
use leaderboard::Leaderboard;
use logs::{LogStore, NewEntry};

/// The game type reserved for the icebreaker (it has its own routes).
pub const ICEBREAKER_GAME_TYPE: &str = crate::icebreaker::SOURCE;

/// One game dialogue model session (per character, game type and round).
pub struct LlmSession {
    pub messages: Vec<ChatMessage>,
    pub last_used: Instant,
}

/// Everything the mini-game family keeps in memory.
pub struct Games {
    pub cfg: GamesConfig,
    pub game_routes: GameRouteTable,
    pub logs: LogStore,
    pub board: Leaderboard,
    pub llm_sessions: Mutex<HashMap<String, LlmSession>>,
    pub rate: Mutex<HashMap<(String, String), VecDeque<Instant>>>,
    pub quick_cache: Mutex<VecDeque<(String, Value)>>,
}

/// The key of a game dialogue model session.
pub fn llm_key(persona: &str, game_type: &str, session_id: &str) -> String {
    format!("{persona}:{game_type}:{session_id}")
}

impl Games {
    pub fn new(st: &AppState, cfg: GamesConfig) -> Games {
        let db = st
            .data_dir()
            .join("state")
            .join("game_scores")
            .join("badminton_scores.db");
        Games {
            game_routes: GameRouteTable::new(cfg.clone()),
            logs: LogStore::new(cfg.log_session_limit, cfg.log_entry_limit),
            board: Leaderboard::new(db, cfg.score_session_ttl).with_notices(st.notices.clone()),
            llm_sessions: Mutex::default(),
            rate: Mutex::default(),
            quick_cache: Mutex::default(),
            cfg,
        }
    }

    /// Drop the dialogue model session of a round; whether one existed.
    pub fn close_llm_session(&self, persona: &str, game_type: &str, session_id: &str) -> bool {
        self.llm_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&llm_key(persona, game_type, session_id))
            .is_some()
    }

    /// The side effects of a finalized route: the model session is closed, the
    /// chat connections are told (`game_window_state_change` closed), the log ends.
    /// Returns whether a model session was closed.
    pub fn after_finalize(&self, st: &AppState, f: &Finalized) -> bool {
        let closed = self.close_llm_session(&f.persona_name, &f.game_type, &f.session_id);
        if let Some(m) = st.sessions.get(&f.persona_name) {
            m.notify(ServerFrame::GameWindowStateChange {
                action: "closed",
                persona_name: f.persona_name.clone(),
                game_type: f.game_type.clone(),
                session_id: f.session_id.clone(),
                reason: Some(f.reason.to_string()),
            });
        }
        self.logs.end(&f.game_type, &f.session_id, &f.reason);
        closed
    }

    /// Finalize lapsed routes and drop idle model sessions.
    pub fn sweep(&self, st: &AppState) {
        for f in self.game_routes.sweep() {
            tracing::info!(
                "game route {}/{} of {} ended: heartbeat timeout",
                f.game_type,
                f.session_id,
                f.persona_name
            );
            self.after_finalize(st, &f);
        }
        let idle = self.cfg.llm_session_idle;
        self.llm_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, s| s.last_used.elapsed() < idle);
    }

    /// Note a backend event in the round's log (when one is active).
    pub fn log_event(&self, game_type: &str, session_id: &str, event: &str, details: Value) {
        self.logs.note(
            game_type,
            session_id,
            NewEntry::backend("route", event, event, details),
        );
    }
}

/// Routes main-chat input of a character with an active game route into the game.
pub struct GameInputRouter {
    pub games: Arc<Games>,
}

impl InputRouter for GameInputRouter {
    fn route(
        &self,
        character: String,
        text: String,
        source: InputSource,
    ) -> BoxFuture<'static, Option<Value>> {
        let routed = self
            .games
            .game_routes
            .route_input(&character, &text, source);
        if let Some(r) = &routed {
            self.games.log_event(
                &r.game_type,
                &r.session_id,
                "main_chat_input_routed",
                json!({"source": r.source, "chars": text.chars().count()}),
            );
        }
        // The hook hands the sessions a JSON value (core knows no game types).
        let routed = routed.and_then(|r| serde_json::to_value(r).ok());
        Box::pin(async move { routed })
    }

    fn is_routing(&self, character: &str) -> bool {
        self.games.game_routes.active_of(character).is_some()
    }
}

/// Start the background sweep (heartbeat lapses, idle model sessions). It holds
/// only weak references and stops when the application state is dropped.
pub fn spawn_sweeper(st: &AppState, games: &Arc<Games>) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("no async runtime: game route heartbeat sweeps are disabled");
        return;
    };
    let weak_state: Weak<Inner> = Arc::downgrade(&st.0);
    let weak_games = Arc::downgrade(games);
    let period = games.cfg.sweep_period;
    handle.spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let (Some(inner), Some(games)) = (weak_state.upgrade(), weak_games.upgrade()) else {
                break;
            };
            games.sweep(&AppState(inner));
        }
    });
}

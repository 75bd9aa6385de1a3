//! Mini-games (`/api/game`) and the new-user icebreaker (`/api/icebreaker`).
//!
//! * [`games`]: per-character game routes (one active at a time, heartbeats,
//!   supersession), main-chat input routing into the active game, game dialogue
//!   through the language model, diagnostic logs, the badminton leaderboard.
//! * `icebreaker`: the onboarding route and its context, free-text, choice
//!   and speak calls.
//! * `http`: the handlers, one module per resource, over those two.
//!
//! Both answer failures as `{ok:false, reason}` (`error::Failure`). See docs/games.md.

mod config;
mod error;
pub mod games;
mod http;
mod icebreaker;
mod model;
mod text;

use std::sync::Arc;

use axum::handler::Handler;
use axum::http::Method;
use companiond_core::guards::Csrf;
use companiond_core::server::Family;
use companiond_core::{Api, AppState};

pub use config::GamesConfig;
use games::{GameInputRouter, Games};
use icebreaker::Icebreaker;

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: Family = Family { api, start };

/// Every route of this family, with its literal path.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "games")
        // ---- logs
        .get(
            "/api/game/logs",
            "game diagnostic log of a session (since cursor, limit) or the session list",
            http::logs::read,
        )
        .get(
            "/api/game/logs/view",
            "game diagnostic logs as an HTML page",
            http::logs::view,
        )
        .csrf_post(
            "/api/game/logs",
            "append a game log entry (CSRF)",
            http::logs::append,
        )
        .csrf_post(
            "/api/game/logs/enable",
            "enable the diagnostic log of a session (CSRF)",
            http::logs::enable,
        )
        // ---- game routes
        .post(
            "/api/game/{game_type}/route/start",
            "start a game route (supersedes the character's other routes)",
            http::game_routes::start,
        )
        .get(
            "/api/game/{game_type}/route/state",
            "public state of a character's game route",
            http::game_routes::state,
        )
        .get(
            "/api/game/route/active",
            "the character's active game route, any game type (read-only)",
            http::game_routes::active,
        )
        .post(
            "/api/game/{game_type}/route/drain",
            "take the queued outputs of a game route",
            http::game_routes::drain,
        )
        .post(
            "/api/game/{game_type}/route/voice-transcript",
            "route a voice transcript into the game",
            http::game_routes::voice_transcript,
        )
        .post(
            "/api/game/{game_type}/route/heartbeat",
            "keep a game route alive",
            http::game_routes::heartbeat,
        )
        .post(
            "/api/game/{game_type}/route/end",
            "end a game route (cleanup result)",
            http::game_routes::end,
        )
        .post(
            "/api/game/{game_type}/end",
            "end a game round and its model session (cleanup result)",
            http::game_routes::end,
        )
        // ---- dialogue
        .post(
            "/api/game/{game_type}/passive-guard",
            "soccer passive-player classifier",
            http::dialogue::passive_guard,
        )
        .post(
            "/api/game/{game_type}/chat",
            "one game event to one character line and control",
            http::dialogue::chat,
        )
        .post(
            "/api/game/{game_type}/mirror-assistant",
            "mirror a game line into the chat session (no speech)",
            http::dialogue::mirror_assistant,
        )
        .post(
            "/api/game/{game_type}/speak",
            "speak a game line (speech pipeline state)",
            http::dialogue::speak,
        )
        .csrf_post(
            "/api/game/{game_type}/realtime-context",
            "inject game context into a realtime voice session (CSRF)",
            http::dialogue::realtime_context,
        )
        .post(
            "/api/game/{game_type}/quick-lines",
            "pre-generated reaction lines (soccer, badminton)",
            http::dialogue::quick_lines,
        )
        .get(
            "/api/game/{game_type}/character",
            "model type and paths of the game character",
            http::dialogue::character,
        )
        // ---- leaderboard
        .get(
            "/api/game/{game_type}/leaderboard",
            "leaderboard page",
            http::leaderboard::page,
        )
        .post(
            "/api/game/{game_type}/leaderboard",
            "submit a round's score (validated against the server's record)",
            http::leaderboard::submit,
        )
        // ---- icebreaker
        .csrf_post(
            "/api/icebreaker/route/start",
            "start the onboarding route (CSRF)",
            http::icebreaker::start,
        )
        .csrf_post(
            "/api/icebreaker/route/end",
            "end the onboarding route (CSRF)",
            http::icebreaker::end,
        )
        .get(
            "/api/icebreaker/route/state",
            "onboarding route state",
            http::icebreaker::state,
        )
        .csrf_post(
            "/api/icebreaker/context",
            "add an onboarding line to the session history (CSRF)",
            http::icebreaker::context,
        )
        .post(
            "/api/icebreaker/free-text/interpret",
            "interpret a free-text answer through the model",
            http::icebreaker::free_text,
        )
        .csrf_post(
            "/api/icebreaker/choice",
            "record an onboarding choice (write-only, CSRF)",
            http::icebreaker::choice,
        )
        .csrf_post(
            "/api/icebreaker/speak",
            "speak an onboarding line: mirror text, turn end (CSRF)",
            http::icebreaker::speak,
        )
}

/// A CSRF-guarded POST route answering a bad token with `{ok:false, reason}`.
trait CsrfPost {
    fn csrf_post<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        summary: &str,
        h: H,
    ) -> Self;
}

impl CsrfPost for Api {
    fn csrf_post<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        summary: &str,
        h: H,
    ) -> Self {
        self.guarded(Method::POST, path, summary, Csrf::Ok, h)
    }
}

/// Start-up work of this family, run once every family's routes are built: the
/// family state, the main-chat input router and the heartbeat sweep.
pub fn start(state: &AppState) {
    start_with(state, GamesConfig::default());
}

/// [`start`] with explicit timings (tests use short heartbeat timeouts).
#[doc(hidden)]
pub fn start_with(state: &AppState, cfg: GamesConfig) {
    let games = Arc::new(Games::new(state, cfg.clone()));
    state.provide(Arc::new(Icebreaker::new(cfg)));
    state.provide(games.clone());
    state.hooks.set_input_router(Arc::new(GameInputRouter {
        games: games.clone(),
    }));
    games::spawn_sweeper(state, &games);
}

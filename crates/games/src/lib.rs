//! Mini-games (`/api/game`) and the new-user icebreaker (`/api/icebreaker`).
//!
//! * [`games`]: per-character game routes (one active at a time, heartbeats,
//!   supersession), main-chat input routing into the active game, game dialogue
//!   through the language model, diagnostic logs, the badminton leaderboard.
//! * [`icebreaker`]: the new-user onboarding route and its context, free-text,
//!   choice and speak calls.
//!
//! Both families answer `{ok:false, reason}` ([`error::Failure`]). See docs/games.md.

pub mod config;
pub mod error;
pub mod games;
pub mod icebreaker;
pub mod util;

use std::sync::Arc;

use axum::http::Method;
use companiond_core::guards::Csrf;
use companiond_core::{Api, AppState};

pub use config::GamesConfig;
use games::{http as g, GameInputRouter, Games};
use icebreaker::{http as ob, Icebreaker};

/// Every route of this family, with its literal path.
pub fn api(state: &AppState) -> Api {
    let post = Method::POST;
    Api::new(state, "games")
        // ---- logs
        .get(
            "/api/game/logs",
            "game diagnostic log of a session (since cursor, limit) or the session list",
            g::logs_get,
        )
        .get(
            "/api/game/logs/view",
            "game diagnostic logs as an HTML page",
            g::logs_view,
        )
        .guarded(
            post.clone(),
            "/api/game/logs",
            "append a game log entry (CSRF)",
            Csrf::Ok,
            g::logs_post,
        )
        .guarded(
            post.clone(),
            "/api/game/logs/enable",
            "enable the diagnostic log of a session (CSRF)",
            Csrf::Ok,
            g::logs_enable,
        )
        // ---- route lifecycle
        .post(
            "/api/game/{game_type}/route/start",
            "start a game route (supersedes the character's other routes)",
            g::route_start,
        )
        .get(
            "/api/game/{game_type}/route/state",
            "public state of a character's game route",
            g::route_state,
        )
        .get(
            "/api/game/route/active",
            "the character's active game route, any game type (read-only)",
            g::route_active,
        )
        .post(
            "/api/game/{game_type}/route/drain",
            "take the queued outputs of a game route",
            g::route_drain,
        )
        .post(
            "/api/game/{game_type}/route/voice-transcript",
            "route a voice transcript into the game",
            g::route_voice_transcript,
        )
        .post(
            "/api/game/{game_type}/route/heartbeat",
            "keep a game route alive",
            g::route_heartbeat,
        )
        .post(
            "/api/game/{game_type}/route/end",
            "end a game route (cleanup result)",
            g::route_end,
        )
        .post(
            "/api/game/{game_type}/end",
            "end a game round and its model session (cleanup result)",
            g::game_end,
        )
        // ---- dialogue
        .post(
            "/api/game/{game_type}/passive-guard",
            "soccer passive-player classifier",
            g::passive_guard,
        )
        .post(
            "/api/game/{game_type}/chat",
            "one game event to one character line and control",
            g::chat,
        )
        .post(
            "/api/game/{game_type}/mirror-assistant",
            "mirror a game line into the chat session (no speech)",
            g::mirror_assistant,
        )
        .post(
            "/api/game/{game_type}/speak",
            "speak a game line (speech pipeline state)",
            g::speak,
        )
        .guarded(
            post.clone(),
            "/api/game/{game_type}/realtime-context",
            "inject game context into a realtime voice session (CSRF)",
            Csrf::Ok,
            g::realtime_context,
        )
        .post(
            "/api/game/{game_type}/quick-lines",
            "pre-generated reaction lines (soccer, badminton)",
            g::quick_lines,
        )
        .get(
            "/api/game/{game_type}/character",
            "model type and paths of the game character",
            g::character_info,
        )
        // ---- leaderboard
        .get(
            "/api/game/{game_type}/leaderboard",
            "leaderboard page",
            g::leaderboard_get,
        )
        .post(
            "/api/game/{game_type}/leaderboard",
            "submit a round's score (validated against the server's record)",
            g::leaderboard_post,
        )
        // ---- onboarding
        .guarded(
            post.clone(),
            "/api/icebreaker/route/start",
            "start the onboarding route (CSRF)",
            Csrf::Ok,
            ob::route_start,
        )
        .guarded(
            post.clone(),
            "/api/icebreaker/route/end",
            "end the onboarding route (CSRF)",
            Csrf::Ok,
            ob::route_end,
        )
        .get(
            "/api/icebreaker/route/state",
            "onboarding route state",
            ob::route_state,
        )
        .guarded(
            post.clone(),
            "/api/icebreaker/context",
            "add an onboarding line to the session history (CSRF)",
            Csrf::Ok,
            ob::context,
        )
        .post(
            "/api/icebreaker/free-text/interpret",
            "interpret a free-text answer through the model",
            ob::free_text,
        )
        .guarded(
            post.clone(),
            "/api/icebreaker/choice",
            "record an onboarding choice (write-only, CSRF)",
            Csrf::Ok,
            ob::choice,
        )
        .guarded(
            post,
            "/api/icebreaker/speak",
            "speak an onboarding line: mirror text, turn end (CSRF)",
            Csrf::Ok,
            ob::speak,
        )
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

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

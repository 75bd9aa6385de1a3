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

use companiond_core::api::ErrorDoc;
use companiond_core::envelope::EnvelopeKind;
pub use config::GamesConfig;
use error::Reason;
use games::logs::LogRead;
use games::{GameInputRouter, Games};
use http::dialogue::{
    ChatBody, MirrorBody, PassiveGuardBody, QuickLinesBody, RealtimeContextBody, SpeakBody,
};
use http::game_routes::{DrainBody, EndBody, HeartbeatBody, RouteStartBody, VoiceTranscriptBody};
use http::icebreaker::{ChoiceBody, FreeTextBody, IceContextBody, IceEndBody, IceStartBody};
use http::leaderboard::LeaderboardSubmitBody;
use http::logs::{LogEnableBody, LogEntryBody};
use http::queries::*;
use http::GameType;
use icebreaker::Icebreaker;

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: Family = Family { api, start };

/// Every route of this family, with its literal path and what it reads and
/// answers (docs/games.md, OpenAPI).
pub fn api(state: &AppState) -> Api {
    Api::new(state, "games")
        .about(
            "Mini-games (`/api/game`) and the new-user icebreaker (`/api/icebreaker`). Failures \
             answer `{ok:false, reason}`, most with HTTP 200 (docs/games.md).",
        )
        // ---- logs
        .get(
            "/api/game/logs",
            "game diagnostic log of a session (since cursor, limit) or the session list",
            http::logs::read,
        )
        .id("read_logs")
        .query::<LogsQuery>()
        .ok::<LogRead>()
        .reasons(&[Reason::InvalidQuery, Reason::InvalidGameType])
        .get(
            "/api/game/logs/view",
            "game diagnostic logs as an HTML page",
            http::logs::view,
        )
        .id("view_logs")
        .query::<LogsQuery>()
        .ok_as::<String>("text/html")
        .fails_with(
            ErrorDoc::new(400, EnvelopeKind::Ok, "a query value is no integer")
                .code(Reason::InvalidQuery.code()),
        )
        .fails_with(
            ErrorDoc::new(
                400,
                EnvelopeKind::Ok,
                "the game type is not 1 to 64 of [a-z0-9_-]",
            )
            .code(Reason::InvalidGameType.code()),
        )
        .csrf_post(
            "/api/game/logs",
            "append a game log entry (CSRF)",
            http::logs::append,
        )
        .id("append_log")
        .json_body::<LogEntryBody>()
        .ok::<http::logs::Appended>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingSessionId,
            Reason::InvalidGameType,
            Reason::LogNotActive,
        ])
        .csrf_post(
            "/api/game/logs/enable",
            "enable the diagnostic log of a session (CSRF)",
            http::logs::enable,
        )
        .id("enable_log")
        .json_body::<LogEnableBody>()
        .ok::<http::logs::Enabled>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingSessionId,
            Reason::InvalidGameType,
        ])
        // ---- game routes
        .post(
            "/api/game/{game_type}/route/start",
            "start a game route (supersedes the character's other routes)",
            http::game_routes::start,
        )
        .id("start_route")
        .path::<GameType>()
        .json_body::<RouteStartBody>()
        .ok::<http::game_routes::RouteStarted>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::NotAGameRoute,
            Reason::InvalidBody,
            Reason::MissingPersonaName,
        ])
        .get(
            "/api/game/{game_type}/route/state",
            "public state of a character's game route",
            http::game_routes::state,
        )
        .id("route_state")
        .path::<GameType>()
        .query::<PersonaQuery>()
        .ok::<http::game_routes::StateAnswer>()
        .reasons(&[Reason::InvalidGameType, Reason::MissingPersonaName])
        .get(
            "/api/game/route/active",
            "the character's active game route, any game type (read-only)",
            http::game_routes::active,
        )
        .id("active_route")
        .query::<PersonaQuery>()
        .ok::<http::game_routes::ActiveRoute>()
        .reasons(&[Reason::MissingPersonaName])
        .post(
            "/api/game/{game_type}/route/drain",
            "take the queued outputs of a game route",
            http::game_routes::drain,
        )
        .id("drain_route")
        .path::<GameType>()
        .json_body::<DrainBody>()
        .ok::<http::game_routes::Drained>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::InvalidBody,
            Reason::MissingPersonaName,
        ])
        .post(
            "/api/game/{game_type}/route/voice-transcript",
            "route a voice transcript into the game",
            http::game_routes::voice_transcript,
        )
        .id("voice_transcript")
        .path::<GameType>()
        .json_body::<VoiceTranscriptBody>()
        .ok::<http::game_routes::TranscriptTaken>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::MissingTranscript,
            Reason::RouteNotActive,
            Reason::SessionIdMismatch,
        ])
        .post(
            "/api/game/{game_type}/route/heartbeat",
            "keep a game route alive",
            http::game_routes::heartbeat,
        )
        .id("heartbeat")
        .path::<GameType>()
        .json_body::<HeartbeatBody>()
        .ok::<http::game_routes::HeartbeatAnswer>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::InvalidBody,
            Reason::MissingPersonaName,
        ])
        .post(
            "/api/game/{game_type}/route/end",
            "end a game route (cleanup result)",
            http::game_routes::end,
        )
        .id("end_route")
        .path::<GameType>()
        .json_body::<EndBody>()
        .ok::<http::game_routes::Ended>()
        .reasons(END_REASONS)
        .post(
            "/api/game/{game_type}/end",
            "end a game round and its model session (cleanup result)",
            http::game_routes::end,
        )
        .id("end_round")
        .path::<GameType>()
        .json_body::<EndBody>()
        .ok::<http::game_routes::Ended>()
        .reasons(END_REASONS)
        // ---- dialogue
        .post(
            "/api/game/{game_type}/passive-guard",
            "soccer passive-player classifier",
            http::dialogue::passive_guard,
        )
        .id("passive_guard")
        .path::<GameType>()
        .json_body::<PassiveGuardBody>()
        .ok::<http::dialogue::GuardAnswer>()
        .post(
            "/api/game/{game_type}/chat",
            "one game event to one character line and control",
            http::dialogue::chat,
        )
        .id("chat")
        .path::<GameType>()
        .json_body::<ChatBody>()
        .ok::<http::dialogue::ChatAnswer>()
        .post(
            "/api/game/{game_type}/mirror-assistant",
            "mirror a game line into the chat session (no speech)",
            http::dialogue::mirror_assistant,
        )
        .id("mirror_line")
        .path::<GameType>()
        .json_body::<MirrorBody>()
        .ok::<http::dialogue::MirrorAnswer>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::MissingLine,
            Reason::RouteOwnedByOtherGame,
            Reason::NoSessionManager,
        ])
        .post(
            "/api/game/{game_type}/speak",
            "speak a game line (speech pipeline state)",
            http::dialogue::speak,
        )
        .id("speak")
        .path::<GameType>()
        .json_body::<SpeakBody>()
        .ok::<http::dialogue::GameSpokenOrStale>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::NotAGameRoute,
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::MissingLine,
            Reason::RouteNotActive,
            Reason::NoSessionManager,
            Reason::NoVoiceProvider,
        ])
        .csrf_post(
            "/api/game/{game_type}/realtime-context",
            "inject game context into a realtime voice session (CSRF)",
            http::dialogue::realtime_context,
        )
        .id("realtime_context")
        .path::<GameType>()
        .json_body::<RealtimeContextBody>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::NoSessionManager,
            Reason::NoActiveRealtimeSession,
        ])
        .post(
            "/api/game/{game_type}/quick-lines",
            "pre-generated reaction lines (soccer, badminton)",
            http::dialogue::quick_lines,
        )
        .id("quick_lines")
        .path::<GameType>()
        .json_body::<QuickLinesBody>()
        .ok::<http::dialogue::QuickLinesAnswer>()
        .get(
            "/api/game/{game_type}/character",
            "model type and paths of the game character",
            http::dialogue::character,
        )
        .id("character")
        .path::<GameType>()
        .query::<PersonaNameQuery>()
        .ok::<http::dialogue::GameCharacter>()
        .reasons(&[Reason::InvalidGameType, Reason::MissingPersonaName])
        // ---- leaderboard
        .get(
            "/api/game/{game_type}/leaderboard",
            "leaderboard page",
            http::leaderboard::page,
        )
        .id("leaderboard")
        .path::<GameType>()
        .query::<LeaderboardQuery>()
        .ok::<http::leaderboard::BoardPage>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::InvalidQuery,
            Reason::StorageError,
        ])
        .post(
            "/api/game/{game_type}/leaderboard",
            "submit a round's score (validated against the server's record)",
            http::leaderboard::submit,
        )
        .id("submit_score")
        .path::<GameType>()
        .json_body::<LeaderboardSubmitBody>()
        .ok::<http::leaderboard::BoardSubmitted>()
        .reasons(&[
            Reason::InvalidGameType,
            Reason::InvalidBody,
            Reason::UnsupportedGameType,
            Reason::InvalidSession,
            Reason::StorageError,
        ])
        // ---- icebreaker
        .csrf_post(
            "/api/icebreaker/route/start",
            "start the onboarding route (CSRF)",
            http::icebreaker::start,
        )
        .id("icebreaker_start")
        .json_body::<IceStartBody>()
        .ok::<http::icebreaker::IceStateAnswer>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::MissingSessionId,
        ])
        .csrf_post(
            "/api/icebreaker/route/end",
            "end the onboarding route (CSRF)",
            http::icebreaker::end,
        )
        .id("icebreaker_end")
        .json_body::<IceEndBody>()
        .ok::<http::icebreaker::IceEnded>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::SessionIdMismatch,
        ])
        .get(
            "/api/icebreaker/route/state",
            "onboarding route state",
            http::icebreaker::state,
        )
        .id("icebreaker_state")
        .query::<PersonaNameQuery>()
        .ok::<http::icebreaker::IceStateAnswer>()
        .reasons(&[Reason::MissingPersonaName])
        .csrf_post(
            "/api/icebreaker/context",
            "add an onboarding line to the session history (CSRF)",
            http::icebreaker::context,
        )
        .id("icebreaker_context")
        .json_body::<IceContextBody>()
        .ok::<http::icebreaker::ContextOrStale>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::InvalidRole,
            Reason::MissingText,
            Reason::InvalidTextLength,
            Reason::RouteNotActive,
            Reason::NoSessionManager,
        ])
        .post(
            "/api/icebreaker/free-text/interpret",
            "interpret a free-text answer through the model",
            http::icebreaker::free_text,
        )
        .id("icebreaker_interpret")
        .json_body::<FreeTextBody>()
        .ok::<http::icebreaker::Interpreted>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::MissingUserText,
            Reason::MissingSessionId,
            Reason::RouteNotActive,
            Reason::SessionIdMismatch,
            Reason::MissingOptions,
            Reason::LlmApiNotConfigured,
            Reason::Timeout,
            Reason::FreeTextInterpreterFailed,
            Reason::ParseFailed,
        ])
        .csrf_post(
            "/api/icebreaker/choice",
            "record an onboarding choice (write-only, CSRF)",
            http::icebreaker::choice,
        )
        .id("icebreaker_choice")
        .json_body::<ChoiceBody>()
        .ok::<http::icebreaker::ChoiceOrStale>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::RouteNotActive,
            Reason::MissingDay,
            Reason::InvalidChoice,
            Reason::ChoiceWriteFailed,
        ])
        .csrf_post(
            "/api/icebreaker/speak",
            "speak an onboarding line: mirror text, turn end (CSRF)",
            http::icebreaker::speak,
        )
        .id("icebreaker_speak")
        .json_body::<SpeakBody>()
        .ok::<http::icebreaker::SpokenOrStale>()
        .reasons(&[
            Reason::InvalidBody,
            Reason::MissingPersonaName,
            Reason::MissingLine,
            Reason::RouteNotActive,
            Reason::NoSessionManager,
        ])
}

/// The failures of both end routes (one handler).
const END_REASONS: &[Reason] = &[
    Reason::InvalidGameType,
    Reason::NotAGameRoute,
    Reason::InvalidBody,
];

/// The failures a route can answer, by reason (each at its status).
trait Reasons {
    fn reasons(self, reasons: &[Reason]) -> Self;
}

impl Reasons for Api {
    fn reasons(self, reasons: &[Reason]) -> Self {
        reasons
            .iter()
            .fold(self, |api, r| api.fails_with(r.answer()))
    }
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

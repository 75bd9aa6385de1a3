//! The one failure type of the games and icebreaker families, mapped to their
//! shared envelope `{ok:false, reason, ...}`: `reason` is the machine-readable
//! code of the variant, extra fields sit beside it.
//!
//! Most failures are HTTP 200 (the families report application failures in the
//! body); `not_a_game_route` and `invalid_query` are 400, storage faults are 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{EnvelopeKind, OkReason};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::games::leaderboard::BoardError;
use crate::icebreaker::free_text::InterpretError;

/// Every machine-readable reason these families answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    InvalidBody,
    InvalidQuery,
    InvalidGameType,
    MissingPersonaName,
    MissingSessionId,
    MissingTranscript,
    MissingLine,
    MissingText,
    MissingUserText,
    MissingOptions,
    MissingDay,
    MissingEvent,
    InvalidEvent,
    InvalidChoice,
    InvalidRole,
    InvalidTextLength,
    NotAGameRoute,
    RouteNotActive,
    SessionIdMismatch,
    RouteOwnedByOtherGame,
    NoSessionManager,
    NoActiveRealtimeSession,
    NoVoiceProvider,
    InvalidSession,
    UnsupportedGameType,
    LogNotActive,
    LlmApiNotConfigured,
    Timeout,
    FreeTextInterpreterFailed,
    ParseFailed,
    ChoiceWriteFailed,
    StorageError,
}

impl Reason {
    /// Every reason, in declaration order (the OpenAPI description lists them).
    pub const ALL: [Reason; 32] = [
        Reason::InvalidBody,
        Reason::InvalidQuery,
        Reason::InvalidGameType,
        Reason::MissingPersonaName,
        Reason::MissingSessionId,
        Reason::MissingTranscript,
        Reason::MissingLine,
        Reason::MissingText,
        Reason::MissingUserText,
        Reason::MissingOptions,
        Reason::MissingDay,
        Reason::MissingEvent,
        Reason::InvalidEvent,
        Reason::InvalidChoice,
        Reason::InvalidRole,
        Reason::InvalidTextLength,
        Reason::NotAGameRoute,
        Reason::RouteNotActive,
        Reason::SessionIdMismatch,
        Reason::RouteOwnedByOtherGame,
        Reason::NoSessionManager,
        Reason::NoActiveRealtimeSession,
        Reason::NoVoiceProvider,
        Reason::InvalidSession,
        Reason::UnsupportedGameType,
        Reason::LogNotActive,
        Reason::LlmApiNotConfigured,
        Reason::Timeout,
        Reason::FreeTextInterpreterFailed,
        Reason::ParseFailed,
        Reason::ChoiceWriteFailed,
        Reason::StorageError,
    ];

    pub fn code(self) -> &'static str {
        match self {
            Reason::InvalidBody => "invalid_body",
            Reason::InvalidQuery => "invalid_query",
            Reason::InvalidGameType => "invalid_game_type",
            Reason::MissingPersonaName => "missing_persona_name",
            Reason::MissingSessionId => "missing_session_id",
            Reason::MissingTranscript => "missing_transcript",
            Reason::MissingLine => "missing_line",
            Reason::MissingText => "missing_text",
            Reason::MissingUserText => "missing_user_text",
            Reason::MissingOptions => "missing_options",
            Reason::MissingDay => "missing_day",
            Reason::MissingEvent => "missing_event",
            Reason::InvalidEvent => "invalid_event",
            Reason::InvalidChoice => "invalid_choice",
            Reason::InvalidRole => "invalid_role",
            Reason::InvalidTextLength => "invalid_text_length",
            Reason::NotAGameRoute => "not_a_game_route",
            Reason::RouteNotActive => "route_not_active",
            Reason::SessionIdMismatch => "session_id_mismatch",
            Reason::RouteOwnedByOtherGame => "route_owned_by_other_game",
            Reason::NoSessionManager => "no_session_manager",
            Reason::NoActiveRealtimeSession => "no_active_realtime_session",
            Reason::NoVoiceProvider => "no_voice_provider",
            Reason::InvalidSession => "invalid_session",
            Reason::UnsupportedGameType => "unsupported_game_type",
            Reason::LogNotActive => "log_not_active",
            Reason::LlmApiNotConfigured => "llm_api_not_configured",
            Reason::Timeout => "timeout",
            Reason::FreeTextInterpreterFailed => "free_text_interpreter_failed",
            Reason::ParseFailed => "parse_failed",
            Reason::ChoiceWriteFailed => "choice_write_failed",
            Reason::StorageError => "storage_error",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Reason::NotAGameRoute | Reason::InvalidQuery => StatusCode::BAD_REQUEST,
            Reason::StorageError => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::OK,
        }
    }
}

/// A failure: a reason plus the extra fields of its envelope.
#[derive(Debug)]
pub struct Failure {
    pub reason: Reason,
    pub extra: Map<String, Value>,
}

impl Failure {
    pub fn new(reason: Reason) -> Self {
        Failure {
            reason,
            extra: Map::new(),
        }
    }

    /// Add a field to the envelope.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.extra.insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
        self
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = self.reason.status();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            if let Some(f) = companiond_core::disk::current() {
                return OkReason::new(f.code())
                    .with("error", f.message())
                    .status(f.status());
            }
        }
        let mut r = OkReason::new(self.reason.code());
        r.extra = self.extra;
        r.status(status)
    }
}

/// Every answer of [`Failure`]: each reason in `{ok:false, reason}` at its status
/// (a route lists the reasons it can give with [`Reason::answer`]).
impl DocumentedError for Failure {
    fn answers() -> Vec<ErrorDoc> {
        Reason::ALL.iter().map(|r| r.answer()).collect()
    }
}

impl Reason {
    /// The answer of this reason: its status, `{ok:false, reason}` and its code.
    pub fn answer(self) -> ErrorDoc {
        let what = match self.status().as_u16() {
            200 => "refused (answered 200 with ok:false)",
            400 => "bad request",
            _ => "storage fault",
        };
        ErrorDoc::new(self.status().as_u16(), EnvelopeKind::Ok, what).code(self.code())
    }
}

impl From<BoardError> for Failure {
    fn from(e: BoardError) -> Failure {
        match e {
            BoardError::InvalidSession(None) => Failure::new(Reason::InvalidSession),
            BoardError::InvalidSession(Some(why)) => {
                Failure::new(Reason::InvalidSession).with("error", why)
            }
            BoardError::Storage(e) => Failure::new(Reason::StorageError).with("error", e),
        }
    }
}

impl From<InterpretError> for Failure {
    fn from(e: InterpretError) -> Failure {
        let (reason, error) = match e {
            InterpretError::NotConfigured(e) => (Reason::LlmApiNotConfigured, e),
            InterpretError::Timeout(e) => (Reason::Timeout, e),
            InterpretError::ModelFailed(e) => (Reason::FreeTextInterpreterFailed, e),
            InterpretError::NotJson => (
                Reason::ParseFailed,
                "the model reply was not a JSON object".to_string(),
            ),
        };
        Failure::new(reason).with("error", error)
    }
}

/// What a handler answers: a JSON success value, or the failure envelope.
pub type Answer = Result<Json<Value>, Failure>;

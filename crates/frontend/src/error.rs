//! The one error enum of the frontend family and its envelopes.
//!
//! The original pages read `{success:false, error, error_code?, ...}`; the
//! character store's own errors keep core's characters envelope; the agent and
//! storage-relocation answers keep the shapes those pages read as
//! "unavailable" (docs/frontend.md).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::characters::CharacterError;
use companiond_core::envelope::SuccessError;
use companiond_core::multipart::{with_drain_cap, DrainCap};
use companiond_core::rename::{RenameError, RenameFailure};
use serde_json::json;

/// A handler's answer: its typed success, or a [`FrontendError`].
pub(crate) type Answer<T> = Result<T, FrontendError>;

/// Every failure of the frontend's routes.
#[derive(Debug)]
pub(crate) enum FrontendError {
    /// 400 `invalid_request`.
    BadRequest(String),
    /// 400 with another machine code (`current_character`, `no_assistant_turn`).
    Refused { code: &'static str, error: String },
    /// 400 `voice_unavailable` with an empty `available_voices`.
    VoiceUnavailable(String),
    /// 400 `TTS_VOICE_NOT_REGISTERED` (also as `code`).
    VoiceNotRegistered,
    /// 400 with the given code, after which the unread upload is drained up to
    /// the largest accepted upload (so the page reads the answer).
    UploadRefused { code: &'static str, error: String },
    /// 404 `not_found`.
    NotFound(String),
    /// 404 `model_not_found` with empty motion and expression lists.
    Live2dModelNotFound,
    /// 500 `storage_error`.
    Storage(String),
    /// A character store error, in core's characters envelope.
    Character(CharacterError),
    /// A failed rename transaction, in the envelope of the interface's rename route.
    Rename(Box<RenameError>),
    /// 502 `{success:false, status:"down", error}`: no agent server.
    AgentDown,
    /// 502 `{ready:false, reasons}`: an agent capability without its server.
    AgentUnavailable,
    /// 409 `{ok:false, error_code:"storage_relocation_unsupported", error}`.
    RelocationUnsupported,
}

/// What an agent answers without companiond's (absent) agent server.
pub(crate) const NO_AGENT: &str = "companiond has no agent server";

impl From<CharacterError> for FrontendError {
    fn from(e: CharacterError) -> Self {
        FrontendError::Character(e)
    }
}

impl From<RenameError> for FrontendError {
    fn from(e: RenameError) -> Self {
        FrontendError::Rename(Box::new(e))
    }
}

fn invalid(error: String, code: &str) -> Response {
    SuccessError::new(error)
        .code(code)
        .status(StatusCode::BAD_REQUEST)
}

impl IntoResponse for FrontendError {
    fn into_response(self) -> Response {
        use FrontendError::*;
        match self {
            BadRequest(error) => invalid(error, "invalid_request"),
            Refused { code, error } => invalid(error, code),
            VoiceUnavailable(error) => SuccessError::new(error)
                .code("voice_unavailable")
                .with("available_voices", Vec::<String>::new())
                .status(StatusCode::BAD_REQUEST),
            VoiceNotRegistered => SuccessError::new("this character has no voice")
                .code("TTS_VOICE_NOT_REGISTERED")
                .with("code", "TTS_VOICE_NOT_REGISTERED")
                .status(StatusCode::BAD_REQUEST),
            UploadRefused { code, error } => with_drain_cap(
                invalid(error, code),
                DrainCap {
                    bytes: crate::models::MAX_VRM_BYTES,
                    time: std::time::Duration::from_secs(30),
                },
            ),
            NotFound(error) => SuccessError::new(error)
                .code("not_found")
                .status(StatusCode::NOT_FOUND),
            Live2dModelNotFound => SuccessError::new("no Live2D model of that name")
                .code("model_not_found")
                .with("motion_files", Vec::<String>::new())
                .with("expression_files", Vec::<String>::new())
                .status(StatusCode::NOT_FOUND),
            Storage(error) => SuccessError::new(error)
                .code("storage_error")
                .status(StatusCode::INTERNAL_SERVER_ERROR),
            Character(e) => e.into_response(),
            Rename(e) => {
                let status = match e.kind {
                    RenameFailure::Invalid => StatusCode::BAD_REQUEST,
                    RenameFailure::NotFound => StatusCode::NOT_FOUND,
                    RenameFailure::Conflict => StatusCode::CONFLICT,
                    RenameFailure::Upstream => StatusCode::BAD_GATEWAY,
                    RenameFailure::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
                    RenameFailure::Failed => StatusCode::INTERNAL_SERVER_ERROR,
                };
                let RenameError {
                    message,
                    code,
                    fields,
                    ..
                } = *e;
                let mut body = SuccessError::new(message);
                body.error_code = code;
                body.extra = fields;
                body.status(status)
            }
            AgentDown => (
                StatusCode::BAD_GATEWAY,
                Json(json!({"success": false, "status": "down", "error": NO_AGENT})),
            )
                .into_response(),
            AgentUnavailable => (
                StatusCode::BAD_GATEWAY,
                Json(json!({"ready": false, "reasons": [NO_AGENT]})),
            )
                .into_response(),
            RelocationUnsupported => (
                StatusCode::CONFLICT,
                Json(json!({
                    "ok": false,
                    "error_code": "storage_relocation_unsupported",
                    "error": "companiond keeps its data in --data-dir; restart it with another --data-dir to move storage",
                })),
            )
                .into_response(),
        }
    }
}

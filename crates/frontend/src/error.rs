//! The one error enum of the frontend family and its envelopes.
//!
//! The original pages read `{success:false, error, error_code?, ...}`; the
//! character store's own errors keep core's characters envelope; the agent and
//! storage-relocation answers keep the shapes those pages read as
//! "unavailable" (docs/frontend.md).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::api::{Api, DocumentedError, ErrorDoc};
use companiond_core::characters::CharacterError;
use companiond_core::characters::NameError;
use companiond_core::envelope::EnvelopeKind;
use companiond_core::envelope::SuccessError;
use companiond_core::multipart::{with_drain_cap, DrainCap};
use companiond_core::rename::{RenameError, RenameFailure};

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

/// Why storage cannot be relocated.
const RELOCATION_UNSUPPORTED: &str =
    "companiond keeps its data in --data-dir; restart it with another --data-dir to move storage";

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
            Storage(error) => companiond_core::disk::storage_error(error),
            Character(e) => e.into_response(),
            Rename(e)
                if e.kind == RenameFailure::Failed
                    && companiond_core::disk::current().is_some() =>
            {
                companiond_core::disk::storage_error(e.message)
            }
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
            AgentDown => SuccessError::new(NO_AGENT)
                .with("status", "down")
                .status(StatusCode::BAD_GATEWAY),
            // `ready`/`reasons` are what the pages read; `success`/`error` make
            // it the family's envelope.
            AgentUnavailable => SuccessError::new(NO_AGENT)
                .with("ready", false)
                .with("reasons", [NO_AGENT])
                .status(StatusCode::BAD_GATEWAY),
            // `ok:false` is what the storage page reads; `success:false` makes it
            // the family's envelope.
            RelocationUnsupported => SuccessError::new(RELOCATION_UNSUPPORTED)
                .code("storage_relocation_unsupported")
                .with("ok", false)
                .status(StatusCode::CONFLICT),
        }
    }
}

// ------------------------------------------------------------------ OpenAPI

/// The answers of the frontend's routes for the OpenAPI document, by variant:
/// each route lists the ones its handler can give (`Api::fails_of`).
pub(crate) mod answers {
    use super::*;

    fn success(status: u16, code: &'static str, description: &'static str) -> ErrorDoc {
        ErrorDoc::new(status, EnvelopeKind::Success, description).code(code)
    }

    /// [`FrontendError::BadRequest`].
    pub(crate) fn bad_request() -> Vec<ErrorDoc> {
        vec![success(
            400,
            "invalid_request",
            "the body is not what the route reads",
        )]
    }
    /// [`FrontendError::Refused`] with `code`.
    pub(crate) fn refused(code: &'static str, description: &'static str) -> Vec<ErrorDoc> {
        vec![success(400, code, description)]
    }
    /// [`FrontendError::UploadRefused`], every code.
    pub(crate) fn upload() -> Vec<ErrorDoc> {
        [
            ("invalid_multipart", "the body is not multipart/form-data"),
            ("no_file", "no part named file"),
            ("invalid_extension", "the file has the wrong extension"),
            ("invalid_name", "the file name is not a safe file name"),
            (
                "upload_refused",
                "the name is taken, the file too large or the upload cut",
            ),
        ]
        .into_iter()
        .map(|(c, d)| success(400, c, d))
        .collect()
    }
    /// [`FrontendError::NotFound`].
    pub(crate) fn not_found(description: &'static str) -> Vec<ErrorDoc> {
        vec![success(404, "not_found", description)]
    }
    /// [`FrontendError::Storage`].
    pub(crate) fn storage() -> Vec<ErrorDoc> {
        vec![success(
            500,
            "storage_error",
            "the data dir could not be written",
        )]
    }
    /// [`FrontendError::Character`] of a route that reads a character: 404.
    pub(crate) fn unknown_character() -> Vec<ErrorDoc> {
        vec![success(
            404,
            "character_not_found",
            "no character of that name",
        )]
    }
    /// [`FrontendError::Character`] of a route that changes a character: 404, 500.
    pub(crate) fn character() -> Vec<ErrorDoc> {
        let mut out = unknown_character();
        out.push(success(
            500,
            "storage_error",
            "the characters file could not be written",
        ));
        out
    }
    /// [`FrontendError::Character`] of a refused new name: 400 with its reason.
    pub(crate) fn names() -> Vec<ErrorDoc> {
        NameError::ALL
            .into_iter()
            .map(|e| success(400, e.code(), e.message()))
            .collect()
    }
    /// Every [`FrontendError::Character`] answer: 400 (name), 404, 409, 500.
    pub(crate) fn character_all() -> Vec<ErrorDoc> {
        let mut out = names();
        out.push(success(
            409,
            "character_exists",
            "a character of that name exists",
        ));
        out.extend(character());
        out
    }
    /// Deleting a character: not the current one, 404, 500.
    pub(crate) fn deleting() -> Vec<ErrorDoc> {
        let mut out = refused(
            "current_character",
            "the current character cannot be deleted; switch first",
        );
        out.push(success(
            409,
            "last_character",
            "the last character cannot be deleted",
        ));
        out.extend(character());
        out
    }
    /// `200 {success:false, error}`: a Live2D model that cannot be read (the
    /// original's answer).
    pub(crate) fn unreadable_model(description: &'static str) -> ErrorDoc {
        ErrorDoc::new(200, EnvelopeKind::Success, description)
    }
    /// [`FrontendError::Rename`]: the rename transaction's answers (its code
    /// depends on the step that failed).
    pub(crate) fn rename() -> Vec<ErrorDoc> {
        [
            (400, "the new name is refused"),
            (404, "no character of that name"),
            (409, "a character of the new name exists"),
            (502, "the memory server refused the rename"),
            (503, "renaming is not available (no memory family)"),
            (500, "the rename could not be completed"),
        ]
        .into_iter()
        .map(|(s, d)| ErrorDoc::new(s, EnvelopeKind::Success, d))
        .collect()
    }
    /// [`FrontendError::VoiceUnavailable`] (with an empty `available_voices`).
    pub(crate) fn voice_unavailable() -> Vec<ErrorDoc> {
        vec![success(
            400,
            "voice_unavailable",
            "companiond has no text-to-speech voices",
        )]
    }
    /// [`FrontendError::VoiceNotRegistered`].
    pub(crate) fn voice_not_registered() -> Vec<ErrorDoc> {
        vec![success(
            400,
            "TTS_VOICE_NOT_REGISTERED",
            "this character has no voice",
        )]
    }
    /// [`FrontendError::Live2dModelNotFound`] (with empty file lists).
    pub(crate) fn live2d_not_found() -> Vec<ErrorDoc> {
        vec![success(
            404,
            "model_not_found",
            "no Live2D model of that name",
        )]
    }
    /// [`FrontendError::AgentDown`] (`status: "down"`, no code).
    pub(crate) fn agent_down() -> Vec<ErrorDoc> {
        vec![ErrorDoc::new(
            502,
            EnvelopeKind::Success,
            "companiond has no agent server (status down)",
        )]
    }
    /// [`FrontendError::AgentUnavailable`] (`ready:false, reasons`, no code).
    pub(crate) fn agent_unavailable() -> Vec<ErrorDoc> {
        vec![ErrorDoc::new(
            502,
            EnvelopeKind::Success,
            "no agent server for this capability (ready false, reasons)",
        )]
    }
    /// [`FrontendError::RelocationUnsupported`] (also `ok:false`).
    pub(crate) fn relocation_unsupported() -> Vec<ErrorDoc> {
        vec![success(
            409,
            "storage_relocation_unsupported",
            "companiond keeps its data in --data-dir",
        )]
    }
}

/// Every answer of [`FrontendError`] (each route lists its own with
/// [`FailsOf::fails_of`]).
impl DocumentedError for FrontendError {
    fn answers() -> Vec<ErrorDoc> {
        use answers::*;
        [
            bad_request(),
            refused(
                "current_character",
                "the current character cannot be deleted",
            ),
            refused("no_assistant_turn", "the messages have no assistant turn"),
            voice_unavailable(),
            voice_not_registered(),
            upload(),
            not_found("not found"),
            live2d_not_found(),
            storage(),
            character_all(),
            rename(),
            agent_down(),
            agent_unavailable(),
            relocation_unsupported(),
        ]
        .concat()
    }
}

/// A route lists the error answers its handler can give.
pub(crate) trait FailsOf {
    fn fails_of(self, answers: impl IntoIterator<Item = Vec<ErrorDoc>>) -> Self;
}

impl FailsOf for Api {
    fn fails_of(self, answers: impl IntoIterator<Item = Vec<ErrorDoc>>) -> Self {
        answers.into_iter().flatten().fold(self, Api::fails_with)
    }
}

//! The one error enum of the memory family and its `{success:false, error}` envelope.
//!
//! Errors that carry a machine code put it in both `code` (the field the memory
//! clients read, e.g. `RECENT_FILE_CONFLICT`) and `error_code` (the foundation's field).
//! The toggle *reads* answer a different shape (`{error, code?}` with 503); see
//! [`ToggleReadError`].

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{BodyFault, EnvelopeKind, SuccessError};
use companiond_core::rename::{RenameError, RenameFailure};
use serde::Serialize;

/// Every failure of the memory routes.
#[derive(Debug)]
pub enum MemoryError {
    /// 400: invalid input.
    BadRequest(String),
    /// 400 with a machine code (name rules).
    Invalid { code: &'static str, error: String },
    /// 404.
    NotFound(String),
    /// 409: `fingerprint` / `identity_token` absent (no code).
    MissingTokens,
    /// 409 `RECENT_FILE_CONFLICT` with the current tokens.
    Conflict {
        fingerprint: Option<String>,
        identity_token: Option<String>,
    },
    /// 409 `RECENT_FILE_THEATER_READONLY`.
    TheaterReadonly,
    /// 409: cloud storage maintenance / read-only fence.
    Fence {
        mode: String,
        operation: String,
        target: String,
    },
    /// 409: the destination already exists.
    Exists { code: &'static str, error: String },
    /// 409: configuration holds the new name but the old storage remains.
    PartialRename(String),
    /// 409: storage could not be written; everything was rolled back.
    NotWritable { error: String, rolled_back: bool },
    /// 409: no legacy memory root is recognised.
    NoLegacyRoots,
    /// 503: the core configuration cannot be read (toggle writes).
    ConfigUnreadable(String),
    /// 500: the powerful-memory migration failed; the setting was not saved.
    MigrationFailed(String),
    /// 500: the post-rename reload failed; `rolled_back` tells whether the rollback worked.
    ReloadFailed {
        error: String,
        rolled_back: bool,
        rollback_error: String,
    },
    /// 500: the rename failed and could not be fully rolled back.
    RollbackFailed {
        error: String,
        rollback_error: String,
    },
    /// 503: background memory work of the character did not stop in time.
    Busy(String),
    /// 409: long-term memory extraction is switched off (toggles).
    Disabled(String),
    /// 409: an extraction of the character is already running.
    ExtractionRunning,
    /// 502: the memory model call failed or answered something unusable.
    ModelFailed(String),
    /// 503 `storage_unreadable`: a memory file was not JSON; it was set aside
    /// (docs/data.md) and the next call starts it anew.
    Unreadable(String),
    /// 500: a storage failure.
    Storage(String),
    /// 500: an unexpected failure.
    Internal(String),
}

impl MemoryError {
    /// A body that did not parse into its type: 400 saying why (the field
    /// that failed, or that it is not a JSON object).
    pub fn body(fault: BodyFault) -> Self {
        MemoryError::BadRequest(match fault {
            BodyFault::NotJson(e) => format!("the body is not valid JSON: {e}"),
            BodyFault::NotObject => "the body must be a JSON object".into(),
            BodyFault::TooLarge { limit } => {
                format!("unreadable body: larger than {limit} bytes")
            }
            f @ BodyFault::Invalid { .. } => f.to_string(),
        })
    }

    pub fn status(&self) -> StatusCode {
        use MemoryError::*;
        match self {
            BadRequest(_) | Invalid { .. } => StatusCode::BAD_REQUEST,
            NotFound(_) => StatusCode::NOT_FOUND,
            MissingTokens
            | Conflict { .. }
            | TheaterReadonly
            | Fence { .. }
            | Exists { .. }
            | PartialRename(_)
            | NotWritable { .. }
            | NoLegacyRoots
            | Disabled(_)
            | ExtractionRunning => StatusCode::CONFLICT,
            ModelFailed(_) => StatusCode::BAD_GATEWAY,
            ConfigUnreadable(_) | Busy(_) | Unreadable(_) => StatusCode::SERVICE_UNAVAILABLE,
            MigrationFailed(_)
            | ReloadFailed { .. }
            | RollbackFailed { .. }
            | Storage(_)
            | Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl std::fmt::Display for MemoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use MemoryError::*;
        match self {
            BadRequest(e) | NotFound(e) | PartialRename(e) | ConfigUnreadable(e)
            | MigrationFailed(e) | Storage(e) | Unreadable(e) | Internal(e) | Busy(e) | Disabled(e)
            | ModelFailed(e) => f.write_str(e),
            ExtractionRunning => {
                f.write_str("an extraction of this character's memory is already running")
            }
            RollbackFailed {
                error,
                rollback_error,
            } => write!(f, "{error}; rollback failed: {rollback_error}"),
            Invalid { error, .. } | Exists { error, .. } | NotWritable { error, .. } => {
                f.write_str(error)
            }
            MissingTokens => f.write_str(
                "fingerprint and identity_token from the read are required; read the file again",
            ),
            Conflict { .. } => f.write_str(
                "the recent file changed since it was read; read it again and merge your edit",
            ),
            TheaterReadonly => f.write_str(
                "theater memory messages are read-only and could not be placed; read the file again and keep their positions (send source_index)",
            ),
            Fence {
                mode,
                operation,
                target,
            } => write!(
                f,
                "{operation} blocked while cloud storage is in {mode} mode ({target})"
            ),
            NoLegacyRoots => f.write_str("no legacy memory root is recognized"),
            ReloadFailed { error, .. } => f.write_str(error),
        }
    }
}

impl std::error::Error for MemoryError {}

impl From<companiond_core::task::TaskFailed> for MemoryError {
    fn from(e: companiond_core::task::TaskFailed) -> Self {
        MemoryError::Internal(e.to_string())
    }
}

fn coded(e: SuccessError, code: &str) -> SuccessError {
    e.code(code).with("code", code)
}

impl MemoryError {
    /// The `{success:false, error, error_code?, code?, ...}` envelope of this error.
    fn envelope(self) -> SuccessError {
        use MemoryError::*;
        let base = SuccessError::new(self.to_string());
        match self {
            Invalid { code, .. } | Exists { code, .. } => coded(base, code),
            Conflict {
                fingerprint,
                identity_token,
            } => coded(base, "RECENT_FILE_CONFLICT")
                .with("fingerprint", fingerprint)
                .with("identity_token", identity_token),
            TheaterReadonly => coded(base, "RECENT_FILE_THEATER_READONLY"),
            Fence {
                mode,
                operation,
                target,
            } => coded(base, "CLOUDSAVE_WRITE_FENCE_ACTIVE")
                .with("mode", mode)
                .with("operation", operation)
                .with("target", target)
                .with("retryable", true),
            PartialRename(_) => coded(base, "RENAME_INCOMPLETE"),
            NotWritable { rolled_back, .. } => {
                coded(base, "STORAGE_NOT_WRITABLE").with("rolled_back", rolled_back)
            }
            NoLegacyRoots => coded(base, "NO_LEGACY_ROOTS"),
            Disabled(_) => coded(base, "MEMORY_EXTRACTION_DISABLED"),
            ExtractionRunning => coded(base, "MEMORY_EXTRACTION_RUNNING"),
            ModelFailed(_) => coded(base, "MEMORY_MODEL_FAILED"),
            ConfigUnreadable(_) => coded(base, "memory_settings_unreadable"),
            Unreadable(_) => coded(base, "storage_unreadable"),
            MigrationFailed(_) => coded(base, "migration_failed"),
            ReloadFailed {
                rolled_back,
                rollback_error,
                ..
            } => coded(base, "MEMORY_RELOAD_FAILED")
                .with("rolled_back", rolled_back)
                .with("rollback_error", rollback_error),
            RollbackFailed { rollback_error, .. } => coded(base, "RENAME_ROLLBACK_FAILED")
                .with("rolled_back", false)
                .with("rollback_error", rollback_error),
            Busy(_) => {
                coded(base, "MEMORY_SERVER_RELEASE_FAILED").with("memory_server_released", false)
            }
            BadRequest(_) | NotFound(_) | MissingTokens | Storage(_) | Internal(_) => base,
        }
    }
}

impl IntoResponse for MemoryError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            if let Some(f) = companiond_core::disk::current() {
                return f.success_error();
            }
        }
        self.envelope().status(status)
    }
}

/// A failed rename as other families see it through core's rename hook: the
/// kind follows this error's status, the code and fields its envelope.
impl From<MemoryError> for RenameError {
    fn from(e: MemoryError) -> Self {
        let kind = match e.status() {
            StatusCode::BAD_REQUEST => RenameFailure::Invalid,
            StatusCode::NOT_FOUND => RenameFailure::NotFound,
            StatusCode::CONFLICT => RenameFailure::Conflict,
            StatusCode::BAD_GATEWAY => RenameFailure::Upstream,
            StatusCode::SERVICE_UNAVAILABLE => RenameFailure::Unavailable,
            _ => RenameFailure::Failed,
        };
        let envelope = e.envelope();
        RenameError {
            kind,
            message: envelope.error,
            code: envelope.error_code,
            fields: envelope.extra,
        }
    }
}

/// Failure of a toggle read: HTTP 503 `{error}` (plus `code: invalid_memory_setting`
/// when the stored value is not a boolean), and never `enabled`.
#[derive(Debug, Serialize)]
pub struct ToggleReadError {
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
}

impl IntoResponse for ToggleReadError {
    fn into_response(self) -> Response {
        (StatusCode::SERVICE_UNAVAILABLE, Json(self)).into_response()
    }
}

/// Every answer of [`MemoryError`] (status, envelope, code), read from one
/// sample of each variant, so the description follows [`MemoryError::status`]
/// and the envelope. Variants whose code depends on the input (`Invalid`,
/// `Exists`: the name rule that failed) are listed without a fixed code.
impl DocumentedError for MemoryError {
    fn answers() -> Vec<ErrorDoc> {
        use MemoryError::*;
        let s = || String::from("x");
        let samples: [(MemoryError, &'static str, bool); 22] = [
            (
                Unreadable(s()),
                "a memory file was not JSON: kept aside, the next call starts it anew",
                true,
            ),
            (
                BadRequest(s()),
                "invalid input (query, body or file name)",
                false,
            ),
            (
                Invalid {
                    code: "empty",
                    error: s(),
                },
                "a character name breaks the naming rules (code names the rule)",
                false,
            ),
            (NotFound(s()), "no such character or memory entry", true),
            (
                MissingTokens,
                "fingerprint and identity_token of the read are missing",
                true,
            ),
            (
                Conflict {
                    fingerprint: None,
                    identity_token: None,
                },
                "the recent file changed since it was read (current tokens included)",
                true,
            ),
            (
                TheaterReadonly,
                "theater messages could not be placed",
                true,
            ),
            (
                Fence {
                    mode: s(),
                    operation: s(),
                    target: s(),
                },
                "cloud storage maintenance blocks writes (retryable)",
                true,
            ),
            (
                Exists {
                    code: "character_exists",
                    error: s(),
                },
                "the new name is taken",
                false,
            ),
            (
                PartialRename(s()),
                "an earlier rename left the old storage",
                true,
            ),
            (
                NotWritable {
                    error: s(),
                    rolled_back: true,
                },
                "storage could not be written; the rename was rolled back",
                true,
            ),
            (NoLegacyRoots, "no legacy memory root is recognized", true),
            (
                Disabled(s()),
                "long-term memory extraction is switched off",
                true,
            ),
            (ExtractionRunning, "an extraction is already running", true),
            (ModelFailed(s()), "the memory model call failed", true),
            (
                ConfigUnreadable(s()),
                "the core configuration cannot be read",
                true,
            ),
            (Busy(s()), "memory work did not stop in time", true),
            (
                MigrationFailed(s()),
                "the powerful-memory migration failed; nothing was saved",
                true,
            ),
            (
                ReloadFailed {
                    error: s(),
                    rolled_back: true,
                    rollback_error: String::new(),
                },
                "the renamed memory could not be reloaded",
                true,
            ),
            (
                RollbackFailed {
                    error: s(),
                    rollback_error: s(),
                },
                "the rename failed and was not fully rolled back",
                true,
            ),
            (Storage(s()), "a storage failure", true),
            (Internal(s()), "an unexpected failure", true),
        ];
        samples
            .into_iter()
            .map(|(e, description, fixed)| {
                let status = e.status().as_u16();
                let code = e.envelope().error_code.filter(|_| fixed);
                let doc = ErrorDoc::new(status, EnvelopeKind::Success, description);
                match code {
                    Some(c) => doc.code(c),
                    None => doc,
                }
            })
            .collect()
    }
}

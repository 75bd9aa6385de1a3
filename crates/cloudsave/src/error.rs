//! The one error enum of the cloud-save family and its mapping to the
//! cloud-save envelope (`{success:false, error, code, message, message_key,
//! message_params, character_name}`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::CloudError;

/// Everything a cloud-save operation can fail with.
#[derive(Debug)]
pub enum CloudSaveError {
    /// The body is not a JSON object.
    InvalidJsonBody(String),
    /// An option is present but not a boolean.
    InvalidParameter(&'static str),
    /// The body is larger than the route accepts.
    BodyTooLarge,
    /// The character name failed the audit (character-name rules).
    NameAuditFailed {
        reason: &'static str,
        message: String,
    },
    /// The storage target cannot be built or reached.
    ProviderUnavailable(String),
    /// Neither side has the character.
    CharacterNotFound,
    /// The character is not configured locally.
    LocalNotFound,
    /// The cloud has no (complete) unit for the character.
    CloudNotFound,
    /// A local character exists and `overwrite` is false.
    LocalExists,
    /// A cloud unit exists and `overwrite` is false.
    CloudExists,
    /// The maintenance / read-only fence is up.
    FenceActive {
        mode: String,
        operation: String,
        target: String,
    },
    /// A chat session is open and `force` is not true.
    ActiveSession,
    /// Closing the chat session did not finish in time.
    SessionTerminateFailed(String),
    /// The memory family could not release the character's memory handles.
    MemoryReleaseFailed(String),
    /// The cloud unit does not match its own meta record.
    PayloadCorrupt(String),
    /// A local memory file cannot be exported (e.g. time_indexed.db is not SQLite).
    LocalUnreadable(String),
    /// Unexpected failure of an upload.
    UploadFailed(String),
    /// Unexpected failure of a download.
    DownloadFailed(String),
    /// A background task (file system, SQLite, hashing) panicked or was
    /// cancelled; uploads and downloads report it as their own failure.
    TaskFailed(String),
    /// The import was rolled back because the reload failed.
    ReloadRolledBack {
        message: String,
        rolled_back: bool,
        rollback_error: String,
        backup_path: Option<String>,
    },
}

impl From<companiond_core::fence::FenceUp> for CloudSaveError {
    fn from(f: companiond_core::fence::FenceUp) -> Self {
        CloudSaveError::FenceActive {
            mode: f.mode,
            operation: f.operation,
            target: f.target,
        }
    }
}

impl From<companiond_core::fence::RaiseError> for CloudSaveError {
    fn from(e: companiond_core::fence::RaiseError) -> Self {
        match e {
            companiond_core::fence::RaiseError::Up(f) => f.into(),
            e @ companiond_core::fence::RaiseError::Storage(_) => {
                CloudSaveError::TaskFailed(e.to_string())
            }
        }
    }
}

impl From<companiond_core::task::TaskFailed> for CloudSaveError {
    fn from(e: companiond_core::task::TaskFailed) -> Self {
        CloudSaveError::TaskFailed(e.to_string())
    }
}

impl From<crate::unit::SnapshotError> for CloudSaveError {
    fn from(e: crate::unit::SnapshotError) -> Self {
        match e {
            crate::unit::SnapshotError::Unreadable(e) => CloudSaveError::LocalUnreadable(e),
            crate::unit::SnapshotError::Io(e) => CloudSaveError::UploadFailed(e),
        }
    }
}

impl std::fmt::Display for CloudSaveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for CloudSaveError {}

impl CloudSaveError {
    /// The failure of a transfer: a failed background task of it is answered
    /// as `failed` (the transfer's own failure).
    pub fn in_transfer(self, failed: fn(String) -> CloudSaveError) -> Self {
        match self {
            CloudSaveError::TaskFailed(m) => failed(m),
            e => e,
        }
    }

    /// The machine code, HTTP status and message key (the frontend's translation keys).
    pub fn parts(&self) -> (&'static str, StatusCode, &'static str) {
        use CloudSaveError::*;
        match self {
            InvalidJsonBody(_) => (
                "INVALID_JSON_BODY",
                StatusCode::BAD_REQUEST,
                "cloudsave.error.invalidJsonBody",
            ),
            InvalidParameter(_) => (
                "INVALID_PARAMETER",
                StatusCode::BAD_REQUEST,
                "cloudsave.error.invalidBooleanParameter",
            ),
            BodyTooLarge => (
                "INVALID_JSON_BODY",
                StatusCode::PAYLOAD_TOO_LARGE,
                "cloudsave.error.invalidJsonBody",
            ),
            NameAuditFailed { .. } => (
                "NAME_AUDIT_FAILED",
                StatusCode::BAD_REQUEST,
                "cloudsave.error.nameAuditFailed",
            ),
            ProviderUnavailable(_) => (
                "CLOUDSAVE_PROVIDER_UNAVAILABLE",
                StatusCode::SERVICE_UNAVAILABLE,
                "cloudsave.error.providerUnavailable",
            ),
            CharacterNotFound => (
                "CLOUDSAVE_CHARACTER_NOT_FOUND",
                StatusCode::NOT_FOUND,
                "cloudsave.error.cloudCharacterNotFound",
            ),
            LocalNotFound => (
                "LOCAL_CHARACTER_NOT_FOUND",
                StatusCode::NOT_FOUND,
                "cloudsave.error.localCharacterNotFound",
            ),
            CloudNotFound => (
                "CLOUD_CHARACTER_NOT_FOUND",
                StatusCode::NOT_FOUND,
                "cloudsave.error.cloudCharacterNotFound",
            ),
            LocalExists => (
                "LOCAL_CHARACTER_EXISTS",
                StatusCode::CONFLICT,
                "cloudsave.error.localCharacterExists",
            ),
            CloudExists => (
                "CLOUD_CHARACTER_EXISTS",
                StatusCode::CONFLICT,
                "cloudsave.error.cloudCharacterExists",
            ),
            FenceActive { .. } => (
                "CLOUDSAVE_WRITE_FENCE_ACTIVE",
                StatusCode::CONFLICT,
                "cloudsave.error.writeFenceActive",
            ),
            ActiveSession => (
                "ACTIVE_SESSION_BLOCKED",
                StatusCode::CONFLICT,
                "cloudsave.error.activeSessionBlocked",
            ),
            SessionTerminateFailed(_) => (
                "SESSION_TERMINATE_FAILED",
                StatusCode::SERVICE_UNAVAILABLE,
                "cloudsave.error.sessionTerminateFailed",
            ),
            MemoryReleaseFailed(_) => (
                "MEMORY_RELEASE_FAILED",
                StatusCode::SERVICE_UNAVAILABLE,
                "cloudsave.error.memoryReleaseFailed",
            ),
            PayloadCorrupt(_) => (
                "CLOUD_PAYLOAD_CORRUPT",
                StatusCode::BAD_GATEWAY,
                "cloudsave.error.cloudPayloadCorrupt",
            ),
            LocalUnreadable(_) => (
                "LOCAL_MEMORY_UNREADABLE",
                StatusCode::CONFLICT,
                "cloudsave.error.localMemoryUnreadable",
            ),
            UploadFailed(_) => (
                "CLOUDSAVE_UPLOAD_FAILED",
                StatusCode::INTERNAL_SERVER_ERROR,
                "cloudsave.error.uploadFailed",
            ),
            DownloadFailed(_) => (
                "CLOUDSAVE_DOWNLOAD_FAILED",
                StatusCode::INTERNAL_SERVER_ERROR,
                "cloudsave.error.downloadFailed",
            ),
            TaskFailed(_) => (
                "CLOUDSAVE_INTERNAL_ERROR",
                StatusCode::INTERNAL_SERVER_ERROR,
                "cloudsave.error.internal",
            ),
            ReloadRolledBack { .. } => (
                "LOCAL_RELOAD_FAILED_ROLLED_BACK",
                StatusCode::INTERNAL_SERVER_ERROR,
                "cloudsave.error.localReloadFailedRolledBack",
            ),
        }
    }

    /// English text for people.
    pub fn message(&self) -> String {
        use CloudSaveError::*;
        match self {
            InvalidJsonBody(e) => format!("The request body must be a JSON object: {e}"),
            InvalidParameter(p) => format!("{p} must be a boolean"),
            BodyTooLarge => "The request body is too large.".into(),
            NameAuditFailed { message, .. } => message.clone(),
            ProviderUnavailable(e) => format!("Cloud storage is unavailable: {e}"),
            CharacterNotFound => {
                "The character exists neither locally nor in cloud storage.".into()
            }
            LocalNotFound => "The character does not exist locally.".into(),
            CloudNotFound => "Cloud storage has no save of this character.".into(),
            LocalExists => {
                "The character already exists locally; pass overwrite:true to replace it.".into()
            }
            CloudExists => {
                "Cloud storage already holds this character; pass overwrite:true to replace it."
                    .into()
            }
            FenceActive {
                mode,
                operation,
                target,
            } => format!("{operation} blocked while root_state.mode={mode} ({target})"),
            ActiveSession => {
                "The character has an active chat session; close it or pass force:true.".into()
            }
            SessionTerminateFailed(e) => format!("The chat session could not be closed: {e}"),
            MemoryReleaseFailed(e) => format!("The character's memory could not be released: {e}"),
            PayloadCorrupt(e) => format!("The cloud save failed verification: {e}"),
            LocalUnreadable(e) => format!("A local memory file cannot be exported: {e}"),
            UploadFailed(e) => format!("Upload failed. Please try again later. ({e})"),
            DownloadFailed(e) => format!("Download failed. Please try again later. ({e})"),
            TaskFailed(e) => format!("Cloud save failed unexpectedly. Please try again later. ({e})"),
            ReloadRolledBack { message, .. } => format!(
                "The imported character could not be loaded; the previous local state was restored: {message}"
            ),
        }
    }

    /// The envelope for `character` (None when the route has no character).
    pub fn to_response(&self, character: Option<&str>) -> Response {
        use CloudSaveError::*;
        let (code, status, key) = self.parts();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            if let Some(f) = companiond_core::disk::current() {
                // The family's codes are upper case: STORAGE_FULL, STORAGE_READ_ONLY.
                let (code, key) = match f {
                    companiond_core::disk::StorageFault::Full => {
                        ("STORAGE_FULL", "cloudsave.error.storageFull")
                    }
                    companiond_core::disk::StorageFault::ReadOnly => {
                        ("STORAGE_READ_ONLY", "cloudsave.error.storageReadOnly")
                    }
                };
                let mut e = CloudError::new(code, f.message(), character);
                e.message_key = key.to_string();
                return e.status(f.status());
            }
        }
        let mut e = CloudError::new(code, self.message(), character);
        e.message_key = key.to_string();
        e = match self {
            InvalidParameter(p) => e.param("parameter", p),
            NameAuditFailed { reason, .. } => e.param("reason", reason),
            ProviderUnavailable(m)
            | SessionTerminateFailed(m)
            | MemoryReleaseFailed(m)
            | PayloadCorrupt(m)
            | LocalUnreadable(m)
            | UploadFailed(m)
            | DownloadFailed(m)
            | TaskFailed(m) => e.param("message", m),
            FenceActive {
                mode,
                operation,
                target,
            } => [("mode", mode), ("operation", operation), ("target", target)]
                .into_iter()
                .fold(e, |e, (key, value)| e.with(key, value))
                .with("retryable", true),
            ActiveSession => e.with("can_force", true),
            ReloadRolledBack {
                message,
                rolled_back,
                rollback_error,
                backup_path,
            } => e
                .param("message", message)
                .with("rolled_back", rolled_back)
                .with("rollback_error", rollback_error)
                .with("backup_path", backup_path),
            _ => e,
        };
        e.status(status)
    }
}

/// A failure bound to the character it concerns; the HTTP answer.
pub struct Failure(pub CloudSaveError, pub Option<String>);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        self.0.to_response(self.1.as_deref())
    }
}

/// Every answer of [`CloudSaveError`], read back from one sample per variant
/// (docs/cloudsave.md describes when each happens).
impl DocumentedError for CloudSaveError {
    fn answers() -> Vec<ErrorDoc> {
        use CloudSaveError::*;
        let m = || "reason".to_string();
        [
            InvalidJsonBody("expected a JSON object".into()),
            InvalidParameter("overwrite"),
            BodyTooLarge,
            NameAuditFailed {
                reason: "path_traversal",
                message: "the character name may not contain ..".into(),
            },
            ProviderUnavailable(m()),
            CharacterNotFound,
            LocalNotFound,
            CloudNotFound,
            LocalExists,
            CloudExists,
            FenceActive {
                mode: "maintenance_readonly".into(),
                operation: "cloudsave_download".into(),
                target: "Mika".into(),
            },
            ActiveSession,
            SessionTerminateFailed(m()),
            MemoryReleaseFailed(m()),
            PayloadCorrupt(m()),
            LocalUnreadable(m()),
            UploadFailed(m()),
            DownloadFailed(m()),
            TaskFailed(m()),
            ReloadRolledBack {
                message: m(),
                rolled_back: true,
                rollback_error: String::new(),
                backup_path: None,
            },
        ]
        .into_iter()
        .map(|e| {
            let description = e.message();
            ErrorDoc::observed(description, Failure(e, Some("Mika".into())))
        })
        .collect()
    }
}

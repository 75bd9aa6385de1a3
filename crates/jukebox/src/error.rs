//! The family's error enum, answered in the `{detail}` envelope.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::Detail;
use companiond_core::store::StoreError;
use companiond_core::task::TaskFailed;
use serde_json::Value;

use crate::upload::Refused;

/// Every failure a jukebox route reports.
#[derive(Debug)]
pub enum JukeboxError {
    /// 400: invalid input, unsafe path, unsupported type, non-boolean option.
    BadRequest(String),
    /// 404: unknown song, action, binding or file.
    NotFound(String),
    /// 404 with a structured detail (`{message, songIds|actionIds}`).
    NotFoundIds {
        message: String,
        key: &'static str,
        ids: Vec<String>,
    },
    /// 409: the item already exists (single-file duplicate upload).
    Conflict(String),
    /// 413: an upload, archive or expanded archive over its limit.
    TooLarge(String),
    /// 422: a JSON body of the wrong shape.
    Invalid(String),
    /// 500: the stored library is unreadable or the disk failed.
    Storage(String),
    /// The one file of a single-file upload was not added: 409 for a
    /// duplicate, 400 otherwise, answered `{success: false, error, detail}`.
    Refused(Refused),
}

impl JukeboxError {
    pub fn bad(msg: impl Into<String>) -> Self {
        JukeboxError::BadRequest(msg.into())
    }
    pub fn not_found(msg: impl Into<String>) -> Self {
        JukeboxError::NotFound(msg.into())
    }
    /// A storage failure (500), except when the file system refused a *name*
    /// (too long, invalid there): that is the client's input (400).
    pub fn io<E: std::fmt::Display + 'static>(context: &str, e: E) -> Self {
        if let Some(m) = companiond_core::paths::name_refused_message(context, &e) {
            return JukeboxError::BadRequest(m);
        }
        JukeboxError::Storage(format!("{context}: {e}"))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            JukeboxError::BadRequest(_) => StatusCode::BAD_REQUEST,
            JukeboxError::NotFound(_) | JukeboxError::NotFoundIds { .. } => StatusCode::NOT_FOUND,
            JukeboxError::Conflict(_) => StatusCode::CONFLICT,
            JukeboxError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            JukeboxError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            JukeboxError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
            JukeboxError::Refused(Refused::Duplicate { .. }) => StatusCode::CONFLICT,
            JukeboxError::Refused(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// The human-readable message.
    pub fn message(&self) -> String {
        match self {
            JukeboxError::BadRequest(m)
            | JukeboxError::NotFound(m)
            | JukeboxError::Conflict(m)
            | JukeboxError::TooLarge(m)
            | JukeboxError::Invalid(m)
            | JukeboxError::Storage(m) => m.clone(),
            JukeboxError::NotFoundIds { message, ids, .. } => {
                format!("{message}: {}", ids.join(", "))
            }
            JukeboxError::Refused(r) => r.to_string(),
        }
    }
}

impl std::fmt::Display for JukeboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for JukeboxError {}

impl From<StoreError> for JukeboxError {
    fn from(e: StoreError) -> Self {
        JukeboxError::Storage(e.to_string())
    }
}

impl From<TaskFailed> for JukeboxError {
    fn from(e: TaskFailed) -> Self {
        JukeboxError::Storage(format!("background task failed: {e}"))
    }
}

impl IntoResponse for JukeboxError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let JukeboxError::Storage(m) = &self {
            if let Some(f) = companiond_core::disk::current() {
                tracing::warn!("jukebox: {m}");
                let body = serde_json::json!({"detail": f.message(), "error_code": f.code()});
                return (f.status(), axum::Json(body)).into_response();
            }
            tracing::error!("jukebox: {m}");
        }
        match self {
            JukeboxError::NotFoundIds { message, key, ids } => {
                let mut d = Detail::new(String::new());
                d.detail = serde_json::json!({ "message": message, key: ids });
                d.status(status)
            }
            JukeboxError::Refused(r) => {
                let error = r.to_string();
                let body = serde_json::json!({"success": false, "error": error, "detail": error});
                (status, axum::Json(body)).into_response()
            }
            other => Detail {
                detail: Value::String(other.message()),
            }
            .status(status),
        }
    }
}

/// Every `{detail}` answer of [`JukeboxError`], by status; the refusals of a
/// single-file upload are the upload routes' own ([`refused_answers`]).
impl companiond_core::api::DocumentedError for JukeboxError {
    fn answers() -> Vec<companiond_core::api::ErrorDoc> {
        use companiond_core::api::ErrorDoc;
        use companiond_core::envelope::EnvelopeKind;
        let m = || String::from("x");
        let samples = [
            (
                JukeboxError::BadRequest(m()),
                "invalid input, unsafe path or unsupported type",
            ),
            (
                JukeboxError::NotFound(m()),
                "unknown song, action, binding or file",
            ),
            (
                JukeboxError::NotFoundIds {
                    message: m(),
                    key: "songIds",
                    ids: Vec::new(),
                },
                "unknown ids (`detail`: `{message, songIds|actionIds}`)",
            ),
            (JukeboxError::Conflict(m()), "the item already exists"),
            (
                JukeboxError::TooLarge(m()),
                "an upload, archive or form over its limit",
            ),
            (JukeboxError::Invalid(m()), "a JSON body of the wrong shape"),
            (
                JukeboxError::Storage(m()),
                "the stored library is unreadable or the disk failed",
            ),
        ];
        samples
            .into_iter()
            .map(|(e, d)| ErrorDoc::new(e.status().as_u16(), EnvelopeKind::Detail, d))
            .collect()
    }
}

/// The refusals of a single-file upload (`{success: false, error, detail}`,
/// [`JukeboxError::Refused`]), which only the upload routes answer:
/// `.fails::<UploadRefusals>()`.
pub struct UploadRefusals;

impl companiond_core::api::DocumentedError for UploadRefusals {
    fn answers() -> Vec<companiond_core::api::ErrorDoc> {
        use companiond_core::api::ErrorDoc;
        use companiond_core::envelope::EnvelopeKind;
        [
            (
                Refused::Invalid(String::new()),
                "the one uploaded file's name or type is refused",
            ),
            (
                Refused::Duplicate {
                    kind: crate::library::Kind::Song,
                    existing: String::new(),
                },
                "the one uploaded file is already in the library",
            ),
        ]
        .into_iter()
        .map(|(refused, d)| {
            let status = JukeboxError::Refused(refused).status().as_u16();
            ErrorDoc::new(status, EnvelopeKind::Success, d)
        })
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_name_from_the_file_system_is_the_clients_error() {
        let e = JukeboxError::io(
            "cannot store the file",
            std::io::Error::from(std::io::ErrorKind::InvalidFilename),
        );
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        let e = JukeboxError::io("x", std::io::Error::other("disk on fire"));
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}

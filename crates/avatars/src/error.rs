//! The family's one error type, answered in the `{success:false, error,
//! error_code}` envelope; the status and code are chosen by variant (see
//! `docs/avatars.md`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{EnvelopeKind, SuccessError};
use companiond_core::paths::NameProblem;

/// Every failure of the MMD and PNGTuber routes.
#[derive(Debug)]
pub enum AvatarError {
    /// Invalid input (400) with a stable machine code.
    Invalid { code: &'static str, message: String },
    /// A file or package over its size limit (400, `file_too_large`).
    TooLarge(String),
    /// The upload body ended early or could not be read (400, `upload_aborted`).
    Aborted(String),
    /// A target the caller may not touch, e.g. a project built-in model (403).
    Forbidden(String),
    /// Missing model, animation or package (404).
    NotFound(String),
    /// The destination already exists (409).
    Exists(String),
    /// A recognised or unrecognised PNGTuber package that could not be imported
    /// (400 with `source_format` and `warnings`).
    Import {
        code: &'static str,
        message: String,
        source_format: String,
        warnings: Vec<String>,
    },
    /// Unexpected failure (500): storage errors, unreadable stored documents.
    Internal(String),
}

/// The machine codes of [`AvatarError::Invalid`] and [`AvatarError::Import`]
/// (400; `TooLarge` and `Aborted` have fixed ones).
/// The OpenAPI document lists exactly these; [`AvatarError::invalid`] and
/// [`AvatarError::import`] refuse (in debug builds) a code missing here.
pub const BAD_REQUEST_CODES: &[&str] = &[
    "ambiguous_layered_save",
    "conversion_failed",
    "duplicate_file",
    "image_pair_candidate",
    "invalid_file_content",
    "invalid_filename",
    "invalid_identifier",
    "invalid_mapping",
    "invalid_model",
    "invalid_model_json",
    "invalid_model_name",
    "invalid_multipart",
    "invalid_name",
    "invalid_package",
    "invalid_upload_path",
    "invalid_url",
    "invalid_zip",
    "missing_file",
    "missing_identifier",
    "missing_model",
    "missing_url",
    "no_files",
    "no_model",
    "out_of_bounds",
    "too_many_entries",
    "too_many_files",
    "unknown_package",
    "unsafe_path",
    "unsafe_zip_entry",
    "unsupported_file_type",
    "unsupported_format",
];

impl AvatarError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(BAD_REQUEST_CODES.contains(&code), "unlisted code {code}");
        AvatarError::Invalid {
            code,
            message: message.into(),
        }
    }
    pub fn import(
        code: &'static str,
        message: impl Into<String>,
        source_format: &str,
        warnings: Vec<String>,
    ) -> Self {
        debug_assert!(BAD_REQUEST_CODES.contains(&code), "unlisted code {code}");
        AvatarError::Import {
            code,
            message: message.into(),
            source_format: source_format.to_string(),
            warnings,
        }
    }
    /// A storage failure (500), except when the file system refused a *name*
    /// (too long, invalid there): that is the client's input, 400 `invalid_filename`.
    pub fn io<E: std::fmt::Display + 'static>(context: &str, e: E) -> Self {
        if let Some(m) = companiond_core::paths::name_refused_message(context, &e) {
            return AvatarError::invalid("invalid_filename", m);
        }
        AvatarError::Internal(format!("{context}: {e}"))
    }
    /// A client-supplied file or folder name that cannot be stored (400
    /// `invalid_filename`, naming the problem).
    pub fn bad_name(what: &str, name: &str, problem: NameProblem) -> Self {
        AvatarError::invalid(
            "invalid_filename",
            format!(
                "{what} {}: {problem}",
                companiond_core::text::shown_name(name)
            ),
        )
    }
    pub fn status(&self) -> StatusCode {
        match self {
            AvatarError::Invalid { .. }
            | AvatarError::TooLarge(_)
            | AvatarError::Aborted(_)
            | AvatarError::Import { .. } => StatusCode::BAD_REQUEST,
            AvatarError::Forbidden(_) => StatusCode::FORBIDDEN,
            AvatarError::NotFound(_) => StatusCode::NOT_FOUND,
            AvatarError::Exists(_) => StatusCode::CONFLICT,
            AvatarError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
    /// The machine code of the answer's `error_code`.
    pub fn code(&self) -> &'static str {
        match self {
            AvatarError::Invalid { code, .. } | AvatarError::Import { code, .. } => code,
            AvatarError::TooLarge(_) => "file_too_large",
            AvatarError::Aborted(_) => "upload_aborted",
            AvatarError::Forbidden(_) => "forbidden",
            AvatarError::NotFound(_) => "not_found",
            AvatarError::Exists(_) => "already_exists",
            AvatarError::Internal(_) => "internal_error",
        }
    }
    pub fn message(&self) -> &str {
        match self {
            AvatarError::Invalid { message, .. } | AvatarError::Import { message, .. } => message,
            AvatarError::TooLarge(m)
            | AvatarError::Aborted(m)
            | AvatarError::Forbidden(m)
            | AvatarError::NotFound(m)
            | AvatarError::Exists(m)
            | AvatarError::Internal(m) => m,
        }
    }
}

impl std::fmt::Display for AvatarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for AvatarError {}

impl From<companiond_core::paths::PathError> for AvatarError {
    fn from(e: companiond_core::paths::PathError) -> Self {
        AvatarError::invalid("unsafe_path", format!("unsafe path: {e}"))
    }
}

impl From<companiond_core::task::TaskFailed> for AvatarError {
    fn from(e: companiond_core::task::TaskFailed) -> Self {
        AvatarError::Internal(e.to_string())
    }
}

impl IntoResponse for AvatarError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            if let Some(f) = companiond_core::disk::current() {
                tracing::warn!("avatars: {}", self.message());
                return f.success_error();
            }
            tracing::error!("avatars: {}", self.message());
        }
        let code = self.code();
        match self {
            AvatarError::Import {
                message,
                source_format,
                warnings,
                ..
            } => SuccessError::new(message)
                .code(code)
                .with("source_format", source_format)
                .with("warnings", warnings)
                .status(status),
            other => SuccessError::new(other.message()).code(code).status(status),
        }
    }
}

/// Every answer of [`AvatarError`]: status and code read from one sample of
/// each variant (and every 400 code), all in the `{success:false, error,
/// error_code}` envelope.
impl DocumentedError for AvatarError {
    fn answers() -> Vec<ErrorDoc> {
        let samples = [
            (
                "a file or package over its size limit",
                AvatarError::TooLarge(String::new()),
            ),
            (
                "the upload body ended early",
                AvatarError::Aborted(String::new()),
            ),
            (
                "a target the caller may not touch (a project model)",
                AvatarError::Forbidden(String::new()),
            ),
            (
                "no such model, animation or package",
                AvatarError::NotFound(String::new()),
            ),
            (
                "the destination already exists",
                AvatarError::Exists(String::new()),
            ),
            ("storage failure", AvatarError::Internal(String::new())),
        ];
        let mut out: Vec<ErrorDoc> = BAD_REQUEST_CODES
            .iter()
            .map(|code| {
                ErrorDoc::new(400, EnvelopeKind::Success, "invalid input (by error_code)")
                    .code(*code)
            })
            .collect();
        out.extend(samples.into_iter().map(|(what, e)| {
            ErrorDoc::new(e.status().as_u16(), EnvelopeKind::Success, what).code(e.code())
        }));
        out
    }
}

/// The storage failure of a read-only route (listings, config reads).
pub fn storage_failure() -> ErrorDoc {
    let e = AvatarError::Internal(String::new());
    ErrorDoc::new(
        e.status().as_u16(),
        EnvelopeKind::Success,
        "storage failure",
    )
    .code(e.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_is_documented_once_with_its_status() {
        let mut seen = std::collections::BTreeSet::new();
        for d in AvatarError::answers() {
            let code = d.code.clone().unwrap_or_default();
            assert!(seen.insert((d.status, code.to_string())), "{code} twice");
        }
        assert!(seen.contains(&(400, "upload_aborted".into())));
        assert!(seen.contains(&(409, "already_exists".into())));
        assert!(seen.contains(&(500, "internal_error".into())));
    }

    #[test]
    fn a_refused_name_from_the_file_system_is_the_clients_error() {
        let refused = std::io::Error::from(std::io::ErrorKind::InvalidFilename);
        let e = AvatarError::io("cannot store the file", refused);
        let code = match &e {
            AvatarError::Invalid { code, .. } => *code,
            _ => "",
        };
        assert_eq!(
            (e.status(), code),
            (StatusCode::BAD_REQUEST, "invalid_filename")
        );
        let e = AvatarError::io("x", std::io::Error::other("disk on fire"));
        assert!(matches!(e, AvatarError::Internal(_)));
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            companiond_core::text::shown_name(&"a".repeat(100))
                .chars()
                .count(),
            83
        );
    }
}

//! The family's one error type, answered in the `{success:false, error,
//! error_code}` envelope; the status and code are chosen by variant (see
//! `docs/avatars.md`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::SuccessError;
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

impl AvatarError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
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
            tracing::error!("avatars: {}", self.message());
        }
        match self {
            AvatarError::Invalid { code, message } => {
                SuccessError::new(message).code(code).status(status)
            }
            AvatarError::TooLarge(m) => SuccessError::new(m).code("file_too_large").status(status),
            AvatarError::Aborted(m) => SuccessError::new(m).code("upload_aborted").status(status),
            AvatarError::Forbidden(m) => SuccessError::new(m).code("forbidden").status(status),
            AvatarError::NotFound(m) => SuccessError::new(m).code("not_found").status(status),
            AvatarError::Exists(m) => SuccessError::new(m).code("already_exists").status(status),
            AvatarError::Import {
                code,
                message,
                source_format,
                warnings,
            } => SuccessError::new(message)
                .code(code)
                .with("source_format", source_format)
                .with("warnings", warnings)
                .status(status),
            AvatarError::Internal(m) => SuccessError::new(m).code("internal_error").status(status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

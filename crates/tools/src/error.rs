//! The one error enum of the tools family and its answer: the request-validation
//! envelope `{detail}` with the status chosen by variant.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{Detail, EnvelopeKind};

/// Why a tools request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolsError {
    /// The body breaks the registration schema (HTTP 422).
    Invalid(String),
    /// A non-null role names no existing character (HTTP 404).
    UnknownRole(String),
}

impl std::fmt::Display for ToolsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolsError::Invalid(m) => f.write_str(m),
            ToolsError::UnknownRole(r) => write!(f, "unknown role: {r}"),
        }
    }
}

impl std::error::Error for ToolsError {}

impl IntoResponse for ToolsError {
    fn into_response(self) -> Response {
        let status = match self {
            ToolsError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ToolsError::UnknownRole(_) => StatusCode::NOT_FOUND,
        };
        Detail::new(self.to_string()).status(status)
    }
}

/// Every answer of [`ToolsError`] (`{detail}` by variant), and the loopback
/// guard's refusal that every route of this family has.
impl DocumentedError for ToolsError {
    fn answers() -> Vec<ErrorDoc> {
        vec![
            ErrorDoc::new(
                422,
                EnvelopeKind::Detail,
                "the body breaks the schema (detail names the field)",
            ),
            ToolsError::unknown_role_answer(),
            ToolsError::loopback_answer(),
        ]
    }
}

impl ToolsError {
    /// [`ToolsError::UnknownRole`]'s answer (the only one a list can give).
    pub fn unknown_role_answer() -> ErrorDoc {
        ErrorDoc::new(404, EnvelopeKind::Detail, "unknown role: no such character")
    }

    /// The loopback guard's refusal, before any body is read.
    pub fn loopback_answer() -> ErrorDoc {
        ErrorDoc::new(403, EnvelopeKind::Detail, "the TCP peer is not loopback")
    }
}

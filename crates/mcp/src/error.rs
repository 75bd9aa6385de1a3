//! The one error enum of the MCP family and its answer: the
//! `{success:false, error, error_code}` envelope with the status chosen by variant.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{EnvelopeKind, SuccessError};

/// Why an MCP request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpError {
    /// The server settings break a rule (HTTP 400, `invalid_server`).
    Invalid(String),
    /// No server of that name (HTTP 404, `unknown_server`).
    UnknownServer(String),
    /// The settings file could not be read or written (HTTP 500, `storage_error`).
    Store(String),
    /// companiond is stopping (HTTP 503, `stopping`).
    Stopping,
}

impl std::fmt::Display for McpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpError::Invalid(m) => f.write_str(m),
            McpError::UnknownServer(n) => write!(f, "no MCP server named {n}"),
            McpError::Store(e) => write!(f, "cannot store the MCP settings: {e}"),
            McpError::Stopping => f.write_str("companiond is stopping"),
        }
    }
}

impl std::error::Error for McpError {}

impl McpError {
    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            McpError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_server"),
            McpError::UnknownServer(_) => (StatusCode::NOT_FOUND, "unknown_server"),
            McpError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "storage_error"),
            McpError::Stopping => (StatusCode::SERVICE_UNAVAILABLE, "stopping"),
        }
    }
}

impl IntoResponse for McpError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            if let Some(f) = companiond_core::disk::current() {
                return f.success_error();
            }
        }
        SuccessError::new(self.to_string())
            .code(code)
            .status(status)
    }
}

impl DocumentedError for McpError {
    fn answers() -> Vec<ErrorDoc> {
        [
            McpError::Invalid("command is empty".into()),
            McpError::UnknownServer("weather".into()),
            McpError::Store("disk full".into()),
        ]
        .iter()
        .map(|e| {
            let (status, code) = e.parts();
            ErrorDoc::new(status.as_u16(), EnvelopeKind::Success, e.to_string()).code(code)
        })
        .chain([ErrorDoc::new(
            422,
            EnvelopeKind::Success,
            "the body is not JSON of the documented shape",
        )])
        .collect()
    }
}

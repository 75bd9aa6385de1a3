//! The family's error enum and its mapping to the `{success:false, error, ...}` envelope.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{BodyFault, SuccessError};
use companiond_core::store::StoreError;
use serde_json::Value;

/// How an outside server failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// It did not answer in time.
    TimedOut,
    /// It refused, broke the protocol or answered an error.
    Failed,
}

/// Every failure of the configuration and proactive routes.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// Invalid input: HTTP 400 `{success:false, error, error_code}`.
    BadRequest { error: String, code: &'static str },
    /// A referenced record does not exist: HTTP 404.
    NotFound(String),
    /// An outside endpoint failed (probes): HTTP 200 `{success:false, error, error_code}`.
    Probe { error: String, code: &'static str },
    /// The voice server failed at a stage: HTTP 504 when it timed out, else 502,
    /// with `code` and `error_code`.
    Upstream {
        failure: Upstream,
        error: String,
        code: &'static str,
        stage: &'static str,
    },
    /// A stored document exists but cannot be parsed: HTTP 503 (it is never overwritten).
    Unreadable(String),
    /// The disk refused a read or write: HTTP 500.
    Storage(String),
}

impl ConfigError {
    pub fn bad(error: impl Into<String>) -> Self {
        ConfigError::BadRequest {
            error: error.into(),
            code: "invalid_input",
        }
    }
    pub fn bad_code(error: impl Into<String>, code: &'static str) -> Self {
        ConfigError::BadRequest {
            error: error.into(),
            code,
        }
    }
    /// A body that did not parse into its type: a field of another shape is
    /// `invalid_input` naming the field; a body that is not a JSON object (or
    /// too large) `invalid_body`.
    pub fn body(fault: BodyFault) -> Self {
        match fault {
            BodyFault::Invalid { .. } => ConfigError::bad(fault.to_string()),
            BodyFault::NotObject => {
                ConfigError::bad_code("the request body must be a JSON object", "invalid_body")
            }
            BodyFault::NotJson(e) => {
                ConfigError::bad_code(format!("invalid request body: {e}"), "invalid_body")
            }
            BodyFault::TooLarge { .. } => {
                ConfigError::bad_code("request body too large or unreadable", "invalid_body")
            }
        }
    }
    pub fn probe(code: &'static str, error: impl Into<String>) -> Self {
        ConfigError::Probe {
            error: error.into(),
            code,
        }
    }
    /// The machine code carried by the error.
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::BadRequest { code, .. } => code,
            ConfigError::NotFound(_) => "not_found",
            ConfigError::Probe { code, .. } => code,
            ConfigError::Upstream { code, .. } => code,
            ConfigError::Unreadable(_) => "storage_unreadable",
            ConfigError::Storage(_) => "storage_error",
        }
    }
    /// The human-readable message.
    pub fn message(&self) -> &str {
        match self {
            ConfigError::BadRequest { error, .. }
            | ConfigError::Probe { error, .. }
            | ConfigError::Upstream { error, .. } => error,
            ConfigError::NotFound(e) | ConfigError::Unreadable(e) | ConfigError::Storage(e) => e,
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ConfigError {}

impl From<StoreError> for ConfigError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Corrupt(m) => ConfigError::Unreadable(format!(
                "a stored settings document is unreadable and was left untouched: {m}"
            )),
            StoreError::Io(e) => ConfigError::Storage(format!("storage error: {e}")),
        }
    }
}

impl From<companiond_core::task::TaskFailed> for ConfigError {
    fn from(e: companiond_core::task::TaskFailed) -> Self {
        ConfigError::Storage(e.to_string())
    }
}

impl IntoResponse for ConfigError {
    fn into_response(self) -> Response {
        match self {
            ConfigError::BadRequest { error, code } => SuccessError::new(error)
                .code(code)
                .status(StatusCode::BAD_REQUEST),
            ConfigError::NotFound(e) => SuccessError::new(e)
                .code("not_found")
                .status(StatusCode::NOT_FOUND),
            ConfigError::Probe { error, code } => SuccessError::new(error)
                .code(code)
                .with("resolved_url", Value::Null)
                .status(StatusCode::OK),
            ConfigError::Upstream {
                failure,
                error,
                code,
                stage,
            } => SuccessError::new(error)
                .code(code)
                .with("code", voice_code(code))
                .with("stage", stage)
                .status(match failure {
                    Upstream::TimedOut => StatusCode::GATEWAY_TIMEOUT,
                    Upstream::Failed => StatusCode::BAD_GATEWAY,
                }),
            ConfigError::Unreadable(e) => SuccessError::new(e)
                .code("storage_unreadable")
                .status(StatusCode::SERVICE_UNAVAILABLE),
            ConfigError::Storage(e) => companiond_core::disk::storage_error(e),
        }
    }
}

/// The upper-case code the reference frontend branches on for voice-server failures.
fn voice_code(code: &str) -> &'static str {
    match code {
        "timeout" => "TTS_TIMEOUT",
        _ => "TTS_CONNECTION_FAILED",
    }
}

/// The answers every configuration route can give: refused input (400, one
/// code per rule), an unknown record (404), an unreadable stored document
/// (503) and a disk failure (500). Read back from one sample per variant.
impl DocumentedError for ConfigError {
    fn answers() -> Vec<ErrorDoc> {
        vec![
            ErrorDoc::observed(
                "refused input; error_code names the rule (invalid_input, invalid_body, ...)",
                ConfigError::bad("model_path is required"),
            )
            .any_code(),
            ErrorDoc::observed(
                "the referenced record does not exist",
                ConfigError::NotFound("no preference record for that model".into()),
            ),
            ErrorDoc::observed(
                "a stored settings document is unreadable (it is left untouched)",
                ConfigError::Unreadable("config/core_config.json is not a JSON object".into()),
            ),
            ErrorDoc::observed(
                "the disk refused a read or write",
                ConfigError::Storage("storage error: disk full".into()),
            ),
        ]
    }
}

/// The probes' failure: HTTP 200 `{success:false, error, error_code, resolved_url}`
/// (the settings page shows it beside the field), codes per failure.
pub struct ProbeFailure;

impl DocumentedError for ProbeFailure {
    fn answers() -> Vec<ErrorDoc> {
        vec![ErrorDoc::observed(
            "the endpoint could not be reached or refused; error_code says how",
            ConfigError::probe("timeout", "the endpoint did not answer in time"),
        )
        .any_code()]
    }
}

/// The voice server's failure at a stage: 504 when it timed out, else 502,
/// with `code` (`TTS_TIMEOUT`, `TTS_CONNECTION_FAILED`) and `stage`.
pub struct VoiceFailure;

impl DocumentedError for VoiceFailure {
    fn answers() -> Vec<ErrorDoc> {
        let at = |failure, code| ConfigError::Upstream {
            failure,
            error: "the voice server failed".into(),
            code,
            stage: "init",
        };
        vec![
            ErrorDoc::observed(
                "the voice server timed out",
                at(Upstream::TimedOut, "timeout"),
            ),
            ErrorDoc::observed(
                "the voice server failed",
                at(Upstream::Failed, "connection_failed"),
            )
            .any_code(),
        ]
    }
}

//! The one error type of the system family and its envelope.
//!
//! Every failure answers `{success:false, ok:false, error, error_code, ...extra}`:
//! the system helpers' clients read `{success:false, error}`, while the handoff,
//! seven-day and autostart clients read `{ok:false, ...}`; one body carrying both
//! flags serves them all. The HTTP status follows the [`Kind`] alone.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::{no_store, SuccessError};
use serde::Serialize;
use serde_json::{Map, Value};

/// What kind of failure (decides the HTTP status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    BadRequest,
    Forbidden,
    NotFound,
    Conflict,
    TooLarge,
    TooManyRequests,
    BadGateway,
    GatewayTimeout,
    Unavailable,
    NotImplemented,
    Internal,
}

impl Kind {
    pub fn status(self) -> StatusCode {
        match self {
            Kind::BadRequest => StatusCode::BAD_REQUEST,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::Conflict => StatusCode::CONFLICT,
            Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            Kind::BadGateway => StatusCode::BAD_GATEWAY,
            Kind::GatewayTimeout => StatusCode::GATEWAY_TIMEOUT,
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A failure of a system route (boxed so `Result`s stay small).
#[derive(Debug)]
pub struct SystemError(Box<ErrorBody>);

impl std::ops::Deref for SystemError {
    type Target = ErrorBody;
    fn deref(&self) -> &ErrorBody {
        &self.0
    }
}

/// Kind, stable machine code, message, extra fields.
#[derive(Debug)]
pub struct ErrorBody {
    pub kind: Kind,
    pub code: String,
    pub message: String,
    pub extra: Map<String, Value>,
    /// Add `Cache-Control: no-store`.
    pub no_store: bool,
}

impl SystemError {
    pub fn new(kind: Kind, code: &str, message: impl Into<String>) -> Self {
        SystemError(Box::new(ErrorBody {
            kind,
            code: code.to_string(),
            message: message.into(),
            extra: Map::new(),
            no_store: false,
        }))
    }
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(Kind::BadRequest, code, message)
    }
    pub fn forbidden(code: &str, message: impl Into<String>) -> Self {
        Self::new(Kind::Forbidden, code, message)
    }
    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, code, message)
    }
    pub fn storage(e: impl std::fmt::Display) -> Self {
        Self::new(Kind::Internal, "storage_error", e.to_string())
    }
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.0.extra.insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
        self
    }
    pub fn no_store(mut self) -> Self {
        self.0.no_store = true;
        self
    }
}

impl std::fmt::Display for SystemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for SystemError {}

impl From<companiond_core::store::StoreError> for SystemError {
    fn from(e: companiond_core::store::StoreError) -> Self {
        SystemError::storage(e)
    }
}

impl From<companiond_core::task::TaskFailed> for SystemError {
    fn from(e: companiond_core::task::TaskFailed) -> Self {
        SystemError::new(Kind::Internal, "internal_error", e.to_string())
    }
}

impl IntoResponse for SystemError {
    fn into_response(self) -> Response {
        let b = *self.0;
        let mut e = SuccessError::new(b.message).code(b.code).with("ok", false);
        for (k, v) in b.extra {
            e = e.with(&k, v);
        }
        let resp = e.status(b.kind.status());
        if b.no_store {
            no_store(resp)
        } else {
            resp
        }
    }
}

pub type SysResult<T> = Result<T, SystemError>;

//! Thin HTTP handlers over the domain modules, one file per resource.

pub mod conversation;
pub mod page;
pub mod preferences;
pub mod proactive;
pub mod providers;
pub mod voice;

use std::convert::Infallible;

use axum::extract::{FromRequest, Request};
use companiond_core::envelope::read_json_body;
use serde_json::{Map, Value};

use crate::error::ConfigError;

/// A JSON body that never rejects: the handler decides how to answer a body that
/// is not JSON (`Err` holds the parse error).
pub struct RawJson(pub Result<Value, String>);

impl<S: Send + Sync> FromRequest<S> for RawJson {
    type Rejection = Infallible;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(RawJson(
            read_json_body::<Value>(req).await.map_err(|(_, m)| m),
        ))
    }
}

impl RawJson {
    /// The body as an object, or a 400 in the family envelope.
    fn object(self) -> Result<Map<String, Value>, ConfigError> {
        match self.0 {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(ConfigError::bad_code(
                "the request body must be a JSON object",
                "invalid_body",
            )),
            Err(e) => Err(ConfigError::bad_code(e, "invalid_body")),
        }
    }
}

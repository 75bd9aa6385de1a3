//! Thin HTTP handlers, one file per resource: parse the request, call the domain
//! module, shape the answer. Family state arrives as `Ext<SystemState>`, or
//! with the app state and the JSON object body as one [`ObjectCall`].

pub mod autostart;
pub mod bodies;
pub mod changelog;
pub mod desktop;
pub mod emotion;
pub mod files;
pub mod handoff;
pub mod platform;
pub mod proactive;
pub mod queries;
pub mod status;
pub mod translate;
pub mod tutorial;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::no_store;
use companiond_core::{AppState, Ext};
use serde_json::{Map, Value};

use crate::error::{SysResult, SystemError};
use crate::state::SystemState;

/// Default largest JSON body of a system route.
pub(crate) const MAX_BODY: usize = 256 * 1024;

pub async fn add_no_store(r: Response) -> Response {
    no_store(r)
}

/// Read a JSON object body (empty = `{}`); 413 past `limit`, 400 for bad JSON or a non-object.
async fn read_obj(body: Body, limit: usize) -> SysResult<Map<String, Value>> {
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| SystemError::BodyTooLarge(format!("the body is larger than {limit} bytes")))?;
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(SystemError::InvalidBody(
            "body must be a JSON object".into(),
        )),
        Err(_) => Err(SystemError::InvalidJson("invalid JSON body".into())),
    }
}

/// A system route's JSON object body (at most [`MAX_BODY`] bytes).
async fn body_object(body: Body) -> SysResult<Map<String, Value>> {
    read_obj(body, MAX_BODY).await
}

/// A call with the app state, the family state and a JSON object body (read as
/// [`body_object`] reads it).
pub struct ObjectCall(pub AppState, pub Arc<SystemState>, pub Map<String, Value>);

impl FromRequest<AppState> for ObjectCall {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let Ext(sys) = Ext::<SystemState>::from_request_parts(&mut parts, state).await?;
        let body = body_object(body)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(ObjectCall(state.clone(), sys, body))
    }
}

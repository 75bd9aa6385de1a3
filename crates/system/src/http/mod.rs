//! Thin HTTP handlers, one file per resource: parse the request, call the domain
//! module, shape the answer. Family state arrives as `Ext<SystemState>`.

pub mod autostart;
pub mod changelog;
pub mod desktop;
pub mod emotion;
pub mod files;
pub mod handoff;
pub mod platform;
pub mod proactive;
pub mod status;
pub mod translate;
pub mod tutorial;

use axum::body::Body;
use axum::extract::RawQuery;
use axum::response::Response;
use companiond_core::envelope::no_store;
use serde_json::{Map, Value};

use crate::error::{SysResult, SystemError};

/// Default largest JSON body of a system route.
const MAX_BODY: usize = 256 * 1024;

pub async fn add_no_store(r: Response) -> Response {
    no_store(r)
}

/// The first value of `key` in the query string.
fn query(q: &RawQuery, key: &str) -> Option<String> {
    let raw = q.0.as_deref()?;
    url::form_urlencoded::parse(raw.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Read a JSON object body (empty = `{}`); 413 past `limit`, 400 for bad JSON or a non-object.
async fn read_obj(body: Body, limit: usize) -> SysResult<Map<String, Value>> {
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| SystemError::BodyTooLarge(format!("the body is larger than {limit} bytes")))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
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

//! Reading requests: JSON object bodies (lenient: empty is `{}`; their fields
//! are read by [`super::body`]), the character of a query, the `{game_type}`
//! path segment.

use axum::body::Body;
use companiond_core::AppState;
use serde_json::{Map, Value};

use super::body::{current_persona, MAX_ID_CHARS};
use super::queries::PersonaQuery;
use crate::error::{Failure, Reason};
use crate::text::truncate_chars;

/// Largest JSON body of these routes.
pub const MAX_BODY: usize = 1024 * 1024;

/// Read and parse a JSON object body (at most [`MAX_BODY`]).
pub async fn body_map(body: Body) -> Result<Map<String, Value>, Failure> {
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        Failure::new(Reason::InvalidBody).with("error", "the body is too large or unreadable")
    })?;
    parse_object(&bytes)
}

/// Parse a JSON request body: empty (or whitespace) is `{}`; anything that is
/// not a JSON object is `invalid_body`.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, Failure> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => {
            Err(Failure::new(Reason::InvalidBody).with("error", "the body must be a JSON object"))
        }
        Err(e) => {
            Err(Failure::new(Reason::InvalidBody).with("error", format!("invalid JSON: {e}")))
        }
    }
}

/// Normalise the `{game_type}` path segment: trimmed, lower-cased, 1..=64 characters of
/// `[a-z0-9_-]`.
pub fn game_type_of(raw: &str) -> Result<String, Failure> {
    let g = raw.trim().to_ascii_lowercase();
    if g.is_empty()
        || g.len() > 64
        || !g
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(
            Failure::new(Reason::InvalidGameType).with("game_type", truncate_chars(raw, 64))
        );
    }
    Ok(g)
}

/// The character of a query (`persona_name`, else `lanlan_name`, cut to 128
/// characters); when the first present is blank, the current one.
pub fn query_persona(st: &AppState, q: &PersonaQuery) -> Result<String, Failure> {
    match q
        .persona_name
        .as_ref()
        .or(q.lanlan_name.as_ref())
        .map(|s| s.trim())
    {
        Some(p) if !p.is_empty() => Ok(truncate_chars(p, MAX_ID_CHARS)),
        _ => current_persona(st),
    }
}

//! Reading requests: JSON object bodies (lenient: empty is `{}`), typed fields
//! with the family's `invalid_body` failure, query strings, the character and
//! session of a request, the `{game_type}` path segment.

use axum::body::Body;
use companiond_core::AppState;
use serde_json::{Map, Value};

use super::queries::PersonaQuery;
use crate::error::{Failure, Reason};
use crate::text::truncate_chars;

/// Largest JSON body of these routes.
pub const MAX_BODY: usize = 1024 * 1024;
/// Longest character name or session id accepted from a body.
const MAX_ID_CHARS: usize = 128;

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

/// A trimmed string field (first of `keys` present). A present non-string,
/// non-null value is `invalid_body`. Empty after trimming counts as absent.
pub fn opt_str(body: &Map<String, Value>, keys: &[&str]) -> Result<Option<String>, Failure> {
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => {
                let t = s.trim();
                if t.is_empty() {
                    continue;
                }
                return Ok(Some(t.to_string()));
            }
            Some(Value::Number(n)) if *k == "session_id" || *k == "sessionId" => {
                return Ok(Some(n.to_string()));
            }
            Some(_) => {
                return Err(Failure::new(Reason::InvalidBody)
                    .with("error", format!("{k} must be a string")))
            }
        }
    }
    Ok(None)
}

/// A boolean option: `true`/`false`, or the strings `true|false|1|0|yes|no|on|off`.
/// Absent or null gives `default`; anything else is `invalid_body`.
pub fn opt_bool(body: &Map<String, Value>, keys: &[&str], default: bool) -> Result<bool, Failure> {
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::Bool(b)) => return Ok(*b),
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => return Ok(true),
                "false" | "0" | "no" | "off" => return Ok(false),
                _ => {}
            },
            Some(Value::Number(n)) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
                return Ok(n.as_i64() == Some(1))
            }
            Some(_) => {}
        }
        return Err(
            Failure::new(Reason::InvalidBody).with("error", format!("{k} must be a boolean"))
        );
    }
    Ok(default)
}

/// Largest integer a JavaScript client represents exactly (2^53 - 1).
pub const MAX_SAFE_INT: i64 = (1 << 53) - 1;

/// An integer field (first of `keys`): a JSON integer or a string holding one,
/// within `min..=max`. Absent or null is `None`; anything else — a fraction,
/// NaN, a value outside the range (2^64, 1e308, -1 when `min` is 0), an
/// object — is `invalid_body` naming the field and its range. No conversion
/// happens before the check.
pub fn opt_int(
    body: &Map<String, Value>,
    keys: &[&str],
    min: i64,
    max: i64,
) -> Result<Option<i64>, Failure> {
    for k in keys {
        let bad = || {
            Failure::new(Reason::InvalidBody).with(
                "error",
                format!("{k} must be an integer from {min} to {max}"),
            )
        };
        let n = match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
            Some(_) => None,
        };
        return match n {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(bad()),
        };
    }
    Ok(None)
}

/// An object field (first of `keys`); a present non-object is `invalid_body`.
pub fn opt_object(
    body: &Map<String, Value>,
    keys: &[&str],
) -> Result<Option<Map<String, Value>>, Failure> {
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(m)) => return Ok(Some(m.clone())),
            Some(_) => {
                return Err(Failure::new(Reason::InvalidBody)
                    .with("error", format!("{k} must be an object")))
            }
        }
    }
    Ok(None)
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

/// The character named by a body (`persona_name`, aliases `personaName`, `lanlan_name`).
pub fn persona_of(b: &Map<String, Value>) -> Result<Option<String>, Failure> {
    bounded_id(
        b,
        &["persona_name", "personaName", "lanlan_name"],
        "persona_name",
    )
}

/// The character named by a body; `missing_persona_name` without one.
pub fn require_persona(b: &Map<String, Value>) -> Result<String, Failure> {
    persona_of(b)?.ok_or_else(|| Failure::new(Reason::MissingPersonaName))
}

/// The character named by a body, else the current one; `missing_persona_name` with neither.
pub fn persona_or_current(st: &AppState, b: &Map<String, Value>) -> Result<String, Failure> {
    match persona_of(b)? {
        Some(p) => Ok(p),
        None => current_persona(st),
    }
}

/// The session a body names (`session_id`, alias `sessionId`; a number is taken as text).
pub fn session_of(b: &Map<String, Value>) -> Result<Option<String>, Failure> {
    bounded_id(b, &["session_id", "sessionId"], "session_id")
}

/// A string field of at most [`MAX_ID_CHARS`] characters (longer is `invalid_body`).
fn bounded_id(
    b: &Map<String, Value>,
    keys: &[&str],
    name: &str,
) -> Result<Option<String>, Failure> {
    let v = opt_str(b, keys)?;
    if v.as_ref().is_some_and(|v| v.chars().count() > MAX_ID_CHARS) {
        return Err(Failure::new(Reason::InvalidBody).with("error", format!("{name} is too long")));
    }
    Ok(v)
}

/// The current character; `missing_persona_name` when there is none.
fn current_persona(st: &AppState) -> Result<String, Failure> {
    st.characters
        .resolve(None)
        .ok_or_else(|| Failure::new(Reason::MissingPersonaName))
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

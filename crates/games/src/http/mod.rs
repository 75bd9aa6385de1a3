//! The HTTP handlers of both families, one module per resource. Each handler
//! takes its checked input ([`extract`], [`input`]), calls the domain
//! ([`crate::games`], [`crate::icebreaker`]) and turns the typed result into
//! the wire answer.

pub mod dialogue;
mod extract;
pub mod game_routes;
pub mod icebreaker;
mod input;
pub mod leaderboard;
pub mod logs;

use axum::Json;
use serde::Serialize;
use serde_json::{Map, Value};

/// The success envelope `{ok:true, ...fields of value}` of a typed domain result.
fn with_ok(value: impl Serialize) -> Json<Value> {
    let mut out = Map::new();
    out.insert("ok".into(), Value::Bool(true));
    if let Ok(Value::Object(fields)) = serde_json::to_value(value) {
        out.extend(fields);
    }
    Json(Value::Object(out))
}

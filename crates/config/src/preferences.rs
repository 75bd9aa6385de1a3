//! Per-model display preferences (`config/preferences.json`, a JSON list of
//! records; the first record is the preferred model).

use companiond_core::envelope::loose;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};
use utoipa::ToSchema;

use crate::error::ConfigError;

/// The document, relative to the data dir.
pub const DOC: &str = "config/preferences.json";

/// Reserved model path of the reference app's global entry (refused).
pub const RESERVED_PATH: &str = "__global_conversation__";
const MAX_PATH_LEN: usize = 2048;
const MAX_RECORDS: usize = 2000;
const MAX_PARAMETERS: usize = 4096;
/// Optional object fields carried over from the stored record when absent.
const OPTIONAL: &[&str] = &[
    "parameters",
    "display",
    "rotation",
    "viewport",
    "camera_position",
];

/// A point or vector of the display record, stored as sent (other keys kept).
#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct Vector {
    #[schema(value_type = f64)]
    x: Number,
    #[schema(value_type = f64)]
    y: Number,
    /// A number or null.
    #[serde(default, deserialize_with = "loose::present")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<f64>)]
    z: Option<Option<Number>>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// One model's display record (the document holds a list, preferred model
/// first): the body of a save, and what is stored (only these fields; the
/// optional objects as sent, an invalid `viewport` dropped).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"model_path": "/static/models/mao/mao.model3.json",
    "position": {"x": 0.5, "y": 0.2}, "scale": {"x": 1.0, "y": 1.0}}))]
pub struct ModelPreference {
    /// Not blank (trimmed), at most 2048 characters, not `__global_conversation__`.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 2048, pattern = "\\S")]
    model_path: Option<String>,
    position: Vector,
    scale: Vector,
    /// At most 4096 entries.
    parameters: Option<Map<String, Value>>,
    display: Option<Map<String, Value>>,
    rotation: Option<Map<String, Value>>,
    camera_position: Option<Map<String, Value>>,
    /// `{width, height}` > 0; another object is dropped (null: absent).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = Option<Object>)]
    viewport: Option<Map<String, Value>>,
}

/// Validate one record. Returns the record to store.
pub fn validate(body: ModelPreference) -> Result<Map<String, Value>, ConfigError> {
    let path = match body.model_path.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => s,
        _ => return Err(ConfigError::bad("model_path is required")),
    };
    if path.chars().count() > MAX_PATH_LEN {
        return Err(ConfigError::bad("model_path is too long"));
    }
    if path == RESERVED_PATH {
        return Err(ConfigError::bad("model_path uses a reserved name"));
    }
    let mut rec = Map::new();
    rec.insert("model_path".into(), Value::String(path.to_string()));
    let json = |v: &Vector| serde_json::to_value(v).unwrap_or(Value::Null);
    rec.insert("position".into(), json(&body.position));
    rec.insert("scale".into(), json(&body.scale));
    if let Some(p) = body.parameters {
        if p.len() > MAX_PARAMETERS {
            return Err(ConfigError::bad("too many parameters"));
        }
        rec.insert("parameters".into(), Value::Object(p));
    }
    for (key, v) in [
        ("display", body.display),
        ("rotation", body.rotation),
        ("camera_position", body.camera_position),
    ] {
        if let Some(v) = v {
            rec.insert(key.into(), Value::Object(v));
        }
    }
    if let Some(vp) = body.viewport {
        let pos = |k: &str| vp.get(k).and_then(Value::as_f64).is_some_and(|n| n > 0.0);
        if pos("width") && pos("height") {
            rec.insert("viewport".into(), Value::Object(vp));
        }
    }
    Ok(rec)
}

fn path_of(v: &Value) -> Option<&str> {
    v.get("model_path").and_then(Value::as_str)
}

/// Save `rec` into `list`: an existing record of the same model is replaced in
/// place (absent optional fields carried over); a new model goes to the front.
pub fn upsert(
    mut list: Vec<Value>,
    mut rec: Map<String, Value>,
) -> Result<Vec<Value>, ConfigError> {
    let path = rec
        .get("model_path")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match list.iter().position(|r| path_of(r) == Some(&path)) {
        Some(i) => {
            if let Some(Value::Object(old)) = list.get(i) {
                for key in OPTIONAL {
                    if !rec.contains_key(*key) {
                        if let Some(v) = old.get(*key) {
                            rec.insert((*key).to_string(), v.clone());
                        }
                    }
                }
            }
            list[i] = Value::Object(rec);
        }
        None => {
            if list.len() >= MAX_RECORDS {
                return Err(ConfigError::bad("too many model preference records"));
            }
            list.insert(0, Value::Object(rec));
        }
    }
    Ok(list)
}

/// Move the record of `path` to the front.
pub fn set_preferred(mut list: Vec<Value>, path: &str) -> Result<Vec<Value>, ConfigError> {
    let Some(i) = list.iter().position(|r| path_of(r) == Some(path)) else {
        return Err(ConfigError::NotFound(format!(
            "no display preference is saved for model {path:?}"
        )));
    };
    let rec = list.remove(i);
    list.insert(0, rec);
    Ok(list)
}

/// The stored list: a list as is, a legacy single record as a one-element list.
pub fn normalise(v: Option<Value>) -> Vec<Value> {
    match v {
        Some(Value::Array(a)) => a.into_iter().filter(Value::is_object).collect(),
        Some(Value::Object(o)) if o.contains_key("model_path") => vec![Value::Object(o)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use companiond_core::envelope::parse_body;

    fn parse(v: Value) -> Result<Map<String, Value>, String> {
        let bytes = serde_json::to_vec(&v).map_err(|e| e.to_string())?;
        parse_body::<ModelPreference>(&bytes)
            .map_err(|f| f.to_string())
            .and_then(|b| validate(b).map_err(|e| e.message().to_string()))
    }

    #[test]
    fn vectors_are_objects_kept_as_sent() {
        let v = |p: Value| json_rec(p);
        assert!(parse(v(serde_json::json!([1, 2]))).is_err());
        let rec = parse(v(
            serde_json::json!({"x": 1, "y": 2.5, "z": null, "w": "k"}),
        ));
        assert_eq!(
            rec.ok().and_then(|r| r.get("position").cloned()),
            Some(serde_json::json!({"x": 1, "y": 2.5, "z": null, "w": "k"}))
        );
    }

    fn json_rec(position: Value) -> Value {
        serde_json::json!({"model_path": "m", "position": position, "scale": {"x": 1, "y": 1}})
    }
}

//! Per-model display preferences (`config/preferences.json`, a JSON list of
//! records; the first record is the preferred model).

use serde_json::{Map, Value};

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

fn num(v: Option<&Value>) -> bool {
    v.is_some_and(Value::is_number)
}

fn vector(body: &Map<String, Value>, key: &str) -> Result<Value, ConfigError> {
    match body.get(key) {
        Some(Value::Object(o)) if num(o.get("x")) && num(o.get("y")) => {
            if o.get("z").is_some_and(|z| !z.is_number() && !z.is_null()) {
                return Err(ConfigError::bad(format!("{key}.z must be a number")));
            }
            Ok(Value::Object(o.clone()))
        }
        Some(_) => Err(ConfigError::bad(format!(
            "{key} must be an object with numeric x and y"
        ))),
        None => Err(ConfigError::bad(format!("{key} is required"))),
    }
}

/// Validate one record. Returns the record to store (only the known fields;
/// an invalid `viewport` is dropped).
pub fn validate(body: &Map<String, Value>) -> Result<Map<String, Value>, ConfigError> {
    let path = match body.get("model_path") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(ConfigError::bad("model_path is required"))
        }
        Some(_) => return Err(ConfigError::bad("model_path must be a string")),
    };
    if path.len() > MAX_PATH_LEN {
        return Err(ConfigError::bad("model_path is too long"));
    }
    if path == RESERVED_PATH {
        return Err(ConfigError::bad("model_path uses a reserved name"));
    }
    let mut rec = Map::new();
    rec.insert("model_path".into(), Value::String(path.to_string()));
    rec.insert("position".into(), vector(body, "position")?);
    rec.insert("scale".into(), vector(body, "scale")?);
    if let Some(p) = body.get("parameters").filter(|v| !v.is_null()) {
        match p {
            Value::Object(o) if o.len() <= MAX_PARAMETERS => {
                rec.insert("parameters".into(), p.clone());
            }
            Value::Object(_) => return Err(ConfigError::bad("too many parameters")),
            _ => return Err(ConfigError::bad("parameters must be an object")),
        }
    }
    for key in ["display", "rotation", "camera_position"] {
        if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
            if !v.is_object() {
                return Err(ConfigError::bad(format!("{key} must be an object")));
            }
            rec.insert(key.into(), v.clone());
        }
    }
    if let Some(Value::Object(vp)) = body.get("viewport") {
        let pos = |k: &str| vp.get(k).and_then(Value::as_f64).is_some_and(|n| n > 0.0);
        if pos("width") && pos("height") {
            rec.insert("viewport".into(), Value::Object(vp.clone()));
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

//! The rules of a stored package's `model.json`: the folder slug, the
//! normalised `pngtuber` block and the validation of the files it references.

use std::path::Path;

use serde_json::{json, Map, Value};

use companiond_core::paths::{clean_segments, safe_join, MAX_NAME_BYTES};

use crate::fsutil::ext_lower;

use super::layered::LAYERED_ADAPTER;

/// URL prefix of the packages.
pub const URL_PREFIX: &str = "/user_pngtuber";

/// The folder slug of a package, as the original application makes it:
/// runs of characters other than letters, digits, `_`, `.` and `-` become one
/// `_`; leading/trailing `.`, `_`, `-` are stripped; empty gives `pngtuber_model`.
pub fn slugify(raw: &str) -> String {
    let mut out = String::new();
    let mut in_run = false;
    for c in raw.trim().chars() {
        if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    // At most 100 characters (as the original application) and, for wide scripts, at most
    // MAX_NAME_BYTES bytes of UTF-8, the longest name a file system stores.
    let mut s = String::new();
    for c in out
        .trim_matches(|c| c == '.' || c == '_' || c == '-')
        .chars()
        .take(100)
    {
        if s.len() + c.len_utf8() > MAX_NAME_BYTES {
            break;
        }
        s.push(c);
    }
    let s = s
        .trim_matches(|c| c == '.' || c == '_' || c == '-')
        .to_string();
    if s.is_empty() {
        "pngtuber_model".into()
    } else {
        s
    }
}

pub(crate) fn is_image(name: &str) -> bool {
    companiond_core::characters::IMAGE_EXTS.contains(&ext_lower(name).as_str())
}

pub(crate) fn is_external(v: &str) -> bool {
    v.starts_with('/') || v.starts_with("http://") || v.starts_with("https://")
}

/// A package-relative path: plain segments, no `.`/`..`/empty parts.
pub(crate) fn relative_segments(v: &str) -> Option<Vec<String>> {
    let v = v.replace('\\', "/");
    if v.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return None;
    }
    clean_segments(&v).ok().filter(|s| !s.is_empty())
}

/// The raw `pngtuber` block of a model.json.
pub(crate) fn raw_config(model: &Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::Object(m)) = model.get("pngtuber") {
        return m.clone();
    }
    if let Some(Value::Object(m)) = model
        .get("_reserved")
        .and_then(|r| r.get("avatar"))
        .and_then(|a| a.get("pngtuber"))
    {
        return m.clone();
    }
    Map::new()
}

pub(crate) fn url_value(v: Option<&Value>, folder: &str) -> String {
    let Some(Value::String(s)) = v else {
        return String::new();
    };
    let s = s.trim();
    if s.is_empty() {
        return String::new();
    }
    let s = s.replace('\\', "/");
    if is_external(&s) {
        return s;
    }
    match relative_segments(&s) {
        Some(segs) => format!("{URL_PREFIX}/{folder}/{}", segs.join("/")),
        None => String::new(),
    }
}

/// The normalised `pngtuber` object every answer carries: every image key as a
/// `/user_pngtuber/<folder>/…` URL (or external URL, or ""), layered metadata and
/// adapter, scale/offsets (with mobile defaults), mirror, source type and format.
pub fn normalize(model: &Map<String, Value>, folder: &str) -> Map<String, Value> {
    let raw = raw_config(model);
    let mut out = Map::new();
    for k in companiond_core::characters::PNGTUBER_IMAGE_KEYS {
        out.insert((*k).into(), json!(url_value(raw.get(*k), folder)));
    }
    let meta = raw.get("layered_metadata").or_else(|| raw.get("metadata"));
    let layered = url_value(meta, folder);
    let adapter = match raw.get("adapter") {
        Some(Value::String(s)) => s.clone(),
        _ if !layered.is_empty() => LAYERED_ADAPTER.into(),
        _ => String::new(),
    };
    out.insert("layered_metadata".into(), json!(layered));
    out.insert("adapter".into(), json!(adapter));
    if let Some(v @ Value::Number(_)) = raw.get("adapter_version") {
        out.insert("adapter_version".into(), v.clone());
    }
    let scale = raw.get("scale").cloned().unwrap_or(json!(1));
    let mobile_default = match scale
        .as_f64()
        .or_else(|| scale.as_str().and_then(|s| s.parse().ok()))
    {
        Some(f) if f.is_finite() => json!(f.min(1.0)),
        _ => json!(1),
    };
    out.insert("scale".into(), scale);
    // Kept as stored, or the default when missing.
    for (key, default) in [
        ("offset_x", json!(0)),
        ("offset_y", json!(0)),
        ("mobile_scale", mobile_default),
        ("mobile_offset_x", json!(0)),
        ("mobile_offset_y", json!(0)),
    ] {
        out.insert(key.into(), raw.get(key).cloned().unwrap_or(default));
    }
    out.insert("mirror".into(), json!(truthy(raw.get("mirror"))));
    let source_type = match raw.get("source_type") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => "transparent_asset".into(),
    };
    let source_format = [model.get("source_format"), raw.get("source_format")]
        .into_iter()
        .flatten()
        .find_map(|v| v.as_str().filter(|s| !s.is_empty()).map(str::to_string))
        .unwrap_or_else(|| source_type.clone());
    out.insert("source_type".into(), json!(source_type));
    out.insert("source_format".into(), json!(source_format));
    out
}

/// Python-like truthiness of a JSON value.
pub(crate) fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// Package validation: `model_type` is `pngtuber`, `idle_image` is set, every
/// image has an allowed extension and every referenced file is present.
/// `folder` lets stored packages,
/// whose paths were normalised to `/user_pngtuber/<folder>/...`, be checked too.
pub fn validate(
    model: &Map<String, Value>,
    pkg: &Path,
    folder: Option<&str>,
) -> Result<(), String> {
    if model.get("model_type").and_then(Value::as_str) != Some("pngtuber") {
        return Err("model_type must be pngtuber".into());
    }
    let raw = raw_config(model);
    match raw.get("idle_image") {
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        _ => return Err("pngtuber.idle_image must be configured".into()),
    }
    let own_prefix = folder.map(|f| format!("{URL_PREFIX}/{f}/"));
    for (k, v) in &raw {
        if !k.ends_with("_image") {
            continue;
        }
        let Some(s) = v.as_str().map(str::trim).filter(|s| !s.is_empty()) else {
            continue;
        };
        let s = s.replace('\\', "/");
        let rel = match &own_prefix {
            Some(p) if s.starts_with(p.as_str()) => s[p.len()..].to_string(),
            _ if is_external(&s) => {
                let path = s.split(['?', '#']).next().unwrap_or("");
                if !is_image(path) {
                    return Err(format!("{k}: unsupported image format ({s})"));
                }
                continue;
            }
            _ => s.clone(),
        };
        let Some(segs) = relative_segments(&rel) else {
            return Err(format!("{k}: invalid path ({s})"));
        };
        if !segs.last().is_some_and(|n| is_image(n)) {
            return Err(format!(
                "{k}: unsupported image format ({s}); allowed: .png .gif .jpg .jpeg .webp"
            ));
        }
        let ok = safe_join(pkg, &segs.join("/"))
            .map(|p| p.is_file())
            .unwrap_or(false);
        if !ok {
            return Err(format!("{k}: referenced file does not exist ({s})"));
        }
    }
    Ok(())
}

pub(crate) fn read_model_json(path: &Path) -> Result<Option<Map<String, Value>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err("model.json is not a JSON object".into()),
        Err(e) => Err(format!("model.json is not valid JSON: {e}")),
    }
}

/// The name a package is shown with: its non-empty `name`, else its folder.
pub(crate) fn display_name(model: &Map<String, Value>, folder: &str) -> String {
    model
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(|| folder.to_string(), str::to_string)
}

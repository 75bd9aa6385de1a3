//! The records (songs, actions, bindings), how they are read leniently from
//! stored JSON, and the names and ids made from file names.

use super::*;

/// Version of a library that never stored one.
pub const DEFAULT_VERSION: &str = "1.0";

/// Allowed song file extensions (lower case, without the dot).
pub const SONG_EXTENSIONS: &[&str] = &["mp3", "wav", "ogg", "flac"];
/// Allowed action file extensions (lower case, without the dot).
pub const ACTION_EXTENSIONS: &[&str] = &["vmd", "bvh", "fbx", "vrma"];

fn yes() -> bool {
    true
}

/// Any JSON value as a string (numbers are written out, other values are "").
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    })
}

/// A boolean, tolerating the usual string spellings; anything else is `true`.
fn lenient_visible<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Bool(b) => b,
        Value::String(s) => parse_bool(&s).unwrap_or(true),
        Value::Number(n) => n.as_f64() != Some(0.0),
        _ => true,
    })
}

/// A boolean, tolerating the usual string spellings; anything else is `false`.
fn lenient_flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Bool(b) => b,
        Value::String(s) => parse_bool(&s).unwrap_or(false),
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    })
}

fn lenient_offset<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(value_to_offset(&Value::deserialize(d)?))
}

/// Largest binding offset magnitude: the 32-bit signed range (offsets are
/// small frame/millisecond counts; the bound keeps them exact in JavaScript).
pub const MAX_OFFSET: i64 = i32::MAX as i64;

/// An offset from any JSON value read leniently (stored library, import
/// archives): integers, integral floats and numeric strings within
/// ±[`MAX_OFFSET`]; anything else (out of range, NaN, text) is 0.
pub fn value_to_offset(v: &Value) -> i64 {
    let in_range = |i: i64| (-MAX_OFFSET..=MAX_OFFSET).contains(&i);
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => Some(i).filter(|i| in_range(*i)),
            None => n
                .as_f64()
                .map(f64::trunc)
                .filter(|f| f.is_finite() && f.abs() <= MAX_OFFSET as f64)
                // In range by the filter, so the cast is exact.
                .map(|f| f as i64),
        },
        Value::String(s) => s.trim().parse::<i64>().ok().filter(|i| in_range(*i)),
        _ => None,
    }
    .unwrap_or(0)
}

/// The boolean spellings accepted for form fields (those of the original app's
/// form parser): true/false, 1/0, yes/no, on/off, t/f, y/n, any case.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Some(true),
        "false" | "0" | "no" | "off" | "f" | "n" => Some(false),
        _ => None,
    }
}

/// A song record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = JukeboxSong)]
#[serde(rename_all = "camelCase")]
pub struct Song {
    #[serde(default, deserialize_with = "lenient_string")]
    pub id: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub artist: String,
    /// Path relative to the library root, `songs/<file>`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub audio: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub audio_md5: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub audio_format: String,
    #[serde(default = "yes", deserialize_with = "lenient_visible")]
    pub visible: bool,
    #[serde(default, deserialize_with = "lenient_string")]
    pub upload_date: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub default_action: String,
    #[serde(default, deserialize_with = "lenient_flag")]
    pub is_builtin: bool,
    /// Fields this version does not know, kept as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An action (dance) record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = JukeboxAction)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    #[serde(default, deserialize_with = "lenient_string")]
    pub id: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub name: String,
    /// Path relative to the library root, `actions/<file>`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub file: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub file_md5: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub format: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub upload_date: String,
    #[serde(default = "yes", deserialize_with = "lenient_visible")]
    pub visible: bool,
    #[serde(default, deserialize_with = "lenient_flag")]
    pub missing: bool,
    #[serde(default, deserialize_with = "lenient_flag")]
    pub is_builtin: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Action {
    /// The animation type used by the default-action rule (`vmd` when unknown).
    pub fn animation_type(&self) -> String {
        let f = self.format.trim().to_ascii_lowercase();
        if f.is_empty() {
            "vmd".into()
        } else {
            f
        }
    }
}

/// One song–action binding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = JukeboxBinding)]
pub struct Binding {
    #[serde(default, deserialize_with = "lenient_offset")]
    pub offset: i64,
}

/// `song id -> action id -> binding`.
pub type Bindings = IndexMap<String, IndexMap<String, Binding>>;

/// `md5 -> id` for songs and actions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = JukeboxMd5Index)]
pub struct Md5Index {
    #[serde(default)]
    #[schema(value_type = HashMap<String, String>)]
    pub songs: IndexMap<String, String>,
    #[serde(default)]
    #[schema(value_type = HashMap<String, String>)]
    pub actions: IndexMap<String, String>,
}

/// An id from a file name: the stem with `<>:"/\|?*` and white space runs
/// turned into `_`, repeated `_` collapsed, trimmed, at most 50 characters.
pub fn sanitize_id(file_name: &str) -> String {
    let stem = file_stem(file_name);
    let mut out = String::new();
    let mut last_us = false;
    for c in stem.chars() {
        let bad = matches!(c, '<' | '>' | ':' | '"' | '/' | '\\' | '|' | '?' | '*')
            || c.is_whitespace()
            || c.is_control();
        let c = if bad { '_' } else { c };
        if c == '_' {
            if !last_us {
                out.push('_');
            }
            last_us = true;
        } else {
            out.push(c);
            last_us = false;
        }
    }
    let trimmed: String = out.trim_matches('_').chars().take(50).collect();
    if trimmed.is_empty() {
        "unnamed".into()
    } else {
        trimmed
    }
}

/// `base`, or `base_1`, `base_2`, ... — the first not taken.
pub fn unique_id(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    let mut n = 1u64;
    loop {
        let c = format!("{base}_{n}");
        if !taken(&c) {
            return c;
        }
        n += 1;
    }
}

/// The part of a file name before its last dot (the whole name when it has none
/// or starts with its only dot).
pub fn file_stem(name: &str) -> &str {
    match name.rfind('.') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

/// The lower-case extension without the dot ("" when none).
pub fn extension(name: &str) -> String {
    match name.rfind('.') {
        Some(i) if i > 0 => name[i + 1..].to_ascii_lowercase(),
        _ => String::new(),
    }
}

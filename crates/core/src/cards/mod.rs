//! Character cards (the format most companion and role-play applications
//! share): reading a card file (PNG/APNG with a `chara` or `ccv3` text chunk,
//! bare JSON V1/V2/V3, a CHARX archive), mapping it onto a character profile,
//! and building the card of any character for export. The routes are in
//! `http::cards`; the prompt a card gives is built by [`crate::prompt`];
//! docs/characters.md has the mapping field by field.
//!
//! A profile made from a card keeps the whole card (V3 shape, unknown fields
//! and `extensions` included) in `_reserved.character_card`, so export gives
//! back what was imported; the original application's keys (`description`,
//! `昵称`, `关键词`, `system_prompt`) are filled from it so its pages show the card.

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::characters::{validate_name, NameRules, SYSTEM_RESERVED};

pub mod charx;
pub mod png;

/// Most bytes of one uploaded card file (cards embed images).
pub const MAX_FILE_BYTES: usize = 20 << 20;

/// Where the card data lives in a profile: `_reserved.<key>`.
pub const CARD_KEY: &str = "character_card";
/// The card image's file name under [`IMAGES_DIR`]: `_reserved.<key>`.
pub const IMAGE_KEY: &str = "card_image";
/// The folder (under [`ASSETS_DIR`]) of a CHARX card's assets: `_reserved.<key>`.
pub const ASSETS_KEY: &str = "card_assets";
/// The character name the card was imported as: `_reserved.<key>` (export
/// keeps the card's own name while the character keeps that name).
pub const IMPORTED_AS_KEY: &str = "card_imported_as";

/// Card images, by a generated file name (a rename leaves them in place).
pub const IMAGES_DIR: &str = crate::layout::CARD_IMAGES;
/// CHARX assets, one generated folder per imported card.
pub const ASSETS_DIR: &str = crate::layout::CARD_ASSETS;

/// The string fields of a card's `data` (V2; V3 adds `nickname`).
pub const STRING_FIELDS: &[&str] = &[
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "creator",
    "character_version",
    "nickname",
];

/// Why a file is not a card we can import (all answered 400, naming the problem).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardError {
    NoFile,
    TooLarge,
    UnknownFormat,
    Png(png::PngError),
    NoCardChunk,
    BadBase64(&'static str),
    BadJson(String),
    NotACard(String),
    Zip(String),
    UnsafePath(String),
    TooManyEntries(usize),
    NoCardJson,
}

impl CardError {
    pub fn code(&self) -> &'static str {
        match self {
            CardError::NoFile => "no_file",
            CardError::TooLarge => "file_too_large",
            CardError::UnknownFormat => "unknown_format",
            CardError::Png(png::PngError::NotPng) => "not_png",
            CardError::Png(_) => "bad_png",
            CardError::NoCardChunk => "no_card_chunk",
            CardError::BadBase64(_) => "invalid_base64",
            CardError::BadJson(_) => "invalid_json",
            CardError::NotACard(_) => "invalid_card",
            CardError::Zip(_) => "invalid_charx",
            CardError::UnsafePath(_) => "unsafe_path",
            CardError::TooManyEntries(_) => "too_many_entries",
            CardError::NoCardJson => "no_card_json",
        }
    }
}

impl std::fmt::Display for CardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CardError::NoFile => f.write_str("no card file was sent (multipart part \"file\")"),
            CardError::TooLarge => write!(
                f,
                "the card file is larger than the limit of {} MiB",
                MAX_FILE_BYTES >> 20
            ),
            CardError::UnknownFormat => {
                f.write_str("the file is neither a PNG, a CHARX (ZIP) nor a JSON card")
            }
            CardError::Png(e) => write!(f, "{e}"),
            CardError::NoCardChunk => {
                f.write_str("the PNG has no character card chunk (chara or ccv3)")
            }
            CardError::BadBase64(k) => write!(f, "the PNG chunk {k} is not valid base64"),
            CardError::BadJson(m) => write!(f, "the card is not valid JSON: {m}"),
            CardError::NotACard(m) => write!(f, "not a character card: {m}"),
            CardError::Zip(m) => write!(f, "the CHARX archive cannot be read: {m}"),
            CardError::UnsafePath(p) => write!(f, "the CHARX entry path {p:?} leaves the archive"),
            CardError::TooManyEntries(n) => write!(
                f,
                "the CHARX archive has more than {} entries ({n})",
                charx::MAX_ENTRIES
            ),
            CardError::NoCardJson => f.write_str("the CHARX archive has no card.json"),
        }
    }
}

/// A card read from a file: the card in V3 shape, its image, its assets.
#[derive(Debug)]
pub struct ReadCard {
    /// `{spec: "chara_card_v3", spec_version, data: {...}, ...}`.
    pub card: Map<String, Value>,
    /// The spec the file said (`chara_card_v2`, `chara_card_v3`, `v1`).
    pub source_spec: String,
    /// The file's format: `png`, `json` or `charx`.
    pub format: &'static str,
    /// The card image and its extension (a PNG card: the PNG itself).
    pub image: Option<(Vec<u8>, &'static str)>,
    /// CHARX files other than `card.json`, by their (checked) relative paths.
    pub assets: Vec<(Vec<String>, Vec<u8>)>,
}

/// Read a card file of any supported format (chosen by its first bytes; a
/// file named `.png`/`.apng` must be a PNG).
pub fn read(bytes: &[u8], file_name: &str) -> Result<ReadCard, CardError> {
    let lower = file_name.to_ascii_lowercase();
    let named_png = lower.ends_with(".png") || lower.ends_with(".apng");
    if bytes.len() > MAX_FILE_BYTES {
        return Err(CardError::TooLarge);
    }
    if bytes.starts_with(png::SIGNATURE) {
        return read_png(bytes);
    }
    if named_png || bytes.get(1..4) == Some(b"PNG") {
        return Err(CardError::Png(png::PngError::NotPng));
    }
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return charx::read(bytes);
    }
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    if text.trim_ascii_start().first() == Some(&b'{') {
        let v: Value =
            serde_json::from_slice(text).map_err(|e| CardError::BadJson(e.to_string()))?;
        let (card, source_spec) = normalise(v)?;
        return Ok(ReadCard {
            card,
            source_spec,
            format: "json",
            image: None,
            assets: Vec::new(),
        });
    }
    Err(CardError::UnknownFormat)
}

fn read_png(bytes: &[u8]) -> Result<ReadCard, CardError> {
    let texts = png::text_chunks(bytes).map_err(CardError::Png)?;
    let find = |k: &str| {
        texts
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, t)| t)
    };
    // V3 is preferred when both are there.
    let (key, raw) = match (find("ccv3"), find("chara")) {
        (Some(t), _) => ("ccv3", t),
        (None, Some(t)) => ("chara", t),
        (None, None) => return Err(CardError::NoCardChunk),
    };
    let compact: Vec<u8> = raw
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let json = base64::engine::general_purpose::STANDARD
        .decode(&compact)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(&compact))
        .map_err(|_| CardError::BadBase64(key))?;
    let v: Value = serde_json::from_slice(&json).map_err(|e| CardError::BadJson(e.to_string()))?;
    let (card, source_spec) = normalise(v)?;
    Ok(ReadCard {
        card,
        source_spec,
        format: "png",
        image: Some((bytes.to_vec(), "png")),
        assets: Vec::new(),
    })
}

/// A card JSON value in V3 shape (V1 flat fields become `data`; every field is
/// kept), after the checks that would otherwise fail later: `data` an object,
/// a non-empty `name`, string fields strings, lists lists, the lorebook an
/// object with an `entries` list of objects.
pub fn normalise(v: Value) -> Result<(Map<String, Value>, String), CardError> {
    let Value::Object(mut top) = v else {
        return Err(CardError::NotACard("the JSON is not an object".into()));
    };
    let spec = top.get("spec").and_then(Value::as_str).map(str::to_string);
    let (data, source_spec) = match spec.as_deref() {
        Some(s @ ("chara_card_v2" | "chara_card_v3")) => match top.shift_remove("data") {
            Some(Value::Object(d)) => (d, s.to_string()),
            _ => return Err(CardError::NotACard("\"data\" must be an object".into())),
        },
        Some(other) => {
            return Err(CardError::NotACard(format!("unknown spec {other:?}")));
        }
        None => (std::mem::take(&mut top), "v1".to_string()),
    };
    check_data(&data)?;
    top.shift_remove("spec");
    top.shift_remove("spec_version");
    let mut card = Map::new();
    card.insert("spec".into(), json!("chara_card_v3"));
    card.insert("spec_version".into(), json!("3.0"));
    card.insert("data".into(), Value::Object(data));
    // What else the file had at the top (V1 copies of a V2 card, extras) stays.
    card.extend(top);
    Ok((card, source_spec))
}

fn check_data(d: &Map<String, Value>) -> Result<(), CardError> {
    let bad = |m: String| Err(CardError::NotACard(m));
    match d.get("name").and_then(Value::as_str) {
        Some(n) if !n.trim().is_empty() => {}
        _ => return bad("the card has no name".into()),
    }
    for f in STRING_FIELDS {
        if let Some(v) = d.get(*f) {
            if !v.is_string() && !v.is_null() {
                return bad(format!("\"{f}\" must be a string"));
            }
        }
    }
    for f in ["alternate_greetings", "tags", "group_only_greetings"] {
        if let Some(v) = d.get(f) {
            let ok = v.is_null() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
            if !ok {
                return bad(format!("\"{f}\" must be a list of strings"));
            }
        }
    }
    if let Some(e) = d.get("extensions") {
        if !e.is_object() && !e.is_null() {
            return bad("\"extensions\" must be an object".into());
        }
    }
    match d.get("character_book") {
        None | Some(Value::Null) => {}
        Some(Value::Object(b)) => {
            let Some(entries) = b.get("entries").and_then(Value::as_array) else {
                return bad("\"character_book.entries\" must be a list".into());
            };
            for (i, e) in entries.iter().enumerate() {
                let Some(e) = e.as_object() else {
                    return bad(format!("lorebook entry {i} is not an object"));
                };
                let keys_ok = |k: &str| match e.get(k) {
                    None | Some(Value::Null) => true,
                    Some(Value::Array(a)) => a.iter().all(Value::is_string),
                    _ => false,
                };
                if !keys_ok("keys") || !keys_ok("secondary_keys") {
                    return bad(format!("lorebook entry {i}: keys must be lists of strings"));
                }
                if e.get("content").is_some_and(|c| !c.is_string()) {
                    return bad(format!("lorebook entry {i}: content must be a string"));
                }
            }
        }
        Some(_) => return bad("\"character_book\" must be an object".into()),
    }
    Ok(())
}

/// The `data` object of a V3-shaped card.
pub fn data(card: &Map<String, Value>) -> Option<&Map<String, Value>> {
    card.get("data").and_then(Value::as_object)
}

/// A new character name for a card's `name` by the character-name rules:
/// characters the rules refuse become spaces, the result is trimmed and cut to
/// fit; a taken (or still refused) name gets `(1)`, `(2)`, … as the original
/// application does. `taken` says whether a name exists.
pub fn new_name(card_name: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut base = String::new();
    for c in card_name.chars() {
        let ok = validate_name(&format!("a{c}a"), NameRules::NEW).is_ok();
        base.push(if ok && c != '.' { c } else { ' ' });
    }
    let mut base = base.split_whitespace().collect::<Vec<_>>().join(" ");
    // Room for a suffix within the name's 60 units.
    let mut units = 0;
    base = base
        .chars()
        .take_while(|c| {
            units += if (*c as u32) <= 0x7F { 1 } else { 2 };
            units <= 52
        })
        .collect::<String>()
        .trim()
        .to_string();
    if base.is_empty() {
        base = "Imported".into();
    }
    let ok = |n: &str| validate_name(n, NameRules::NEW).is_ok() && !taken(n);
    if ok(&base) {
        return base;
    }
    (1..100_000)
        .map(|i| format!("{base}({i})"))
        .find(|n| ok(n))
        .unwrap_or_else(|| format!("Imported {}", uuid::Uuid::new_v4().simple()))
}

/// The profile of a character made from `card`: the original application's
/// keys filled from the card, the card kept whole under `_reserved`.
pub fn profile_for(
    card: &Map<String, Value>,
    name: &str,
    image: Option<&str>,
    assets: Option<&str>,
) -> Map<String, Value> {
    let mut p = Map::new();
    let d = data(card).cloned().unwrap_or_default();
    // A card exported by companiond carries the character's own profile fields.
    if let Some(own) = d
        .get("extensions")
        .and_then(|e| e.get("companiond"))
        .and_then(|c| c.get("profile"))
        .and_then(Value::as_object)
    {
        for (k, v) in own {
            if k != "_reserved" && k != "name" && !SYSTEM_RESERVED.contains(&k.as_str()) {
                p.insert(k.clone(), v.clone());
            }
        }
    }
    let text = |k: &str| {
        d.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
    };
    if let Some(s) = text("description") {
        p.insert("description".into(), json!(s));
    }
    if let Some(s) = text("nickname") {
        p.insert("昵称".into(), json!(s));
    }
    if let Some(tags) = d
        .get("tags")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
    {
        p.insert("关键词".into(), Value::Array(tags.clone()));
    }
    if let Some(s) = text("system_prompt") {
        p.insert("system_prompt".into(), json!(s));
    }
    let mut reserved = Map::new();
    reserved.insert(CARD_KEY.into(), Value::Object(card.clone()));
    reserved.insert(IMPORTED_AS_KEY.into(), json!(name));
    if let Some(i) = image {
        reserved.insert(IMAGE_KEY.into(), json!(i));
    }
    if let Some(a) = assets {
        reserved.insert(ASSETS_KEY.into(), json!(a));
    }
    // The original application's card metadata (its card manager's origin badge).
    let now = crate::now_rfc3339();
    let author: String = text("creator").unwrap_or("").chars().take(64).collect();
    reserved.insert(
        "card_meta".into(),
        json!({"author": author, "origin": "imported", "created_at": now, "updated_at": now}),
    );
    p.insert("_reserved".into(), Value::Object(reserved));
    p
}

/// The stored card image of a profile (`_reserved.card_image` under
/// [`IMAGES_DIR`] of the data dir `root`), if there is one. Blocking.
pub fn image_of(root: &std::path::Path, profile: &Value) -> Option<Vec<u8>> {
    let file = reserved(profile, IMAGE_KEY)?.as_str()?;
    let file = crate::paths::safe_name(file).ok()?;
    let path = crate::paths::safe_join(&root.join(IMAGES_DIR), file).ok()?;
    std::fs::read(path).ok()
}

/// Remove the stored card image and CHARX assets of a deleted character
/// (best effort). Blocking.
pub fn remove_files(root: &std::path::Path, profile: &Value) {
    let file = |key: &str, dir: &str| {
        let name = reserved(profile, key)?.as_str()?;
        let name = crate::paths::safe_name(name).ok()?;
        crate::paths::safe_join(&root.join(dir), name).ok()
    };
    if let Some(p) = file(IMAGE_KEY, IMAGES_DIR) {
        let _ = std::fs::remove_file(p);
    }
    if let Some(p) = file(ASSETS_KEY, ASSETS_DIR) {
        let _ = std::fs::remove_dir_all(p);
    }
}

/// The content type of an image by its first bytes.
pub fn image_type(bytes: &[u8]) -> &'static str {
    match image_ext(bytes) {
        Some("png") => "image/png",
        Some("jpg") => "image/jpeg",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        _ => "application/octet-stream",
    }
}

/// `profile._reserved.<key>`.
pub fn reserved<'a>(profile: &'a Value, key: &str) -> Option<&'a Value> {
    profile.get("_reserved").and_then(|r| r.get(key))
}

/// The card of a character (stored, else made from its profile) with the
/// profile's current values over it, in V3 shape with every field the specs
/// require present.
pub fn card_of(name: &str, profile: &Value) -> Map<String, Value> {
    let stored = reserved(profile, CARD_KEY).and_then(Value::as_object);
    let mut card = stored.cloned().unwrap_or_default();
    let mut d = data(&card).cloned().unwrap_or_default();
    let renamed = reserved(profile, IMPORTED_AS_KEY).and_then(Value::as_str) != Some(name);
    if stored.is_none() || renamed {
        d.insert("name".into(), json!(name));
    }
    let s = |k: &str| {
        profile
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
    };
    if let Some(v) = s("description").or_else(|| s("描述")) {
        d.insert("description".into(), json!(v));
    }
    if let Some(v) = s("system_prompt")
        .or_else(|| reserved(profile, "system_prompt").and_then(Value::as_str))
        .filter(|v| !v.trim().is_empty())
    {
        d.insert("system_prompt".into(), json!(v));
    }
    if let Some(v) = s("昵称") {
        d.insert("nickname".into(), json!(v));
    }
    if let Some(t) = profile.get("关键词").and_then(Value::as_array) {
        let tags: Vec<Value> = t.iter().filter(|v| v.is_string()).cloned().collect();
        d.insert("tags".into(), Value::Array(tags));
    }
    // The profile's own fields (the original application's free fields).
    let own: Map<String, Value> = profile
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !k.starts_with('_')
                        && k.as_str() != "name"
                        && !SYSTEM_RESERVED.contains(&k.as_str())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mapped = |k: &str| matches!(k, "description" | "描述" | "昵称" | "关键词");
    if stored.is_none() {
        // A character made in companiond: its own fields travel in an extension
        // (restored on import) and, as text, in the description.
        if !d.contains_key("description") {
            let lines: Vec<String> = own
                .iter()
                .filter(|(k, _)| !mapped(k))
                .filter_map(|(k, v)| field_text(v).map(|t| format!("{k}: {t}")))
                .collect();
            d.insert("description".into(), json!(lines.join("\n")));
        }
        let ext = d.entry("extensions").or_insert_with(|| json!({}));
        if let Some(e) = ext.as_object_mut() {
            e.insert("companiond".into(), json!({"profile": own}));
        }
    } else {
        // An imported card: fields added since (in the original's card form)
        // travel in the same extension; a card without any is left as it was.
        let added: Map<String, Value> = own.into_iter().filter(|(k, _)| !mapped(k)).collect();
        if !added.is_empty() {
            let ext = d.entry("extensions").or_insert_with(|| json!({}));
            if let Some(e) = ext.as_object_mut() {
                e.insert("companiond".into(), json!({"profile": added}));
            }
        }
    }
    for f in STRING_FIELDS {
        if *f != "nickname" && !d.get(*f).is_some_and(Value::is_string) {
            d.insert((*f).into(), json!(""));
        }
    }
    for f in ["alternate_greetings", "tags", "group_only_greetings"] {
        if !d.get(f).is_some_and(Value::is_array) {
            d.insert(f.into(), json!([]));
        }
    }
    if !d.get("extensions").is_some_and(Value::is_object) {
        d.insert("extensions".into(), json!({}));
    }
    card.insert("spec".into(), json!("chara_card_v3"));
    card.insert("spec_version".into(), json!("3.0"));
    card.insert("data".into(), Value::Object(d));
    card
}

/// A profile field as prompt text: a string, or a list of strings joined.
pub fn field_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Array(a) => {
            let parts: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The V2 form of a V3-shaped card (older readers): the same `data`, plus
/// the V1 fields at the top.
pub fn as_v2(card: &Map<String, Value>) -> Value {
    let d = data(card).cloned().unwrap_or_default();
    let mut out = Map::new();
    out.insert("spec".into(), json!("chara_card_v2"));
    out.insert("spec_version".into(), json!("2.0"));
    for f in [
        "name",
        "description",
        "personality",
        "scenario",
        "first_mes",
        "mes_example",
    ] {
        out.insert(f.into(), d.get(f).cloned().unwrap_or(json!("")));
    }
    out.insert("data".into(), Value::Object(d));
    Value::Object(out)
}

/// A V3 PNG that also carries the V2 chunk, on `image` (a PNG) or a placeholder.
pub fn export_png(card: &Map<String, Value>, image: Option<&[u8]>) -> Vec<u8> {
    let b64 = |v: &Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
    let v3 = b64(&Value::Object(card.clone()));
    let v2 = b64(&as_v2(card));
    let texts = [("chara", v2.as_str()), ("ccv3", v3.as_str())];
    image
        .and_then(|i| png::with_text_chunks(i, &texts).ok())
        .or_else(|| png::with_text_chunks(&png::placeholder(), &texts).ok())
        .unwrap_or_default()
}

/// The extension of an image by its first bytes (PNG, JPEG, WebP, GIF).
pub fn image_ext(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(png::SIGNATURE) {
        Some("png")
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some("jpg")
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        Some("webp")
    } else if bytes.starts_with(b"GIF8") {
        Some("gif")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        let none = |_: &str| false;
        assert_eq!(new_name("Mika", none), "Mika");
        assert_eq!(new_name("Dr. Who?", none), "Dr Who");
        assert_eq!(new_name("api", none), "api(1)");
        assert_eq!(new_name("../..", none), "Imported");
        assert_eq!(
            new_name("Mika", |n| n == "Mika" || n == "Mika(1)"),
            "Mika(2)"
        );
    }

    #[test]
    fn v1_v2_v3_normalise_to_v3() {
        let (c, s) = normalise(json!({"name": "A", "description": "d", "x": 1})).unwrap();
        assert_eq!(s, "v1");
        assert_eq!(c["data"], json!({"name": "A", "description": "d", "x": 1}));
        let (c, s) = normalise(
            json!({"spec": "chara_card_v2", "spec_version": "2.0", "name": "A",
            "data": {"name": "A", "extensions": {"k": 1}}}),
        )
        .unwrap();
        assert_eq!(s, "chara_card_v2");
        assert_eq!(c["spec"], "chara_card_v3");
        assert_eq!(c["data"]["extensions"]["k"], 1);
        assert_eq!(c["name"], "A");
        assert!(normalise(json!({"spec": "chara_card_v2", "data": "x"})).is_err());
        assert!(normalise(json!({"description": "no name"})).is_err());
        assert!(
            normalise(json!({"name": "A", "character_book": {"entries": [{"keys": "x"}]}}))
                .is_err()
        );
    }
}

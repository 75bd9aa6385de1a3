//! The characters registry (`<data>/config/characters.json`) and the rules of a
//! character name. Its routes are in `http::characters`.
//!
//! File shape: `{"current": "<name>", "characters": {"<name>": {<profile>}, ...}}`
//! (insertion order kept). A corrupt file is moved aside to
//! `characters.json.corrupt-<millis>` and the defaults are used, with a pending notice.

use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::layout as docs;
use crate::notices::Notices;
use crate::store::{self, Store};

/// The name of the character of a fresh data dir.
pub const DEFAULT_CHARACTER: &str = "Companion";

/// Route names a new character may not take: the first path segments the
/// application's pages and APIs already use.
pub const RESERVED_ROUTE_NAMES: &[&str] = &[
    "l2d",
    "model_manager",
    "live2d_parameter_editor",
    "live2d_emotion_manager",
    "vrm_emotion_manager",
    "mmd_emotion_manager",
    "voice_clone",
    "voice_identity",
    "api_key",
    "character_card_manager",
    "cloudsave_manager",
    "memory_browser",
    "cookies_login",
    "chat",
    "subtitle",
    "agenthud",
    "toast",
    "card_maker",
    "soccer_demo",
    "badminton_demo",
    "drawing_guess_demo",
    "watch_together",
    "jukebox",
    "static",
    "user_live2d",
    "user_live2d_local",
    "user_vrm",
    "user_mmd",
    "user_mods",
    "workshop",
    "api",
    "ws",
    "health",
];

/// Maximum name length in units (ASCII = 1, other characters = 2).
pub const MAX_NAME_UNITS: usize = 60;

/// Why a character name was refused; `code()` is the stable machine reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    Empty,
    ContainsPathSeparator,
    PathTraversal,
    UnsafeDot,
    ContainsDot,
    ReservedDeviceName,
    ReservedRouteName,
    InvalidCharacter,
    TooLong,
}

impl NameError {
    pub fn code(self) -> &'static str {
        match self {
            NameError::Empty => "empty",
            NameError::ContainsPathSeparator => "contains_path_separator",
            NameError::PathTraversal => "path_traversal",
            NameError::UnsafeDot => "unsafe_dot",
            NameError::ContainsDot => "contains_dot",
            NameError::ReservedDeviceName => "reserved_device_name",
            NameError::ReservedRouteName => "reserved_route_name",
            NameError::InvalidCharacter => "invalid_character",
            NameError::TooLong => "too_long_units",
        }
    }
    pub fn message(self) -> &'static str {
        match self {
            NameError::Empty => "the character name is empty",
            NameError::ContainsPathSeparator => "the character name may not contain / or \\",
            NameError::PathTraversal => "the character name may not contain ..",
            NameError::UnsafeDot => "the character name may not be . or end with a dot",
            NameError::ContainsDot => "the character name may not contain a dot",
            NameError::ReservedDeviceName => "the character name is a reserved device name",
            NameError::ReservedRouteName => "the character name is a reserved route name",
            NameError::InvalidCharacter => {
                "the character name contains a character that is not allowed"
            }
            NameError::TooLong => "the character name is too long",
        }
    }
}

/// Which rules apply.
#[derive(Clone, Copy, Debug)]
pub struct NameRules {
    /// Dots are allowed (existing/historical names), never for new names.
    pub allow_dots: bool,
    /// Reserved route names are refused (new names) or accepted (lookups of existing names).
    pub refuse_reserved_routes: bool,
}

impl NameRules {
    /// Rules for a new character or a rename target.
    pub const NEW: NameRules = NameRules {
        allow_dots: false,
        refuse_reserved_routes: true,
    };
    /// Rules for looking up an existing name.
    pub const EXISTING: NameRules = NameRules {
        allow_dots: true,
        refuse_reserved_routes: false,
    };
}

fn is_space_separator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\u{00A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// Validate a character name (trimmed first; the first failing rule wins).
/// Returns the trimmed name.
pub fn validate_name(raw: &str, rules: NameRules) -> Result<String, NameError> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.contains('/') || name.contains('\\') {
        return Err(NameError::ContainsPathSeparator);
    }
    if name.contains("..") {
        return Err(NameError::PathTraversal);
    }
    if name == "." || name.ends_with('.') {
        return Err(NameError::UnsafeDot);
    }
    if !rules.allow_dots && name.contains('.') {
        return Err(NameError::ContainsDot);
    }
    let stem = name
        .split('.')
        .next()
        .unwrap_or(name)
        .trim()
        .to_ascii_uppercase();
    let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CLOCK$")
        || ((stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.len() == 4
            && stem.as_bytes()[3].is_ascii_digit()
            && stem.as_bytes()[3] != b'0');
    if device {
        return Err(NameError::ReservedDeviceName);
    }
    if rules.refuse_reserved_routes && RESERVED_ROUTE_NAMES.contains(&name) {
        return Err(NameError::ReservedRouteName);
    }
    let allowed = |c: char| {
        c.is_alphanumeric()
            || is_space_separator(c)
            || matches!(
                c,
                '_' | '-' | '(' | ')' | '（' | '）' | '·' | '・' | '•' | '\'' | '’'
            )
            || (rules.allow_dots && c == '.')
    };
    if !name.chars().all(allowed) {
        return Err(NameError::InvalidCharacter);
    }
    let units: usize = name
        .chars()
        .map(|c| if (c as u32) <= 0x7F { 1 } else { 2 })
        .sum();
    if units > MAX_NAME_UNITS {
        return Err(NameError::TooLong);
    }
    Ok(name.to_string())
}

/// The characters file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CharactersDoc {
    pub current: String,
    pub characters: Map<String, Value>,
}

impl CharactersDoc {
    fn fresh() -> Self {
        let mut characters = Map::new();
        characters.insert(DEFAULT_CHARACTER.to_string(), json!({}));
        CharactersDoc {
            current: DEFAULT_CHARACTER.to_string(),
            characters,
        }
    }
}

/// Errors of registry operations.
#[derive(Debug)]
pub enum CharacterError {
    Invalid(NameError),
    Exists(String),
    NotFound(String),
    LastCharacter,
    Storage(String),
}

/// The in-memory registry, written through to the characters file atomically.
pub struct Characters {
    store: Store,
    doc: RwLock<CharactersDoc>,
    write_lock: tokio::sync::Mutex<()>,
}

impl Characters {
    /// Load the file; a fresh data dir gets `Companion`.
    pub fn load(store: Store, notices: &Notices) -> Result<Characters, String> {
        let path = store.path(docs::CHARACTERS);
        let doc = match store::read_json::<CharactersDoc>(&path) {
            Ok(Some(d)) => normalise(d),
            Ok(None) => {
                let d = CharactersDoc::fresh();
                store::atomic_write_json(&path, &d).map_err(|e| {
                    format!("data directory is not writable ({}): {e}", path.display())
                })?;
                d
            }
            Err(e) => {
                let aside =
                    path.with_file_name(format!("characters.json.corrupt-{}", crate::now_millis()));
                let _ = std::fs::rename(&path, &aside);
                tracing::warn!(
                    "characters file unreadable ({e}); moved to {} and starting fresh",
                    aside.display()
                );
                notices.push(json!({
                    "kind": "characters_file_recovered",
                    "message": "The characters file was unreadable; a copy was kept and defaults were restored.",
                    "backup_path": aside.to_string_lossy(),
                }));
                let d = CharactersDoc::fresh();
                store::atomic_write_json(&path, &d)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                d
            }
        };
        Ok(Characters {
            store,
            doc: RwLock::new(doc),
            write_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// A snapshot of the file.
    pub fn snapshot(&self) -> CharactersDoc {
        self.doc.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn names(&self) -> Vec<String> {
        // The keys only: no copy of every profile.
        self.doc
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .characters
            .keys()
            .cloned()
            .collect()
    }
    pub fn exists(&self, name: &str) -> bool {
        self.doc
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .characters
            .contains_key(name)
    }
    pub fn current(&self) -> String {
        self.doc
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .current
            .clone()
    }
    pub fn profile(&self, name: &str) -> Option<Value> {
        self.doc
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .characters
            .get(name)
            .cloned()
    }
    /// `name` if given and existing, else the current character.
    pub fn resolve(&self, name: Option<&str>) -> Option<String> {
        match name.map(str::trim).filter(|n| !n.is_empty()) {
            Some(n) => self.exists(n).then(|| n.to_string()),
            None => Some(self.current()).filter(|c| self.exists(c)),
        }
    }

    /// Apply `f` to a copy of the document and persist it; the in-memory copy
    /// changes only when the write succeeded.
    pub async fn mutate<R>(
        &self,
        f: impl FnOnce(&mut CharactersDoc) -> Result<R, CharacterError>,
    ) -> Result<R, CharacterError> {
        let _g = self.write_lock.lock().await;
        let mut doc = self.snapshot();
        let r = f(&mut doc)?;
        let path = self.store.path(docs::CHARACTERS);
        let to_write = doc.clone();
        tokio::task::spawn_blocking(move || store::atomic_write_json(&path, &to_write))
            .await
            .map_err(|e| CharacterError::Storage(e.to_string()))?
            .map_err(|e| {
                CharacterError::Storage(format!("cannot save the characters file: {e}"))
            })?;
        *self.doc.write().unwrap_or_else(|e| e.into_inner()) = doc;
        Ok(r)
    }

    /// Re-read the file from disk (after an import replaced it).
    pub async fn reload(&self) -> Result<(), String> {
        let _g = self.write_lock.lock().await;
        let path = self.store.path(docs::CHARACTERS);
        match store::read_json::<CharactersDoc>(&path) {
            Ok(Some(d)) => {
                *self.doc.write().unwrap_or_else(|e| e.into_inner()) = normalise(d);
                Ok(())
            }
            Ok(None) => Err("the characters file is missing".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    pub async fn create(
        &self,
        name: &str,
        profile: Map<String, Value>,
    ) -> Result<String, CharacterError> {
        let name = validate_name(name, NameRules::NEW).map_err(CharacterError::Invalid)?;
        let n = name.clone();
        self.mutate(move |doc| {
            if doc.characters.contains_key(&n) {
                return Err(CharacterError::Exists(n));
            }
            doc.characters.insert(n.clone(), Value::Object(profile));
            if doc.current.is_empty() {
                doc.current = n;
            }
            Ok(())
        })
        .await?;
        Ok(name)
    }

    pub async fn set_current(&self, name: &str) -> Result<String, CharacterError> {
        let name = name.trim().to_string();
        self.mutate(move |doc| {
            if !doc.characters.contains_key(&name) {
                return Err(CharacterError::NotFound(name));
            }
            doc.current = name.clone();
            Ok(name)
        })
        .await
    }

    pub async fn delete(&self, name: &str) -> Result<(), CharacterError> {
        let name = name.to_string();
        self.mutate(move |doc| {
            if !doc.characters.contains_key(&name) {
                return Err(CharacterError::NotFound(name));
            }
            if doc.characters.len() == 1 {
                return Err(CharacterError::LastCharacter);
            }
            doc.characters.shift_remove(&name);
            if doc.current == name {
                doc.current = doc.characters.keys().next().cloned().unwrap_or_default();
            }
            Ok(())
        })
        .await
    }
}

fn normalise(mut d: CharactersDoc) -> CharactersDoc {
    if !d.characters.contains_key(&d.current) {
        d.current = d.characters.keys().next().cloned().unwrap_or_default();
    }
    d
}

/// Character-profile fields reserved by the system: never replaced by a form
/// save, listed by `page_config` (`system_reserved_fields`).
pub const SYSTEM_RESERVED: &[&str] = &[
    "_reserved",
    "character_id",
    "live2d",
    "voice_id",
    "system_prompt",
    "model_type",
    "live3d_sub_type",
    "vrm",
    "vrm_animation",
    "lighting",
    "vrm_rotation",
    "live2d_item_id",
    "live2d_idle_animation",
    "item_id",
    "idleAnimation",
    "idleAnimations",
    "mmd",
    "mmd_animation",
    "mmd_idle_animation",
    "mmd_idle_animations",
    "touch_set",
    "_field_order",
];

/// The master profile of the original application's characters document
/// (`主人`), written by `POST /api/characters/master` (crates/frontend).
pub const MASTER_DOC: &str = "config/master.json";

/// The original application's `猫娘` map: each profile without companiond's `name`,
/// with `model_type` defaulting to `live2d` (the original pages read it; docs/frontend.md).
pub fn original_profiles(doc: &CharactersDoc) -> Map<String, Value> {
    doc.characters
        .iter()
        .map(|(name, profile)| {
            let mut m = profile.as_object().cloned().unwrap_or_default();
            m.remove("name");
            let model_type = m
                .get("model_type")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())
                .unwrap_or("live2d")
                .to_string();
            m.insert("model_type".into(), Value::String(model_type));
            (name.clone(), Value::Object(m))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        let ok = [
            "Mika",
            "猫娘",
            "Anna Lee",
            "a_b-c",
            "x(1)",
            "李·华",
            "O'Neil",
            "ミク・初音",
            "ab\u{3000}cd",
        ];
        for n in ok {
            assert!(validate_name(n, NameRules::NEW).is_ok(), "{n}");
        }
        let bad = [
            ("", NameError::Empty),
            ("  ", NameError::Empty),
            ("a/b", NameError::ContainsPathSeparator),
            ("a\\b", NameError::ContainsPathSeparator),
            ("..", NameError::PathTraversal),
            ("a..b", NameError::PathTraversal),
            (".", NameError::UnsafeDot),
            ("x.", NameError::UnsafeDot),
            ("a.b", NameError::ContainsDot),
            ("CON", NameError::ReservedDeviceName),
            ("nul", NameError::ReservedDeviceName),
            ("com1", NameError::ReservedDeviceName),
            ("LPT9", NameError::ReservedDeviceName),
            ("api", NameError::ReservedRouteName),
            ("static", NameError::ReservedRouteName),
            ("a<b", NameError::InvalidCharacter),
            ("a:b", NameError::InvalidCharacter),
            ("a\tb", NameError::InvalidCharacter),
            ("a\u{200B}b", NameError::InvalidCharacter),
            ("a?b", NameError::InvalidCharacter),
        ];
        for (n, e) in bad {
            assert_eq!(validate_name(n, NameRules::NEW), Err(e), "{n:?}");
        }
        assert_eq!(
            validate_name(&"a".repeat(61), NameRules::NEW),
            Err(NameError::TooLong)
        );
        assert!(validate_name(&"a".repeat(60), NameRules::NEW).is_ok());
        assert_eq!(
            validate_name(&"猫".repeat(31), NameRules::NEW),
            Err(NameError::TooLong)
        );
        assert!(validate_name("COM0", NameRules::NEW).is_ok());
        assert!(validate_name("a.b", NameRules::EXISTING).is_ok());
        assert!(validate_name("api", NameRules::EXISTING).is_ok());
        assert_eq!(
            validate_name("con.txt", NameRules::EXISTING),
            Err(NameError::ReservedDeviceName)
        );
    }
}

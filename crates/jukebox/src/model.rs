//! The jukebox library: records, the merged view of the bundled and the user
//! library, the persisted user document and the revision hash.
//!
//! Nothing here knows about HTTP or the file system.

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    #[serde(default, deserialize_with = "lenient_offset")]
    pub offset: i64,
}

/// `song id -> action id -> binding`.
pub type Bindings = IndexMap<String, IndexMap<String, Binding>>;

/// `md5 -> id` for songs and actions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Md5Index {
    #[serde(default)]
    pub songs: IndexMap<String, String>,
    #[serde(default)]
    pub actions: IndexMap<String, String>,
}

/// The bundled library file (`<bundle>/jukebox/config.json`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleDoc {
    #[serde(default)]
    pub version: Option<Value>,
    #[serde(default)]
    pub songs: IndexMap<String, Song>,
    #[serde(default)]
    pub actions: IndexMap<String, Action>,
    #[serde(default)]
    pub bindings: Bindings,
    #[serde(default)]
    pub md5_index: Md5Index,
}

impl BundleDoc {
    /// Force the built-in marker and the ids (the keys win over the records).
    pub fn normalise(mut self) -> Self {
        for (id, s) in self.songs.iter_mut() {
            s.id = id.clone();
            s.is_builtin = true;
        }
        for (id, a) in self.actions.iter_mut() {
            a.id = id.clone();
            a.is_builtin = true;
        }
        self
    }
}

/// Settings the user changed on built-in resources.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    #[serde(default)]
    pub songs: IndexMap<String, Map<String, Value>>,
    #[serde(default)]
    pub actions: IndexMap<String, Map<String, Value>>,
}

/// The persisted user document (`<data>/jukebox/config.json`): only user
/// resources and override settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub songs: IndexMap<String, Song>,
    #[serde(default)]
    pub actions: IndexMap<String, Action>,
    /// Per song: the complete binding map that replaces the bundled one
    /// (an empty map removes the bundled bindings of that song).
    #[serde(default)]
    pub bindings: Bindings,
    /// Written by the original application for built-in pairs; read for compatibility.
    #[serde(default, skip_serializing)]
    pub builtin_bindings: Bindings,
    #[serde(default)]
    pub md5_index: Md5Index,
    #[serde(default)]
    pub builtin_overrides: Overrides,
}

/// The merged library that the routes work on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Library {
    pub version: String,
    pub songs: IndexMap<String, Song>,
    pub actions: IndexMap<String, Action>,
    pub bindings: Bindings,
    pub md5: Md5Index,
}

const SONG_OVERRIDE_FIELDS: &[&str] = &["visible", "defaultAction", "name", "artist"];
const ACTION_OVERRIDE_FIELDS: &[&str] = &["visible", "name"];

fn apply_song_override(s: &mut Song, o: &Map<String, Value>) {
    if let Some(v) = o.get("visible").and_then(Value::as_bool) {
        s.visible = v;
    }
    if let Some(v) = o.get("defaultAction").and_then(Value::as_str) {
        s.default_action = v.to_string();
    }
    if let Some(v) = o.get("name").and_then(Value::as_str) {
        s.name = v.to_string();
    }
    if let Some(v) = o.get("artist").and_then(Value::as_str) {
        s.artist = v.to_string();
    }
}

fn apply_action_override(a: &mut Action, o: &Map<String, Value>) {
    if let Some(v) = o.get("visible").and_then(Value::as_bool) {
        a.visible = v;
    }
    if let Some(v) = o.get("name").and_then(Value::as_str) {
        a.name = v.to_string();
    }
}

fn song_field(s: &Song, f: &str) -> Value {
    match f {
        "visible" => json!(s.visible),
        "defaultAction" => json!(s.default_action),
        "name" => json!(s.name),
        _ => json!(s.artist),
    }
}

fn action_field(a: &Action, f: &str) -> Value {
    match f {
        "visible" => json!(a.visible),
        _ => json!(a.name),
    }
}

impl Library {
    /// Merge the bundled library with the user document (user entries win).
    /// `action_missing(action)` tells whether an action's file is absent.
    pub fn merge(bundle: &BundleDoc, user: &UserDoc) -> Library {
        let mut songs: IndexMap<String, Song> = bundle.songs.clone();
        let mut actions: IndexMap<String, Action> = bundle.actions.clone();
        for (id, o) in &user.builtin_overrides.songs {
            if let Some(s) = songs.get_mut(id) {
                apply_song_override(s, o);
            }
        }
        for (id, o) in &user.builtin_overrides.actions {
            if let Some(a) = actions.get_mut(id) {
                apply_action_override(a, o);
            }
        }
        for (id, s) in &user.songs {
            let mut s = s.clone();
            s.id = id.clone();
            s.is_builtin = false;
            songs.insert(id.clone(), s);
        }
        for (id, a) in &user.actions {
            let mut a = a.clone();
            a.id = id.clone();
            a.is_builtin = false;
            actions.insert(id.clone(), a);
        }

        let mut bindings = bundle.bindings.clone();
        for layer in [&user.builtin_bindings, &user.bindings] {
            for (sid, map) in layer {
                if map.is_empty() {
                    bindings.shift_remove(sid);
                } else {
                    bindings.insert(sid.clone(), map.clone());
                }
            }
        }
        // Drop bindings whose song or action no longer exists.
        bindings.retain(|sid, map| {
            map.retain(|aid, _| actions.contains_key(aid));
            songs.contains_key(sid) && !map.is_empty()
        });
        for s in songs.values_mut() {
            if !s.default_action.is_empty() && !actions.contains_key(&s.default_action) {
                s.default_action.clear();
            }
        }

        let mut lib = Library {
            version: user
                .version
                .clone()
                .filter(|v| !v.is_empty())
                .or_else(|| bundle.version.as_ref().map(version_string))
                .unwrap_or_else(|| DEFAULT_VERSION.to_string()),
            songs,
            actions,
            bindings,
            md5: Md5Index::default(),
        };
        lib.reindex(Some(&bundle.md5_index));
        lib
    }

    /// Rebuild the MD5 indexes from the records (plus any still-valid bundled entries).
    pub fn reindex(&mut self, bundled: Option<&Md5Index>) {
        let mut idx = Md5Index::default();
        if let Some(b) = bundled {
            for (md5, id) in &b.songs {
                if self.songs.contains_key(id) {
                    idx.songs.insert(md5.clone(), id.clone());
                }
            }
            for (md5, id) in &b.actions {
                if self.actions.contains_key(id) {
                    idx.actions.insert(md5.clone(), id.clone());
                }
            }
        }
        // Built-ins first so that a user record with the same MD5 wins.
        for pass_builtin in [true, false] {
            for (id, s) in &self.songs {
                if s.is_builtin == pass_builtin && !s.audio_md5.is_empty() {
                    idx.songs.insert(s.audio_md5.clone(), id.clone());
                }
            }
            for (id, a) in &self.actions {
                if a.is_builtin == pass_builtin && !a.file_md5.is_empty() {
                    idx.actions.insert(a.file_md5.clone(), id.clone());
                }
            }
        }
        self.md5 = idx;
    }

    /// The user document to persist: user records, bindings that differ from
    /// the bundle, and changed settings of built-in resources.
    pub fn split(&self, bundle: &BundleDoc) -> UserDoc {
        let mut doc = UserDoc {
            version: Some(self.version.clone()),
            ..UserDoc::default()
        };
        for (id, s) in &self.songs {
            if !s.is_builtin {
                let mut s = s.clone();
                s.is_builtin = false;
                doc.md5_index.songs.insert(s.audio_md5.clone(), id.clone());
                doc.songs.insert(id.clone(), s);
            } else if let Some(orig) = bundle.songs.get(id) {
                let mut o = Map::new();
                for f in SONG_OVERRIDE_FIELDS {
                    let cur = song_field(s, f);
                    if cur != song_field(orig, f) {
                        o.insert((*f).to_string(), cur);
                    }
                }
                if !o.is_empty() {
                    doc.builtin_overrides.songs.insert(id.clone(), o);
                }
            }
        }
        for (id, a) in &self.actions {
            if !a.is_builtin {
                doc.md5_index.actions.insert(a.file_md5.clone(), id.clone());
                doc.actions.insert(id.clone(), a.clone());
            } else if let Some(orig) = bundle.actions.get(id) {
                let mut o = Map::new();
                for f in ACTION_OVERRIDE_FIELDS {
                    let cur = action_field(a, f);
                    if cur != action_field(orig, f) {
                        o.insert((*f).to_string(), cur);
                    }
                }
                if !o.is_empty() {
                    doc.builtin_overrides.actions.insert(id.clone(), o);
                }
            }
        }
        doc.md5_index.songs.shift_remove("");
        doc.md5_index.actions.shift_remove("");
        let empty = IndexMap::new();
        let mut song_ids: Vec<&String> = self.bindings.keys().collect();
        song_ids.extend(
            bundle
                .bindings
                .keys()
                .filter(|k| !self.bindings.contains_key(*k)),
        );
        for sid in song_ids {
            let cur = self.bindings.get(sid).unwrap_or(&empty);
            let base = bundle.bindings.get(sid).unwrap_or(&empty);
            let user_song = self.songs.get(sid).is_some_and(|s| !s.is_builtin);
            // A differing map is stored (even empty, to hide the bundled one);
            // a user song's bindings are always stored.
            if cur != base || (user_song && !cur.is_empty()) {
                doc.bindings.insert(sid.clone(), cur.clone());
            }
        }
        doc
    }

    /// The short stable hash of version, songs, actions and bindings.
    pub fn revision(&self) -> String {
        let v = json!({
            "version": self.version,
            "songs": self.songs,
            "actions": self.actions,
            "bindings": self.bindings,
        });
        let mut h = Sha256::new();
        write_canonical(&v, &mut h);
        hex::encode(h.finalize())[..16].to_string()
    }

    pub fn summary(&self, revision: &str) -> Summary {
        Summary {
            config_revision: revision.to_string(),
            song_count: self.songs.len(),
            visible_song_count: self.songs.values().filter(|s| s.visible).count(),
            action_count: self.actions.len(),
        }
    }

    /// The full config object of GET /config.
    pub fn to_json(&self, summary: &Summary) -> Value {
        json!({
            "version": self.version,
            "songs": self.songs,
            "actions": self.actions,
            "bindings": self.bindings,
            "md5Index": self.md5,
            "configRevision": summary.config_revision,
            "songCount": summary.song_count,
            "visibleSongCount": summary.visible_song_count,
            "actionCount": summary.action_count,
        })
    }

    /// Remove a song's bindings, its record and its index entry.
    pub fn remove_song(&mut self, id: &str) -> Option<Song> {
        let s = self.songs.shift_remove(id)?;
        self.bindings.shift_remove(id);
        if self.md5.songs.get(&s.audio_md5).map(String::as_str) == Some(id) {
            self.md5.songs.shift_remove(&s.audio_md5);
        }
        Some(s)
    }

    /// Remove an action, every binding to it and every default-action reference.
    pub fn remove_action(&mut self, id: &str) -> Option<Action> {
        let a = self.actions.shift_remove(id)?;
        self.bindings.retain(|_, map| {
            map.shift_remove(id);
            !map.is_empty()
        });
        for s in self.songs.values_mut() {
            if s.default_action == id {
                s.default_action.clear();
            }
        }
        if self.md5.actions.get(&a.file_md5).map(String::as_str) == Some(id) {
            self.md5.actions.shift_remove(&a.file_md5);
        }
        Some(a)
    }

    /// Bind and apply the default-action rule: the bound action becomes the
    /// song's default when the song has no (existing) default action of the same
    /// animation type. Returns the song's default action afterwards.
    pub fn bind(&mut self, song_id: &str, action_id: &str, offset: i64) -> Option<String> {
        let new_type = self.actions.get(action_id)?.animation_type();
        let current_type = {
            let song = self.songs.get(song_id)?;
            self.actions
                .get(&song.default_action)
                .map(Action::animation_type)
        };
        self.bindings
            .entry(song_id.to_string())
            .or_default()
            .insert(action_id.to_string(), Binding { offset });
        let song = self.songs.get_mut(song_id)?;
        if current_type.as_deref() != Some(new_type.as_str()) {
            song.default_action = action_id.to_string();
        }
        Some(song.default_action.clone())
    }

    /// Remove one binding; `None` when it does not exist. Returns the song's
    /// default action afterwards.
    pub fn unbind(&mut self, song_id: &str, action_id: &str) -> Option<String> {
        let map = self.bindings.get_mut(song_id)?;
        map.shift_remove(action_id)?;
        if map.is_empty() {
            self.bindings.shift_remove(song_id);
        }
        let song = self.songs.get_mut(song_id)?;
        if song.default_action == action_id {
            song.default_action.clear();
        }
        Some(song.default_action.clone())
    }

    pub fn is_bound(&self, song_id: &str, action_id: &str) -> bool {
        self.bindings
            .get(song_id)
            .is_some_and(|m| m.contains_key(action_id))
    }
}

fn version_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The cheap part of the config that clients poll.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub config_revision: String,
    pub song_count: usize,
    pub visible_song_count: usize,
    pub action_count: usize,
}

/// Write `v` as compact JSON with object keys sorted (canonical form) into the hasher.
fn write_canonical(v: &Value, h: &mut Sha256) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            h.update(b"{");
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                h.update(Value::String((*k).clone()).to_string().as_bytes());
                h.update(b":");
                if let Some(x) = m.get(*k) {
                    write_canonical(x, h);
                }
            }
            h.update(b"}");
        }
        Value::Array(a) => {
            h.update(b"[");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                write_canonical(x, h);
            }
            h.update(b"]");
        }
        other => h.update(other.to_string().as_bytes()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn song(id: &str, md5: &str, builtin: bool) -> Song {
        serde_json::from_value(
            json!({"id": id, "name": id, "audio": format!("songs/{id}.mp3"),
            "audioMd5": md5, "audioFormat": "mp3", "isBuiltin": builtin}),
        )
        .unwrap()
    }

    fn action(id: &str, md5: &str, format: &str) -> Action {
        serde_json::from_value(
            json!({"id": id, "name": id, "file": format!("actions/{id}.{format}"),
            "fileMd5": md5, "format": format}),
        )
        .unwrap()
    }

    fn bundle() -> BundleDoc {
        let mut b = BundleDoc::default();
        b.songs.insert("b1".into(), song("b1", "m-b1", true));
        b.actions.insert("ba".into(), action("ba", "m-ba", "vmd"));
        b.bindings
            .entry("b1".into())
            .or_default()
            .insert("ba".into(), Binding { offset: 3 });
        b.normalise()
    }

    #[test]
    fn merge_split_round_trip_keeps_only_user_data() {
        let b = bundle();
        let mut lib = Library::merge(&b, &UserDoc::default());
        assert!(lib.songs["b1"].is_builtin);
        assert_eq!(lib.md5.songs["m-b1"], "b1");
        let untouched = lib.split(&b);
        assert!(untouched.songs.is_empty() && untouched.bindings.is_empty());
        assert!(untouched.builtin_overrides.songs.is_empty());

        lib.songs.insert("u1".into(), song("u1", "m-u1", false));
        lib.actions.insert("ua".into(), action("ua", "m-ua", "bvh"));
        lib.songs["b1"].visible = false;
        lib.unbind("b1", "ba");
        lib.bind("u1", "ba", 7);
        let doc = lib.split(&b);
        assert_eq!(doc.songs.len(), 1);
        assert_eq!(doc.actions.len(), 1);
        assert_eq!(doc.builtin_overrides.songs["b1"]["visible"], json!(false));
        assert!(
            doc.bindings["b1"].is_empty(),
            "an emptied built-in binding map is kept"
        );
        let again = Library::merge(&b, &doc);
        let mut expect = lib.clone();
        expect.reindex(Some(&b.md5_index));
        assert_eq!(again, expect);
        assert_eq!(again.revision(), lib.revision());
    }

    #[test]
    fn user_song_shadowing_a_bundled_id_keeps_its_own_empty_bindings() {
        let b = bundle();
        let mut lib = Library::merge(&b, &UserDoc::default());
        lib.songs.insert("b1".into(), song("b1", "m-user", false));
        lib.bindings.shift_remove("b1");
        let doc = lib.split(&b);
        assert!(doc.bindings["b1"].is_empty());
        let again = Library::merge(&b, &doc);
        assert!(!again.bindings.contains_key("b1"));
        assert!(!again.songs["b1"].is_builtin);
    }

    #[test]
    fn default_action_rule() {
        let mut lib = Library::merge(&bundle(), &UserDoc::default());
        lib.actions.insert("v2".into(), action("v2", "m2", "vmd"));
        lib.actions.insert("b3".into(), action("b3", "m3", "bvh"));
        lib.songs["b1"].default_action.clear();
        assert_eq!(lib.bind("b1", "v2", 0).unwrap(), "v2");
        assert_eq!(
            lib.bind("b1", "ba", 0).unwrap(),
            "v2",
            "same type keeps the default"
        );
        assert_eq!(
            lib.bind("b1", "b3", 0).unwrap(),
            "b3",
            "another type takes over"
        );
        assert_eq!(lib.unbind("b1", "b3").unwrap(), "");
        assert!(lib.unbind("b1", "b3").is_none());
    }

    #[test]
    fn revision_is_stable_and_order_independent() {
        let b = bundle();
        let lib = Library::merge(&b, &UserDoc::default());
        let mut other = lib.clone();
        other.songs.reverse();
        assert_eq!(lib.revision(), other.revision());
        assert_eq!(lib.revision().len(), 16);
        other.songs["b1"].name = "x".into();
        assert_ne!(lib.revision(), other.revision());
    }

    #[test]
    fn ids() {
        assert_eq!(sanitize_id("My Song: <live>.mp3"), "My_Song_live");
        assert_eq!(sanitize_id("???.mp3"), "unnamed");
        assert_eq!(sanitize_id(".mp3"), ".mp3");
        assert_eq!(unique_id("a", |c| c == "a" || c == "a_1"), "a_2");
        assert_eq!(extension("x.MP3"), "mp3");
        assert_eq!(file_stem("a.b.c"), "a.b");
    }
}

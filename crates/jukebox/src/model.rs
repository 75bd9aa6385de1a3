//! The jukebox library: records, the merged view of the bundled and the user
//! library, the persisted user document and the revision hash.
//!
//! The library is kept in memory and changed in place: every change goes through
//! a tracked method that remembers the previous value of what it touches, so a
//! change can be turned into journal records, revision and cache updates that
//! cost what changed — or undone.
//!
//! Nothing here knows about HTTP or the file system.

use std::collections::{BTreeMap, HashMap, HashSet};

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
    /// Storage generation (absent in files of the first format; see `storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageMark>,
}

/// The marker of the journaled storage format in the base document.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageMark {
    pub format: u32,
    pub generation: u64,
}

/// A map that keeps insertion order with O(1) lookups and O(log n) removal:
/// each entry carries a sequence number; `order` lists keys by sequence.
#[derive(Clone, Debug)]
pub struct Ordered<V> {
    map: HashMap<String, (u64, Box<V>)>,
    order: BTreeMap<u64, String>,
    next: u64,
}

impl<V> Default for Ordered<V> {
    fn default() -> Self {
        Ordered {
            map: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
        }
    }
}

impl<V: PartialEq> PartialEq for Ordered<V> {
    /// Equal contents (order is not compared, as for JSON objects).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .map
                .iter()
                .all(|(k, (_, v))| other.get(k).is_some_and(|o| o == v.as_ref()))
    }
}

impl<V> Ordered<V> {
    pub fn from_index_map(m: IndexMap<String, V>) -> Self {
        let mut o = Ordered::default();
        for (k, v) in m {
            o.put(k, v);
        }
        o
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, k: &str) -> Option<&V> {
        self.map.get(k).map(|(_, v)| v.as_ref())
    }
    pub fn contains_key(&self, k: &str) -> bool {
        self.map.contains_key(k)
    }
    /// The sequence number of a key (its place in the order).
    pub fn seq(&self, k: &str) -> Option<u64> {
        self.map.get(k).map(|(s, _)| *s)
    }
    /// Entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> + '_ {
        self.order
            .values()
            .filter_map(|k| self.map.get_key_value(k).map(|(k, (_, v))| (k, v.as_ref())))
    }
    /// Entries whose sequence number is in `range`, in order.
    pub fn range(&self, range: std::ops::Range<u64>) -> impl Iterator<Item = (&String, &V)> + '_ {
        self.order
            .range(range)
            .filter_map(|(_, k)| self.map.get_key_value(k).map(|(k, (_, v))| (k, v.as_ref())))
    }
    pub fn keys(&self) -> impl Iterator<Item = &String> + '_ {
        self.order.values()
    }
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.iter().map(|(_, v)| v)
    }
    /// The highest sequence number in use (+1).
    pub fn seq_end(&self) -> u64 {
        self.next
    }

    // Raw changes, for the tracked methods of [`Library`] only.
    fn get_mut(&mut self, k: &str) -> Option<&mut V> {
        self.map.get_mut(k).map(|(_, v)| v.as_mut())
    }
    /// Insert or replace; a new key goes last.
    fn put(&mut self, k: String, v: V) -> u64 {
        if let Some((seq, old)) = self.map.get_mut(&k) {
            **old = v;
            return *seq;
        }
        let seq = self.next;
        self.next += 1;
        self.order.insert(seq, k.clone());
        self.map.insert(k, (seq, Box::new(v)));
        seq
    }
    /// Put back at a known place (undo).
    fn put_at(&mut self, k: String, seq: u64, v: V) {
        if let Some((old_seq, _)) = self.map.get(&k) {
            let old_seq = *old_seq;
            self.order.remove(&old_seq);
        }
        self.order.insert(seq, k.clone());
        self.next = self.next.max(seq + 1);
        self.map.insert(k, (seq, Box::new(v)));
    }
    fn take(&mut self, k: &str) -> Option<(u64, V)> {
        let (seq, v) = self.map.remove(k)?;
        self.order.remove(&seq);
        Some((seq, *v))
    }
}

/// The bindings of one song: action id -> binding.
pub type BindingMap = IndexMap<String, Binding>;

/// The live MD5 indexes (`md5 -> id`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Md5Live {
    pub songs: HashMap<String, String>,
    pub actions: HashMap<String, String>,
}

/// One changed entry: its key, where it was / is in the order, old and new value.
pub struct Changed<V> {
    pub id: String,
    pub old: Option<(u64, V)>,
    pub new: Option<u64>,
}

/// What one change did (old values; new ones are in the library).
#[derive(Default)]
pub struct Changes {
    pub songs: Vec<Changed<Song>>,
    pub actions: Vec<Changed<Action>>,
    pub bindings: Vec<Changed<BindingMap>>,
    /// MD5 keys whose holder changed: (is_song, md5, old holder).
    pub md5: Vec<(bool, String, Option<String>)>,
    /// The MD5 indexes were rebuilt as a whole (rare).
    pub md5_rebuilt: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.songs.is_empty() && self.actions.is_empty() && self.bindings.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
struct Touched {
    songs: HashMap<String, Option<(u64, Song)>>,
    actions: HashMap<String, Option<(u64, Action)>>,
    bindings: HashMap<String, Option<(u64, BindingMap)>>,
    md5: HashMap<(bool, String), Option<String>>,
    md5_before: Option<Md5Live>,
}

/// The merged library that the routes work on.
#[derive(Clone, Debug, Default)]
pub struct Library {
    pub version: String,
    pub songs: Ordered<Song>,
    pub actions: Ordered<Action>,
    pub bindings: Ordered<BindingMap>,
    pub md5: Md5Live,
    /// The bundle's own MD5 index (entries count while their id exists).
    bundle_md5: Md5Index,
    /// Ids of built-in records (a change to one rebuilds the MD5 index).
    builtin_songs: HashSet<String>,
    builtin_actions: HashSet<String>,
    /// MD5s claimed by more than one record (a removal rebuilds the MD5 index).
    dup_md5: HashSet<(bool, String)>,
    /// Reverse indexes as of the last [`Library::finish`]: action id -> songs
    /// bound to it / songs whose default it is (so deleting an action touches
    /// only those songs). Entries touched since are checked directly.
    bound_to: HashMap<String, HashSet<String>>,
    default_of: HashMap<String, HashSet<String>>,
    /// Old values of what changed since the last finish (`None`: nothing).
    touched: Option<Box<Touched>>,
}

impl PartialEq for Library {
    fn eq(&self, o: &Self) -> bool {
        self.version == o.version
            && self.songs == o.songs
            && self.actions == o.actions
            && self.bindings == o.bindings
            && self.md5 == o.md5
    }
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
    pub fn merge(bundle: &BundleDoc, user: &UserDoc) -> Library {
        Library::merge_owned(bundle, user.clone())
    }

    /// [`Library::merge`] consuming the user document (no copy of its records).
    pub fn merge_owned(bundle: &BundleDoc, user: UserDoc) -> Library {
        let mut lib = Library::merge_raw(bundle, user);
        lib.reindex();
        lib.settle();
        lib
    }

    /// The merge without its indexes: the caller replays a journal first, then
    /// calls [`Library::reindex`] and [`Library::settle`] once.
    pub fn merge_raw(bundle: &BundleDoc, user: UserDoc) -> Library {
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
        let version = user.version.clone();
        for (id, mut s) in user.songs {
            s.id.clone_from(&id);
            s.is_builtin = false;
            songs.insert(id, s);
        }
        for (id, mut a) in user.actions {
            a.id.clone_from(&id);
            a.is_builtin = false;
            actions.insert(id, a);
        }

        let mut bindings = bundle.bindings.clone();
        for layer in [user.builtin_bindings, user.bindings] {
            for (sid, map) in layer {
                if map.is_empty() {
                    bindings.shift_remove(&sid);
                } else {
                    bindings.insert(sid, map);
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

        Library {
            version: version
                .filter(|v| !v.is_empty())
                .or_else(|| bundle.version.as_ref().map(version_string))
                .unwrap_or_else(|| DEFAULT_VERSION.to_string()),
            songs: Ordered::from_index_map(songs),
            actions: Ordered::from_index_map(actions),
            bindings: Ordered::from_index_map(bindings),
            md5: Md5Live::default(),
            bundle_md5: bundle.md5_index.clone(),
            builtin_songs: bundle.songs.keys().cloned().collect(),
            builtin_actions: bundle.actions.keys().cloned().collect(),
            dup_md5: HashSet::new(),
            bound_to: HashMap::new(),
            default_of: HashMap::new(),
            touched: None,
        }
    }

    /// Forget what was recorded and rebuild the reverse indexes (after a load).
    pub fn settle(&mut self) {
        self.touched = None;
        self.bound_to.clear();
        self.default_of.clear();
        for (sid, m) in self.bindings.iter() {
            for aid in m.keys() {
                self.bound_to
                    .entry(aid.clone())
                    .or_default()
                    .insert(sid.clone());
            }
        }
        for (sid, s) in self.songs.iter() {
            if !s.default_action.is_empty() {
                self.default_of
                    .entry(s.default_action.clone())
                    .or_default()
                    .insert(sid.clone());
            }
        }
    }

    /// The reverse indexes equal ones rebuilt from scratch (tests).
    #[cfg(test)]
    fn reverse_is_exact(&self) -> bool {
        let mut fresh = self.clone();
        fresh.settle();
        fresh.bound_to == self.bound_to && fresh.default_of == self.default_of
    }

    /// Songs bound to `aid` and songs whose default is `aid` (current state).
    fn songs_referencing(&self, aid: &str) -> (Vec<String>, Vec<String>) {
        let mut bound: HashSet<&String> = self.bound_to.get(aid).into_iter().flatten().collect();
        let mut defaults: HashSet<&String> =
            self.default_of.get(aid).into_iter().flatten().collect();
        if let Some(t) = &self.touched {
            bound.extend(t.bindings.keys());
            defaults.extend(t.songs.keys());
        }
        let mut bound: Vec<String> = bound
            .into_iter()
            .filter(|sid| self.bindings.get(sid).is_some_and(|m| m.contains_key(aid)))
            .cloned()
            .collect();
        let mut defaults: Vec<String> = defaults
            .into_iter()
            .filter(|sid| self.songs.get(sid).is_some_and(|s| s.default_action == aid))
            .cloned()
            .collect();
        bound.sort_by_key(|sid| self.bindings.seq(sid));
        defaults.sort_by_key(|sid| self.songs.seq(sid));
        (bound, defaults)
    }

    /// Fold a finished change into the reverse indexes.
    fn update_reverse(&mut self, c: &Changes) {
        fn unlink(idx: &mut HashMap<String, HashSet<String>>, key: &str, sid: &str) {
            if let Some(set) = idx.get_mut(key) {
                set.remove(sid);
                if set.is_empty() {
                    idx.remove(key);
                }
            }
        }
        for ch in &c.bindings {
            if let Some((_, old)) = &ch.old {
                for aid in old.keys() {
                    unlink(&mut self.bound_to, aid, &ch.id);
                }
            }
            if let Some(m) = self.bindings.get(&ch.id) {
                for aid in m.keys() {
                    self.bound_to
                        .entry(aid.clone())
                        .or_default()
                        .insert(ch.id.clone());
                }
            }
        }
        for ch in &c.songs {
            if let Some((_, old)) = &ch.old {
                if !old.default_action.is_empty() {
                    unlink(&mut self.default_of, &old.default_action, &ch.id);
                }
            }
            if let Some(s) = self.songs.get(&ch.id) {
                if !s.default_action.is_empty() {
                    self.default_of
                        .entry(s.default_action.clone())
                        .or_default()
                        .insert(ch.id.clone());
                }
            }
        }
    }

    /// Rebuild the MD5 indexes from the records (plus still-valid bundled
    /// entries): built-ins first so that a user record with the same MD5 wins.
    pub fn reindex(&mut self) {
        if let Some(t) = self.touched.as_mut() {
            if t.md5_before.is_none() {
                t.md5_before = Some(self.md5.clone());
            }
        }
        self.md5 = self.full_md5_index();
        // MD5s with more than one claimant: removing one of them needs a rebuild.
        let mut claims: HashMap<(bool, &str), u32> = HashMap::new();
        for (md5, id) in &self.bundle_md5.songs {
            if self.songs.contains_key(id) {
                *claims.entry((true, md5)).or_default() += 1;
            }
        }
        for (md5, id) in &self.bundle_md5.actions {
            if self.actions.contains_key(id) {
                *claims.entry((false, md5)).or_default() += 1;
            }
        }
        for s in self.songs.values() {
            if !s.audio_md5.is_empty() {
                *claims.entry((true, &s.audio_md5)).or_default() += 1;
            }
        }
        for a in self.actions.values() {
            if !a.file_md5.is_empty() {
                *claims.entry((false, &a.file_md5)).or_default() += 1;
            }
        }
        self.dup_md5 = claims
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|((s, m), _)| (s, m.to_string()))
            .collect();
    }

    /// The MD5 indexes computed from scratch (the reference for the
    /// incrementally maintained [`Library::md5`]).
    pub fn full_md5_index(&self) -> Md5Live {
        let mut idx = Md5Live::default();
        for (md5, id) in &self.bundle_md5.songs {
            if self.songs.contains_key(id) {
                idx.songs.insert(md5.clone(), id.clone());
            }
        }
        for (md5, id) in &self.bundle_md5.actions {
            if self.actions.contains_key(id) {
                idx.actions.insert(md5.clone(), id.clone());
            }
        }
        for pass_builtin in [true, false] {
            for (id, s) in self.songs.iter() {
                if s.is_builtin == pass_builtin && !s.audio_md5.is_empty() {
                    idx.songs.insert(s.audio_md5.clone(), id.clone());
                }
            }
            for (id, a) in self.actions.iter() {
                if a.is_builtin == pass_builtin && !a.file_md5.is_empty() {
                    idx.actions.insert(a.file_md5.clone(), id.clone());
                }
            }
        }
        idx
    }

    // -------------------------------------------------------------- tracking

    /// Start recording a change (old values of everything touched).
    pub fn begin(&mut self) {
        if self.touched.is_some() {
            // Changes made outside begin/finish (tests): fold them in first.
            let _ = self.finish();
        }
        self.touched = Some(Box::default());
    }

    fn t(&mut self) -> Option<&mut Touched> {
        self.touched.as_deref_mut()
    }

    /// Recording is always on: a change made without [`Library::begin`] is
    /// still recorded (and folded in by the next begin or finish).
    fn recording(&mut self) {
        if self.touched.is_none() {
            self.touched = Some(Box::default());
        }
    }

    fn touch_song(&mut self, id: &str) {
        self.recording();
        if self
            .touched
            .as_ref()
            .is_some_and(|t| !t.songs.contains_key(id))
        {
            let old = self
                .songs
                .map
                .get(id)
                .map(|(seq, v)| (*seq, v.as_ref().clone()));
            if let Some(t) = self.t() {
                t.songs.insert(id.to_string(), old);
            }
        }
    }
    fn touch_action(&mut self, id: &str) {
        self.recording();
        if self
            .touched
            .as_ref()
            .is_some_and(|t| !t.actions.contains_key(id))
        {
            let old = self
                .actions
                .map
                .get(id)
                .map(|(seq, v)| (*seq, v.as_ref().clone()));
            if let Some(t) = self.t() {
                t.actions.insert(id.to_string(), old);
            }
        }
    }
    fn touch_bindings(&mut self, sid: &str) {
        self.recording();
        if self
            .touched
            .as_ref()
            .is_some_and(|t| !t.bindings.contains_key(sid))
        {
            let old = self
                .bindings
                .map
                .get(sid)
                .map(|(seq, v)| (*seq, v.as_ref().clone()));
            if let Some(t) = self.t() {
                t.bindings.insert(sid.to_string(), old);
            }
        }
    }
    fn set_md5(&mut self, song: bool, md5: &str, holder: Option<String>) {
        let map = if song {
            &mut self.md5.songs
        } else {
            &mut self.md5.actions
        };
        let old = match &holder {
            Some(h) => map.insert(md5.to_string(), h.clone()),
            None => map.remove(md5),
        };
        if old == holder {
            return;
        }
        if let Some(t) = self.touched.as_deref_mut() {
            t.md5.entry((song, md5.to_string())).or_insert(old);
        }
    }

    /// The recorded change, ended (`None` when nothing was recorded).
    pub fn finish(&mut self) -> Changes {
        let Some(t) = self.touched.take() else {
            return Changes::default();
        };
        let t = *t;
        let mut c = Changes {
            md5_rebuilt: t.md5_before.is_some(),
            ..Changes::default()
        };
        for (id, old) in t.songs {
            let new = self.songs.map.get(&id);
            if old.as_ref().map(|(_, v)| v) != new.map(|(_, v)| v.as_ref()) {
                c.songs.push(Changed {
                    new: new.map(|(s, _)| *s),
                    id,
                    old,
                });
            }
        }
        for (id, old) in t.actions {
            let new = self.actions.map.get(&id);
            if old.as_ref().map(|(_, v)| v) != new.map(|(_, v)| v.as_ref()) {
                c.actions.push(Changed {
                    new: new.map(|(s, _)| *s),
                    id,
                    old,
                });
            }
        }
        for (id, old) in t.bindings {
            let new = self.bindings.map.get(&id);
            if old.as_ref().map(|(_, v)| v) != new.map(|(_, v)| v.as_ref()) {
                c.bindings.push(Changed {
                    new: new.map(|(s, _)| *s),
                    id,
                    old,
                });
            }
        }
        for ((song, md5), old) in t.md5 {
            c.md5.push((song, md5, old));
        }
        // In the order of the library (new entries in the order they were added).
        let key = |new: Option<u64>, old: Option<u64>| (new.unwrap_or(u64::MAX), old);
        c.songs
            .sort_by_key(|x| key(x.new, x.old.as_ref().map(|o| o.0)));
        c.actions
            .sort_by_key(|x| key(x.new, x.old.as_ref().map(|o| o.0)));
        c.bindings
            .sort_by_key(|x| key(x.new, x.old.as_ref().map(|o| o.0)));
        self.update_reverse(&c);
        c
    }

    /// Undo everything recorded since [`Library::begin`].
    pub fn rollback(&mut self) {
        let Some(t) = self.touched.take() else {
            return;
        };
        let t = *t;
        for (id, old) in t.songs {
            match old {
                Some((seq, v)) => self.songs.put_at(id, seq, v),
                None => {
                    self.songs.take(&id);
                }
            }
        }
        for (id, old) in t.actions {
            match old {
                Some((seq, v)) => self.actions.put_at(id, seq, v),
                None => {
                    self.actions.take(&id);
                }
            }
        }
        for (id, old) in t.bindings {
            match old {
                Some((seq, v)) => self.bindings.put_at(id, seq, v),
                None => {
                    self.bindings.take(&id);
                }
            }
        }
        if t.md5_before.is_some() {
            // The index was rebuilt during the change: rebuild it again.
            self.reindex();
        } else {
            for ((song, md5), old) in t.md5 {
                let map = if song {
                    &mut self.md5.songs
                } else {
                    &mut self.md5.actions
                };
                match old {
                    Some(h) => {
                        map.insert(md5, h);
                    }
                    None => {
                        map.remove(&md5);
                    }
                }
            }
        }
    }

    // -------------------------------------------------------------- changes

    /// A song to change in place.
    pub fn song_mut(&mut self, id: &str) -> Option<&mut Song> {
        if !self.songs.contains_key(id) {
            return None;
        }
        self.touch_song(id);
        self.songs.get_mut(id)
    }

    /// An action to change in place (not its MD5).
    pub fn action_mut(&mut self, id: &str) -> Option<&mut Action> {
        if !self.actions.contains_key(id) {
            return None;
        }
        self.touch_action(id);
        self.actions.get_mut(id)
    }

    /// Add a new user song (last in order) and index its MD5.
    pub fn insert_song(&mut self, song: Song) {
        let id = song.id.clone();
        let md5 = song.audio_md5.clone();
        self.touch_song(&id);
        let old = self.songs.get(&id).map(|r| r.audio_md5.clone());
        self.songs.put(id.clone(), song);
        if let Some(old) = old.filter(|o| *o != md5 && !o.is_empty()) {
            self.unindex(true, &id, &old);
        }
        if md5.is_empty() {
            return;
        }
        if self.md5.songs.get(&md5).is_some_and(|h| *h != id) {
            // Another record claims this MD5: let the full rule decide.
            self.dup_md5.insert((true, md5));
            self.reindex();
        } else {
            self.set_md5(true, &md5, Some(id));
        }
    }

    /// Add a new user action (last in order) and index its MD5.
    pub fn insert_action(&mut self, action: Action) {
        let id = action.id.clone();
        let md5 = action.file_md5.clone();
        self.touch_action(&id);
        let old = self.actions.get(&id).map(|r| r.file_md5.clone());
        self.actions.put(id.clone(), action);
        if let Some(old) = old.filter(|o| *o != md5 && !o.is_empty()) {
            self.unindex(false, &id, &old);
        }
        if md5.is_empty() {
            return;
        }
        if self.md5.actions.get(&md5).is_some_and(|h| *h != id) {
            // Another record claims this MD5: let the full rule decide.
            self.dup_md5.insert((false, md5));
            self.reindex();
        } else {
            self.set_md5(false, &md5, Some(id));
        }
    }

    /// Remove a song's bindings, its record and its index entry.
    pub fn remove_song(&mut self, id: &str) -> Option<Song> {
        let s = self.songs.get(id)?.clone();
        self.touch_song(id);
        self.songs.take(id);
        if self.bindings.contains_key(id) {
            self.touch_bindings(id);
            self.bindings.take(id);
        }
        self.unindex(true, id, &s.audio_md5);
        Some(s)
    }

    /// Remove an action, every binding to it and every default-action reference.
    pub fn remove_action(&mut self, id: &str) -> Option<Action> {
        let a = self.actions.get(id)?.clone();
        let (bound, defaults) = self.songs_referencing(id);
        self.touch_action(id);
        self.actions.take(id);
        for sid in bound {
            self.touch_bindings(&sid);
            let empty = match self.bindings.get_mut(&sid) {
                Some(m) => {
                    m.shift_remove(id);
                    m.is_empty()
                }
                None => false,
            };
            if empty {
                self.bindings.take(&sid);
            }
        }
        for sid in defaults {
            if let Some(s) = self.song_mut(&sid) {
                s.default_action.clear();
            }
        }
        self.unindex(false, id, &a.file_md5);
        Some(a)
    }

    /// Drop the index entry of a removed record (a rebuild when others claim it).
    fn unindex(&mut self, song: bool, id: &str, md5: &str) {
        let builtin = if song {
            self.builtin_songs.contains(id)
        } else {
            self.builtin_actions.contains(id)
        };
        let bundle_target = if song {
            self.bundle_md5.songs.values().any(|v| v == id) && !self.bundle_md5.songs.is_empty()
        } else {
            self.bundle_md5.actions.values().any(|v| v == id) && !self.bundle_md5.actions.is_empty()
        };
        if builtin || bundle_target || self.dup_md5.contains(&(song, md5.to_string())) {
            self.reindex();
            return;
        }
        let holds = if song {
            self.md5.songs.get(md5).is_some_and(|h| h == id)
        } else {
            self.md5.actions.get(md5).is_some_and(|h| h == id)
        };
        if holds {
            self.set_md5(song, md5, None);
        }
    }

    /// Add or update one binding without the default-action rule (import).
    pub fn put_binding(&mut self, song_id: &str, action_id: &str, offset: i64) {
        self.touch_bindings(song_id);
        match self.bindings.get_mut(song_id) {
            Some(m) => {
                m.insert(action_id.to_string(), Binding { offset });
            }
            None => {
                let mut m = IndexMap::new();
                m.insert(action_id.to_string(), Binding { offset });
                self.bindings.put(song_id.to_string(), m);
            }
        }
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
        self.put_binding(song_id, action_id, offset);
        let song = self.song_mut(song_id)?;
        if current_type.as_deref() != Some(new_type.as_str()) {
            song.default_action = action_id.to_string();
        }
        Some(song.default_action.clone())
    }

    /// Remove one binding; `None` when it does not exist. Returns the song's
    /// default action afterwards.
    pub fn unbind(&mut self, song_id: &str, action_id: &str) -> Option<String> {
        if !self.is_bound(song_id, action_id) {
            return None;
        }
        self.touch_bindings(song_id);
        let empty = match self.bindings.get_mut(song_id) {
            Some(m) => {
                m.shift_remove(action_id);
                m.is_empty()
            }
            None => false,
        };
        if empty {
            self.bindings.take(song_id);
        }
        let song = self.song_mut(song_id)?;
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

    // -------------------------------------------------------------- journal replay

    /// Replay one journal record (raw: no cascades, those are records of their own).
    pub fn replay(&mut self, op: &JournalOp) {
        match op {
            JournalOp::Song { id, change } => match change {
                OpChange::Put(v) => {
                    if let Ok(mut s) = serde_json::from_value::<Song>(Value::Object(v.clone())) {
                        s.id = id.clone();
                        self.songs.put(id.clone(), s);
                    }
                }
                OpChange::Set(fields) => {
                    if let Some(s) = self.songs.get_mut(id) {
                        if let Some(n) = patched(&*s, fields) {
                            *s = n;
                        }
                    }
                }
                OpChange::Del => {
                    self.songs.take(id);
                }
            },
            JournalOp::Action { id, change } => match change {
                OpChange::Put(v) => {
                    if let Ok(mut a) = serde_json::from_value::<Action>(Value::Object(v.clone())) {
                        a.id = id.clone();
                        self.actions.put(id.clone(), a);
                    }
                }
                OpChange::Set(fields) => {
                    if let Some(a) = self.actions.get_mut(id) {
                        if let Some(n) = patched(&*a, fields) {
                            *a = n;
                        }
                    }
                }
                OpChange::Del => {
                    self.actions.take(id);
                }
            },
            JournalOp::Bindings { id, map } => match map {
                Some(m) => {
                    self.bindings.put(id.clone(), m.clone());
                }
                None => {
                    self.bindings.take(id);
                }
            },
        }
    }

    /// After a replay: drop bindings to unknown songs or actions and default
    /// actions that no longer exist (as [`Library::merge`] does).
    pub fn drop_dangling(&mut self) {
        let mut empty = Vec::new();
        let songs = &self.songs;
        let actions = &self.actions;
        let mut dangling_maps = Vec::new();
        for (sid, m) in self.bindings.iter() {
            if !songs.contains_key(sid) {
                empty.push(sid.clone());
            } else if m.keys().any(|a| !actions.contains_key(a)) {
                dangling_maps.push(sid.clone());
            }
        }
        for sid in dangling_maps {
            if let Some(m) = self.bindings.get_mut(&sid) {
                m.retain(|a, _| actions.contains_key(a));
                if m.is_empty() {
                    empty.push(sid);
                }
            }
        }
        for sid in empty {
            self.bindings.take(&sid);
        }
        let dangling: Vec<String> = self
            .songs
            .iter()
            .filter(|(_, s)| {
                !s.default_action.is_empty() && !actions.contains_key(&s.default_action)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in dangling {
            if let Some(s) = self.songs.get_mut(&id) {
                s.default_action.clear();
            }
        }
    }

    // -------------------------------------------------------------- persisted form

    /// The user document to persist (borrowing): user records, bindings that
    /// differ from the bundle, and changed settings of built-in resources.
    pub fn split_ref<'a>(&'a self, bundle: &'a BundleDoc, generation: u64) -> UserDocRef<'a> {
        let mut doc = UserDocRef {
            version: &self.version,
            songs: Vec::new(),
            actions: Vec::new(),
            bindings: Vec::new(),
            md5_songs: Vec::new(),
            md5_actions: Vec::new(),
            overrides: Overrides::default(),
            storage: StorageMark {
                format: STORAGE_FORMAT,
                generation,
            },
        };
        for (id, s) in self.songs.iter() {
            if !s.is_builtin {
                if !s.audio_md5.is_empty() {
                    doc.md5_songs.push((&s.audio_md5, id));
                }
                doc.songs.push((id, s));
            } else if let Some(orig) = bundle.songs.get(id) {
                let mut o = Map::new();
                for f in SONG_OVERRIDE_FIELDS {
                    let cur = song_field(s, f);
                    if cur != song_field(orig, f) {
                        o.insert((*f).to_string(), cur);
                    }
                }
                if !o.is_empty() {
                    doc.overrides.songs.insert(id.clone(), o);
                }
            }
        }
        for (id, a) in self.actions.iter() {
            if !a.is_builtin {
                if !a.file_md5.is_empty() {
                    doc.md5_actions.push((&a.file_md5, id));
                }
                doc.actions.push((id, a));
            } else if let Some(orig) = bundle.actions.get(id) {
                let mut o = Map::new();
                for f in ACTION_OVERRIDE_FIELDS {
                    let cur = action_field(a, f);
                    if cur != action_field(orig, f) {
                        o.insert((*f).to_string(), cur);
                    }
                }
                if !o.is_empty() {
                    doc.overrides.actions.insert(id.clone(), o);
                }
            }
        }
        let empty = &*EMPTY_BINDINGS;
        let mut song_ids: Vec<&String> = self.bindings.keys().collect();
        song_ids.extend(
            bundle
                .bindings
                .keys()
                .filter(|k| !self.bindings.contains_key(k)),
        );
        for sid in song_ids {
            let cur = self.bindings.get(sid).unwrap_or(empty);
            let base = bundle.bindings.get(sid).unwrap_or(empty);
            let user_song = self.songs.get(sid).is_some_and(|s| !s.is_builtin);
            // A differing map is stored (even empty, to hide the bundled one);
            // a user song's bindings are always stored.
            if cur != base || (user_song && !cur.is_empty()) {
                doc.bindings.push((sid, cur));
            }
        }
        doc
    }

    /// The user document as an owned value.
    pub fn split(&self, bundle: &BundleDoc) -> UserDoc {
        let v = serde_json::to_value(self.split_ref(bundle, 0)).unwrap_or(Value::Null);
        let mut doc: UserDoc = serde_json::from_value(v).unwrap_or_default();
        doc.storage = None;
        doc
    }

    pub fn summary(&self, revision: &str) -> Summary {
        Summary {
            config_revision: revision.to_string(),
            song_count: self.songs.len(),
            visible_song_count: self.songs.values().filter(|s| s.visible).count(),
            action_count: self.actions.len(),
        }
    }

    /// The full config object of GET /config (the reference for the cached body).
    pub fn to_json(&self, summary: &Summary) -> Value {
        let songs: Map<String, Value> = self
            .songs
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let actions: Map<String, Value> = self
            .actions
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let bindings: Map<String, Value> = self
            .bindings
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        json!({
            "version": self.version,
            "songs": songs,
            "actions": actions,
            "bindings": bindings,
            "md5Index": {"songs": self.md5.songs, "actions": self.md5.actions},
            "configRevision": summary.config_revision,
            "songCount": summary.song_count,
            "visibleSongCount": summary.visible_song_count,
            "actionCount": summary.action_count,
        })
    }
}

static EMPTY_BINDINGS: std::sync::LazyLock<BindingMap> = std::sync::LazyLock::new(IndexMap::new);

/// `v` with `fields` replaced (through its JSON form); `None` when that fails.
fn patched<T: Serialize + serde::de::DeserializeOwned>(
    v: &T,
    fields: &Map<String, Value>,
) -> Option<T> {
    let Ok(Value::Object(mut m)) = serde_json::to_value(v) else {
        return None;
    };
    for (k, x) in fields {
        m.insert(k.clone(), x.clone());
    }
    serde_json::from_value(Value::Object(m)).ok()
}

/// The JSON fields of `new` that differ from `old` (a field missing from
/// `new` cannot happen: records always serialise every known field).
pub fn changed_fields<T: Serialize>(old: &T, new: &T) -> Map<String, Value> {
    let (Ok(Value::Object(o)), Ok(Value::Object(n))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return Map::new();
    };
    n.into_iter().filter(|(k, v)| o.get(k) != Some(v)).collect()
}

/// The current storage format (`storage.format` in the base document).
pub const STORAGE_FORMAT: u32 = 2;

/// The persisted user document, borrowing from the library (compaction
/// writes it without copying the records).
pub struct UserDocRef<'a> {
    version: &'a str,
    songs: Vec<(&'a String, &'a Song)>,
    actions: Vec<(&'a String, &'a Action)>,
    bindings: Vec<(&'a String, &'a BindingMap)>,
    md5_songs: Vec<(&'a String, &'a String)>,
    md5_actions: Vec<(&'a String, &'a String)>,
    overrides: Overrides,
    storage: StorageMark,
}

struct Pairs<'b, K, V>(&'b [(K, V)]);

impl<K: Serialize, V: Serialize> Serialize for Pairs<'_, K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl Serialize for UserDocRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(7))?;
        m.serialize_entry("version", self.version)?;
        m.serialize_entry("songs", &Pairs(&self.songs))?;
        m.serialize_entry("actions", &Pairs(&self.actions))?;
        m.serialize_entry("bindings", &Pairs(&self.bindings))?;
        m.serialize_entry("md5Index", &Md5Ref(&self.md5_songs, &self.md5_actions))?;
        m.serialize_entry("builtinOverrides", &self.overrides)?;
        m.serialize_entry("storage", &self.storage)?;
        m.end()
    }
}

struct Md5Ref<'b, 'a>(
    &'b [(&'a String, &'a String)],
    &'b [(&'a String, &'a String)],
);

impl Serialize for Md5Ref<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("songs", &Pairs(self.0))?;
        m.serialize_entry("actions", &Pairs(self.1))?;
        m.end()
    }
}

// ------------------------------------------------------------------ journal records

/// How one record changed.
#[derive(Clone, Debug, PartialEq)]
pub enum OpChange {
    /// The whole record (new).
    Put(Map<String, Value>),
    /// Only these fields (an edit; a hand edit of other fields survives replay).
    Set(Map<String, Value>),
    Del,
}

/// One record of a journal line, serialised as
/// `{"s"|"a": id, "put"|"set": {...}}`, `{"s"|"a": id, "del": true}` or
/// `{"b": song id, "map": {...} | null}`.
#[derive(Clone, Debug, PartialEq)]
pub enum JournalOp {
    Song { id: String, change: OpChange },
    Action { id: String, change: OpChange },
    Bindings { id: String, map: Option<BindingMap> },
}

impl JournalOp {
    pub fn to_json(&self) -> Value {
        let rec = |kind: &str, id: &str, c: &OpChange| match c {
            OpChange::Put(m) => json!({kind: id, "put": m}),
            OpChange::Set(m) => json!({kind: id, "set": m}),
            OpChange::Del => json!({kind: id, "del": true}),
        };
        match self {
            JournalOp::Song { id, change } => rec("s", id, change),
            JournalOp::Action { id, change } => rec("a", id, change),
            JournalOp::Bindings { id, map } => json!({"b": id, "map": map}),
        }
    }

    pub fn from_json(v: &Value) -> Option<JournalOp> {
        let o = v.as_object()?;
        let change = || -> Option<OpChange> {
            if let Some(m) = o.get("put").and_then(Value::as_object) {
                Some(OpChange::Put(m.clone()))
            } else if let Some(m) = o.get("set").and_then(Value::as_object) {
                Some(OpChange::Set(m.clone()))
            } else if o.get("del").is_some() {
                Some(OpChange::Del)
            } else {
                None
            }
        };
        if let Some(id) = o.get("s").and_then(Value::as_str) {
            return Some(JournalOp::Song {
                id: id.to_string(),
                change: change()?,
            });
        }
        if let Some(id) = o.get("a").and_then(Value::as_str) {
            return Some(JournalOp::Action {
                id: id.to_string(),
                change: change()?,
            });
        }
        let id = o.get("b").and_then(Value::as_str)?.to_string();
        let map = match o.get("map") {
            None | Some(Value::Null) => None,
            Some(m) => Some(serde_json::from_value::<BindingMap>(m.clone()).ok()?),
        };
        Some(JournalOp::Bindings { id, map })
    }
}

impl Changes {
    /// The journal records of this change.
    pub fn ops(&self, lib: &Library) -> Vec<JournalOp> {
        let mut ops = Vec::new();
        let to_map = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        for c in &self.songs {
            let change = match (&c.old, lib.songs.get(&c.id)) {
                (_, None) => OpChange::Del,
                (None, Some(n)) => OpChange::Put(to_map(json!(n))),
                (Some((seq, o)), Some(n)) if Some(*seq) == c.new => {
                    OpChange::Set(changed_fields(o, n))
                }
                (Some(_), Some(n)) => {
                    // Removed and added again: it moved to the end.
                    ops.push(JournalOp::Song {
                        id: c.id.clone(),
                        change: OpChange::Del,
                    });
                    OpChange::Put(to_map(json!(n)))
                }
            };
            ops.push(JournalOp::Song {
                id: c.id.clone(),
                change,
            });
        }
        for c in &self.actions {
            let change = match (&c.old, lib.actions.get(&c.id)) {
                (_, None) => OpChange::Del,
                (None, Some(n)) => OpChange::Put(to_map(json!(n))),
                (Some((seq, o)), Some(n)) if Some(*seq) == c.new => {
                    OpChange::Set(changed_fields(o, n))
                }
                (Some(_), Some(n)) => {
                    // Removed and added again: it moved to the end.
                    ops.push(JournalOp::Action {
                        id: c.id.clone(),
                        change: OpChange::Del,
                    });
                    OpChange::Put(to_map(json!(n)))
                }
            };
            ops.push(JournalOp::Action {
                id: c.id.clone(),
                change,
            });
        }
        for c in &self.bindings {
            if c.old.as_ref().is_some_and(|(seq, _)| Some(*seq) != c.new) {
                ops.push(JournalOp::Bindings {
                    id: c.id.clone(),
                    map: None,
                });
            }
            ops.push(JournalOp::Bindings {
                id: c.id.clone(),
                map: lib.bindings.get(&c.id).cloned(),
            });
        }
        ops
    }
}

// ------------------------------------------------------------------ revision

/// The revision digest: per kind, the wrapping sum (4 × u64 lanes) of the
/// SHA-256 of each entry's canonical JSON. Order-independent and updated per
/// change in O(size of the change); the revision hashes the version and the
/// three sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digest3 {
    pub songs: [u64; 4],
    pub actions: [u64; 4],
    pub bindings: [u64; 4],
}

/// Feeds serialised JSON straight into the hasher (no intermediate value).
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.update(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// SHA-256 of `kind`, the key(s) and the compact JSON of a record (its fields in
/// their fixed order), as four u64 lanes.
fn entry_hash<T: Serialize + ?Sized>(kind: u8, keys: &[&str], v: &T) -> [u64; 4] {
    let mut h = Sha256::new();
    h.update([kind]);
    for k in keys {
        let _ = serde_json::to_writer(HashWriter(&mut h), k);
        h.update(b":");
    }
    let _ = serde_json::to_writer(HashWriter(&mut h), v);
    let out = h.finalize();
    let mut lanes = [0u64; 4];
    for (i, l) in lanes.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&out[i * 8..i * 8 + 8]);
        *l = u64::from_le_bytes(b);
    }
    lanes
}

/// The bindings of one song as one entry per (song, action) pair, so the
/// order inside a song's map does not matter.
fn bindings_hash(sid: &str, m: &BindingMap) -> [u64; 4] {
    let mut sum = [0u64; 4];
    for (aid, b) in m {
        add(&mut sum, entry_hash(b'b', &[sid, aid], &b.offset));
    }
    sum
}

fn add(sum: &mut [u64; 4], x: [u64; 4]) {
    for i in 0..4 {
        sum[i] = sum[i].wrapping_add(x[i]);
    }
}

fn sub(sum: &mut [u64; 4], x: [u64; 4]) {
    for i in 0..4 {
        sum[i] = sum[i].wrapping_sub(x[i]);
    }
}

impl Digest3 {
    /// From scratch, over the whole library.
    pub fn full(lib: &Library) -> Digest3 {
        let mut d = Digest3::default();
        for (id, s) in lib.songs.iter() {
            add(&mut d.songs, entry_hash(b's', &[id], s));
        }
        for (id, a) in lib.actions.iter() {
            add(&mut d.actions, entry_hash(b'a', &[id], a));
        }
        for (id, m) in lib.bindings.iter() {
            add(&mut d.bindings, bindings_hash(id, m));
        }
        d
    }

    /// Apply one change (old values out, new values in).
    pub fn update(&mut self, lib: &Library, c: &Changes) {
        for ch in &c.songs {
            if let Some((_, o)) = &ch.old {
                sub(&mut self.songs, entry_hash(b's', &[&ch.id], o));
            }
            if let Some(n) = lib.songs.get(&ch.id) {
                add(&mut self.songs, entry_hash(b's', &[&ch.id], n));
            }
        }
        for ch in &c.actions {
            if let Some((_, o)) = &ch.old {
                sub(&mut self.actions, entry_hash(b'a', &[&ch.id], o));
            }
            if let Some(n) = lib.actions.get(&ch.id) {
                add(&mut self.actions, entry_hash(b'a', &[&ch.id], n));
            }
        }
        for ch in &c.bindings {
            if let Some((_, o)) = &ch.old {
                sub(&mut self.bindings, bindings_hash(&ch.id, o));
            }
            if let Some(n) = lib.bindings.get(&ch.id) {
                add(&mut self.bindings, bindings_hash(&ch.id, n));
            }
        }
    }

    /// `configRevision`: 16 hex characters of SHA-256 over the version and the sums.
    pub fn revision(&self, version: &str) -> String {
        let mut h = Sha256::new();
        h.update(b"jukebox-revision-3\0");
        h.update(Value::String(version.to_string()).to_string().as_bytes());
        for lanes in [self.songs, self.actions, self.bindings] {
            for l in lanes {
                h.update(l.to_le_bytes());
            }
        }
        hex::encode(h.finalize())[..16].to_string()
    }
}

impl Library {
    /// The revision computed from scratch.
    pub fn revision(&self) -> String {
        Digest3::full(self).revision(&self.version)
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
        assert!(lib.songs.get("b1").unwrap().is_builtin);
        assert_eq!(lib.md5.songs["m-b1"], "b1");
        let untouched = lib.split(&b);
        assert!(untouched.songs.is_empty() && untouched.bindings.is_empty());
        assert!(untouched.builtin_overrides.songs.is_empty());

        lib.insert_song(song("u1", "m-u1", false));
        lib.insert_action(action("ua", "m-ua", "bvh"));
        lib.song_mut("b1").unwrap().visible = false;
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
        assert_eq!(again, lib);
        assert_eq!(again.revision(), lib.revision());
    }

    #[test]
    fn user_song_shadowing_a_bundled_id_keeps_its_own_empty_bindings() {
        let b = bundle();
        let mut lib = Library::merge(&b, &UserDoc::default());
        lib.insert_song(song("b1", "m-user", false));
        lib.unbind("b1", "ba");
        let doc = lib.split(&b);
        assert!(doc.bindings["b1"].is_empty());
        let again = Library::merge(&b, &doc);
        assert!(!again.bindings.contains_key("b1"));
        assert!(!again.songs.get("b1").unwrap().is_builtin);
    }

    #[test]
    fn default_action_rule() {
        let mut lib = Library::merge(&bundle(), &UserDoc::default());
        lib.insert_action(action("v2", "m2", "vmd"));
        lib.insert_action(action("b3", "m3", "bvh"));
        lib.song_mut("b1").unwrap().default_action.clear();
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
        let mut lib = Library::merge(&b, &UserDoc::default());
        lib.insert_song(song("u1", "m-u1", false));
        lib.insert_song(song("u2", "m-u2", false));
        // The same content inserted in the other order.
        let mut other = Library::merge(&b, &UserDoc::default());
        other.insert_song(song("u2", "m-u2", false));
        other.insert_song(song("u1", "m-u1", false));
        assert_eq!(lib.revision(), other.revision());
        assert_eq!(lib.revision().len(), 16);
        // Bindings of one song made in another order.
        lib.insert_action(action("v2", "m2", "vmd"));
        other.insert_action(action("v2", "m2", "vmd"));
        lib.bind("u1", "ba", 1);
        lib.bind("u1", "v2", 2);
        other.bind("u1", "v2", 2);
        other.bind("u1", "ba", 1);
        other.song_mut("u1").unwrap().default_action = "ba".into();
        assert_eq!(lib.revision(), other.revision());
        other.song_mut("b1").unwrap().name = "x".into();
        assert_ne!(lib.revision(), other.revision());
    }

    /// A small deterministic generator for the property tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    /// One random change through the tracked methods (as the routes make them).
    fn random_change(lib: &mut Library, r: &mut Rng, n: u64) {
        let sid = format!("s{}", r.next(12));
        let aid = format!("a{}", r.next(6));
        match r.next(9) {
            0 => lib.insert_song(song(&sid, &format!("m-{}", r.next(14)), false)),
            1 => {
                let fmt = if r.next(2) == 0 { "vmd" } else { "bvh" };
                lib.insert_action(action(&aid, &format!("am-{}", r.next(8)), fmt));
            }
            2 => {
                lib.remove_song(&sid);
            }
            3 => {
                lib.remove_action(&aid);
            }
            4 => {
                lib.bind(&sid, &aid, n as i64);
            }
            5 => {
                lib.unbind(&sid, &aid);
            }
            6 => {
                if let Some(s) = lib.song_mut(&sid) {
                    s.name = format!("renamed {n}");
                    s.visible = n.is_multiple_of(2);
                }
            }
            7 => {
                if let Some(a) = lib.action_mut("ba") {
                    a.visible = n.is_multiple_of(3);
                }
            }
            _ => {
                if let Some(s) = lib.song_mut("b1") {
                    s.visible = n.is_multiple_of(2);
                    s.default_action = String::new();
                }
            }
        }
    }

    #[test]
    fn incremental_revision_index_and_journal_equal_a_full_recomputation() {
        let b = bundle();
        let mut r = Rng(0x2545_F491_4F6C_DD1D);
        let mut lib = Library::merge(&b, &UserDoc::default());
        let mut digest = Digest3::full(&lib);
        // What a restart would see: the base, with every journal line replayed.
        let base = lib.clone();
        let mut replayed = base.clone();
        for n in 0..3000u64 {
            let before = lib.clone();
            lib.begin();
            let k = 1 + r.next(3);
            for _ in 0..k {
                random_change(&mut lib, &mut r, n);
            }
            if n % 7 == 0 {
                // A failed change is undone completely.
                lib.rollback();
                assert_eq!(lib, before, "rollback at step {n}");
                assert_eq!(lib.md5, lib.full_md5_index());
                let _ = lib.finish();
                continue;
            }
            let changes = lib.finish();
            digest.update(&lib, &changes);
            assert_eq!(digest, Digest3::full(&lib), "digest at step {n}");
            assert_eq!(digest.revision(&lib.version), lib.revision());
            assert_eq!(lib.md5, lib.full_md5_index(), "md5 index at step {n}");
            assert!(lib.reverse_is_exact(), "reverse indexes at step {n}");
            // The journal line, written and read back, replays to the same state.
            let line: Vec<Value> = changes.ops(&lib).iter().map(JournalOp::to_json).collect();
            let line: Value = serde_json::from_str(&serde_json::to_string(&line).unwrap()).unwrap();
            for op in line.as_array().unwrap() {
                replayed.replay(&JournalOp::from_json(op).unwrap());
            }
            replayed.drop_dangling();
            replayed.reindex();
            assert_eq!(replayed, lib, "replay at step {n}");
        }
        // And the persisted document merges back to the same library.
        let again = Library::merge(&b, &lib.split(&b));
        assert_eq!(again.revision(), lib.revision());
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

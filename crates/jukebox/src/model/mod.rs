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

mod documents;
mod journal;
mod ordered;
mod records;
mod revision;
mod tracking;

pub use documents::*;
pub use journal::*;
pub use ordered::*;
pub use records::*;
pub use revision::*;
use tracking::Touched;
pub use tracking::*;

/// The bindings of one song: action id -> binding.
pub type BindingMap = IndexMap<String, Binding>;

/// The live MD5 indexes (`md5 -> id`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Md5Live {
    pub songs: HashMap<String, String>,
    pub actions: HashMap<String, String>,
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
        let (id, md5) = (song.id.clone(), song.audio_md5.clone());
        self.touch_song(&id);
        let old = self.songs.get(&id).map(|r| r.audio_md5.clone());
        self.songs.put(id.clone(), song);
        self.index_inserted(true, id, md5, old);
    }

    /// Add a new user action (last in order) and index its MD5.
    pub fn insert_action(&mut self, action: Action) {
        let (id, md5) = (action.id.clone(), action.file_md5.clone());
        self.touch_action(&id);
        let old = self.actions.get(&id).map(|r| r.file_md5.clone());
        self.actions.put(id.clone(), action);
        self.index_inserted(false, id, md5, old);
    }

    /// Index the MD5 of a record just inserted (`old`: the MD5 of the record
    /// it replaced).
    fn index_inserted(&mut self, song: bool, id: String, md5: String, old: Option<String>) {
        if let Some(old) = old.filter(|o| *o != md5 && !o.is_empty()) {
            self.unindex(song, &id, &old);
        }
        if md5.is_empty() {
            return;
        }
        let holders = if song {
            &self.md5.songs
        } else {
            &self.md5.actions
        };
        if holders.get(&md5).is_some_and(|h| *h != id) {
            // Another record claims this MD5: let the full rule decide.
            self.dup_md5.insert((song, md5));
            self.reindex();
        } else {
            self.set_md5(song, &md5, Some(id));
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
}

#[cfg(test)]
mod tests;

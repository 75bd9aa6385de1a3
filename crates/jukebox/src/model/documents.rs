//! The stored documents: the bundled library file, the persisted user document
//! (only user records and changed settings of built-in ones) and how the
//! library is split back into it.

use super::*;

/// The bundled library file (`<bundle>/jukebox/config.json`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BundleDoc {
    pub version: Option<Value>,
    pub songs: IndexMap<String, Song>,
    pub actions: IndexMap<String, Action>,
    pub bindings: Bindings,
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
#[serde(default)]
pub struct Overrides {
    pub songs: IndexMap<String, Map<String, Value>>,
    pub actions: IndexMap<String, Map<String, Value>>,
}

/// The persisted user document (`<data>/jukebox/config.json`): only user
/// resources and override settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UserDoc {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub songs: IndexMap<String, Song>,
    pub actions: IndexMap<String, Action>,
    /// Per song: the complete binding map that replaces the bundled one
    /// (an empty map removes the bundled bindings of that song).
    pub bindings: Bindings,
    /// Written by the original application for built-in pairs; read for compatibility.
    #[serde(skip_serializing)]
    pub builtin_bindings: Bindings,
    pub md5_index: Md5Index,
    pub builtin_overrides: Overrides,
    /// Storage generation (absent in files of the first format; see `storage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageMark>,
}

/// The marker of the journaled storage format in the base document.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageMark {
    pub format: u32,
    pub generation: u64,
}

/// How one kind of record goes into the user document.
struct SplitKind<V: 'static> {
    builtin: fn(&V) -> bool,
    md5: fn(&V) -> &String,
    /// The settings a user may change on a built-in record.
    fields: &'static [&'static str],
    field: fn(&V, &str) -> Value,
}

const SONG_SPLIT: SplitKind<Song> = SplitKind {
    builtin: |s| s.is_builtin,
    md5: |s| &s.audio_md5,
    fields: SONG_OVERRIDE_FIELDS,
    field: song_field,
};

const ACTION_SPLIT: SplitKind<Action> = SplitKind {
    builtin: |a| a.is_builtin,
    md5: |a| &a.file_md5,
    fields: ACTION_OVERRIDE_FIELDS,
    field: action_field,
};

/// One kind's part of the user document: user records whole (with their MD5
/// entries), built-in ones as the settings that differ from the bundle.
fn split_records<'a, V>(
    records: &'a Ordered<V>,
    bundled: &IndexMap<String, V>,
    kind: &SplitKind<V>,
    out: &mut Vec<(&'a String, &'a V)>,
    md5_out: &mut Vec<(&'a String, &'a String)>,
    overrides: &mut IndexMap<String, Map<String, Value>>,
) {
    for (id, r) in records.iter() {
        if !(kind.builtin)(r) {
            let md5 = (kind.md5)(r);
            if !md5.is_empty() {
                md5_out.push((md5, id));
            }
            out.push((id, r));
        } else if let Some(orig) = bundled.get(id) {
            let mut o = Map::new();
            for f in kind.fields {
                let cur = (kind.field)(r, f);
                if cur != (kind.field)(orig, f) {
                    o.insert((*f).to_string(), cur);
                }
            }
            if !o.is_empty() {
                overrides.insert(id.clone(), o);
            }
        }
    }
}

impl Library {
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
        split_records(
            &self.songs,
            &bundle.songs,
            &SONG_SPLIT,
            &mut doc.songs,
            &mut doc.md5_songs,
            &mut doc.overrides.songs,
        );
        split_records(
            &self.actions,
            &bundle.actions,
            &ACTION_SPLIT,
            &mut doc.actions,
            &mut doc.md5_actions,
            &mut doc.overrides.actions,
        );
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

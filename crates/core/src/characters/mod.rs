//! The characters registry (`<data>/config/characters.json`); the rules of a
//! character name are in [`names`] (re-exported here), the start-up index of
//! the file in `index`. The routes are in `http::characters`.
//!
//! File shape: `{"current": "<name>", "characters": {"<name>": {<profile>}, ...}}`
//! (insertion order kept). A corrupt file is moved aside to
//! `characters.json.corrupt-<millis>` and the defaults are used, with a pending
//! notice. The file is read beside the server's start-up ([`Characters::load`]).

use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::layout as docs;
use crate::notices::Notices;
use crate::store::{self, Store, StoreError};

mod index;
pub mod names;
mod profile;

use index::{read_indexed, IndexedDoc};
pub use names::*;
pub use profile::{default_system_prompt, Avatar, Profile};

/// The name of the character of a fresh data dir.
pub const DEFAULT_CHARACTER: &str = "Companion";

/// The image keys of a profile's `pngtuber` block (one image per state).
pub const PNGTUBER_IMAGE_KEYS: &[&str] = &[
    "idle_image",
    "talking_image",
    "drag_image",
    "click_image",
    "happy_image",
    "sad_image",
    "angry_image",
    "surprised_image",
];

/// File extensions accepted as avatar images (lower case).
pub const IMAGE_EXTS: &[&str] = &["png", "gif", "jpg", "jpeg", "webp"];

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
///
/// Start-up reads nothing: an existing file is read on a background thread
/// started by [`Characters::load`], first into an index (the names, the current
/// character, each profile kept as its JSON text), then into full profiles. A
/// call that needs the document before the index is there waits for it; a
/// profile asked for before the full parse is parsed alone. Cheap to clone (one
/// registry, shared).
#[derive(Clone)]
pub struct Characters {
    store: Store,
    doc: Arc<OnceLock<RwLock<Doc>>>,
    write_lock: Arc<tokio::sync::Mutex<()>>,
}

/// The registry's document: as indexed at start-up, or parsed.
enum Doc {
    Indexed(IndexedDoc),
    Parsed(CharactersDoc),
}

impl IndexedDoc {
    /// The document with every profile parsed.
    fn parsed(&self) -> CharactersDoc {
        CharactersDoc {
            current: self.current.clone(),
            characters: self.profiles(),
        }
    }
}

impl Doc {
    fn current(&self) -> &str {
        match self {
            Doc::Indexed(d) => &d.current,
            Doc::Parsed(d) => &d.current,
        }
    }
    fn contains(&self, name: &str) -> bool {
        match self {
            Doc::Indexed(d) => d.characters.contains_key(name),
            Doc::Parsed(d) => d.characters.contains_key(name),
        }
    }
    fn names(&self) -> Vec<String> {
        match self {
            Doc::Indexed(d) => d.characters.keys().cloned().collect(),
            Doc::Parsed(d) => d.characters.keys().cloned().collect(),
        }
    }
    fn profile(&self, name: &str) -> Option<Value> {
        match self {
            Doc::Indexed(d) => d.characters.get(name).map(|span| d.profile_at(span)),
            Doc::Parsed(d) => d.characters.get(name).cloned(),
        }
    }
    /// The current character made one that exists (the first), as a loaded file is.
    fn normalised(mut self) -> Doc {
        if !self.contains(self.current()) {
            let first = self.names().into_iter().next().unwrap_or_default();
            match &mut self {
                Doc::Indexed(d) => d.current = first,
                Doc::Parsed(d) => d.current = first,
            }
        }
        self
    }
}

impl Characters {
    /// Open the registry; a fresh data dir gets `Companion` (written before this
    /// returns, so an unwritable data dir is an error). An existing file is read
    /// in the background (see [`Characters`]); an unreadable one is then moved
    /// aside to `characters.json.corrupt-<millis>`, the defaults are used and a
    /// notice is queued.
    pub fn load(store: Store, notices: &Notices) -> Result<Characters, String> {
        let path = store.path(docs::CHARACTERS);
        let characters = Characters {
            store,
            doc: Arc::default(),
            write_lock: Arc::default(),
        };
        if !path.try_exists().unwrap_or(true) {
            let d = CharactersDoc::fresh();
            store::atomic_write_json(&path, &d)
                .map_err(|e| format!("data directory is not writable ({}): {e}", path.display()))?;
            characters.publish(Doc::Parsed(d));
            return Ok(characters);
        }
        let (loader, notices) = (characters.clone(), notices.clone());
        let spawned = std::thread::Builder::new()
            .name("characters-load".into())
            .spawn(move || loader.read_in_background(&path, &notices));
        if let Err(e) = spawned {
            return Err(format!("cannot start reading the characters file: {e}"));
        }
        Ok(characters)
    }

    /// The loader thread: index, publish, then parse every profile (unless a
    /// change already replaced the index).
    fn read_in_background(&self, path: &Path, notices: &Notices) {
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_indexed(path)));
        let Ok(read) = read else {
            // Never leave a caller waiting; the file is left as it is.
            tracing::error!("reading the characters file failed; using the defaults");
            return self.publish(Doc::Parsed(CharactersDoc::fresh()));
        };
        let indexed = match read {
            Ok(Some(d)) => Doc::Indexed(d).normalised(),
            Ok(None) => Doc::Parsed(CharactersDoc::fresh()),
            Err(e) => Doc::Parsed(recover_corrupt(path, &e, notices)),
        };
        let is_indexed = matches!(indexed, Doc::Indexed(_));
        self.publish(indexed);
        if is_indexed {
            // Nobody waits for this: leave the processor to start-up and requests.
            lower_thread_priority();
            self.parse_all();
        }
    }

    fn publish(&self, doc: Doc) {
        let _ = self.doc.set(RwLock::new(doc));
    }

    /// The document, once the loader published it.
    fn doc(&self) -> &RwLock<Doc> {
        self.doc.wait()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Doc> {
        self.doc().read().unwrap_or_else(|e| e.into_inner())
    }

    /// Replace an index by the parsed document (no-op once parsed).
    fn parse_all(&self) {
        let parsed = match &*self.read() {
            Doc::Indexed(d) => d.parsed(),
            Doc::Parsed(_) => return,
        };
        let mut doc = self.doc().write().unwrap_or_else(|e| e.into_inner());
        // A change made meanwhile parsed the document itself; keep that.
        if matches!(*doc, Doc::Indexed(_)) {
            *doc = Doc::Parsed(parsed);
        }
    }

    /// A snapshot of the file.
    pub fn snapshot(&self) -> CharactersDoc {
        self.parse_all();
        match &*self.read() {
            Doc::Parsed(d) => d.clone(),
            Doc::Indexed(d) => d.parsed(),
        }
    }
    pub fn names(&self) -> Vec<String> {
        // The keys only: no copy of every profile.
        self.read().names()
    }
    pub fn exists(&self, name: &str) -> bool {
        self.read().contains(name)
    }
    pub fn current(&self) -> String {
        self.read().current().to_string()
    }
    /// The profile of `name`.
    pub fn profile(&self, name: &str) -> Option<Profile> {
        self.read().profile(name).map(Profile::from)
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
        *self.doc().write().unwrap_or_else(|e| e.into_inner()) = Doc::Parsed(doc);
        Ok(r)
    }

    /// Re-read the file from disk (after an import replaced it).
    pub async fn reload(&self) -> Result<(), String> {
        let _g = self.write_lock.lock().await;
        let path = self.store.path(docs::CHARACTERS);
        match store::read_json::<CharactersDoc>(&path) {
            Ok(Some(d)) => {
                *self.doc().write().unwrap_or_else(|e| e.into_inner()) =
                    Doc::Parsed(d).normalised();
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

/// Give the calling thread the lowest scheduling priority (Linux: the nice
/// value is per thread); elsewhere nothing.
fn lower_thread_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only reads its integer arguments; `0` names the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
    }
}

/// Move an unreadable characters file aside, queue a notice, and start from
/// the defaults (written back; a failure to write is logged, the defaults are
/// still used).
fn recover_corrupt(path: &Path, e: &StoreError, notices: &Notices) -> CharactersDoc {
    let aside = path.with_file_name(format!("characters.json.corrupt-{}", crate::now_millis()));
    let _ = std::fs::rename(path, &aside);
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
    if let Err(e) = store::atomic_write_json(path, &d) {
        tracing::error!("cannot write {}: {e}", path.display());
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

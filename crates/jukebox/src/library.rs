//! The jukebox service: where the library lives, the cached merged view, and
//! every change to it (one lock, atomic writes, files removed only after the
//! config that stops referencing them is saved).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;
use companiond_core::paths::{clean_segments, safe_existing, safe_join, PathError};
use companiond_core::store::{atomic_write_json, read_json, Store, StoreError};
use serde_json::{json, Value};

use crate::error::JukeboxError;
use crate::model::{
    parse_bool, BundleDoc, Library, Summary, UserDoc, ACTION_EXTENSIONS, SONG_EXTENSIONS,
};

/// Size limits, parameters of the domain so tests can use small ones.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One song or action file (upload, import entry, pack-folder entry).
    pub file: u64,
    /// One import archive, and the total bytes an import may expand to.
    pub archive: u64,
    /// Entries an import archive may hold.
    pub archive_entries: usize,
    /// Largest `config.json` inside an import archive.
    pub archive_config: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            file: 1 << 30,
            archive: 10 << 30,
            archive_entries: 100_000,
            archive_config: 64 << 20,
        }
    }
}

/// Human-readable size for messages ("1.0 GB", "12 MB", "512 bytes").
pub fn human_size(n: u64) -> String {
    const GB: f64 = (1u64 << 30) as f64;
    const MB: f64 = (1u64 << 20) as f64;
    let f = n as f64;
    if f >= GB {
        format!("{:.1} GB", f / GB)
    } else if f >= MB {
        format!("{:.1} MB", f / MB)
    } else {
        format!("{n} bytes")
    }
}

/// Songs or actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Song,
    Action,
}

impl Kind {
    pub fn dir(self) -> &'static str {
        match self {
            Kind::Song => "songs",
            Kind::Action => "actions",
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            Kind::Song => "song",
            Kind::Action => "action",
        }
    }
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Kind::Song => SONG_EXTENSIONS,
            Kind::Action => ACTION_EXTENSIONS,
        }
    }
    pub fn ids_key(self) -> &'static str {
        match self {
            Kind::Song => "songIds",
            Kind::Action => "actionIds",
        }
    }
    pub fn id_key(self) -> &'static str {
        match self {
            Kind::Song => "songId",
            Kind::Action => "actionId",
        }
    }
}

/// File identity used to notice that a config file changed on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    ino: u64,
}

fn stamp_of(p: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(p).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some(FileStamp {
        modified: m.modified().ok(),
        len: m.len(),
        ino,
    })
}

/// One immutable view of the merged library, shared by readers.
pub struct Snapshot {
    user_stamp: Option<FileStamp>,
    bundle_stamp: Option<FileStamp>,
    pub lib: Library,
    pub bundle: Arc<BundleDoc>,
    pub summary: Summary,
    json: OnceLock<Bytes>,
}

impl Snapshot {
    fn new(
        user_stamp: Option<FileStamp>,
        bundle_stamp: Option<FileStamp>,
        lib: Library,
        bundle: Arc<BundleDoc>,
    ) -> Snapshot {
        let summary = lib.summary(&lib.revision());
        Snapshot {
            user_stamp,
            bundle_stamp,
            lib,
            bundle,
            summary,
            json: OnceLock::new(),
        }
    }

    /// The serialised GET /config body (built once per snapshot).
    pub fn config_json(&self) -> Bytes {
        self.json
            .get_or_init(|| {
                Bytes::from(
                    serde_json::to_vec(&self.lib.to_json(&self.summary)).unwrap_or_default(),
                )
            })
            .clone()
    }
}

/// Side effects of a change that depend on whether its config is saved.
#[derive(Default)]
pub struct Tx {
    /// Files created for the change: removed when the change is not saved.
    pub created: Vec<PathBuf>,
    /// Files to remove once the change is saved.
    pub remove_after: Vec<PathBuf>,
}

impl Tx {
    fn rollback(&mut self) {
        for p in self.created.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
    fn commit(&mut self) {
        for p in self.remove_after.drain(..) {
            if let Err(e) = std::fs::remove_file(&p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("jukebox: cannot remove {}: {e}", p.display());
                }
            }
        }
    }
}

/// The jukebox of one server.
pub struct Jukebox {
    root: PathBuf,
    bundle_root: PathBuf,
    store: Store,
    pub limits: Limits,
    cache: Mutex<Option<Arc<Snapshot>>>,
}

/// Path of the user document relative to the data dir (its store lock key).
pub const USER_CONFIG: &str = "jukebox/config.json";

impl Jukebox {
    pub fn new(data_dir: &Path, bundle_dir: &Path, store: Store, limits: Limits) -> Jukebox {
        let j = Jukebox {
            root: data_dir.join("jukebox"),
            bundle_root: bundle_dir.join("jukebox"),
            store,
            limits,
            cache: Mutex::new(None),
        };
        j.sweep_temp_files();
        j
    }

    /// The user library folder (`<data>/jukebox`).
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn bundle_root(&self) -> &Path {
        &self.bundle_root
    }
    pub fn dir(&self, kind: Kind) -> PathBuf {
        self.root.join(kind.dir())
    }
    /// Scratch space for archives (same file system as the library).
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join(".tmp")
    }
    fn user_config(&self) -> PathBuf {
        self.root.join("config.json")
    }
    fn bundle_config(&self) -> PathBuf {
        self.bundle_root.join("config.json")
    }

    /// Remove staging files a crash may have left behind.
    fn sweep_temp_files(&self) {
        for dir in [self.dir(Kind::Song), self.dir(Kind::Action), self.tmp_dir()] {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(".upload-")
                    || name.starts_with(".import-")
                    || name.starts_with(".export-")
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    fn cached(&self) -> Option<Arc<Snapshot>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_cache(&self, s: Arc<Snapshot>) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
    }

    /// The current snapshot: the cached one while neither config file changed.
    pub async fn snapshot(self: &Arc<Self>) -> Result<Arc<Snapshot>, JukeboxError> {
        if let Some(s) = self.cached() {
            if s.user_stamp == stamp_of(&self.user_config())
                && s.bundle_stamp == stamp_of(&self.bundle_config())
            {
                return Ok(s);
            }
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.snapshot_blocking())
            .await
            .map_err(|e| JukeboxError::io("background task failed", e))?
    }

    /// Like [`Jukebox::snapshot`] for blocking code.
    pub fn snapshot_blocking(&self) -> Result<Arc<Snapshot>, JukeboxError> {
        let user_stamp = stamp_of(&self.user_config());
        let bundle_stamp = stamp_of(&self.bundle_config());
        let prev = self.cached();
        if let Some(s) = &prev {
            if s.user_stamp == user_stamp && s.bundle_stamp == bundle_stamp {
                return Ok(s.clone());
            }
        }
        let bundle = match &prev {
            Some(s) if s.bundle_stamp == bundle_stamp => s.bundle.clone(),
            _ => Arc::new(self.load_bundle()),
        };
        let user: UserDoc = read_json(&self.user_config())
            .map_err(|e| match e {
                StoreError::Corrupt(m) => {
                    JukeboxError::Storage(format!("the jukebox library file is unreadable: {m}"))
                }
                other => JukeboxError::from(other),
            })?
            .unwrap_or_default();
        let mut lib = Library::merge(&bundle, &user);
        self.mark_missing(&mut lib);
        let snap = Arc::new(Snapshot::new(user_stamp, bundle_stamp, lib, bundle));
        self.set_cache(snap.clone());
        Ok(snap)
    }

    fn load_bundle(&self) -> BundleDoc {
        match read_json::<BundleDoc>(&self.bundle_config()) {
            Ok(Some(b)) => b.normalise(),
            Ok(None) => BundleDoc::default(),
            Err(e) => {
                tracing::warn!("jukebox: bundled library ignored: {e}");
                BundleDoc::default()
            }
        }
    }

    /// Set `missing` on every action whose file is in neither library folder.
    fn mark_missing(&self, lib: &mut Library) {
        for a in lib.actions.values_mut() {
            a.missing = self.locate(&a.file).is_none();
        }
    }

    /// Where a stored relative path (`songs/x.mp3`) is: the user folder first,
    /// then the bundled folder. `None` when in neither or when unsafe.
    pub fn locate(&self, rel: &str) -> Option<PathBuf> {
        if rel.is_empty() {
            return None;
        }
        [&self.root, &self.bundle_root]
            .into_iter()
            .filter_map(|root| safe_existing(root, rel).ok())
            .find(|p| p.is_file())
    }

    /// The user-folder path of a stored relative path (for deletion).
    pub fn user_path(&self, rel: &str) -> Option<PathBuf> {
        safe_join(&self.root, rel).ok()
    }

    /// Resolve a path of GET /file: `songs/...` or `actions/...`, user folder
    /// first, bundled folder as fallback.
    pub fn resolve_file(&self, rel: &str) -> Result<PathBuf, JukeboxError> {
        let rel = rel.strip_prefix("static/jukebox/").unwrap_or(rel);
        let segs =
            clean_segments(rel).map_err(|e| JukeboxError::bad(format!("invalid path: {e}")))?;
        if segs.len() < 2 || !(segs[0] == "songs" || segs[0] == "actions") {
            return Err(JukeboxError::not_found("file not found"));
        }
        for root in [&self.root, &self.bundle_root] {
            match safe_existing(root, rel) {
                Ok(p) if p.is_file() => return Ok(p),
                Ok(_) | Err(PathError::Io(_)) => continue,
                Err(e) => return Err(JukeboxError::bad(format!("invalid path: {e}"))),
            }
        }
        Err(JukeboxError::not_found("file not found"))
    }

    /// Apply `f` to a copy of the library under the library lock and save it
    /// atomically when it changed. `f` runs on a blocking thread.
    pub async fn mutate<R, F>(self: &Arc<Self>, f: F) -> Result<R, JukeboxError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Library, &BundleDoc, &mut Tx) -> Result<R, JukeboxError> + Send + 'static,
    {
        let lock = self.store.lock_for(USER_CONFIG);
        let _guard = lock.lock().await;
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.mutate_blocking(f))
            .await
            .map_err(|e| JukeboxError::io("background task failed", e))?
    }

    fn mutate_blocking<R, F>(&self, f: F) -> Result<R, JukeboxError>
    where
        F: FnOnce(&mut Library, &BundleDoc, &mut Tx) -> Result<R, JukeboxError>,
    {
        let snap = self.snapshot_blocking()?;
        let mut lib = snap.lib.clone();
        let mut tx = Tx::default();
        let r = match f(&mut lib, &snap.bundle, &mut tx) {
            Ok(r) => r,
            Err(e) => {
                tx.rollback();
                return Err(e);
            }
        };
        lib.reindex(Some(&snap.bundle.md5_index));
        if lib != snap.lib {
            let doc = lib.split(&snap.bundle);
            if let Err(e) = atomic_write_json(&self.user_config(), &doc) {
                tx.rollback();
                return Err(JukeboxError::io("cannot save the jukebox library", e));
            }
            let user_stamp = stamp_of(&self.user_config());
            self.set_cache(Arc::new(Snapshot::new(
                user_stamp,
                snap.bundle_stamp,
                lib,
                snap.bundle.clone(),
            )));
        }
        tx.commit();
        Ok(r)
    }

    // ------------------------------------------------------------ operations

    /// Delete one song: a user song loses its file, bindings and index entry;
    /// a built-in one is hidden.
    pub async fn delete(self: &Arc<Self>, kind: Kind, id: String) -> Result<Value, JukeboxError> {
        let this = self.clone();
        self.mutate(
            move |lib, _, tx| match this.delete_one(lib, kind, &id, tx)? {
                Deleted::Hidden => Ok(json!({
                    "success": true,
                    "message": format!("built-in {} hidden", kind.word()),
                    "hidden": true,
                })),
                Deleted::Removed => Ok(json!({"success": true, "hidden": false, "deleted": true})),
            },
        )
        .await
    }

    fn delete_one(
        &self,
        lib: &mut Library,
        kind: Kind,
        id: &str,
        tx: &mut Tx,
    ) -> Result<Deleted, JukeboxError> {
        match kind {
            Kind::Song => {
                let s = lib
                    .songs
                    .get_mut(id)
                    .ok_or_else(|| JukeboxError::not_found("song does not exist"))?;
                if s.is_builtin {
                    s.visible = false;
                    return Ok(Deleted::Hidden);
                }
                let s = lib
                    .remove_song(id)
                    .ok_or_else(|| JukeboxError::not_found("song does not exist"))?;
                tx.remove_after.extend(self.user_path(&s.audio));
                Ok(Deleted::Removed)
            }
            Kind::Action => {
                let a = lib
                    .actions
                    .get_mut(id)
                    .ok_or_else(|| JukeboxError::not_found("action does not exist"))?;
                if a.is_builtin {
                    a.visible = false;
                    return Ok(Deleted::Hidden);
                }
                let a = lib
                    .remove_action(id)
                    .ok_or_else(|| JukeboxError::not_found("action does not exist"))?;
                tx.remove_after.extend(self.user_path(&a.file));
                Ok(Deleted::Removed)
            }
        }
    }

    /// Batch delete: every id must exist (else 404 and nothing changes).
    pub async fn batch_delete(
        self: &Arc<Self>,
        kind: Kind,
        ids: Vec<String>,
    ) -> Result<Value, JukeboxError> {
        let mut unique: Vec<String> = Vec::new();
        for id in ids {
            if !id.is_empty() && !unique.contains(&id) {
                unique.push(id);
            }
        }
        if unique.is_empty() {
            return Err(JukeboxError::bad(format!("no {} selected", kind.word())));
        }
        let this = self.clone();
        self.mutate(move |lib, _, tx| {
            let missing: Vec<String> = unique
                .iter()
                .filter(|id| match kind {
                    Kind::Song => !lib.songs.contains_key(*id),
                    Kind::Action => !lib.actions.contains_key(*id),
                })
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(JukeboxError::NotFoundIds {
                    message: format!("{} does not exist", kind.word()),
                    key: kind.ids_key(),
                    ids: missing,
                });
            }
            let (mut deleted, mut hidden, mut failed) = (Vec::new(), Vec::new(), Vec::new());
            for id in &unique {
                let name = match kind {
                    Kind::Song => lib.songs.get(id).map(|s| s.name.clone()),
                    Kind::Action => lib.actions.get(id).map(|a| a.name.clone()),
                }
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| id.clone());
                match this.delete_one(lib, kind, id, tx) {
                    Ok(Deleted::Hidden) => hidden.push(json!({kind.id_key(): id, "name": name})),
                    Ok(Deleted::Removed) => deleted.push(json!({kind.id_key(): id, "name": name})),
                    Err(e) => {
                        failed.push(json!({kind.id_key(): id, "name": name, "error": e.message()}))
                    }
                }
            }
            let failed_count = failed.len();
            Ok(json!({
                "success": failed_count == 0,
                "partial": failed_count > 0 && (!deleted.is_empty() || !hidden.is_empty()),
                "requestedCount": unique.len(),
                "deletedCount": deleted.len(),
                "hiddenCount": hidden.len(),
                "failedCount": failed_count,
                "deleted": deleted,
                "hidden": hidden,
                "failed": failed,
            }))
        })
        .await
    }

    pub async fn set_visibility(
        self: &Arc<Self>,
        kind: Kind,
        id: String,
        visible: bool,
    ) -> Result<Value, JukeboxError> {
        self.mutate(move |lib, _, _| match kind {
            Kind::Song => {
                let s = lib
                    .songs
                    .get_mut(&id)
                    .ok_or_else(|| JukeboxError::not_found("song does not exist"))?;
                s.visible = visible;
                Ok(json!({"success": true, "visible": visible, "song": s}))
            }
            Kind::Action => {
                let a = lib
                    .actions
                    .get_mut(&id)
                    .ok_or_else(|| JukeboxError::not_found("action does not exist"))?;
                a.visible = visible;
                Ok(json!({"success": true, "visible": visible, "action": a}))
            }
        })
        .await
    }

    /// Change the given fields only (`None` = unchanged).
    pub async fn set_song_metadata(
        self: &Arc<Self>,
        id: String,
        name: Option<String>,
        artist: Option<String>,
    ) -> Result<Value, JukeboxError> {
        self.mutate(move |lib, _, _| {
            let s = lib
                .songs
                .get_mut(&id)
                .ok_or_else(|| JukeboxError::not_found("song does not exist"))?;
            if let Some(n) = name {
                s.name = n;
            }
            if let Some(a) = artist {
                s.artist = a;
            }
            Ok(json!({"success": true, "song": s}))
        })
        .await
    }

    pub async fn set_action_name(
        self: &Arc<Self>,
        id: String,
        name: String,
    ) -> Result<Value, JukeboxError> {
        self.mutate(move |lib, _, _| {
            let a = lib
                .actions
                .get_mut(&id)
                .ok_or_else(|| JukeboxError::not_found("action does not exist"))?;
            a.name = name;
            Ok(json!({"success": true, "action": a}))
        })
        .await
    }

    /// Set (must be bound) or clear (empty) a song's default action.
    pub async fn set_default_action(
        self: &Arc<Self>,
        song_id: String,
        action_id: String,
    ) -> Result<Value, JukeboxError> {
        self.mutate(move |lib, _, _| {
            if !lib.songs.contains_key(&song_id) {
                return Err(JukeboxError::not_found("song does not exist"));
            }
            if !action_id.is_empty() {
                if !lib.actions.contains_key(&action_id) {
                    return Err(JukeboxError::not_found("action does not exist"));
                }
                if !lib.is_bound(&song_id, &action_id) {
                    return Err(JukeboxError::bad("this action is not bound to this song"));
                }
            }
            if let Some(s) = lib.songs.get_mut(&song_id) {
                s.default_action = action_id.clone();
            }
            Ok(json!({"success": true, "defaultAction": action_id}))
        })
        .await
    }

    pub async fn bind(
        self: &Arc<Self>,
        song_id: String,
        action_id: String,
        offset: i64,
    ) -> Result<Value, JukeboxError> {
        self.mutate(move |lib, _, _| {
            check_pair(lib, &song_id, &action_id)?;
            let default = lib
                .bind(&song_id, &action_id, offset)
                .ok_or_else(|| JukeboxError::not_found("song does not exist"))?;
            Ok(json!({"success": true, "defaultAction": default, "offset": offset}))
        })
        .await
    }

    pub async fn unbind(
        self: &Arc<Self>,
        song_id: String,
        action_id: String,
    ) -> Result<Value, JukeboxError> {
        self.mutate(move |lib, _, _| {
            check_pair(lib, &song_id, &action_id)?;
            let default = lib
                .unbind(&song_id, &action_id)
                .ok_or_else(|| JukeboxError::not_found("binding does not exist"))?;
            Ok(json!({"success": true, "defaultAction": default}))
        })
        .await
    }
}

enum Deleted {
    Hidden,
    Removed,
}

fn check_pair(lib: &Library, song_id: &str, action_id: &str) -> Result<(), JukeboxError> {
    if !lib.songs.contains_key(song_id) {
        return Err(JukeboxError::not_found("song does not exist"));
    }
    if !lib.actions.contains_key(action_id) {
        return Err(JukeboxError::not_found("action does not exist"));
    }
    Ok(())
}

/// Parse a boolean option given as text (400 when it is not one).
pub fn bool_option(field: &str, raw: &str) -> Result<bool, JukeboxError> {
    parse_bool(raw).ok_or_else(|| JukeboxError::bad(format!("{field} must be a boolean")))
}

//! The jukebox service: the library held in memory, its storage (a base
//! document and a journal, see [`crate::storage`]), the cached answers, and
//! every change to it (one lock, one durable journal line per change, files
//! removed only after the change that stops referencing them is saved).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use companiond_core::paths::{clean_segments, safe_existing, safe_join, PathError};
use companiond_core::store::{read_json, Store};

use crate::error::JukeboxError;
use crate::model::{
    parse_bool, BundleDoc, Changes, Digest3, Library, Summary, UserDoc, ACTION_EXTENSIONS,
    SONG_EXTENSIONS,
};
use crate::storage::{
    backup_v1, read_journal, stamp_of, tail_summary, write_journal, Appender, FileStamp, Header,
    JournalError, Paths, SummaryRec, JOURNAL_VERSION,
};
use crate::view::{Body, View};

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

/// What was last seen (or written) on disk: a difference means a hand edit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stamps {
    base: Option<FileStamp>,
    journal: Option<FileStamp>,
    bundle: Option<FileStamp>,
}

/// The loaded library with everything derived from it.
struct Live {
    stamps: Stamps,
    bundle: Arc<BundleDoc>,
    lib: Library,
    digest: Digest3,
    summary: Summary,
    view: View,
    generation: u64,
    /// The journal being appended to (`None`: the next change compacts).
    journal: Option<Appender>,
    /// Bytes of the base document when it was written or read.
    base_len: u64,
}

/// The jukebox of one server.
pub struct Jukebox {
    root: PathBuf,
    bundle_root: PathBuf,
    paths: Paths,
    store: Store,
    pub limits: Limits,
    live: Arc<Mutex<Option<Live>>>,
    /// The summary while the library is not loaded (from the journal's tail,
    /// or kept when the library was unloaded), with the stamps it is valid for.
    quick: Arc<Mutex<Option<(Stamps, Summary)>>>,
    /// Milliseconds since `epoch` of the last use; the library is unloaded
    /// after `idle_ms` without one.
    epoch: Instant,
    last_use: Arc<AtomicU64>,
    idle_ms: Arc<AtomicU64>,
    janitor: Once,
}

/// Default time without any jukebox request after which the library (and its
/// cached answer) is dropped from memory; the next use reads it again.
pub const DEFAULT_IDLE_UNLOAD: Duration = Duration::from_secs(120);

/// Give freed memory back to the system (glibc keeps freed pages of every
/// thread's arena otherwise: the RSS would stay at its peak).
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Path of the user document relative to the data dir (its store lock key).
pub const USER_CONFIG: &str = "jukebox/config.json";

/// Compaction: the base is rewritten once the journal is larger than the base
/// (so a byte of the base is rewritten at most once per byte appended: O(1)
/// amortised bytes per change) and larger than this.
const COMPACT_SMALL: u64 = 16 * 1024;

impl Jukebox {
    pub fn new(data_dir: &Path, bundle_dir: &Path, store: Store, limits: Limits) -> Jukebox {
        let root = data_dir.join("jukebox");
        Jukebox {
            paths: Paths::new(&root),
            root,
            bundle_root: bundle_dir.join("jukebox"),
            store,
            limits,
            live: Arc::new(Mutex::new(None)),
            quick: Arc::new(Mutex::new(None)),
            epoch: Instant::now(),
            last_use: Arc::new(AtomicU64::new(0)),
            idle_ms: Arc::new(AtomicU64::new(DEFAULT_IDLE_UNLOAD.as_millis() as u64)),
            janitor: Once::new(),
        }
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
    fn bundle_config(&self) -> PathBuf {
        self.bundle_root.join("config.json")
    }

    /// Remove staging files a crash may have left behind (start-up work).
    pub fn sweep_temp_files(&self) {
        for dir in [
            self.dir(Kind::Song),
            self.dir(Kind::Action),
            self.tmp_dir(),
            self.root.clone(),
        ] {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(".upload-")
                    || name.starts_with(".import-")
                    || name.starts_with(".export-")
                    || name.starts_with(".config.json.compact-")
                    || (name.starts_with(".config.journal.") && name.ends_with(".tmp"))
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    fn stamps_now(&self) -> Stamps {
        Stamps {
            base: stamp_of(&self.paths.base),
            journal: stamp_of(&self.paths.journal),
            bundle: stamp_of(&self.bundle_config()),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Option<Live>> {
        self.touch();
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self) {
        self.last_use
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Unload the library after `idle` without a request (tests and benches
    /// use short times).
    pub fn set_idle_unload(&self, idle: Duration) {
        self.idle_ms
            .store(idle.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    /// Start the thread that unloads the library when it is idle (once, at
    /// the first load); it ends with the jukebox.
    fn start_janitor(&self) {
        self.janitor.call_once(|| {
            let live = Arc::downgrade(&self.live);
            let quick = Arc::downgrade(&self.quick);
            let (last, idle, epoch) = (self.last_use.clone(), self.idle_ms.clone(), self.epoch);
            let spawned = std::thread::Builder::new()
                .name("jukebox-idle".into())
                .spawn(move || loop {
                    let idle_ms = idle.load(Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis((idle_ms / 4).clamp(20, 1000)));
                    let (Some(live), Some(quick)) = (live.upgrade(), quick.upgrade()) else {
                        return;
                    };
                    let now = epoch.elapsed().as_millis() as u64;
                    if now.saturating_sub(last.load(Ordering::Relaxed)) < idle_ms {
                        continue;
                    }
                    // A change or a read in progress holds the lock: not idle.
                    let Ok(mut guard) = live.try_lock() else {
                        continue;
                    };
                    if let Some(l) = guard.take() {
                        *quick.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some((l.stamps, l.summary.clone()));
                        drop(l);
                        drop(guard);
                        trim_heap();
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!("jukebox: cannot start the idle thread: {e}");
            }
        });
    }

    /// The loaded library, (re)loaded when a file changed on disk.
    fn ensure<'a>(
        &self,
        guard: &'a mut std::sync::MutexGuard<'_, Option<Live>>,
    ) -> Result<&'a mut Live, JukeboxError> {
        let now = self.stamps_now();
        if guard.as_ref().is_none_or(|l| l.stamps != now) {
            **guard = None;
            let live = self.load(now);
            // The load's temporary copies (file bytes, parsed document) are gone.
            trim_heap();
            **guard = Some(live?);
            self.start_janitor();
        }
        guard
            .as_mut()
            .ok_or_else(|| JukeboxError::Storage("the jukebox library is not loaded".into()))
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

    /// Read the base and the journal, migrating a first-format base once.
    fn load(&self, mut stamps: Stamps) -> Result<Live, JukeboxError> {
        let bundle = Arc::new(self.load_bundle());
        let unreadable = |m: String| {
            JukeboxError::Storage(format!("the jukebox library file is unreadable: {m}"))
        };
        let bytes = match std::fs::read(&self.paths.base) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(JukeboxError::io("cannot read the jukebox library", e)),
        };
        let base_len = bytes.as_ref().map(|b| b.len() as u64).unwrap_or(0);
        let user: UserDoc = match &bytes {
            Some(b) => serde_json::from_slice(b).map_err(|e| unreadable(e.to_string()))?,
            None => UserDoc::default(),
        };
        drop(bytes);
        let generation = user.storage.map(|s| s.generation).unwrap_or(0);
        let first_format = stamps.base.is_some() && user.storage.is_none();
        let mut lib = Library::merge_raw(&bundle, user);
        let mut journal = None;
        if !first_format {
            match read_journal(&self.paths.journal, generation) {
                Ok(j) => {
                    for line in &j.lines {
                        for op in line {
                            lib.replay(op);
                        }
                    }
                    if !j.lines.is_empty() {
                        lib.drop_dangling();
                    }
                    journal = Some(
                        Appender::open(&self.paths.journal, j.valid_len)
                            .map_err(|e| JukeboxError::io("cannot open the jukebox journal", e))?,
                    );
                }
                Err(JournalError::Absent) => {}
                Err(JournalError::Corrupt(m)) => {
                    return Err(JukeboxError::Storage(format!(
                        "the jukebox journal is unreadable: {m}"
                    )))
                }
                Err(JournalError::Io(e)) => {
                    return Err(JukeboxError::io("cannot read the jukebox journal", e))
                }
            }
        }
        lib.reindex();
        self.mark_missing(&mut lib);
        lib.settle();
        let digest = Digest3::full(&lib);
        let summary = lib.summary(&digest.revision(&lib.version));
        let mut view = View::default();
        view.reset();
        let mut live = Live {
            stamps,
            bundle,
            lib,
            digest,
            summary,
            view,
            generation,
            journal,
            base_len,
        };
        if first_format {
            // Migration: keep the first-format file, then write the base in the
            // journaled format (atomically: a crash leaves the old file, and the
            // migration runs again) and its empty journal.
            backup_v1(&self.paths.base, &self.paths.backup)
                .map_err(|e| JukeboxError::io("cannot back up the jukebox library", e))?;
            self.compact(&mut live)
                .map_err(|e| JukeboxError::io("cannot migrate the jukebox library", e))?;
            tracing::info!(
                "jukebox: library migrated to the journaled format (backup: {})",
                self.paths.backup.display()
            );
            stamps = live.stamps;
        }
        live.stamps = stamps;
        Ok(live)
    }

    /// Set `missing` on every action whose file is in neither library folder.
    fn mark_missing(&self, lib: &mut Library) {
        let missing: Vec<(String, bool)> = lib
            .actions
            .iter()
            .map(|(id, a)| (id.clone(), self.locate(&a.file).is_none()))
            .collect();
        for (id, m) in missing {
            if lib.actions.get(&id).is_some_and(|a| a.missing != m) {
                if let Some(a) = lib.action_mut(&id) {
                    a.missing = m;
                }
            }
        }
    }

    /// Write the whole base (generation + 1) and a new journal after it.
    fn compact(&self, live: &mut Live) -> std::io::Result<()> {
        let generation = live.generation + 1;
        let doc = live.lib.split_ref(&live.bundle, generation);
        let dir = &self.root;
        std::fs::create_dir_all(dir)?;
        let tmp = tempfile::Builder::new()
            .prefix(".config.json.compact-")
            .suffix(".tmp")
            .tempfile_in(dir)?;
        {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
            serde_json::to_writer_pretty(&mut w, &doc).map_err(std::io::Error::other)?;
            std::io::Write::flush(&mut w)?;
        }
        tmp.as_file().sync_all()?;
        let base_len = tmp.as_file().metadata()?.len();
        tmp.persist(&self.paths.base).map_err(|e| e.error)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        // From here the new base is the state; the old journal is stale (its
        // generation is the previous one) until the new one replaces it.
        live.generation = generation;
        live.base_len = base_len;
        live.journal = None;
        let base = stamp_of(&self.paths.base);
        let bundle = stamp_of(&self.bundle_config());
        let header = Header {
            journal: JOURNAL_VERSION,
            generation,
            base,
            bundle,
            summary: Some(SummaryRec::from(&live.summary)),
        };
        let appender = write_journal(&self.paths.journal, &header)?;
        live.stamps = Stamps {
            base,
            journal: appender.stamp(),
            bundle,
        };
        live.journal = Some(appender);
        Ok(())
    }

    /// Persist one recorded change: a journal line, or a compaction.
    fn persist(&self, live: &mut Live, changes: &Changes) -> std::io::Result<()> {
        let journal_len = live.journal.as_ref().map(|j| j.len).unwrap_or(0);
        let compact = live.journal.is_none()
            || !self.paths.base.exists()
            || journal_len > live.base_len.max(COMPACT_SMALL);
        if compact {
            return self.compact(live);
        }
        let ops = changes.ops(&live.lib);
        if let Some(j) = live.journal.as_mut() {
            j.append(&ops, &live.summary)?;
            live.stamps.journal = j.stamp();
        }
        Ok(())
    }

    // ------------------------------------------------------------ reads

    /// The summary; after a restart it comes from the journal's tail without
    /// loading the library, while the files are the ones it was written with.
    pub async fn summary(self: &Arc<Self>) -> Result<Summary, JukeboxError> {
        let this = self.clone();
        companiond_core::task::blocking(move || this.summary_blocking()).await
    }

    fn summary_blocking(&self) -> Result<Summary, JukeboxError> {
        self.touch();
        {
            let guard = self.live();
            if let Some(l) = guard.as_ref() {
                if l.stamps == self.stamps_now() {
                    return Ok(l.summary.clone());
                }
            } else {
                let now = self.stamps_now();
                let mut quick = self.quick.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((st, s)) = quick.as_ref() {
                    if *st == now {
                        return Ok(s.clone());
                    }
                }
                if let Some((h, s)) = tail_summary(&self.paths.journal) {
                    if now.base.is_some() && h.base == now.base && h.bundle == now.bundle {
                        let s = Summary::from(s);
                        *quick = Some((now, s.clone()));
                        return Ok(s);
                    }
                }
            }
        }
        self.read(|live| live.summary.clone())
    }

    /// Whether the stored library still needs its one-time migration: a base
    /// document without a journal (the first format, or a crash between a
    /// compaction and its journal).
    pub fn needs_migration(&self) -> bool {
        self.paths.base.exists() && !self.paths.journal.exists()
    }

    /// Load the library now (migrating it when needed); blocking.
    pub fn load_now(&self) {
        if let Err(e) = self.read(|_| ()) {
            tracing::warn!("jukebox: the library could not be loaded: {e}");
        }
    }

    fn read<R>(&self, f: impl FnOnce(&mut Live) -> R) -> Result<R, JukeboxError> {
        let mut guard = self.live();
        let live = self.ensure(&mut guard)?;
        Ok(f(live))
    }

    /// The GET /config answer (cached parts).
    pub async fn config_body(self: &Arc<Self>) -> Result<Body, JukeboxError> {
        // Fast path: nothing changed since the body was last built (never
        // waits for a change in progress on this async thread).
        self.touch();
        if let Ok(guard) = self.live.try_lock() {
            if let Some(l) = guard.as_ref() {
                if let Some(b) = l.view_body_cached() {
                    if l.stamps == self.stamps_now() {
                        return Ok(b);
                    }
                }
            }
        }
        let this = self.clone();
        companiond_core::task::blocking(move || {
            this.read(|live| {
                let Live {
                    view, lib, summary, ..
                } = live;
                view.body(lib, summary)
            })
        })
        .await
    }

    /// Run `f` on the library (blocking code; holds the library lock).
    pub fn with_library<R>(&self, f: impl FnOnce(&Library) -> R) -> Result<R, JukeboxError> {
        self.read(|live| f(&live.lib))
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

    // ------------------------------------------------------------ changes

    /// Apply `f` to the library under the library lock and persist what it
    /// changed (a journal line); undone when `f` fails or the write fails.
    /// `f` runs on a blocking thread.
    pub async fn mutate<R, F>(self: &Arc<Self>, f: F) -> Result<R, JukeboxError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Library, &BundleDoc, &mut Tx) -> Result<R, JukeboxError> + Send + 'static,
    {
        let lock = self.store.lock_for(USER_CONFIG);
        let _guard = lock.lock().await;
        let this = self.clone();
        companiond_core::task::blocking(move || this.mutate_blocking(f)).await
    }

    fn mutate_blocking<R, F>(&self, f: F) -> Result<R, JukeboxError>
    where
        F: FnOnce(&mut Library, &BundleDoc, &mut Tx) -> Result<R, JukeboxError>,
    {
        let mut guard = self.live();
        let live = self.ensure(&mut guard)?;
        let mut tx = Tx::default();
        let bundle = live.bundle.clone();
        live.lib.begin();
        let r = match f(&mut live.lib, &bundle, &mut tx) {
            Ok(r) => r,
            Err(e) => {
                live.lib.rollback();
                tx.rollback();
                return Err(e);
            }
        };
        let changes = live.lib.finish();
        if !changes.is_empty() {
            let (old_digest, old_summary) = (live.digest, live.summary.clone());
            live.digest.update(&live.lib, &changes);
            live.summary = summary_after(&live.lib, &live.digest, &old_summary, &changes);
            if let Err(e) = self.persist(live, &changes) {
                // Undo in memory: reload from disk on the next request.
                live.digest = old_digest;
                live.summary = old_summary;
                *guard = None;
                tx.rollback();
                return Err(JukeboxError::io("cannot save the jukebox library", e));
            }
            live.view.changed(&live.lib, &changes);
            *self.quick.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        tx.commit();
        Ok(r)
    }
}

impl Live {
    fn view_body_cached(&self) -> Option<Body> {
        self.view.cached()
    }
}

/// The summary after a change: counts adjusted by what changed.
fn summary_after(lib: &Library, d: &Digest3, old: &Summary, c: &Changes) -> Summary {
    let mut visible = old.visible_song_count as i64;
    for ch in &c.songs {
        if ch.old.as_ref().is_some_and(|(_, s)| s.visible) {
            visible -= 1;
        }
        if lib.songs.get(&ch.id).is_some_and(|s| s.visible) {
            visible += 1;
        }
    }
    Summary {
        config_revision: d.revision(&lib.version),
        song_count: lib.songs.len(),
        visible_song_count: visible.max(0) as usize,
        action_count: lib.actions.len(),
    }
}

/// Parse a boolean option given as text (400 when it is not one).
pub fn bool_option(field: &str, raw: &str) -> Result<bool, JukeboxError> {
    parse_bool(raw).ok_or_else(|| JukeboxError::bad(format!("{field} must be a boolean")))
}

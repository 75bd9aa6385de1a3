//! The data-dir document store.
//!
//! Every JSON document is written atomically (temporary file in the same folder,
//! fsync, rename, fsync of the folder), and every document has one async lock so
//! that concurrent read-modify-write cycles serialise. Readers never see a torn
//! file because the rename is atomic.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::task::{blocking, TaskFailed};

/// Errors of the store.
#[derive(Debug)]
pub enum StoreError {
    Io(std::io::Error),
    /// The file exists but is not valid JSON of the expected shape.
    Corrupt(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io(e) => write!(f, "storage error: {e}"),
            StoreError::Corrupt(e) => write!(f, "stored document is unreadable: {e}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Io(e)
    }
}

/// Write `bytes` to `path` atomically: temp file in the same folder, fsync, rename.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let t = std::time::Instant::now();
    let r = atomic_write_once(path, bytes);
    crate::metrics::metrics().store_write(t.elapsed());
    crate::disk::observe(&r);
    r
}

fn atomic_write_once(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile_in(dir, path)?;
    let result = (|| {
        tmp.1.write_all(bytes)?;
        tmp.1.sync_all()?;
        std::fs::rename(&tmp.0, path)?;
        sync_dir(dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp.0);
    }
    result
}

/// Sync `dir`, so a rename in it is durable (best effort: not every platform
/// can open a folder).
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// [`atomic_write`] for a large document replaced often (a long chat history).
///
/// Two costs of a replacement are moved off the caller's path, both measured
/// on this project's machine for a 3.6 MB history (docs/performance.md):
/// * *freeing the replaced file's blocks* (about 1 ms, paid inside the rename
///   or by the next journal commit, i.e. the next save's fsync): the replaced
///   file is first hard-linked under a temporary name, so the rename only drops
///   a name, and that link is removed afterwards in the background;
/// * *allocating the new file's blocks* (about 1 ms at its fsync): from 1 MiB
///   on, the next version is written into a [spare](Spares) file prepared in
///   the background after this one — a new file of the same name pattern whose
///   blocks are already allocated and written, so the next write overwrites
///   them and its fsync only writes data. Each replacement still puts a new
///   file in place (the document's identity changes, and a reader that opened
///   the old one keeps reading it whole); the spare itself is never read.
///
/// A link or spare left by a crash has [`atomic_write`]'s temporary-file name
/// and is removed by [`sweep_leftover_temps`] at the next start.
pub fn atomic_write_deferred(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    Staged::write(path, bytes)?.publish()
}

/// A new version of a document written and synced under a temporary name
/// beside it, not yet in place: [`Staged::publish`] renames it over the
/// document ([`atomic_write_deferred`]'s second half); dropping it unpublished
/// removes it and the document stays as it was. This lets a caller do other
/// work (a last check that the document is still the version it started from)
/// while the disk writes, and decide after.
pub struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    len: u64,
    /// The old document's second name ([`keep_link`]), removed later.
    kept: Option<PathBuf>,
    published: bool,
}

impl Staged {
    /// Write and fsync `bytes` under a temporary name beside `path` (into a
    /// prepared spare when there is one).
    pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<Staged> {
        Staged::write_parts(path, &[bytes])
    }

    /// [`Staged::write`] of the concatenation of `parts`, each part written
    /// by a thread of its own (at its offset) where the platform allows.
    pub fn write_parts(path: &Path, parts: &[&[u8]]) -> std::io::Result<Staged> {
        let r = Staged::write_parts_once(path, parts);
        if let Err(e) = &r {
            crate::disk::note(e);
        }
        r
    }

    fn write_parts_once(path: &Path, parts: &[&[u8]]) -> std::io::Result<Staged> {
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        std::fs::create_dir_all(dir)?;
        let (tmp, mut file) = match SPARES.take(path) {
            Some(spare) => spare,
            None => tempfile_in(dir, path)?,
        };
        let mut staged = Staged {
            tmp,
            path: path.to_path_buf(),
            len: parts.iter().map(|p| p.len() as u64).sum(),
            kept: None,
            published: false,
        };
        // A spare is written from its start, and may be longer than this
        // version.
        write_from_start(&mut file, parts)?;
        file.set_len(staged.len)?;
        file.sync_all()?;
        staged.kept = keep_link(dir, path);
        Ok(staged)
    }

    /// Rename the new version over the document and sync the folder.
    pub fn publish(mut self) -> std::io::Result<()> {
        let r = std::fs::rename(&self.tmp, &self.path);
        crate::disk::observe(&r);
        r?;
        self.published = true;
        sync_dir(self.path.parent().unwrap_or_else(|| Path::new(".")));
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.tmp);
        }
        let kept = self.kept.take();
        let next = (self.published && self.len >= Spares::FROM).then(|| self.path.clone());
        let len = self.len;
        if kept.is_some() || next.is_some() {
            crate::task::later(move || {
                // The old blocks are freed first, so the spare's fsync also
                // commits their release.
                if let Some(link) = kept {
                    let _ = std::fs::remove_file(&link);
                }
                if let Some(path) = next {
                    SPARES.prepare(&path, len);
                }
            });
        }
    }
}

/// Write `parts` one after the other from the start of `file`: on Unix the
/// first part here and the others at once on a second thread, at their
/// offsets (filling the page cache is a copy the two cores share).
#[cfg(unix)]
fn write_from_start(file: &mut std::fs::File, parts: &[&[u8]]) -> std::io::Result<()> {
    write_at(file, parts, 0)
}

#[cfg(unix)]
fn write_at(file: &std::fs::File, parts: &[&[u8]], offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    match parts {
        [] => Ok(()),
        [only] => file.write_all_at(only, offset),
        [first, rest @ ..] => {
            let after = offset + first.len() as u64;
            let (a, b) = crate::task::join(
                || file.write_all_at(first, offset),
                || write_at(file, rest, after),
            );
            a.and(b)
        }
    }
}

#[cfg(not(unix))]
fn write_from_start(file: &mut std::fs::File, parts: &[&[u8]]) -> std::io::Result<()> {
    std::io::Seek::rewind(file)?;
    for part in parts {
        file.write_all(part)?;
    }
    Ok(())
}

/// The spare files of [`atomic_write_deferred`]: for each of the few documents
/// replaced last, a temporary file beside it, opened, whose blocks are
/// allocated and written (with zeros, a sixteenth more than the last
/// version). At most [`Spares::MAX`] exist (the disk they hold is a few
/// versions of the largest histories); a new one evicts the oldest.
struct Spares(Mutex<std::collections::VecDeque<Spare>>);

struct Spare {
    target: PathBuf,
    tmp: PathBuf,
    file: std::fs::File,
}

static SPARES: Spares = Spares(Mutex::new(std::collections::VecDeque::new()));

impl Spares {
    /// Documents from this size on get a spare.
    const FROM: u64 = 1 << 20;
    const MAX: usize = 4;

    /// The spare of `target`, if it is still where it was made (a rename of
    /// the folder moves it, and then it is left to the start-up sweep).
    fn take(&self, target: &Path) -> Option<(PathBuf, std::fs::File)> {
        let spare = {
            let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let at = all.iter().position(|s| s.target == target)?;
            all.remove(at)?
        };
        let here = std::fs::symlink_metadata(&spare.tmp)
            .ok()
            .map(|m| crate::stamp::Stamp::of(&m));
        let open = spare
            .file
            .metadata()
            .ok()
            .map(|m| crate::stamp::Stamp::of(&m));
        match (here, open) {
            (Some(h), Some(o)) if (h.dev, h.ino) == (o.dev, o.ino) => Some((spare.tmp, spare.file)),
            _ => None,
        }
    }

    /// Prepare a spare for `target`, whose last version has `len` bytes.
    fn prepare(&self, target: &Path, len: u64) {
        let dir = target.parent().unwrap_or_else(|| Path::new("."));
        let Ok((tmp, mut file)) = tempfile_in(dir, target) else {
            return;
        };
        static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
        let mut left = (len + len / 16).next_multiple_of(4096);
        let written = (|| {
            while left > 0 {
                let n = left.min(ZEROS.len() as u64) as usize;
                file.write_all(&ZEROS[..n])?;
                left -= n as u64;
            }
            file.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        let spare = Spare {
            target: target.to_path_buf(),
            tmp,
            file,
        };
        let evicted: Vec<Spare> = {
            let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let mut out = Vec::new();
            if let Some(at) = all.iter().position(|s| s.target == spare.target) {
                out.extend(all.remove(at));
            }
            all.push_back(spare);
            while all.len() > Self::MAX {
                out.extend(all.pop_front());
            }
            out
        };
        for old in evicted {
            let _ = std::fs::remove_file(&old.tmp);
        }
    }
}

/// A second name for `path` in `dir` (`None` when it does not exist or cannot
/// be linked: the rename then frees it in place, as [`atomic_write`] does).
fn keep_link(dir: &Path, path: &Path) -> Option<PathBuf> {
    let stem = path.file_name().and_then(|n| n.to_str()).unwrap_or("doc");
    for _ in 0..16 {
        let link = dir.join(format!(".{stem}.{}.tmp", temp_token()));
        match std::fs::hard_link(path, &link) {
            Ok(()) => return Some(link),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

/// Serialise `value` as pretty JSON and write it atomically.
pub fn atomic_write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    atomic_write(path, &bytes)
}

fn tempfile_in(dir: &Path, target: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    // The same name pattern as `keep_link`'s, which `is_leftover_temp` knows.
    let stem = target.file_name().and_then(|n| n.to_str()).unwrap_or("doc");
    for _ in 0..16 {
        let name = format!(".{stem}.{}.tmp", temp_token());
        let p = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("cannot create a temporary file"))
}

/// Is `name` one of [`atomic_write`]'s temporary files: `.<target>.<32 hex>.tmp`?
pub fn is_leftover_temp(name: &str) -> bool {
    leftover_token(name).is_some()
}

/// The token of a temporary name `.<target>.<32 hex digits>.tmp`.
fn leftover_token(name: &str) -> Option<&str> {
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (target, token) = rest.rsplit_once('.')?;
    let ok = !target.is_empty()
        && token.len() == 32
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    ok.then_some(token)
}

/// The 32 hex digits of a temporary name: this process's mark (8 digits, the
/// same for every temporary file it makes) and 24 random ones. The mark lets
/// [`sweep_leftover_temps`] tell its own writes in flight from a dead
/// process's leftovers without looking at file times.
pub fn temp_token() -> String {
    let random = crate::options::random_token();
    format!("{}{}", process_mark(), &random[..24])
}

/// This process's 8 hex digits at the start of every temporary name it makes.
pub fn process_mark() -> &'static str {
    static MARK: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARK.get_or_init(|| crate::options::random_token()[..8].to_string())
}

/// Is `token` (of a temporary name) one of this process's?
fn made_here(token: &str) -> bool {
    token.starts_with(process_mark())
}

/// Remove the temporary files that an interrupted [`atomic_write`] left under
/// `root` (a kill -9 between create and rename), and the files and folders an
/// interrupted upload left (`staging::hidden_name`), walking the tree without
/// following symbolic links: every file of exactly that name pattern that this
/// process did not make, whatever its age. Only sound while this process holds
/// the data dir's lock (`instance::InstanceLock`: no other process writes
/// there). Returns how many were removed.
pub fn sweep_leftover_temps(root: &Path) -> usize {
    let mut removed = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            let leftover = entry
                .file_name()
                .to_str()
                .and_then(leftover_token)
                .is_some_and(|token| !made_here(token));
            if ft.is_dir() {
                // A folder being received (`staging::hidden_name`) that a crash
                // left: removed whole (`remove_dir_all` does not follow links).
                if leftover {
                    if std::fs::remove_dir_all(entry.path()).is_ok() {
                        removed += 1;
                    }
                    continue;
                }
                // Snapshots hold only kept documents, never a write in
                // progress (`snapshots::prune` removes interrupted ones):
                // not walked, so their number costs the start nothing.
                if dir == root && entry.file_name() == crate::snapshots::ROOT {
                    continue;
                }
                stack.push(entry.path());
                continue;
            }
            if ft.is_file() && leftover && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Read and parse a JSON document; `Ok(None)` when the file does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Io(e)),
    }
}

/// Atomic JSON documents under one root, with one async lock per document.
#[derive(Clone, Default)]
pub struct Store {
    root: PathBuf,
    locks: Arc<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>>,
    /// Told when an unreadable document is set aside.
    notices: Option<crate::notices::Notices>,
}

/// Documents that stay in place when they are not JSON: the interface answers
/// 503 for the core configuration until the user repairs it (and the status
/// flags `recovery_required`); the characters file recovers at start-up.
const KEPT_WHEN_UNREADABLE: &[&str] = &[crate::layout::CORE_CONFIG, crate::layout::CHARACTERS];

/// Whether the file at `path` exists and is not JSON at all (torn, garbage,
/// not UTF-8). JSON of another shape than a reader expects is not this: it
/// stays where it is.
fn not_json(path: &Path) -> bool {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice::<serde::de::IgnoredAny>(&b).is_err(),
        Err(_) => false,
    }
}

/// Move a document that is not JSON aside as `NAME.corrupt-<millis>` (bytes
/// kept) so that its family starts it anew, and tell the user (a pending
/// notice `document_recovered` with `backup_path`). The caller holds the
/// document's lock. The new name, when it was moved.
pub fn set_aside_unreadable(
    path: &Path,
    notices: Option<&crate::notices::Notices>,
) -> Option<PathBuf> {
    if !not_json(path) {
        return None;
    }
    let name = path.file_name()?.to_string_lossy().into_owned();
    let aside = path.with_file_name(format!("{name}.corrupt-{}", crate::now_millis()));
    if let Err(e) = std::fs::rename(path, &aside) {
        tracing::error!(
            "{} is unreadable and cannot be moved aside: {e}",
            path.display()
        );
        return None;
    }
    sync_dir(path.parent().unwrap_or_else(|| Path::new(".")));
    tracing::warn!(
        "{} was not JSON; moved to {} and starting anew",
        path.display(),
        aside.display()
    );
    if let Some(n) = notices {
        n.push(serde_json::json!({
            "kind": "document_recovered",
            "document": name,
            "message": format!("{name} was unreadable; a copy was kept and it starts anew."),
            "backup_path": aside.to_string_lossy(),
        }));
    }
    Some(aside)
}

impl Store {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Store {
            root: root.into(),
            locks: Arc::default(),
            notices: None,
        }
    }

    /// Tell the user through `notices` when a document is set aside.
    pub fn with_notices(mut self, notices: crate::notices::Notices) -> Self {
        self.notices = Some(notices);
        self
    }

    /// The notices this store tells.
    pub fn notices(&self) -> Option<&crate::notices::Notices> {
        self.notices.as_ref()
    }

    /// [`read_json`] under the document's lock, setting an unreadable one aside.
    fn read_locked<T: DeserializeOwned>(&self, path: &Path) -> Result<Option<T>, StoreError> {
        let r = read_json(path);
        if let Err(StoreError::Corrupt(_)) = &r {
            self.recover_locked(path);
        }
        r
    }

    /// After a read found `path` unreadable: set it aside (under its lock,
    /// so a write that replaced it meanwhile is never moved) unless it is one
    /// of the documents that stay.
    fn recover_locked(&self, path: &Path) {
        let kept = KEPT_WHEN_UNREADABLE
            .iter()
            .any(|k| self.root.join(k) == path);
        if !kept {
            set_aside_unreadable(path, self.notices.as_ref());
        }
    }

    /// The root folder (the data dir).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Absolute path of a document given relative to the root. `rel` must come
    /// from the program, never from a request (use [`crate::paths::safe_join`] for those).
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// The async lock of the document at `path` (absolute or relative to the root).
    pub fn lock_for(&self, path: impl AsRef<Path>) -> Arc<tokio::sync::Mutex<()>> {
        let p = self.root.join(path);
        let mut map = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(p).or_default().clone()
    }

    /// Read a document (no lock needed: writes are atomic renames).
    pub async fn read<T: DeserializeOwned + Send + 'static>(
        &self,
        rel: impl AsRef<Path>,
    ) -> Result<Option<T>, StoreError> {
        let p = self.path(rel);
        let path = p.clone();
        let r = blocking(move || read_json(&p)).await;
        if let Err(StoreError::Corrupt(_)) = &r {
            // Only when nobody holds the document (the reader may be inside
            // its own update): else the next read sets it aside.
            let lock = self.lock_for(&path);
            let Ok(_g) = lock.try_lock() else {
                return r;
            };
            let me = self.clone();
            let _ = blocking(move || {
                me.recover_locked(&path);
                Ok::<(), StoreError>(())
            })
            .await;
        }
        r
    }

    /// [`Store::read`] for a caller that holds the document's lock: a
    /// document that is not JSON is set aside at once.
    pub async fn read_held<T: DeserializeOwned + Send + 'static>(
        &self,
        rel: impl AsRef<Path>,
    ) -> Result<Option<T>, StoreError> {
        let p = self.path(rel);
        let me = self.clone();
        blocking(move || me.read_locked(&p)).await
    }

    /// Replace a document atomically under its lock.
    pub async fn write<T: Serialize + Send + Sync + 'static>(
        &self,
        rel: impl AsRef<Path>,
        value: T,
    ) -> Result<(), StoreError> {
        let p = self.path(rel);
        let lock = self.lock_for(&p);
        let _g = lock.lock().await;
        blocking(move || atomic_write_json(&p, &value).map_err(StoreError::Io)).await
    }

    /// Read-modify-write under the document's lock. `f` gets the current value
    /// (`None` when absent) and returns the new value plus a result; a corrupt
    /// document is an error and is never overwritten.
    pub async fn update<T, R, F>(&self, rel: impl AsRef<Path>, f: F) -> Result<R, StoreError>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        R: Send + 'static,
        F: FnOnce(Option<T>) -> (T, R) + Send + 'static,
    {
        let p = self.path(rel);
        let lock = self.lock_for(&p);
        let _g = lock.lock().await;
        let me = self.clone();
        blocking(move || {
            let cur = me.read_locked::<T>(&p)?;
            let (new, r) = f(cur);
            atomic_write_json(&p, &new)?;
            Ok(r)
        })
        .await
    }

    /// Like [`Store::update`] but `f` may refuse (return `Err`) and then nothing is written.
    pub async fn try_update<T, R, E, F>(
        &self,
        rel: impl AsRef<Path>,
        f: F,
    ) -> Result<Result<R, E>, StoreError>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        R: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Option<T>) -> Result<(T, R), E> + Send + 'static,
    {
        let p = self.path(rel);
        let lock = self.lock_for(&p);
        let _g = lock.lock().await;
        let me = self.clone();
        blocking(move || {
            let cur = me.read_locked::<T>(&p)?;
            match f(cur) {
                Ok((new, r)) => {
                    atomic_write_json(&p, &new)?;
                    Ok(Ok(r))
                }
                Err(e) => Ok(Err(e)),
            }
        })
        .await
    }
}

impl From<TaskFailed> for StoreError {
    fn from(e: TaskFailed) -> Self {
        StoreError::Io(std::io::Error::other(e.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_removes_dead_uploads_files_and_folders_but_not_this_processs() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("user_mmd");
        std::fs::create_dir_all(&sub).unwrap();
        let dead = "ffffffff0123456789abcdef01234567";
        let dead = if dead.starts_with(process_mark()) {
            "eeeeeeee0123456789abcdef01234567"
        } else {
            dead
        };
        std::fs::write(sub.join(format!(".upload.part.{dead}.tmp")), b"x").unwrap();
        let work = sub.join(format!(".zipwork.{dead}.tmp"));
        std::fs::create_dir_all(work.join("inner")).unwrap();
        std::fs::write(work.join("inner/a.pmx"), b"x").unwrap();
        let live_file = sub.join(crate::staging::hidden_name("upload", ".part"));
        std::fs::write(&live_file, b"x").unwrap();
        let live_dir = sub.join(crate::staging::hidden_name("zipwork", ""));
        std::fs::create_dir_all(&live_dir).unwrap();
        std::fs::write(sub.join("kept.pmx"), b"x").unwrap();
        assert_eq!(sweep_leftover_temps(dir.path()), 2);
        assert!(!work.exists());
        assert!(live_file.exists() && live_dir.exists());
        assert!(sub.join("kept.pmx").exists());
    }

    #[test]
    fn leftover_names() {
        assert!(is_leftover_temp(
            ".core_config.json.0123456789abcdef0123456789abcdef.tmp"
        ));
        assert!(is_leftover_temp(
            ".a.b.0123456789abcdef0123456789abcdef.tmp"
        ));
        assert!(!is_leftover_temp(
            "core_config.json.0123456789abcdef0123456789abcdef.tmp"
        ));
        assert!(!is_leftover_temp("..0123456789abcdef0123456789abcdef.tmp"));
        assert!(!is_leftover_temp(".x.0123456789ABCDEF0123456789abcdef.tmp"));
        assert!(!is_leftover_temp(".x.0123.tmp"));
        assert!(!is_leftover_temp(".song.tmp"));
        assert!(!is_leftover_temp(
            ".x.0123456789abcdef0123456789abcdef.tmpx"
        ));
    }

    /// A deferred replacement writes what `atomic_write` writes, keeps the old
    /// file's bytes readable through a handle opened before, and leaves no second
    /// name behind (the link goes on a background thread; a crash's link has
    /// the temporary name the start-up sweep removes).
    #[test]
    fn deferred_replacement_leaves_only_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recent.json");
        atomic_write_deferred(&p, b"[1]").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"[1]");
        let mut before = std::fs::File::open(&p).unwrap();
        atomic_write_deferred(&p, b"[1, 2]").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"[1, 2]");
        let mut old = String::new();
        std::io::Read::read_to_string(&mut before, &mut old).unwrap();
        assert_eq!(old, "[1]");
        let link = keep_link(dir.path(), &p).unwrap();
        assert!(is_leftover_temp(
            link.file_name().unwrap().to_str().unwrap()
        ));
        std::fs::remove_file(link).unwrap();
        let names = || -> Vec<String> {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while names().len() > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(names(), vec!["recent.json".to_string()]);
    }

    /// From 1 MiB on, the next version is written into the spare prepared
    /// after the last one: a new file in place each time, holding exactly the
    /// new bytes (shorter than the spare), and one spare left beside it.
    #[cfg(unix)]
    #[test]
    fn large_documents_are_written_into_prepared_spares() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recent.json");
        let others = || -> Vec<(PathBuf, u64)> {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|q| q != &p)
                .map(|q| {
                    let ino = std::fs::metadata(&q).unwrap().ino();
                    (q, ino)
                })
                .collect()
        };
        let ready = || {
            let all = SPARES.0.lock().unwrap();
            all.iter().any(|s| s.target == p)
        };
        let one_spare = || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !(ready() && others().len() == 1) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let o = others();
            assert_eq!(o.len(), 1, "one spare: {o:?}");
            assert!(is_leftover_temp(
                o[0].0.file_name().unwrap().to_str().unwrap()
            ));
            o[0].clone()
        };
        let big = vec![b'a'; 2 << 20];
        atomic_write_deferred(&p, &big).unwrap();
        let (_, spare) = one_spare();
        let mut before = std::fs::File::open(&p).unwrap();
        let small: Vec<u8> = vec![b'b'; (1 << 20) + 5];
        atomic_write_deferred(&p, &small).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().ino(),
            spare,
            "written into the spare"
        );
        assert!(
            std::fs::read(&p).unwrap() == small,
            "the new bytes, exactly"
        );
        let mut old = Vec::new();
        std::io::Read::read_to_end(&mut before, &mut old).unwrap();
        assert!(old == big, "a reader of the old version reads it whole");
        let (_, next) = one_spare();
        assert_ne!(next, spare);
    }

    /// Parts written at once make the document their concatenation, over a
    /// longer spare too.
    #[test]
    fn parts_are_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("doc.json");
        let parts: [&[u8]; 3] = [b"[1,", b"2,3", b",4]"];
        Staged::write_parts(&p, &parts).unwrap().publish().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"[1,2,3,4]");
        let big = vec![b'x'; (1 << 20) + 1];
        let half = big.len() / 2;
        Staged::write_parts(&p, &[&big[..half], &big[half..]])
            .unwrap()
            .publish()
            .unwrap();
        assert!(std::fs::read(&p).unwrap() == big);
    }

    /// A staged version that is dropped unpublished leaves the document as it
    /// was and no file of its own; a published one replaces it.
    #[test]
    fn a_staged_version_is_published_or_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recent.json");
        std::fs::write(&p, b"[1]").unwrap();
        let names = || -> Vec<String> {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        let staged = Staged::write(&p, b"[2]").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"[1]", "not yet in place");
        drop(staged);
        let settle = |want: usize| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while names().len() > want && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        settle(1);
        assert_eq!(names(), vec!["recent.json".to_string()]);
        assert_eq!(std::fs::read(&p).unwrap(), b"[1]");
        Staged::write(&p, b"[3]").unwrap().publish().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"[3]");
        settle(1);
        assert_eq!(names(), vec!["recent.json".to_string()]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_leave_valid_json_and_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut tasks = Vec::new();
        for i in 0..64u32 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                s.write(
                    "docs/one.json",
                    serde_json::json!({"writer": i, "pad": "x".repeat(4096)}),
                )
                .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let v: serde_json::Value = store.read("docs/one.json").await.unwrap().unwrap();
        assert!(v["writer"].as_u64().unwrap() < 64);
        let names: Vec<_> = std::fs::read_dir(dir.path().join("docs"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("one.json")]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn updates_serialise_and_last_writer_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move {
                s.update("count.json", |cur: Option<u64>| (cur.unwrap_or(0) + 1, ()))
                    .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(store.read::<u64>("count.json").await.unwrap(), Some(50));
        store.write("count.json", 7u64).await.unwrap();
        assert_eq!(store.read::<u64>("count.json").await.unwrap(), Some(7));
    }

    #[tokio::test]
    async fn a_document_that_is_not_json_is_reported_once_kept_aside_and_started_anew() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.json"), b"{not json").unwrap();
        let notices = crate::notices::Notices::default();
        let store = Store::new(dir.path()).with_notices(notices.clone());
        assert!(matches!(
            store.read::<serde_json::Value>("bad.json").await,
            Err(StoreError::Corrupt(_))
        ));
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("bad.json.corrupt-")
            })
            .collect();
        assert_eq!(aside.len(), 1);
        assert_eq!(std::fs::read(aside[0].path()).unwrap(), b"{not json");
        let (pending, _) = notices.peek();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0]["kind"], "document_recovered");
        // The family starts it anew.
        assert_eq!(
            store.read::<serde_json::Value>("bad.json").await.unwrap(),
            None
        );
        store
            .update("bad.json", |_: Option<serde_json::Value>| {
                (serde_json::json!({"a": 1}), ())
            })
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn json_of_another_shape_and_the_core_configuration_stay_in_place() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("list.json"), b"[1, 2]").unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join(crate::layout::CORE_CONFIG), b"{broken").unwrap();
        let store = Store::new(dir.path());
        assert!(store.read::<u64>("list.json").await.is_err());
        let r = store.update("list.json", |_: Option<u64>| (7u64, ())).await;
        assert!(r.is_err());
        assert_eq!(
            std::fs::read(dir.path().join("list.json")).unwrap(),
            b"[1, 2]"
        );
        assert!(store
            .read::<serde_json::Value>(crate::layout::CORE_CONFIG)
            .await
            .is_err());
        assert_eq!(
            std::fs::read(dir.path().join(crate::layout::CORE_CONFIG)).unwrap(),
            b"{broken"
        );
    }
}

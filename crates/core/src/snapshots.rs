//! Snapshots of a character's memory, taken before every change that replaces
//! or removes it, so the change can be undone (docs/data.md § Snapshots).
//!
//! ```text
//! <data>/snapshots/<character>/<id>/snapshot.json   what it is (Meta)
//! <data>/snapshots/<character>/<id>/<unit file>...  the files as they were
//! ```
//!
//! Every JSON document of a memory unit is replaced by an atomic rename, never
//! written in place, so a hard link to the file about to be replaced keeps its
//! old bytes at no cost: that is how documents are kept ([`How::Link`]; a copy
//! where the folder cannot be linked). The SQLite time index changes in place:
//! when a snapshot keeps it, it is copied with SQLite's online backup
//! ([`How::Sqlite`]). A snapshot is written into a hidden `.<id>.partial`
//! folder and renamed into place when complete, so a crash never leaves half
//! of one listed.
//!
//! Kept: the last [`Budget::keep`] snapshots of a character (default 20)
//! within [`Budget::max_bytes`]; a `delete` snapshot (the trash of a deleted
//! character) is kept [`TRASH_DAYS`] days whatever their number. The budget is
//! read from `config/snapshots.json` (`{"keep": 20, "maxBytes": ...}`).
//!
//! This module knows which files to keep and how; it does not coordinate with
//! the writers: a caller holds the locks of what it is about to change (the
//! memory family's routes restore through it under the memory locks).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The folder of every character's snapshots, relative to the data dir.
pub const ROOT: &str = "snapshots";
/// The budget document, relative to the data dir.
pub const CONFIG: &str = "config/snapshots.json";
/// The description of a snapshot inside its folder.
pub const META: &str = "snapshot.json";
/// How long the trash of a deleted character is kept.
pub const TRASH_DAYS: i64 = 30;
/// The format of `snapshot.json`.
pub const FORMAT: u32 = 1;

/// The long-term memory documents (what a correction or a forget rewrites).
pub const LONG_TERM_FILES: &[&str] = &[
    "facts.json",
    "facts_archive.json",
    "persona.json",
    "reflections.json",
    "reflections_archive.json",
    "surfaced.json",
];
/// The JSON documents of a unit (everything but the time index).
pub fn document_files() -> Vec<&'static str> {
    crate::layout::CHARACTER_UNIT_FILES
        .iter()
        .copied()
        .filter(|f| !f.ends_with(".db"))
        .collect()
}
/// Every file of a unit, the time index included.
pub fn all_files() -> Vec<&'static str> {
    crate::layout::CHARACTER_UNIT_FILES.to_vec()
}

/// What kind of change a snapshot was taken before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = SnapshotKind)]
pub enum Kind {
    /// The memory browser's save of the recent history.
    Save,
    /// The automatic review's rewrite of the recent history.
    Review,
    /// A correction of a long-term memory entry.
    Correct,
    /// A forget of a long-term memory entry.
    Forget,
    /// A rename of the character (kept under the new name).
    Rename,
    /// A cloud-save download over the local character.
    Download,
    /// The character was deleted: its trash.
    Delete,
    /// A restore of another snapshot (undo of the undo).
    Restore,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Save => "save",
            Kind::Review => "review",
            Kind::Correct => "correct",
            Kind::Forget => "forget",
            Kind::Rename => "rename",
            Kind::Download => "download",
            Kind::Delete => "delete",
            Kind::Restore => "restore",
        }
    }
}

/// How a file was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = SnapshotFileHow)]
pub enum How {
    /// A hard link to the replaced file (no copy).
    Link,
    /// A byte copy.
    Copy,
    /// SQLite's online backup.
    Sqlite,
}

/// One kept file.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = SnapshotKeptFile)]
pub struct KeptFile {
    pub name: String,
    pub size: u64,
    pub how: How,
}

/// `snapshot.json`: what a snapshot holds.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = SnapshotMeta)]
pub struct Meta {
    pub format: u32,
    pub id: String,
    pub character: String,
    pub kind: Kind,
    /// When it was taken (RFC 3339, UTC).
    pub created_at: String,
    pub created_ms: i64,
    pub files: Vec<KeptFile>,
    /// The character's profile as it was (`characters.json` entry), when kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub profile: Option<Value>,
    /// For a rename: the name before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// For a restore: the snapshot restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<String>,
}

impl Meta {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// What to keep of a character before a change.
pub struct Take<'a> {
    pub character: &'a str,
    pub kind: Kind,
    /// Unit files (names inside `memory/<character>/`); missing ones are skipped.
    pub files: &'a [&'a str],
    pub profile: Option<Value>,
    pub renamed_from: Option<String>,
    pub restored: Option<String>,
}

/// Errors of the snapshot store.
#[derive(Debug)]
pub enum SnapshotError {
    /// No snapshot of that id for that character.
    NotFound,
    /// A character or snapshot name that cannot be a folder name.
    BadName(String),
    /// `snapshot.json` of a newer format or unreadable.
    Unreadable(String),
    Io(std::io::Error),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::NotFound => write!(f, "no such snapshot"),
            SnapshotError::BadName(n) => write!(f, "invalid name {n:?}"),
            SnapshotError::Unreadable(e) => write!(f, "the snapshot is unreadable: {e}"),
            SnapshotError::Io(e) => write!(f, "storage error: {e}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

impl From<std::io::Error> for SnapshotError {
    fn from(e: std::io::Error) -> Self {
        SnapshotError::Io(e)
    }
}

/// The snapshot budget of a character.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Budget {
    /// How many snapshots (other than the trash) are kept.
    pub keep: usize,
    /// At most this many bytes of kept files (other than the trash).
    pub max_bytes: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            keep: 20,
            max_bytes: 1 << 30,
        }
    }
}

impl Budget {
    /// `config/snapshots.json`, defaults where absent or unreadable.
    pub fn read(data_dir: &Path) -> Budget {
        crate::store::read_json::<Budget>(&data_dir.join(CONFIG))
            .ok()
            .flatten()
            .map(|b| Budget {
                keep: b.keep.max(1),
                ..b
            })
            .unwrap_or_default()
    }
}

/// The snapshots folder of `character`.
pub fn character_root(data_dir: &Path, character: &str) -> Result<PathBuf, SnapshotError> {
    crate::paths::safe_name(character)
        .map_err(|_| SnapshotError::BadName(character.to_string()))?;
    Ok(data_dir.join(ROOT).join(character))
}

/// The folder of one snapshot.
fn snapshot_dir(data_dir: &Path, character: &str, id: &str) -> Result<PathBuf, SnapshotError> {
    let root = character_root(data_dir, character)?;
    if !valid_id(id) {
        return Err(SnapshotError::NotFound);
    }
    Ok(root.join(id))
}

/// `<13 digits of ms>-<kind>[-n]`: made here, checked before any use as a path.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Keep the files of `t.character` before a change; the snapshot's
/// description. Runs on a blocking thread. Nothing is synced: the links and
/// the description are committed with the file system's journal, at the
/// latest by the change's own sync (a crash before leaves no snapshot or an
/// unreadable one, which is skipped). The caller prunes ([`prune`]) after,
/// off its path.
pub fn take(data_dir: &Path, t: &Take) -> Result<Meta, SnapshotError> {
    let root = character_root(data_dir, t.character)?;
    std::fs::create_dir_all(&root)?;
    let ms = crate::now_millis();
    let (id, partial) = reserve(&root, ms, t.kind)?;
    let result = fill(data_dir, t, &id, ms, &partial).and_then(|meta| {
        std::fs::rename(&partial, root.join(&id))?;
        Ok(meta)
    });
    match result {
        Ok(meta) => Ok(meta),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            Err(e)
        }
    }
}

/// A fresh id and its hidden folder (created).
fn reserve(root: &Path, ms: i64, kind: Kind) -> Result<(String, PathBuf), SnapshotError> {
    for n in 0..1000 {
        let id = if n == 0 {
            format!("{ms:013}-{}", kind.as_str())
        } else {
            format!("{ms:013}-{}-{n}", kind.as_str())
        };
        if root.join(&id).exists() {
            continue;
        }
        let partial = root.join(format!(".{id}.partial"));
        match std::fs::create_dir(&partial) {
            Ok(()) => return Ok((id, partial)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            // A prune removed the empty folder meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(root)?;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(SnapshotError::Io(std::io::Error::other(
        "no free snapshot name",
    )))
}

fn fill(data_dir: &Path, t: &Take, id: &str, ms: i64, into: &Path) -> Result<Meta, SnapshotError> {
    let unit = data_dir.join(crate::layout::MEMORY).join(t.character);
    let mut files = Vec::new();
    for name in t.files {
        let src = unit.join(name);
        let Ok(m) = std::fs::symlink_metadata(&src) else {
            continue;
        };
        if !m.is_file() {
            continue;
        }
        let dst = into.join(name);
        let how = keep_file(&src, &dst)?;
        let size = std::fs::metadata(&dst)?.len();
        files.push(KeptFile {
            name: name.to_string(),
            size,
            how,
        });
    }
    let meta = Meta {
        format: FORMAT,
        id: id.to_string(),
        character: t.character.to_string(),
        kind: t.kind,
        created_at: rfc3339(ms),
        created_ms: ms,
        files,
        profile: t.profile.clone(),
        renamed_from: t.renamed_from.clone(),
        restored: t.restored.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&meta).map_err(std::io::Error::other)?;
    std::fs::write(into.join(META), bytes)?;
    Ok(meta)
}

/// Keep `src` at `dst`: the online backup for a SQLite database, else a hard
/// link (the writers replace documents by rename), else a copy.
fn keep_file(src: &Path, dst: &Path) -> std::io::Result<How> {
    if is_sqlite(src) {
        sqlite_copy(src, dst)?;
        return Ok(How::Sqlite);
    }
    if std::fs::hard_link(src, dst).is_ok() {
        return Ok(How::Link);
    }
    copy_synced(src, dst)?;
    Ok(How::Copy)
}

fn is_sqlite(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "db")
}

/// Copy the database at `src` into a new file `dst` with SQLite's online
/// backup (consistent even while another connection writes it).
pub fn sqlite_copy(src: &Path, dst: &Path) -> std::io::Result<()> {
    let err = std::io::Error::other;
    let from = rusqlite::Connection::open_with_flags(
        src,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    from.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(err)?;
    let mut to = rusqlite::Connection::open(dst).map_err(err)?;
    {
        let backup = rusqlite::backup::Backup::new(&from, &mut to).map_err(err)?;
        // One step of every page: the copy is of one moment.
        loop {
            match backup.step(-1).map_err(err)? {
                rusqlite::backup::StepResult::Done => break,
                rusqlite::backup::StepResult::More => continue,
                _ => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
    drop(to);
    std::fs::File::open(dst)?.sync_all()
}

fn copy_synced(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::copy(src, dst)?;
    std::fs::File::open(dst)?.sync_all()
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

use crate::rfc3339_ms as rfc3339;

/// Read one snapshot's description.
pub fn read(data_dir: &Path, character: &str, id: &str) -> Result<Meta, SnapshotError> {
    let dir = snapshot_dir(data_dir, character, id)?;
    read_meta(&dir, character)
}

/// `snapshot.json` of `dir`, in the folder of `character` (a rename moves a
/// character's snapshots: the folder names the character).
fn read_meta(dir: &Path, character: &str) -> Result<Meta, SnapshotError> {
    let bytes = match std::fs::read(dir.join(META)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(SnapshotError::NotFound),
        Err(e) => return Err(e.into()),
    };
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| SnapshotError::Unreadable(e.to_string()))?;
    if v.get("format").and_then(Value::as_u64) > Some(FORMAT as u64) {
        return Err(SnapshotError::Unreadable(
            "written by a newer version".into(),
        ));
    }
    let mut meta: Meta =
        serde_json::from_value(v).map_err(|e| SnapshotError::Unreadable(e.to_string()))?;
    meta.character = character.to_string();
    Ok(meta)
}

/// The path of a kept file (for reading it).
pub fn file_path(
    data_dir: &Path,
    character: &str,
    id: &str,
    file: &str,
) -> Result<PathBuf, SnapshotError> {
    crate::paths::safe_name(file).map_err(|_| SnapshotError::BadName(file.to_string()))?;
    Ok(snapshot_dir(data_dir, character, id)?.join(file))
}

/// Every snapshot of `character`, newest first (unreadable ones skipped).
pub fn list(data_dir: &Path, character: &str) -> Result<Vec<Meta>, SnapshotError> {
    let root = character_root(data_dir, character)?;
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(&root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e.into()),
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !valid_id(name) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Ok(m) = read_meta(&e.path(), character) {
            out.push(m);
        }
    }
    out.sort_by(|a, b| (b.created_ms, &b.id).cmp(&(a.created_ms, &a.id)));
    Ok(out)
}

/// Every name with a snapshots folder.
pub fn characters(data_dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(data_dir.join(ROOT))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| crate::paths::safe_name(n).is_ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Remove the snapshots of `character` past its budget and the trash older
/// than [`TRASH_DAYS`], and the leftovers of an interrupted snapshot.
pub fn prune(data_dir: &Path, character: &str) {
    let Ok(root) = character_root(data_dir, character) else {
        return;
    };
    let budget = Budget::read(data_dir);
    if let Ok(rd) = std::fs::read_dir(&root) {
        for e in rd.flatten() {
            let n = e.file_name();
            let partial = n
                .to_str()
                .is_some_and(|n| n.starts_with('.') && n.ends_with(".partial"));
            // Only leftovers: a partial folder of this moment is being filled.
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|d| d.as_secs() > 600);
            if partial && old {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let Ok(all) = list(data_dir, character) else {
        return;
    };
    let now = crate::now_millis();
    let (mut kept, mut bytes) = (0usize, 0u64);
    for m in &all {
        let remove = if m.kind == Kind::Delete {
            now - m.created_ms > TRASH_DAYS * 86_400_000
        } else {
            kept += 1;
            bytes += m.bytes();
            // The newest one is always kept.
            kept > 1 && (kept > budget.keep || bytes > budget.max_bytes)
        };
        if remove {
            let _ = std::fs::remove_dir_all(root.join(&m.id));
        }
    }
    if list(data_dir, character).is_ok_and(|l| l.is_empty()) {
        let _ = std::fs::remove_dir(&root);
    }
}

/// At start-up: the trash older than [`TRASH_DAYS`] expires. Read from the
/// folder names alone (an id starts with its time and ends with its kind), so
/// a start costs one listing per character with snapshots; the budget of each
/// character is applied at its next snapshot.
pub fn expire_trash(data_dir: &Path) {
    let limit = crate::now_millis() - TRASH_DAYS * 86_400_000;
    for c in characters(data_dir) {
        let Ok(root) = character_root(data_dir, &c) else {
            continue;
        };
        let Ok(rd) = std::fs::read_dir(&root) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(id) = name.to_str() else { continue };
            if id_kind_is(id, Kind::Delete) && id_millis(id).is_some_and(|ms| ms < limit) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let _ = std::fs::remove_dir(&root);
    }
}

/// The time in an id (`<13 digits>-…`).
fn id_millis(id: &str) -> Option<i64> {
    id.split('-').next()?.parse().ok()
}

/// Whether an id names a snapshot of `kind` (`<ms>-<kind>` or `<ms>-<kind>-<n>`).
fn id_kind_is(id: &str, kind: Kind) -> bool {
    valid_id(id) && id.split('-').nth(1) == Some(kind.as_str())
}

/// The snapshots of `kind` of `character`, newest first: only their
/// descriptions are read.
pub fn list_kind(data_dir: &Path, character: &str, kind: Kind) -> Vec<Meta> {
    let Ok(root) = character_root(data_dir, character) else {
        return Vec::new();
    };
    let mut out: Vec<Meta> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_str().is_some_and(|n| id_kind_is(n, kind)))
                .filter_map(|e| read_meta(&e.path(), character).ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| (b.created_ms, &b.id).cmp(&(a.created_ms, &a.id)));
    out
}

/// Put the files of snapshot `id` of `from` back into `memory/<into>/`, each
/// by an atomic replacement (a copy into a temporary file, then a rename; the
/// time index by the online backup). The caller holds the memory locks and
/// has closed the time index.
pub fn put_back(data_dir: &Path, from: &str, id: &str, into: &str) -> Result<Meta, SnapshotError> {
    let meta = read(data_dir, from, id)?;
    let src_dir = snapshot_dir(data_dir, from, id)?;
    crate::paths::safe_name(into).map_err(|_| SnapshotError::BadName(into.to_string()))?;
    let unit = data_dir.join(crate::layout::MEMORY).join(into);
    std::fs::create_dir_all(&unit)?;
    for f in &meta.files {
        crate::paths::safe_name(&f.name).map_err(|_| SnapshotError::BadName(f.name.clone()))?;
        let src = src_dir.join(&f.name);
        let dst = unit.join(&f.name);
        let tmp = unit.join(format!(".{}.{}.tmp", f.name, crate::store::temp_token()));
        let placed = (|| {
            if f.how == How::Sqlite {
                sqlite_copy(&src, &tmp)?;
                for side in ["-journal", "-wal", "-shm"] {
                    let mut p = dst.clone().into_os_string();
                    p.push(side);
                    let _ = std::fs::remove_file(PathBuf::from(p));
                }
            } else {
                copy_synced(&src, &tmp)?;
            }
            std::fs::rename(&tmp, &dst)
        })();
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    }
    sync_dir(&unit);
    Ok(meta)
}

/// What a kept file holds: its entry count (a JSON array's length, the
/// `reflections` of an object, the persona's facts) and, where the entries
/// carry one, the dates of the oldest and newest.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[schema(as = SnapshotFileSummary)]
pub struct FileSummary {
    pub name: String,
    pub size: u64,
    pub how: How,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
}

/// Summaries of every file of a snapshot (reads each kept file once).
pub fn summarise(data_dir: &Path, meta: &Meta) -> Result<Vec<FileSummary>, SnapshotError> {
    let dir = snapshot_dir(data_dir, &meta.character, &meta.id)?;
    let mut out = Vec::new();
    for f in &meta.files {
        let mut s = FileSummary {
            name: f.name.clone(),
            size: f.size,
            how: f.how,
            entries: None,
            oldest: None,
            newest: None,
        };
        let p = dir.join(&f.name);
        if f.how == How::Sqlite {
            s.entries = sqlite_lines(&p);
        } else if let Ok(Some(v)) = crate::store::read_json::<Value>(&p) {
            let items: Vec<&Value> = match &v {
                Value::Array(a) => a.iter().collect(),
                Value::Object(o) => match o.get("reflections").and_then(Value::as_array) {
                    Some(a) => a.iter().collect(),
                    None if f.name == "persona.json" => o
                        .values()
                        .filter_map(|s| s.get("facts").and_then(Value::as_array))
                        .flatten()
                        .collect(),
                    None => Vec::new(),
                },
                _ => Vec::new(),
            };
            if v.is_array() || !items.is_empty() || f.name == "persona.json" {
                s.entries = Some(items.len());
            }
            let mut dates: Vec<&str> = items
                .iter()
                .filter_map(|i| i.get("created_at").and_then(Value::as_str))
                .collect();
            dates.sort_unstable();
            s.oldest = dates.first().map(|d| d.to_string());
            s.newest = dates.last().map(|d| d.to_string());
        }
        out.push(s);
    }
    Ok(out)
}

/// Lines of the time index (`memory_lines`), when it can be read.
fn sqlite_lines(p: &Path) -> Option<usize> {
    let c = rusqlite::Connection::open_with_flags(p, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .ok()?;
    c.query_row("SELECT count(*) FROM memory_lines", [], |r| {
        r.get::<_, i64>(0)
    })
    .ok()
    .map(|n| n.max(0) as usize)
}

/// Move `snapshots/<old>` to `snapshots/<new>` after a rename (the snapshots
/// follow the character); nothing when there are none. A destination that
/// exists (snapshots of a deleted character of the new name) is merged into.
pub fn follow_rename(data_dir: &Path, old: &str, new: &str) -> std::io::Result<()> {
    let (Ok(from), Ok(to)) = (character_root(data_dir, old), character_root(data_dir, new)) else {
        return Ok(());
    };
    if !from.is_dir() {
        return Ok(());
    }
    if !to.exists() {
        return std::fs::rename(&from, &to);
    }
    for e in std::fs::read_dir(&from)?.flatten() {
        let dst = to.join(e.file_name());
        if !dst.exists() {
            std::fs::rename(e.path(), dst)?;
        }
    }
    let _ = std::fs::remove_dir_all(&from);
    Ok(())
}

/// [`take`] before a change, for a writer: a failure is logged and the change
/// goes on (a snapshot is a way back, not a condition of the change); the
/// prune runs later, off the writer's path.
pub fn before_change(data_dir: &Path, t: &Take) -> Option<Meta> {
    match take(data_dir, t) {
        Ok(m) => {
            let (d, c) = (data_dir.to_path_buf(), t.character.to_string());
            crate::task::later(move || prune(&d, &c));
            Some(m)
        }
        Err(e) => {
            tracing::warn!(
                "no snapshot of {} before {}: {e}",
                t.character,
                t.kind.as_str()
            );
            None
        }
    }
}

/// The trash of a character about to be deleted: its profile and every unit
/// file (the time index by the online backup). `None` when the character does
/// not exist (the delete then answers its error).
pub async fn trash_before_delete(state: &crate::AppState, character: &str) -> Option<Meta> {
    let profile = state.characters.profile(character)?;
    let (d, c) = (state.data_dir().to_path_buf(), character.to_string());
    tokio::task::spawn_blocking(move || {
        let files = all_files();
        before_change(
            &d,
            &Take {
                character: &c,
                kind: Kind::Delete,
                files: &files,
                profile: Some(profile.into_value()),
                renamed_from: None,
                restored: None,
            },
        )
    })
    .await
    .ok()
    .flatten()
}

/// Delete a character, its memory going to the trash first: what every
/// delete route calls (the characters route, the original pages' route).
/// Its card image and assets are removed (docs/characters.md); the trash
/// keeps the card's data in the profile, not those files.
pub async fn delete_to_trash(
    state: &crate::AppState,
    character: &str,
) -> Result<(), crate::characters::CharacterError> {
    let profile = state.characters.profile(character);
    let trash = trash_before_delete(state, character).await;
    let r = state.characters.delete(character).await;
    match (&r, trash) {
        (Err(_), Some(t)) => discard(state.data_dir(), character, &t.id),
        (Ok(()), _) => {
            if let Some(p) = profile {
                let root = state.store.root().to_path_buf();
                let _ = tokio::task::spawn_blocking(move || crate::cards::remove_files(&root, &p))
                    .await;
            }
        }
        _ => {}
    }
    r
}

/// Remove one snapshot (taken before a change that did not happen after all).
pub fn discard(data_dir: &Path, character: &str, id: &str) {
    if let Ok(dir) = snapshot_dir(data_dir, character, id) {
        let _ = std::fs::remove_dir_all(dir);
        // Folders left empty go too (only an empty folder can be removed).
        if let Ok(root) = character_root(data_dir, character) {
            let _ = std::fs::remove_dir(root);
            let _ = std::fs::remove_dir(data_dir.join(ROOT));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(data: &Path, c: &str) -> PathBuf {
        let d = data.join("memory").join(c);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_linked_snapshot_keeps_the_replaced_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let u = unit(dir.path(), "Mika");
        std::fs::write(u.join("recent.json"), b"[1]").unwrap();
        let m = take(
            dir.path(),
            &Take {
                character: "Mika",
                kind: Kind::Save,
                files: &["recent.json", "facts.json"],
                profile: None,
                renamed_from: None,
                restored: None,
            },
        )
        .unwrap();
        assert_eq!(m.files.len(), 1, "a missing file is skipped");
        assert_eq!(m.files[0].how, How::Link);
        crate::store::atomic_write(&u.join("recent.json"), b"[1,2]").unwrap();
        let p = file_path(dir.path(), "Mika", &m.id, "recent.json").unwrap();
        assert_eq!(std::fs::read(p).unwrap(), b"[1]");
        put_back(dir.path(), "Mika", &m.id, "Mika").unwrap();
        assert_eq!(std::fs::read(u.join("recent.json")).unwrap(), b"[1]");
        assert!(matches!(
            read(dir.path(), "Mika", "../x"),
            Err(SnapshotError::NotFound)
        ));
        assert!(character_root(dir.path(), "..").is_err());
    }

    #[test]
    fn the_budget_keeps_the_newest_and_the_trash() {
        let dir = tempfile::tempdir().unwrap();
        let u = unit(dir.path(), "Mika");
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join(CONFIG), br#"{"keep": 3}"#).unwrap();
        std::fs::write(u.join("recent.json"), b"[1]").unwrap();
        let t = |kind| Take {
            character: "Mika",
            kind,
            files: &["recent.json"],
            profile: None,
            renamed_from: None,
            restored: None,
        };
        take(dir.path(), &t(Kind::Delete)).unwrap();
        for _ in 0..5 {
            take(dir.path(), &t(Kind::Save)).unwrap();
        }
        prune(dir.path(), "Mika");
        let l = list(dir.path(), "Mika").unwrap();
        assert_eq!(l.iter().filter(|m| m.kind == Kind::Save).count(), 3);
        assert_eq!(l.iter().filter(|m| m.kind == Kind::Delete).count(), 1);
        assert_eq!(list_kind(dir.path(), "Mika", Kind::Delete).len(), 1);

        // A trash older than 30 days expires at the next start; a fresh one stays.
        let old = character_root(dir.path(), "Mika")
            .unwrap()
            .join("0000000000001-delete");
        std::fs::create_dir_all(&old).unwrap();
        expire_trash(dir.path());
        assert!(!old.exists());
        assert_eq!(list_kind(dir.path(), "Mika", Kind::Delete).len(), 1);
    }
}

//! Whole backups of the data folder and their restore (docs/data.md § Backup
//! and restore): `companiond backup --out FILE`, `companiond restore FILE`,
//! `GET /api/backup` (streamed) and `POST /api/backup/restore` (an archive
//! checked and kept for the next start).
//!
//! The archive is a ZIP (the `zip` crate, already used by the avatar and
//! jukebox imports): first `companiond-backup.json` ([`Manifest`]: the format,
//! which this version reads up to [`FORMAT`]), then every file of the data
//! folder under its relative path, sorted. Each document is read whole through
//! one handle (every writer replaces documents by rename, so a read sees one
//! version, never half of one); a SQLite database (`*.db`) is copied with
//! SQLite's online backup, so it is consistent while the server writes it.
//! Left out: the lock and instance files, the snapshots and the trash
//! (`snapshots/`, unless asked for), the cloud-save download backups
//! (`cloudsave_backups/`), an
//! archive waiting to be restored, crash leftovers and SQLite side files.
//! Every `*ApiKey` value in `config/` is written empty unless the secrets are
//! asked for.
//!
//! Neither the route nor the command holds the archive in memory: members are
//! copied file to archive through a buffer. The `zip` writer of this tree
//! (2.6) needs to seek back over each member's header, so the route writes the
//! archive into a temporary file beside the data dir and streams that file
//! out as it answers (then removes it); the command writes the file it was
//! given.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::instance::{InstanceLock, INFO_FILE, LOCK_FILE};

/// The archive format this version writes and the newest it reads.
pub const FORMAT: u32 = 1;
/// The first member of an archive.
pub const MANIFEST: &str = "companiond-backup.json";
/// An archive kept by `POST /api/backup/restore`, applied at the next start.
pub const PENDING: &str = "restore-pending.zip";
/// Top-level folders of the data dir a backup leaves out (the snapshots
/// unless asked for).
const LEFT_OUT_DIRS: &[&str] = &["cloudsave_backups"];

/// What a backup holds beside the data.
#[derive(Clone, Copy, Debug, Default)]
pub struct Include {
    /// The `*ApiKey` values (else written empty).
    pub secrets: bool,
    /// `snapshots/`: every character's snapshots and the trash.
    pub snapshots: bool,
}

/// `companiond-backup.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub app: String,
    pub version: String,
    pub created_at: String,
    /// Whether the `*ApiKey` values are in the archive.
    pub secrets: bool,
    /// Whether `snapshots/` (snapshots and trash) is in the archive.
    #[serde(default)]
    pub snapshots: bool,
}

/// What a backup wrote.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Written {
    pub files: usize,
    pub bytes: u64,
}

/// The files of `data_dir` a backup holds, relative, with `/` separators,
/// sorted. Symbolic links are not followed (nor kept).
pub fn files_of(data_dir: &Path, snapshots: bool) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(data_dir.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        for e in std::fs::read_dir(&dir)?.flatten() {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(ft) = e.file_type() else { continue };
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if ft.is_dir() {
                let left_out = LEFT_OUT_DIRS.contains(&name.as_str())
                    || (!snapshots && name == crate::snapshots::ROOT);
                if rel.is_empty() && left_out {
                    continue;
                }
                stack.push((e.path(), path));
            } else if ft.is_file() && !left_out(&rel, &name) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn left_out(rel: &str, name: &str) -> bool {
    let top = rel.is_empty();
    (top && (name == LOCK_FILE || name == INFO_FILE || name == PENDING))
        || crate::store::is_leftover_temp(name)
        || name.ends_with("-journal")
        || name.ends_with("-wal")
        || name.ends_with("-shm")
        || (name.starts_with('.') && (name.ends_with(".tmp") || name.ends_with(".partial")))
}

fn is_db(rel: &str) -> bool {
    rel.ends_with(".db")
}

/// Write the archive of `data_dir` to `out`.
pub fn write_archive<W: Write + Seek>(
    data_dir: &Path,
    out: W,
    include: Include,
) -> std::io::Result<Written> {
    let secrets = include.secrets;
    let err = std::io::Error::other;
    let mut zip = zip::ZipWriter::new(out);
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    let manifest = Manifest {
        format: FORMAT,
        app: "companiond".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        created_at: crate::now_rfc3339(),
        secrets,
        snapshots: include.snapshots,
    };
    zip.start_file(MANIFEST, deflated).map_err(err)?;
    zip.write_all(&serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?)?;
    let mut written = Written::default();
    for rel in files_of(data_dir, include.snapshots)? {
        let path = data_dir.join(&rel);
        if is_db(&rel) {
            let tmp = std::env::temp_dir().join(format!(
                "companiond-backup-{}.db",
                crate::store::temp_token()
            ));
            let copied = crate::snapshots::sqlite_copy(&path, &tmp);
            let added = copied.and_then(|()| {
                let mut f = std::fs::File::open(&tmp)?;
                zip.start_file(rel.as_str(), deflated).map_err(err)?;
                std::io::copy(&mut f, &mut zip)
            });
            let _ = std::fs::remove_file(&tmp);
            match added {
                Ok(n) => {
                    written.files += 1;
                    written.bytes += n;
                }
                // Gone meanwhile (a deleted character's index): nothing to keep.
                Err(_) if !path.exists() => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        let mut f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        zip.start_file(rel.as_str(), deflated).map_err(err)?;
        let n = if !secrets && rel.starts_with("config/") && rel.ends_with(".json") {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            let bytes = without_secrets(bytes);
            zip.write_all(&bytes)?;
            bytes.len() as u64
        } else {
            std::io::copy(&mut f, &mut zip)?
        };
        written.files += 1;
        written.bytes += n;
    }
    zip.finish().map_err(err)?.flush()?;
    Ok(written)
}

/// The document with every non-empty `*ApiKey` value emptied (the bytes as
/// they are when there is none, or when they are not JSON).
fn without_secrets(bytes: Vec<u8>) -> Vec<u8> {
    if !bytes.windows(6).any(|w| w == b"ApiKey") {
        return bytes;
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return bytes;
    };
    fn strip(v: &mut Value) -> bool {
        let mut changed = false;
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k.ends_with("ApiKey") {
                        if x.as_str().is_some_and(|s| !s.is_empty())
                            || !(x.is_string() || x.is_null())
                        {
                            *x = Value::String(String::new());
                            changed = true;
                        }
                    } else {
                        changed |= strip(x);
                    }
                }
            }
            Value::Array(a) => {
                for x in a {
                    changed |= strip(x);
                }
            }
            _ => {}
        }
        changed
    }
    if !strip(&mut v) {
        return bytes;
    }
    serde_json::to_vec_pretty(&v).unwrap_or(bytes)
}

/// `companiond backup --out FILE`: the archive written beside `out` under a
/// temporary name, synced, then renamed into place.
pub fn backup_to_file(data_dir: &Path, out: &Path, include: Include) -> Result<Written, String> {
    if !data_dir.is_dir() {
        return Err(format!(
            "data directory {} does not exist",
            data_dir.display()
        ));
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("backup.zip");
    let tmp = dir.join(format!(".{name}.{}.tmp", crate::store::temp_token()));
    let result = (|| {
        let f = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let written = write_archive(data_dir, &mut w, include)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, out)?;
        Ok::<_, std::io::Error>(written)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| format!("cannot write the backup {}: {e}", out.display()))
}

/// Why an archive cannot be restored (the restore route's status by variant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    /// The file could not be read (a fault of this machine, not of the archive).
    Unreadable(String),
    /// Not a ZIP archive, or a broken one.
    NotZip(String),
    /// A ZIP without a readable companiond manifest.
    NotBackup(String),
    /// Written by a newer companiond (its format number).
    Newer(u64),
    /// A member whose name would leave the data folder.
    BadMember(String),
}

impl std::fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveError::Unreadable(e) => write!(f, "the archive cannot be read: {e}"),
            ArchiveError::NotZip(e) => write!(f, "the file is not a ZIP archive: {e}"),
            ArchiveError::NotBackup(e) => write!(f, "not a companiond backup: {e}"),
            ArchiveError::Newer(format) => write!(
                f,
                "the backup is of format {format}, newer than this companiond reads ({FORMAT}): upgrade companiond first"
            ),
            ArchiveError::BadMember(name) => write!(f, "bad member {name:?}"),
        }
    }
}

/// Read and check an archive's manifest: refused when it is not a companiond
/// backup or of a newer format than this version reads.
pub fn check_archive<R: Read + Seek>(
    archive: &mut zip::ZipArchive<R>,
) -> Result<Manifest, ArchiveError> {
    let mut m = archive
        .by_name(MANIFEST)
        .map_err(|_| ArchiveError::NotBackup(format!("no {MANIFEST}")))?;
    let mut bytes = Vec::new();
    m.read_to_end(&mut bytes)
        .map_err(|e| ArchiveError::NotZip(format!("cannot read {MANIFEST}: {e}")))?;
    let bad = |e: serde_json::Error| ArchiveError::NotBackup(format!("{MANIFEST}: {e}"));
    let v: Value = serde_json::from_slice(&bytes).map_err(bad)?;
    let format = v.get("format").and_then(Value::as_u64).unwrap_or(0);
    if format > FORMAT as u64 {
        return Err(ArchiveError::Newer(format));
    }
    serde_json::from_value(v).map_err(bad)
}

/// Check the archive at `path` (opened, manifest read, every member's name
/// checked).
pub fn check_file(path: &Path) -> Result<Manifest, ArchiveError> {
    let f = std::fs::File::open(path).map_err(|e| ArchiveError::Unreadable(e.to_string()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(f))
        .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
    let m = check_archive(&mut zip)?;
    for i in 0..zip.len() {
        let f = zip
            .by_index_raw(i)
            .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
        member_path(f.name())?;
    }
    Ok(m)
}

/// A member's relative path, checked: plain segments only.
fn member_path(name: &str) -> Result<Vec<String>, ArchiveError> {
    let bad = || ArchiveError::BadMember(name.to_string());
    let segs = crate::paths::clean_segments(name).map_err(|_| bad())?;
    if segs.is_empty() || name.starts_with('/') || name.starts_with('\\') {
        return Err(bad());
    }
    Ok(segs)
}

/// What a restore did.
#[derive(Clone, Debug, Serialize)]
pub struct Restored {
    pub files: usize,
    /// Where the replaced folder's contents were kept.
    pub replaced: Option<PathBuf>,
    pub manifest_created_at: String,
}

/// `companiond restore FILE`: refused while a server holds the data dir's
/// lock; see [`restore_locked`].
pub fn restore_from_file(data_dir: &Path, archive: &Path) -> Result<Restored, String> {
    check_file(archive).map_err(|e| e.to_string())?;
    let lock = InstanceLock::acquire(data_dir)?;
    let r = restore_locked(data_dir, archive);
    drop(lock);
    r
}

/// Replace the data folder's contents with the archive's, the lock held.
///
/// The archive is extracted into a folder beside the data dir
/// (`<data>.restoring-<ms>`); only when all of it is there are the data dir's
/// entries (all but its lock files) moved aside into `<data>.replaced-<ms>`
/// and the restored ones moved in. A failure before that changes nothing; an
/// interruption during the moves leaves every file in one of the two folders.
pub fn restore_locked(data_dir: &Path, archive: &Path) -> Result<Restored, String> {
    let f = std::fs::File::open(archive)
        .map_err(|e| format!("cannot open {}: {e}", archive.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(f))
        .map_err(|e| format!("{} is not a ZIP archive: {e}", archive.display()))?;
    let manifest = check_archive(&mut zip).map_err(|e| e.to_string())?;
    let ms = crate::now_millis();
    let base = data_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("data")
        .to_string();
    let parent = data_dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = parent.join(format!("{base}.restoring-{ms}"));
    let aside = parent.join(format!("{base}.replaced-{ms}"));
    std::fs::create_dir(&staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    let extracted = extract(&mut zip, &staging);
    let files = match extracted {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    if !manifest.secrets {
        carry_secrets(data_dir, &staging);
    }
    let moved = (|| {
        let keep = |n: &std::ffi::OsStr| n == LOCK_FILE || n == INFO_FILE;
        let mut replaced = false;
        for e in std::fs::read_dir(data_dir)?.flatten() {
            if keep(&e.file_name()) {
                continue;
            }
            if !replaced {
                std::fs::create_dir(&aside)?;
                replaced = true;
            }
            std::fs::rename(e.path(), aside.join(e.file_name()))?;
        }
        for e in std::fs::read_dir(&staging)?.flatten() {
            std::fs::rename(e.path(), data_dir.join(e.file_name()))?;
        }
        std::fs::remove_dir(&staging)?;
        Ok::<_, std::io::Error>(replaced)
    })();
    match moved {
        Ok(replaced) => Ok(Restored {
            files,
            replaced: replaced.then_some(aside),
            manifest_created_at: manifest.created_at,
        }),
        Err(e) => Err(format!(
            "the restore stopped while moving folders ({e}): the replaced files are in {}, the restored ones in {}",
            aside.display(),
            staging.display()
        )),
    }
}

/// An archive without secrets restored over a folder that has them: every
/// `*ApiKey` left empty in a restored `config/*.json` takes the value the
/// replaced folder's same document holds (restoring on the same computer
/// keeps the keys; on a new one they are entered again).
fn carry_secrets(data_dir: &Path, staging: &Path) {
    let Ok(rd) = std::fs::read_dir(staging.join("config")) else {
        return;
    };
    for e in rd.flatten() {
        let restored = e.path();
        if restored.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(Some(old)) =
            crate::store::read_json::<Value>(&data_dir.join("config").join(e.file_name()))
        else {
            continue;
        };
        let Ok(Some(mut new)) = crate::store::read_json::<Value>(&restored) else {
            continue;
        };
        fn fill(new: &mut Value, old: &Value) -> bool {
            let (Value::Object(n), Value::Object(o)) = (new, old) else {
                return false;
            };
            let mut changed = false;
            for (k, v) in n.iter_mut() {
                let Some(was) = o.get(k) else { continue };
                if k.ends_with("ApiKey") {
                    if v.as_str() == Some("") && was.as_str().is_some_and(|w| !w.is_empty()) {
                        *v = was.clone();
                        changed = true;
                    }
                } else {
                    changed |= fill(v, was);
                }
            }
            changed
        }
        if fill(&mut new, &old) {
            let _ = crate::store::atomic_write_json(&restored, &new);
        }
    }
}

fn extract<R: Read + Seek>(zip: &mut zip::ZipArchive<R>, into: &Path) -> Result<usize, String> {
    let mut n = 0;
    for i in 0..zip.len() {
        let mut m = zip.by_index(i).map_err(|e| e.to_string())?;
        let name = m.name().to_string();
        if name == MANIFEST || m.is_dir() {
            continue;
        }
        let segs = member_path(&name).map_err(|e| e.to_string())?;
        let mut dst = into.to_path_buf();
        for s in &segs {
            dst.push(s);
        }
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p)
                .map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dst)
            .map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
        std::io::copy(&mut m, &mut out).map_err(|e| format!("cannot extract {name}: {e}"))?;
        out.sync_all()
            .map_err(|e| format!("cannot write {}: {e}", dst.display()))?;
        n += 1;
    }
    Ok(n)
}

/// At start-up, the lock held and nothing read yet: apply an archive that
/// `POST /api/backup/restore` kept (`<data>/restore-pending.zip`). A failure
/// leaves the data as it was and the archive renamed `restore-failed-<ms>.zip`.
pub fn apply_pending(data_dir: &Path) -> Option<Result<Restored, String>> {
    let pending = data_dir.join(PENDING);
    if !pending.is_file() {
        return None;
    }
    // Out of the folder first: the restore replaces the folder's contents.
    let parent = data_dir.parent().unwrap_or(Path::new("."));
    let base = data_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("data");
    let held = parent.join(format!("{base}.{}", PENDING));
    if let Err(e) = std::fs::rename(&pending, &held) {
        return Some(Err(format!("cannot read {}: {e}", pending.display())));
    }
    let r = restore_locked(data_dir, &held);
    match &r {
        Ok(_) => {
            let _ = std::fs::remove_file(&held);
        }
        Err(_) => {
            let failed = data_dir.join(format!("restore-failed-{}.zip", crate::now_millis()));
            let _ = std::fs::rename(&held, failed);
        }
    }
    Some(r)
}

/// `companiond backup`: one line on stdout when done, one on stderr and exit
/// 1 on failure.
pub fn run_backup(a: &crate::options::BackupArgs) -> i32 {
    let data_dir = match crate::options::resolve_data_dir(a.data_dir.clone()) {
        Ok(d) => d,
        Err(e) => return failed(&e),
    };
    let include = Include {
        secrets: a.with_secrets,
        snapshots: a.with_snapshots,
    };
    match backup_to_file(&data_dir, &a.out, include) {
        Ok(w) => {
            println!(
                "backup of {} written to {} ({} files, {} bytes before compression{}{})",
                data_dir.display(),
                a.out.display(),
                w.files,
                w.bytes,
                if a.with_secrets {
                    ", secrets included"
                } else {
                    ", secrets left out"
                },
                if a.with_snapshots {
                    ", snapshots included"
                } else {
                    ""
                }
            );
            0
        }
        Err(e) => failed(&e),
    }
}

/// `companiond restore FILE`: refused while a server holds the data dir.
pub fn run_restore(a: &crate::options::RestoreArgs) -> i32 {
    let data_dir = match crate::options::resolve_data_dir(a.data_dir.clone()) {
        Ok(d) => d,
        Err(e) => return failed(&e),
    };
    match restore_from_file(&data_dir, &a.file) {
        Ok(r) => {
            match &r.replaced {
                Some(p) => println!(
                    "restored {} files into {}; the replaced files are in {}",
                    r.files,
                    data_dir.display(),
                    p.display()
                ),
                None => println!("restored {} files into {}", r.files, data_dir.display()),
            }
            0
        }
        Err(e) => failed(&e),
    }
}

fn failed(e: &str) -> i32 {
    eprintln!("companiond: {e}");
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_emptied_and_other_documents_kept_as_they_are() {
        let doc = serde_json::to_vec_pretty(&serde_json::json!({
            "coreApi": "x", "coreApiKey": "sk-1", "nested": {"ttsApiKey": "k"}, "emptyApiKey": ""
        }))
        .unwrap();
        let out: Value = serde_json::from_slice(&without_secrets(doc)).unwrap();
        assert_eq!(out["coreApiKey"], "");
        assert_eq!(out["nested"]["ttsApiKey"], "");
        assert_eq!(out["coreApi"], "x");
        let plain = b"{\n  \"a\": 1\n}".to_vec();
        assert_eq!(without_secrets(plain.clone()), plain);
    }

    #[test]
    fn a_restore_without_secrets_keeps_the_keys_of_the_replaced_folder() {
        let t = tempfile::tempdir().unwrap();
        let data = t.path().join("data");
        std::fs::create_dir_all(data.join("config")).unwrap();
        let cfg =
            serde_json::json!({"coreApi": "a", "coreApiKey": "sk-old", "summaryModelApiKey": ""});
        crate::store::atomic_write_json(&data.join("config/core_config.json"), &cfg).unwrap();
        let archive = t.path().join("b.zip");
        let f = std::fs::File::create(&archive).unwrap();
        write_archive(&data, std::io::BufWriter::new(f), Include::default()).unwrap();
        // Changed since: another key, another provider.
        let now = serde_json::json!({"coreApi": "b", "coreApiKey": "sk-new", "summaryModelApiKey": "sk-s"});
        crate::store::atomic_write_json(&data.join("config/core_config.json"), &now).unwrap();
        let r = restore_locked(&data, &archive).unwrap();
        let got: Value = crate::store::read_json(&data.join("config/core_config.json"))
            .unwrap()
            .unwrap();
        assert_eq!(got["coreApi"], "a", "the archive's settings");
        assert_eq!(got["coreApiKey"], "sk-new", "the replaced folder's key");
        assert_eq!(got["summaryModelApiKey"], "sk-s");
        let aside: Value =
            crate::store::read_json(&r.replaced.unwrap().join("config/core_config.json"))
                .unwrap()
                .unwrap();
        assert_eq!(aside, now);
    }

    #[test]
    fn an_archive_of_a_newer_format_is_refused_and_members_are_contained() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.zip");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
        let o = zip::write::SimpleFileOptions::default();
        z.start_file(MANIFEST, o).unwrap();
        z.write_all(br#"{"format": 99, "app": "companiond", "version": "9", "created_at": "", "secrets": false}"#)
            .unwrap();
        z.finish().unwrap();
        assert!(matches!(check_file(&p), Err(ArchiveError::Newer(99))));
        assert!(member_path("../x").is_err());
        assert!(member_path("/etc/passwd").is_err());
        assert!(member_path("config/a.json").is_ok());
    }
}

//! The operation backup of a download and the application of a verified
//! unit: copies of every local file an import touches (kept under
//! `cloudsave_backups/<timestamp>/` when asked, with `_operation.json`
//! describing them), the atomic move of the members into the memory folder,
//! and the restore that puts every touched file back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use companiond_core::store;
use companiond_core::task::TaskFailed;
use serde_json::{json, Value};

use crate::unit;

/// A step of an import failed (message for the rollback report).
#[derive(Debug)]
pub struct StepFailed(pub String);

impl From<TaskFailed> for StepFailed {
    fn from(e: TaskFailed) -> Self {
        StepFailed(e.to_string())
    }
}

/// The operation backup: copies of every local file a download touches.
#[derive(Clone)]
pub struct Backup {
    pub root: PathBuf,
    mem_dir: PathBuf,
    mem_dir_existed: bool,
    /// File name in the memory folder → whether it existed (and was copied).
    targets: BTreeMap<String, bool>,
}

fn all_touched() -> impl Iterator<Item = &'static str> {
    unit::MANAGED_FILES
        .iter()
        .chain(unit::SQLITE_SIDECARS.iter())
        .copied()
}

fn timestamp_dir(base: &Path) -> std::io::Result<PathBuf> {
    let now = time::OffsetDateTime::now_utc();
    let ts = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}{:03}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.millisecond()
    );
    std::fs::create_dir_all(base)?;
    for i in 0..100 {
        let p = if i == 0 {
            base.join(&ts)
        } else {
            base.join(format!("{ts}-{i}"))
        };
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("cannot create a backup folder"))
}

impl Backup {
    /// Copy the files into `<base>/<ts>/` (or a private folder under `staging`
    /// when no backup is to be kept) and describe them in `_operation.json`.
    pub fn take(
        name: &str,
        mem_dir: &Path,
        previous_profile: Option<&Value>,
        character_existed: bool,
        data: &Path,
        base: Option<&Path>,
        staging: &Path,
    ) -> std::io::Result<Backup> {
        let root = match base {
            Some(b) => timestamp_dir(b)?,
            None => {
                std::fs::create_dir_all(staging)?;
                tempfile::Builder::new()
                    .prefix("rollback-")
                    .tempdir_in(staging)?
                    .keep()
            }
        };
        let mem_dir_existed = mem_dir.is_dir();
        let mut targets = BTreeMap::new();
        std::fs::create_dir_all(root.join("memory"))?;
        for f in all_touched() {
            let src = mem_dir.join(f);
            let exists = std::fs::symlink_metadata(&src).is_ok_and(|m| m.file_type().is_file());
            if exists {
                std::fs::copy(&src, root.join("memory").join(f))?;
            }
            targets.insert(f.to_string(), exists);
        }
        let chars = data.join("config").join("characters.json");
        if chars.is_file() {
            std::fs::create_dir_all(root.join("config"))?;
            std::fs::copy(&chars, root.join("config").join("characters.json"))?;
        }
        let op = json!({
            "schema_version": 1,
            "operation": "character_download",
            "character_name": name,
            "created_at_utc": companiond_core::now_rfc3339(),
            "character_existed": character_existed,
            "memory_dir_existed": mem_dir_existed,
            "previous_profile": previous_profile,
            "targets": targets.iter().map(|(f, had)| json!({
                "relative_path": format!("memory/{name}/{f}"),
                "had_backup": had,
                "is_dir": false,
            })).collect::<Vec<_>>(),
        });
        store::atomic_write_json(&root.join("_operation.json"), &op)?;
        Ok(Backup {
            root,
            mem_dir: mem_dir.to_path_buf(),
            mem_dir_existed,
            targets,
        })
    }

    /// Put every touched file back as it was (atomic per file).
    pub fn restore(&self) -> Result<(), StepFailed> {
        let mut errors = Vec::new();
        for (f, had) in &self.targets {
            let dst = self.mem_dir.join(f);
            let r = if *had {
                atomic_copy(&self.root.join("memory").join(f), &dst)
            } else {
                match std::fs::remove_file(&dst) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                }
            };
            if let Err(e) = r {
                errors.push(format!("{f}: {e}"));
            }
        }
        if !self.mem_dir_existed {
            // Only an empty folder is removed.
            let _ = std::fs::remove_dir(&self.mem_dir);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(StepFailed(format!("restore failed: {}", errors.join(", "))))
        }
    }

    pub fn discard(&self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Move each verified member into the memory folder (rename: atomic per file),
/// then delete managed files the unit does not have (and stale SQLite sidecars).
pub fn apply_files(
    mem_dir: &Path,
    members: &BTreeMap<String, PathBuf>,
    backup: &Backup,
) -> std::io::Result<()> {
    let remove = |p: PathBuf| match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    std::fs::create_dir_all(mem_dir)?;
    // The SQLite side files belong to the database being replaced or removed.
    let db_touched = members.contains_key(unit::SQLITE_FILE)
        || backup.targets.get(unit::SQLITE_FILE) == Some(&true);
    if db_touched {
        for side in unit::SQLITE_SIDECARS {
            remove(mem_dir.join(side))?;
        }
    }
    for (f, src) in members {
        let dst = mem_dir.join(f);
        // Same file system (both under the data dir): rename is atomic; else copy + rename.
        if std::fs::rename(src, &dst).is_err() {
            atomic_copy(src, &dst)?;
        }
    }
    for (f, had) in &backup.targets {
        if *had && !members.contains_key(f) && unit::is_managed(f) {
            remove(mem_dir.join(f))?;
        }
    }
    if let Ok(d) = std::fs::File::open(mem_dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Copy `src` over `dst` atomically (streamed into a temporary file beside
/// `dst`, fsync, rename).
fn atomic_copy(src: &Path, dst: &Path) -> std::io::Result<()> {
    let dir = dst.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(".restore-")
        .tempfile_in(dir)?;
    {
        let mut from = std::fs::File::open(src)?;
        let mut to = tmp.as_file();
        std::io::copy(&mut from, &mut to)?;
        to.sync_all()?;
    }
    tmp.persist(dst).map_err(|e| e.error)?;
    Ok(())
}

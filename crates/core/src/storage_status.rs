//! The storage flags of the status and storage-location answers.
//!
//! The flags are recomputed on every call (no stored state machine; a file found
//! valid JSON is remembered by its stamp, not parsed again):
//! * `migration_pending` / `legacy_cleanup_pending`: the marker document
//!   `<data>/state/storage_migration.json` (`{"pending": bool, "legacy_cleanup_pending": bool,
//!   "reason": str}`) written by whoever runs a storage migration, or the core overlay;
//! * `recovery_required`: `config/core_config.json` or `config/characters.json` exists but is
//!   not valid JSON, the marker document itself is unreadable, or the core overlay says so;
//! * `selection_required`: the data directory is no longer writable (the user has to pick
//!   another storage location), or the core overlay says so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use crate::json::AnyJson;
use crate::layout as docs;
use crate::stamp::Stamp;
use crate::state::StorageStatus;

/// The marker document of a storage migration in progress.
pub const MIGRATION_MARKER: &str = "state/storage_migration.json";
/// The bootstrap stage reported when nothing blocks.
pub const STAGE: &str = "stage3_web_restart";

fn unreadable_json(path: &Path) -> Option<String> {
    let computed_at = std::time::SystemTime::now();
    let read = std::fs::File::open(path).and_then(|mut f| {
        let stamp = Stamp::of(&f.metadata()?);
        if valid_cache().get(path) == Some(&stamp) {
            return Ok(None);
        }
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut b)?;
        Ok(Some((stamp, b)))
    });
    match read {
        Ok(None) => None,
        Ok(Some((stamp, b))) => match serde_json::from_slice::<AnyJson>(&b) {
            Ok(_) => {
                let mut cache = valid_cache();
                if stamp.settled(computed_at) {
                    cache.insert(path.to_path_buf(), stamp);
                } else {
                    cache.remove(path);
                }
                None
            }
            Err(e) => Some(format!(
                "{} is unreadable: {e}",
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("{}: {e}", path.display())),
    }
}

/// Files found valid JSON, by the stamp they had (kept only once settled,
/// see [`crate::stamp`]): a 2 MB characters file is not parsed per
/// status call.
fn valid_cache() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Stamp>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Stamp>>> = OnceLock::new();
    CACHE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".status-probe-{}", std::process::id()));
    let ok = std::fs::create_dir_all(dir).is_ok() && std::fs::write(&probe, b"ok").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// Compute the storage flags (blocking file checks).
pub fn storage_flags(data: &Path, overlay: StorageStatus) -> StorageStatus {
    let mut s = overlay;
    let mut errors: Vec<String> = Vec::new();
    for rel in [docs::CORE_CONFIG, docs::CHARACTERS] {
        if let Some(e) = unreadable_json(&data.join(rel)) {
            s.recovery_required = true;
            errors.push(e);
        }
    }
    let marker = data.join(MIGRATION_MARKER);
    let mut marker_reason = String::new();
    match std::fs::read(&marker) {
        Ok(b) => match serde_json::from_slice::<Value>(&b) {
            Ok(v) => {
                if v.get("pending").and_then(Value::as_bool) == Some(true) {
                    s.migration_pending = true;
                }
                if v.get("legacy_cleanup_pending").and_then(Value::as_bool) == Some(true) {
                    s.legacy_cleanup_pending = true;
                }
                marker_reason = v
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .chars()
                    .take(80)
                    .collect();
            }
            Err(e) => {
                s.recovery_required = true;
                errors.push(format!("storage_migration.json is unreadable: {e}"));
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => errors.push(e.to_string()),
    }
    if !writable(&data.join("state")) {
        s.selection_required = true;
        errors.push("the data directory is not writable".into());
    }
    if s.blocking_reason.trim().is_empty() {
        s.blocking_reason = if s.migration_pending {
            if marker_reason.is_empty() {
                "migration_pending".into()
            } else {
                marker_reason
            }
        } else if s.recovery_required {
            "recovery_required".into()
        } else if s.selection_required {
            "selection_required".into()
        } else {
            String::new()
        };
    }
    if s.last_error_summary.is_empty() {
        s.last_error_summary = errors.join("; ");
    }
    if s.stage.is_empty() {
        s.stage = STAGE.into();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_checked_again() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("characters.json");
        std::fs::write(&p, b"{}").unwrap();
        assert_eq!(unreadable_json(&p), None);
        std::fs::write(&p, b"{broken").unwrap();
        assert!(unreadable_json(&p).unwrap().contains("is unreadable"));
        std::fs::write(&p, b"[]").unwrap();
        assert_eq!(unreadable_json(&p), None);
    }
}

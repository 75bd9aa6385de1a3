//! `GET /api/system/status`: readiness plus the storage-migration flags.
//!
//! The flags are recomputed on every call (no stored state machine):
//! * `migration_pending` / `legacy_cleanup_pending`: the marker document
//!   `<data>/state/storage_migration.json` (`{"pending": bool, "legacy_cleanup_pending": bool,
//!   "reason": str}`) written by whoever runs a storage migration, or the core overlay;
//! * `recovery_required`: `config/core_config.json` or `config/characters.json` exists but is
//!   not valid JSON, the marker document itself is unreadable, or the core overlay says so;
//! * `selection_required`: the data directory is no longer writable (the user has to pick
//!   another storage location), or the core overlay says so.

use std::path::Path;

use companiond_core::layout as docs;
use companiond_core::state::StorageStatus;
use companiond_core::AppState;
use serde_json::{json, Value};

/// The marker document of a storage migration in progress.
pub const MIGRATION_MARKER: &str = "state/storage_migration.json";
/// The bootstrap stage reported when nothing blocks.
pub const STAGE: &str = "stage3_web_restart";

fn unreadable_json(path: &Path) -> Option<String> {
    match std::fs::read(path) {
        Ok(b) => match serde_json::from_slice::<Value>(&b) {
            Ok(_) => None,
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

/// The whole status body.
pub async fn snapshot(st: &AppState) -> Value {
    if !st.is_ready() {
        return json!({
            "ok": true, "status": "starting", "ready": false,
            "storage": StorageStatus::default(),
        });
    }
    let data = st.data_dir().to_path_buf();
    let overlay = st.storage_status();
    let storage = tokio::task::spawn_blocking(move || storage_flags(&data, overlay))
        .await
        .unwrap_or_default();
    let status = if storage.selection_required
        || storage.migration_pending
        || storage.recovery_required
        || !storage.blocking_reason.trim().is_empty()
    {
        "migration_required"
    } else {
        "ready"
    };
    json!({
        "ok": true,
        "status": status,
        "ready": status == "ready",
        "storage": storage,
    })
}

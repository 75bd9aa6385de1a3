//! The `platform_autocloud` document: what the cloud holds as a whole (the
//! manifest of every published unit), what this device last applied, and the
//! paths a platform cloud (e.g. Steam Auto-Cloud) would sync.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::local_state::LocalState;
use crate::unit::{self, Meta};

/// `platform_autocloud` (the keys the frontend reads, in this order).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformAutocloud {
    pub backend: &'static str,
    pub app_id: &'static str,
    pub has_snapshot: bool,
    pub snapshot_sequence_number: u64,
    pub snapshot_exported_at_utc: String,
    pub manifest_fingerprint: String,
    pub last_applied_manifest_fingerprint: String,
    pub startup_import_required: bool,
    pub manual_download_required: bool,
    pub runtime_has_user_content: bool,
    pub last_successful_export_at: String,
    pub last_successful_import_at: String,
    pub source_launch: bool,
    pub steam_session_ready: bool,
    pub steam_launch_tracked: bool,
    pub steam_available: bool,
    pub steam_running: bool,
    pub steam_logged_on: bool,
    pub runtime_root: String,
    pub cloudsave_root: String,
    pub manifest_path: String,
    pub manifest_exists: bool,
    pub recommended_paths: Value,
    pub current_platform_rule: Value,
    /// Only in `GET platform-autocloud-config`: whether the target could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_available: Option<bool>,
    /// Only when the target could not be read: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_error: Option<String>,
}

/// Where the document's inputs come from.
pub struct Inputs<'a> {
    pub backend: &'static str,
    /// Every published unit (empty when the target could not be read).
    pub units: &'a [Arc<Meta>],
    pub local: LocalState,
    pub runtime_has_user_content: bool,
    pub runtime_root: String,
    pub cloudsave_root: String,
}

/// `sha256:` over the sorted (name, fingerprint, sequence) of every unit.
pub fn manifest_fingerprint(units: &[Arc<Meta>]) -> String {
    let list: Vec<Value> = units
        .iter()
        .map(|m| json!([m.character_name, m.payload_fingerprint, m.sequence_number]))
        .collect();
    format!(
        "sha256:{}",
        unit::sha256_hex(unit::canonical_json(&Value::Array(list)).as_bytes())
    )
}

/// Build the document. An import is required at start-up when the cloud's
/// manifest differs from the one last applied here and this device has no
/// memory of its own yet; with memory of its own, the download is manual.
pub fn platform_autocloud(i: Inputs<'_>) -> PlatformAutocloud {
    let units = i.units;
    let has_snapshot = !units.is_empty();
    let manifest_fp = manifest_fingerprint(units);
    let seq = units.iter().map(|m| m.sequence_number).max().unwrap_or(0);
    let exported = units
        .iter()
        .map(|m| m.updated_at_utc.clone())
        .max()
        .unwrap_or_default();
    let has_content = i.runtime_has_user_content;
    let differs = has_snapshot && manifest_fp != i.local.last_applied_manifest_fingerprint;
    let root = i.cloudsave_root;
    let platform = if cfg!(target_os = "windows") {
        ("Windows", "WinAppDataLocal")
    } else if cfg!(target_os = "macos") {
        ("macOS", "MacAppSupport")
    } else {
        ("Linux", "LinuxXdgDataHome")
    };
    PlatformAutocloud {
        backend: i.backend,
        app_id: "",
        has_snapshot,
        snapshot_sequence_number: seq,
        snapshot_exported_at_utc: exported,
        manifest_fingerprint: if has_snapshot {
            manifest_fp
        } else {
            String::new()
        },
        last_applied_manifest_fingerprint: i.local.last_applied_manifest_fingerprint,
        startup_import_required: differs && !has_content,
        manual_download_required: differs && has_content,
        runtime_has_user_content: has_content,
        last_successful_export_at: i.local.last_successful_export_at,
        last_successful_import_at: i.local.last_successful_import_at,
        source_launch: false,
        steam_session_ready: false,
        steam_launch_tracked: false,
        steam_available: false,
        steam_running: false,
        steam_logged_on: false,
        runtime_root: i.runtime_root,
        manifest_path: format!("{}/characters", root.trim_end_matches('/')),
        cloudsave_root: root,
        manifest_exists: has_snapshot,
        recommended_paths: json!({
            "cross_platform_strategy": "single_root_with_overrides",
            "primary_root": {"root": "WinAppDataLocal", "subdirectory": "companiond/cloud", "pattern": "*", "os": "All OSes", "recursive": true},
            "root_overrides": [
                {"os": "macOS", "new_root": "MacAppSupport", "add_replace_path": "companiond/cloud", "replace_path": true},
                {"os": "Linux", "new_root": "LinuxXdgDataHome", "add_replace_path": "companiond/cloud", "replace_path": true},
            ],
        }),
        current_platform_rule: json!({"platform": platform.0, "root": platform.1, "subdirectory": "companiond/cloud"}),
        provider_available: None,
        provider_error: None,
    }
}

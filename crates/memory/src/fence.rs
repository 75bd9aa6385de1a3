//! The cloud-storage maintenance / read-only fence.
//!
//! Shared through the data dir so that cloud save (another crate) can raise it
//! without a code dependency: `<data>/state/root_state.json` holds
//! `{"mode": "..."}`; every mode except `normal` blocks memory writes
//! (reference § 2.4: `bootstrap_importing`, `bootstrap_readonly`,
//! `deferred_init`, `maintenance_readonly`). A missing file, a missing `mode`
//! or an unreadable file count as `normal` (the fence is advisory and must not
//! lock the user out because of a damaged state file).

use std::path::Path;

use serde_json::Value;

use crate::error::MemoryError;

/// Where the fence lives, relative to the data dir.
pub const ROOT_STATE: &str = "state/root_state.json";

/// The current mode (`normal` when none is recorded).
pub fn mode(data_dir: &Path) -> String {
    let path = data_dir.join(ROOT_STATE);
    let Ok(bytes) = std::fs::read(&path) else {
        return "normal".into();
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => v
            .get("mode")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or("normal")
            .to_string(),
        Err(e) => {
            tracing::warn!("{} is unreadable ({e}); treating as normal", path.display());
            "normal".into()
        }
    }
}

/// `Err(409)` while the fence is up.
pub fn check(data_dir: &Path, operation: &str, target: &str) -> Result<(), MemoryError> {
    let m = mode(data_dir);
    if m == "normal" {
        Ok(())
    } else {
        Err(MemoryError::Fence {
            mode: m,
            operation: operation.to_string(),
            target: target.to_string(),
        })
    }
}

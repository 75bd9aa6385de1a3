//! `GET /api/system/status`: readiness plus the storage flags
//! ([`companiond_core::storage_status`]).

use companiond_core::state::StorageStatus;
use companiond_core::storage_status::storage_flags;
use companiond_core::task::{blocking, TaskFailed};
use companiond_core::AppState;

/// The start-up and storage state the status route reports.
#[derive(Debug)]
pub struct Snapshot {
    /// `starting`, `migration_required` or `ready`.
    pub status: &'static str,
    pub storage: StorageStatus,
}

/// The current status: `starting` until start-up work is done, then the storage
/// flags decide between `migration_required` and `ready`.
pub async fn snapshot(st: &AppState) -> Snapshot {
    if !st.is_ready() {
        return Snapshot {
            status: "starting",
            storage: StorageStatus::default(),
        };
    }
    let data = st.data_dir().to_path_buf();
    let overlay = st.storage_status();
    let storage = blocking(move || Ok::<_, TaskFailed>(storage_flags(&data, overlay)))
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
    Snapshot { status, storage }
}

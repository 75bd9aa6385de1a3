//! Local (never synced) state of cloud save: `state/cloudsave_local_state.json`
//! (client id, per-device sequence counter, last export/import). The fence an
//! upload or download raises is `companiond_core::fence`.

use companiond_core::store::Store;
use serde::{Deserialize, Serialize};

pub const LOCAL_STATE: &str = "state/cloudsave_local_state.json";

/// `state/cloudsave_local_state.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LocalState {
    #[serde(default)]
    pub version: u32,
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub next_sequence_number: u64,
    #[serde(default)]
    pub last_applied_manifest_fingerprint: String,
    #[serde(default)]
    pub last_successful_export_at: String,
    #[serde(default)]
    pub last_successful_import_at: String,
}

fn state_err(e: impl std::fmt::Display) -> String {
    format!("cannot update {LOCAL_STATE}: {e}")
}

fn fresh_client_id(s: &mut LocalState) {
    if s.client_id.is_empty() {
        s.client_id = uuid::Uuid::new_v4().simple().to_string();
    }
    s.version = 1;
}

/// Read the local state (a missing or unreadable file reads as defaults).
pub async fn read(store: &Store) -> LocalState {
    store
        .read::<LocalState>(LOCAL_STATE)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Take the next per-device sequence number (monotonic, persisted before use).
pub async fn next_sequence(store: &Store) -> Result<(u64, String), String> {
    store
        .update(LOCAL_STATE, |cur: Option<LocalState>| {
            let mut s = cur.unwrap_or_default();
            fresh_client_id(&mut s);
            let n = s.next_sequence_number.max(1);
            s.next_sequence_number = n + 1;
            let id = s.client_id.clone();
            (s, (n, id))
        })
        .await
        .map_err(state_err)
}

/// Record a successful export (`upload`) or import (`download`).
pub async fn record_success(store: &Store, upload: bool, manifest_fingerprint: String) {
    let now = companiond_core::now_rfc3339();
    let r = store
        .update(LOCAL_STATE, move |cur: Option<LocalState>| {
            let mut s = cur.unwrap_or_default();
            fresh_client_id(&mut s);
            if upload {
                s.last_successful_export_at = now;
            } else {
                s.last_successful_import_at = now;
            }
            s.last_applied_manifest_fingerprint = manifest_fingerprint;
            (s, ())
        })
        .await;
    if let Err(e) = r {
        tracing::warn!("{}", state_err(e));
    }
}

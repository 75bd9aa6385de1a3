//! Local (never synced) state of cloud save: `state/cloudsave_local_state.json`
//! (client id, per-device sequence counter, last export/import) and the
//! maintenance / read-only fence `state/root_state.json`.

use companiond_core::store::{self, Store};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::CloudSaveError;

pub const LOCAL_STATE: &str = "state/cloudsave_local_state.json";
pub const ROOT_STATE: &str = "state/root_state.json";
/// The fence mode raised for the whole of an upload or download.
pub const MODE_IMPORTING: &str = "bootstrap_importing";
pub const MODE_NORMAL: &str = "normal";

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

/// The client id, created on first use.
pub async fn client_id(store: &Store) -> Result<String, String> {
    store
        .update(LOCAL_STATE, |cur: Option<LocalState>| {
            let mut s = cur.unwrap_or_default();
            fresh_client_id(&mut s);
            let id = s.client_id.clone();
            (s, id)
        })
        .await
        .map_err(state_err)
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

// ------------------------------------------------------------------ the fence

/// The fence while an upload or download runs. Lowered by [`Fence::lower`], or
/// on drop if the operation ended some other way (panic): it is always lowered.
pub struct Fence {
    store: Store,
    lowered: bool,
}

fn set_normal(doc: &mut Map<String, Value>) {
    doc.insert("mode".into(), Value::String(MODE_NORMAL.into()));
    doc.remove("operation");
    doc.remove("target");
    doc.remove("since");
}

/// Raise the fence for `operation` on `target`. Refused (409) when another
/// mode than `normal` is already set.
pub async fn raise(store: &Store, operation: &str, target: &str) -> Result<Fence, CloudSaveError> {
    let (op, tgt) = (operation.to_string(), target.to_string());
    let r = store
        .try_update(ROOT_STATE, move |cur: Option<Value>| {
            let mut doc = match cur {
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(CloudSaveError::FenceActive {
                        mode: "unreadable".into(),
                        operation: op,
                        target: tgt,
                    })
                }
                None => Map::new(),
            };
            let mode = doc
                .get("mode")
                .and_then(Value::as_str)
                .unwrap_or(MODE_NORMAL)
                .to_string();
            if mode != MODE_NORMAL {
                return Err(CloudSaveError::FenceActive {
                    mode,
                    operation: op,
                    target: tgt,
                });
            }
            doc.entry("version").or_insert(Value::from(1));
            doc.insert("mode".into(), Value::String(MODE_IMPORTING.into()));
            doc.insert("operation".into(), Value::String(op));
            doc.insert("target".into(), Value::String(tgt));
            doc.insert(
                "since".into(),
                Value::String(companiond_core::now_rfc3339()),
            );
            Ok((Value::Object(doc), ()))
        })
        .await;
    match r {
        Ok(Ok(())) => Ok(Fence {
            store: store.clone(),
            lowered: false,
        }),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(CloudSaveError::FenceActive {
            mode: "unreadable".into(),
            operation: operation.to_string(),
            target: format!("{target} ({e})"),
        }),
    }
}

impl Fence {
    /// Lower the fence (mode back to `normal`).
    pub async fn lower(mut self) {
        let r = self
            .store
            .update(ROOT_STATE, |cur: Option<Value>| {
                let mut doc = cur.and_then(|v| v.as_object().cloned()).unwrap_or_default();
                set_normal(&mut doc);
                (Value::Object(doc), ())
            })
            .await;
        match r {
            Ok(()) => self.lowered = true,
            Err(e) => tracing::error!("cannot lower the cloud-save fence: {e}"),
        }
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        if !self.lowered {
            lower_now(&self.store);
        }
    }
}

/// Lower the fence synchronously (drop path and start-up recovery).
fn lower_now(store: &Store) {
    let path = store.path(ROOT_STATE);
    match store::read_json::<Value>(&path) {
        Ok(Some(Value::Object(mut doc))) => {
            set_normal(&mut doc);
            if let Err(e) = store::atomic_write_json(&path, &Value::Object(doc)) {
                tracing::error!("cannot lower the cloud-save fence: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::error!("cannot lower the cloud-save fence: {e}"),
    }
}

/// At start-up: a fence left up by a cloud-save operation of a previous process
/// (crash) is lowered.
pub fn recover_stale_fence(store: &Store) {
    let path = store.path(ROOT_STATE);
    if let Ok(Some(Value::Object(doc))) = store::read_json::<Value>(&path) {
        let ours = doc.get("mode").and_then(Value::as_str) == Some(MODE_IMPORTING)
            && doc
                .get("operation")
                .and_then(Value::as_str)
                .is_some_and(|o| o.starts_with("character_"));
        if ours {
            tracing::warn!("lowering a cloud-save fence left by a previous run");
            lower_now(store);
        }
    }
}

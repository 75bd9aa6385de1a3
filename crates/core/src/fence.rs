//! The maintenance / read-only fence of the data dir: `state/root_state.json`
//! (docs/memory.md, docs/cloudsave.md).
//!
//! `{"mode": "..."}`: every mode except `normal` blocks memory writes
//! (`bootstrap_importing`, `bootstrap_readonly`, `deferred_init`,
//! `maintenance_readonly`). Cloud save raises it for the whole of an upload or
//! download; the memory family checks it before every write. A missing file, a
//! missing `mode` or an unreadable file count as `normal` for readers (the fence
//! is advisory and must not lock the user out because of a damaged state file),
//! while raising refuses an unreadable one.

use std::path::Path;

use serde_json::{Map, Value};

use crate::layout::ROOT_STATE;
use crate::store::{self, Store};

/// The mode raised for the whole of a cloud-save upload or download.
pub const MODE_IMPORTING: &str = "bootstrap_importing";
/// No fence.
pub const MODE_NORMAL: &str = "normal";

/// The fence's mode as stored in `state/root_state.json` (`mode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// No fence: memory writes go ahead.
    Normal,
    /// Raised by cloud save for the whole of an upload or download.
    Importing,
    /// Any other mode the original writes (`bootstrap_readonly`,
    /// `deferred_init`, `maintenance_readonly`, ...): writes are blocked.
    Other(String),
}

impl Mode {
    /// The mode named `s` (an empty name is `normal`).
    pub fn parse(s: &str) -> Mode {
        match s.trim() {
            "" | MODE_NORMAL => Mode::Normal,
            MODE_IMPORTING => Mode::Importing,
            other => Mode::Other(other.to_string()),
        }
    }

    /// The stored name.
    pub fn as_str(&self) -> &str {
        match self {
            Mode::Normal => MODE_NORMAL,
            Mode::Importing => MODE_IMPORTING,
            Mode::Other(s) => s,
        }
    }

    pub fn is_normal(&self) -> bool {
        *self == Mode::Normal
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The current mode (`normal` when none is recorded).
pub fn mode(data_dir: &Path) -> Mode {
    let path = data_dir.join(ROOT_STATE);
    let Ok(bytes) = std::fs::read(&path) else {
        return Mode::Normal;
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => Mode::parse(v.get("mode").and_then(Value::as_str).unwrap_or(MODE_NORMAL)),
        Err(e) => {
            tracing::warn!("{} is unreadable ({e}); treating as normal", path.display());
            Mode::Normal
        }
    }
}

/// Is the fence down (memory writes may go ahead)?
pub fn is_normal(data_dir: &Path) -> bool {
    mode(data_dir).is_normal()
}

/// The fence is already up (or its file unreadable): who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceUp {
    pub mode: String,
    pub operation: String,
    pub target: String,
}

/// Why the fence could not be raised.
#[derive(Debug)]
pub enum RaiseError {
    /// It is up already, or its file is unreadable.
    Up(FenceUp),
    /// The disk refused to write it (full, read-only, ...).
    Storage(std::io::Error),
}

impl std::fmt::Display for RaiseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RaiseError::Up(u) => write!(f, "{} blocked while mode={}", u.operation, u.mode),
            RaiseError::Storage(e) => write!(f, "cannot write the root state: {e}"),
        }
    }
}

/// The raised fence (held for the whole of a cloud-save upload or download). Lowered by [`Fence::lower`], or
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
pub async fn raise(store: &Store, operation: &str, target: &str) -> Result<Fence, RaiseError> {
    let (op, tgt) = (operation.to_string(), target.to_string());
    let r = store
        .try_update(ROOT_STATE, move |cur: Option<Value>| {
            let mut doc = match cur {
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(FenceUp {
                        mode: "unreadable".into(),
                        operation: op,
                        target: tgt,
                    })
                }
                None => Map::new(),
            };
            let mode = Mode::parse(
                doc.get("mode")
                    .and_then(Value::as_str)
                    .unwrap_or(MODE_NORMAL),
            );
            if !mode.is_normal() {
                return Err(FenceUp {
                    mode: mode.to_string(),
                    operation: op,
                    target: tgt,
                });
            }
            doc.entry("version").or_insert(Value::from(1));
            doc.insert("mode".into(), Value::String(MODE_IMPORTING.into()));
            doc.insert("operation".into(), Value::String(op));
            doc.insert("target".into(), Value::String(tgt));
            doc.insert("since".into(), Value::String(crate::now_rfc3339()));
            Ok((Value::Object(doc), ()))
        })
        .await;
    match r {
        Ok(Ok(())) => Ok(Fence {
            store: store.clone(),
            lowered: false,
        }),
        Ok(Err(e)) => Err(RaiseError::Up(e)),
        Err(crate::store::StoreError::Io(e)) => Err(RaiseError::Storage(e)),
        Err(e) => Err(RaiseError::Up(FenceUp {
            mode: "unreadable".into(),
            operation: operation.to_string(),
            target: format!("{target} ({e})"),
        })),
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
            Err(e) => tracing::error!("cannot lower the write fence: {e}"),
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
                tracing::error!("cannot lower the write fence: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::error!("cannot lower the write fence: {e}"),
    }
}

/// At start-up: a fence that a previous process raised for a character
/// operation (`character_*`) and never lowered (crash) is lowered.
pub fn recover_stale(store: &Store) {
    let path = store.path(ROOT_STATE);
    if let Ok(Some(Value::Object(doc))) = store::read_json::<Value>(&path) {
        let ours = doc.get("mode").and_then(Value::as_str).map(Mode::parse)
            == Some(Mode::Importing)
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

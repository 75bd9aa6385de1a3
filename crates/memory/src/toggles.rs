//! The memory toggles `review_config` and `powerful_memory_config`
//! (docs/memory.md).
//!
//! Both live in `config/core_config.json` (keys `recent_memory_auto_review`,
//! `powerful_memory_enabled`), a file the configuration routes write too: every
//! write is a read-modify-write through the store lock of that document that
//! keeps all other keys, and an unreadable, malformed or non-object file is
//! never replaced. Toggle writes are serialised (migration included) by one
//! lock that reads also wait on.

use std::path::Path;

use companiond_core::layout::CORE_CONFIG;
use companiond_core::store::StoreError;
use companiond_core::AppState;
use serde_json::{Map, Value};

use crate::error::{MemoryError, ToggleReadError};
use crate::tasks::TaskKind;
use crate::{fence, unit, MemoryRuntime};

/// Which toggle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Toggle {
    Review,
    Powerful,
}

impl Toggle {
    /// The key in the core configuration.
    pub fn key(self) -> &'static str {
        match self {
            Toggle::Review => "recent_memory_auto_review",
            Toggle::Powerful => "powerful_memory_enabled",
        }
    }
}

/// What the stored configuration looks like.
enum Stored {
    Missing,
    Object(Map<String, Value>),
}

fn load(data_dir: &Path) -> Result<Stored, String> {
    let path = data_dir.join(CORE_CONFIG);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Stored::Missing),
        Err(e) => return Err(format!("the core configuration cannot be read: {e}")),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(Stored::Object(m)),
        Ok(_) => Err("the core configuration is not a JSON object".into()),
        Err(e) => Err(format!("the core configuration is not valid JSON: {e}")),
    }
}

/// Read a toggle: default true; 503 on an unreadable file or a
/// non-boolean value. Waits for pending toggle writes.
pub async fn read(
    state: &AppState,
    rt: &MemoryRuntime,
    toggle: Toggle,
) -> Result<bool, ToggleReadError> {
    let _g = rt.toggle_lock.read().await;
    let data = state.data_dir().to_path_buf();
    let stored = tokio::task::spawn_blocking(move || load(&data))
        .await
        .map_err(|e| ToggleReadError {
            error: e.to_string(),
            code: None,
        })?
        .map_err(|error| ToggleReadError { error, code: None })?;
    match stored {
        Stored::Missing => Ok(true),
        Stored::Object(m) => match m.get(toggle.key()) {
            None => Ok(true),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(ToggleReadError {
                error: format!("the stored value of {} is not a boolean", toggle.key()),
                code: Some("invalid_memory_setting"),
            }),
        },
    }
}

/// Write a toggle (fenced; switching powerful memory off migrates first;
/// other keys of the file are kept). Returns the saved value.
pub async fn write(
    state: &AppState,
    rt: &MemoryRuntime,
    toggle: Toggle,
    enabled: bool,
) -> Result<bool, MemoryError> {
    fence::check(state.data_dir(), "save", CORE_CONFIG)?;
    let _g = rt.toggle_lock.write().await;
    fence::check(state.data_dir(), "save", CORE_CONFIG)?;
    let data = state.data_dir().to_path_buf();
    let stored =
        companiond_core::task::blocking(move || load(&data).map_err(MemoryError::ConfigUnreadable))
            .await?;
    if toggle == Toggle::Powerful && !enabled {
        let already_off = match &stored {
            Stored::Object(m) => m.get(toggle.key()) == Some(&Value::Bool(false)),
            Stored::Missing => false,
        };
        if !already_off {
            let data = state.data_dir().to_path_buf();
            tokio::task::spawn_blocking(move || migrate_powerful_off(&data))
                .await
                .map_err(|e| MemoryError::MigrationFailed(e.to_string()))?
                .map_err(MemoryError::MigrationFailed)?;
        }
    }
    let key = toggle.key();
    let r = state
        .store
        .try_update(CORE_CONFIG, move |cur: Option<Value>| match cur {
            None => {
                let mut m = Map::new();
                m.insert(key.to_string(), Value::Bool(enabled));
                Ok((Value::Object(m), ()))
            }
            Some(Value::Object(mut m)) => {
                m.insert(key.to_string(), Value::Bool(enabled));
                Ok((Value::Object(m), ()))
            }
            Some(_) => Err("the core configuration is not a JSON object"),
        })
        .await;
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(MemoryError::ConfigUnreadable(e.to_string())),
        Err(StoreError::Corrupt(e)) => {
            return Err(MemoryError::ConfigUnreadable(format!(
                "the core configuration is not valid JSON: {e}"
            )))
        }
        Err(StoreError::Io(e)) => {
            return Err(MemoryError::Storage(format!(
                "cannot save the core configuration: {e}"
            )))
        }
    }
    if toggle == Toggle::Review && !enabled {
        rt.tasks.cancel_all(TaskKind::Review);
    }
    Ok(enabled)
}

/// The powerful-memory-off migration: every confirmed reflection of every
/// character gets its age anchor (`confirmed_at`) reset to now, so that the
/// lightweight path does not promote or expire them by an age accumulated
/// under powerful memory. `reflections.json` is a JSON array (or an object
/// with a `reflections` array). All files are checked before any is written;
/// an unreadable file fails the migration and nothing is saved.
pub fn migrate_powerful_off(data_dir: &Path) -> Result<usize, String> {
    let root = unit::memory_root(data_dir);
    let rd = match std::fs::read_dir(&root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("cannot list {}: {e}", root.display())),
    };
    let now = companiond_core::now_rfc3339();
    let mut planned = Vec::new();
    for entry in rd.flatten() {
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let path = entry.path().join("reflections.json");
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let mut doc: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not valid JSON: {e}", path.display()))?;
        let list = match &mut doc {
            Value::Array(a) => a,
            Value::Object(o) => match o.get_mut("reflections") {
                Some(Value::Array(a)) => a,
                _ => return Err(format!("{} has no reflections array", path.display())),
            },
            _ => return Err(format!("{} is not a reflections list", path.display())),
        };
        let mut changed = 0;
        for r in list.iter_mut().filter_map(Value::as_object_mut) {
            if r.get("status").and_then(Value::as_str) == Some("confirmed") {
                r.insert("confirmed_at".into(), Value::String(now.clone()));
                r.insert("age_anchor_reset_at".into(), Value::String(now.clone()));
                changed += 1;
            }
        }
        if changed > 0 {
            planned.push((path, doc, changed));
        }
    }
    let mut total = 0;
    for (path, doc, changed) in planned {
        companiond_core::store::atomic_write_json(&path, &doc)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        total += changed;
    }
    Ok(total)
}

//! `GET|PUT /api/seven-day-tutorial/state`.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use companiond_core::store::atomic_write_json;
use companiond_core::task::blocking;
use companiond_core::AppState;
use serde_json::Value;

use super::body_object;
use crate::error::{SysResult, SystemError};
use crate::tutorial;

/// Write the tutorial document directly (atomically): the caller holds its lock.
async fn write_locked(st: &AppState, doc: Value) -> SysResult<()> {
    let path = st.store.path(tutorial::DOC);
    blocking(move || atomic_write_json(&path, &doc).map_err(SystemError::storage)).await
}

/// The stored state, migrated from the legacy document on first use (the caller
/// holds the document lock).
async fn load_locked(st: &AppState) -> SysResult<Value> {
    if let Some(v) = st.store.read::<Value>(tutorial::DOC).await? {
        if v.get("initialized").and_then(Value::as_bool) == Some(true) {
            return Ok(v);
        }
    }
    let legacy: Option<Value> = st.store.read(tutorial::LEGACY_DOC).await.ok().flatten();
    match legacy.as_ref().and_then(tutorial::migrate_legacy) {
        Some(m) => {
            write_locked(st, m.clone()).await?;
            Ok(m)
        }
        None => Ok(tutorial::empty_store()),
    }
}

/// `GET /api/seven-day-tutorial/state`.
pub async fn get_state(State(st): State<AppState>) -> SysResult<Json<Value>> {
    let lock = st.store.lock_for(tutorial::DOC);
    let _g = lock.lock().await;
    let v = load_locked(&st).await?;
    Ok(Json(tutorial::public(&v, true)))
}

/// `PUT /api/seven-day-tutorial/state` (`{state, expectedRevision}`).
pub async fn put_state(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = Value::Object(body_object(body).await?);
    let (state, expected) = tutorial::validate_put(&b)?;
    let lock = st.store.lock_for(tutorial::DOC);
    let _g = lock.lock().await;
    let current = load_locked(&st).await?;
    let next = tutorial::apply_put(&current, &state, expected)?;
    write_locked(&st, next.clone()).await?;
    Ok(Json(tutorial::public(&next, true)))
}

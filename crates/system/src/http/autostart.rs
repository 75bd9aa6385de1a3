//! `/api/autostart-prompt/{state,heartbeat,shown,decision}`.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use companiond_core::{now_millis, AppState};
use serde_json::{json, Value};

use super::body_object;
use crate::autostart;
use crate::error::SysResult;

/// Apply `f` to the stored prompt state (normalised first) under the document lock.
async fn update<R: Send + 'static>(
    st: &AppState,
    f: impl FnOnce(&mut autostart::State, &autostart::Config, i64) -> SysResult<R> + Send + 'static,
) -> SysResult<(autostart::State, R)> {
    let cfg: Option<Value> = st.store.read(autostart::CONFIG_DOC).await.ok().flatten();
    let cfg = autostart::Config::from_overrides(cfg.as_ref());
    let now = now_millis();
    st.store
        .try_update(autostart::DOC, move |cur: Option<autostart::State>| {
            let mut s = cur.unwrap_or_default();
            s.normalize();
            let r = f(&mut s, &cfg, now)?;
            Ok((s.clone(), (s, r)))
        })
        .await?
}

/// `GET /api/autostart-prompt/state` (the public view).
pub async fn state(State(st): State<AppState>) -> SysResult<Json<Value>> {
    let mut s = st
        .store
        .read::<autostart::State>(autostart::DOC)
        .await?
        .unwrap_or_default();
    s.normalize();
    Ok(Json(
        json!({"ok": true, "prompt_mode": "autostart", "state": s.public()}),
    ))
}

/// `POST /api/autostart-prompt/heartbeat`.
pub async fn heartbeat(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let (s, (should, reason, token)) = update(&st, move |s, cfg, now| {
        Ok(autostart::heartbeat(s, &b, cfg, now))
    })
    .await?;
    Ok(Json(
        json!({"ok": true, "should_prompt": should, "prompt_reason": reason,
               "prompt_mode": "autostart", "prompt_token": token, "state": s}),
    ))
}

/// `POST /api/autostart-prompt/shown`.
pub async fn shown(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let (s, already) = update(&st, move |s, cfg, now| autostart::shown(s, &b, cfg, now)).await?;
    Ok(Json(
        json!({"ok": true, "already_acknowledged": already, "state": s}),
    ))
}

/// `POST /api/autostart-prompt/decision`.
pub async fn decision(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let (s, ()) = update(&st, move |s, cfg, now| autostart::decision(s, &b, cfg, now)).await?;
    Ok(Json(json!({"ok": true, "state": s})))
}

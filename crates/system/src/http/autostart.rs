//! `/api/autostart-prompt/{state,heartbeat,shown,decision}`.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use companiond_core::AppState;
use serde_json::{json, Value};

use super::body_object;
use crate::autostart;
use crate::error::SysResult;

/// `GET /api/autostart-prompt/state` (the public view).
pub async fn state(State(st): State<AppState>) -> SysResult<Json<Value>> {
    let s = autostart::load(&st).await?;
    Ok(Json(
        json!({"ok": true, "prompt_mode": "autostart", "state": s.public()}),
    ))
}

/// `POST /api/autostart-prompt/heartbeat`.
pub async fn heartbeat(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let (s, (should, reason, token)) = autostart::update(&st, move |s, cfg, now| {
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
    let (s, already) =
        autostart::update(&st, move |s, cfg, now| autostart::shown(s, &b, cfg, now)).await?;
    Ok(Json(
        json!({"ok": true, "already_acknowledged": already, "state": s}),
    ))
}

/// `POST /api/autostart-prompt/decision`.
pub async fn decision(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let (s, ()) =
        autostart::update(&st, move |s, cfg, now| autostart::decision(s, &b, cfg, now)).await?;
    Ok(Json(json!({"ok": true, "state": s})))
}

//! `/api/autostart-prompt/{state,heartbeat,shown,decision}`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{ok_json, BodyOf};
use companiond_core::AppState;
use serde::Serialize;
use utoipa::ToSchema;

use super::bodies::{AutostartDecisionBody, AutostartHeartbeatBody, AutostartShownBody};
use crate::autostart::{self, PublicState};
use crate::error::SysResult;

/// `GET /api/autostart-prompt/state`: the public view of the prompt state.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "prompt_mode": "autostart", "state": {
    "status": "observing", "shown_count": 0, "deferred_until": 0, "never_remind": false,
    "accepted_at": 0, "started_at": 0, "completed_at": 0, "last_error": "",
    "autostart_enabled": false, "enabled_at": 0}}))]
pub struct AutostartPromptView<'a> {
    ok: bool,
    /// Always `autostart`.
    prompt_mode: &'static str,
    state: PublicState<'a>,
}

/// `POST /api/autostart-prompt/heartbeat`: whether to show the prompt now.
#[derive(Serialize, ToSchema)]
pub struct AutostartHeartbeat {
    ok: bool,
    should_prompt: bool,
    /// Why (or why not) the prompt is due.
    prompt_reason: &'static str,
    /// Always `autostart`.
    prompt_mode: &'static str,
    /// The token of the prompt to show (echoed by `shown` and `decision`).
    prompt_token: Option<String>,
    state: autostart::State,
}

/// `POST /api/autostart-prompt/shown`.
#[derive(Serialize, ToSchema)]
pub struct AutostartShown {
    ok: bool,
    /// The token had been acknowledged before.
    already_acknowledged: bool,
    state: autostart::State,
}

/// `POST /api/autostart-prompt/decision`.
#[derive(Serialize, ToSchema)]
pub struct AutostartDecided {
    ok: bool,
    state: autostart::State,
}

/// `GET /api/autostart-prompt/state` (the public view).
pub async fn state(State(st): State<AppState>) -> SysResult<Response> {
    let s = autostart::load(&st).await?;
    Ok(ok_json(AutostartPromptView {
        ok: true,
        prompt_mode: "autostart",
        state: s.public(),
    }))
}

/// `POST /api/autostart-prompt/heartbeat`.
pub async fn heartbeat(
    State(st): State<AppState>,
    BodyOf(b): BodyOf<AutostartHeartbeatBody>,
) -> SysResult<Json<AutostartHeartbeat>> {
    let (s, (should, reason, token)) = autostart::update(&st, move |s, cfg, now| {
        Ok(autostart::heartbeat(s, &b, cfg, now))
    })
    .await?;
    Ok(Json(AutostartHeartbeat {
        ok: true,
        should_prompt: should,
        prompt_reason: reason,
        prompt_mode: "autostart",
        prompt_token: token,
        state: s,
    }))
}

/// `POST /api/autostart-prompt/shown`.
pub async fn shown(
    State(st): State<AppState>,
    BodyOf(b): BodyOf<AutostartShownBody>,
) -> SysResult<Json<AutostartShown>> {
    let (s, already) =
        autostart::update(&st, move |s, cfg, now| autostart::shown(s, &b, cfg, now)).await?;
    Ok(Json(AutostartShown {
        ok: true,
        already_acknowledged: already,
        state: s,
    }))
}

/// `POST /api/autostart-prompt/decision`.
pub async fn decision(
    State(st): State<AppState>,
    BodyOf(b): BodyOf<AutostartDecisionBody>,
) -> SysResult<Json<AutostartDecided>> {
    let (s, ()) =
        autostart::update(&st, move |s, cfg, now| autostart::decision(s, &b, cfg, now)).await?;
    Ok(Json(AutostartDecided { ok: true, state: s }))
}

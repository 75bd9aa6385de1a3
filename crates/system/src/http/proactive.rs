//! `/api/proactive_chat`, `/api/proactive/music_played_through` and
//! `/api/mini_game/invite/respond`.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use companiond_core::{now_millis, AppState, Ext};
use serde_json::{json, Value};

use super::body_object;
use crate::error::SysResult;
use crate::persona;
use crate::state::SystemState;

/// `POST /api/proactive_chat`: one proactive round.
pub async fn proactive_chat(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    body: Body,
) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    sys.proactive.run(&st, &sys.tracker, &b).await.map(Json)
}

/// `POST /api/proactive/music_played_through`: the recommended song was heard to
/// the end, so its source may be used again.
pub async fn music_played_through(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    body: Body,
) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let name = persona::named_or_current(&st, &b)?;
    let cleared = sys.proactive.clear_music(&name);
    Ok(Json(
        json!({"success": true, "cleared": cleared, "lanlan_name": name, "persona_name": name}),
    ))
}

/// `POST /api/mini_game/invite/respond`.
pub async fn invite_respond(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    body: Body,
) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    sys.proactive.respond(&st, &b, now_millis()).map(Json)
}

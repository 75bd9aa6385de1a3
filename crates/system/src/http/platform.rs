//! Platform achievements and playtime: `/api/platform/...` and the original
//! pages' `/api/steam/...` paths of the same routes.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::Json;
use companiond_core::AppState;
use serde_json::{json, Value};

use super::body_object;
use crate::error::SysResult;
use crate::platform;

/// `POST /api/platform/set-achievement-status/{name}`.
pub async fn set_achievement(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> SysResult<Json<Value>> {
    let newly = platform::set_achievement(&st, &name).await?;
    Ok(Json(json!({
        "success": true, "achievement": name, "newlyUnlocked": newly,
        "alreadyUnlocked": !newly,
        "message": if newly { "achievement unlocked" } else { "achievement was already unlocked" },
    })))
}

/// `POST /api/platform/update-playtime` (`{seconds}`).
pub async fn update_playtime(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    // The configuration is checked before the body, as it always was.
    let cfg = platform::configured(&st).await?;
    let b = body_object(body).await?;
    let seconds = platform::parse_seconds(b.get("seconds"))?;
    let (total, unlocked) = platform::record_playtime(&st, cfg, seconds).await?;
    Ok(Json(
        json!({"success": true, "totalPlayTime": total, "added": seconds,
               "stat": platform::STAT, "progressUnlocked": unlocked}),
    ))
}

/// `GET /api/platform/list-achievements`.
pub async fn list_achievements(State(st): State<AppState>) -> SysResult<Json<Value>> {
    let (items, total) = platform::listing(&st).await?;
    Ok(Json(
        json!({"success": true, "count": items.len(), "achievements": items,
               "totalPlayTime": total, "stat": platform::STAT}),
    ))
}

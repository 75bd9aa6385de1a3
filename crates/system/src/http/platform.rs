//! Platform achievements and playtime: `/api/platform/...` and the original
//! pages' `/api/steam/...` paths of the same routes.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::Json;
use companiond_core::task::blocking;
use companiond_core::{now_millis, AppState};
use serde_json::{json, Value};

use super::body_object;
use crate::error::{SysResult, SystemError};
use crate::platform;

async fn achievements(st: &AppState) -> SysResult<Vec<platform::Achievement>> {
    let bundle = st.bundle_dir().to_path_buf();
    blocking(move || platform::load_config(&bundle)).await
}

/// `POST /api/platform/set-achievement-status/{name}`.
pub async fn set_achievement(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> SysResult<Json<Value>> {
    let cfg = achievements(&st).await?;
    let now = now_millis();
    let n = name.clone();
    let newly = st
        .store
        .try_update(platform::DOC, move |cur: Option<platform::Progress>| {
            let mut p = cur.unwrap_or_default();
            let newly = platform::unlock(&cfg, &mut p, &n, now)?;
            Ok::<_, SystemError>((p, newly))
        })
        .await??;
    Ok(Json(json!({
        "success": true, "achievement": name, "newlyUnlocked": newly,
        "alreadyUnlocked": !newly,
        "message": if newly { "achievement unlocked" } else { "achievement was already unlocked" },
    })))
}

/// `POST /api/platform/update-playtime` (`{seconds}`).
pub async fn update_playtime(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let cfg = achievements(&st).await?;
    let b = body_object(body).await?;
    let seconds = platform::parse_seconds(b.get("seconds"))?;
    let now = now_millis();
    let (total, unlocked) = st
        .store
        .update(platform::DOC, move |cur: Option<platform::Progress>| {
            let mut p = cur.unwrap_or_default();
            let unlocked = platform::add_playtime(&cfg, &mut p, seconds, now);
            let total = p.play_time_seconds;
            (p, (total, unlocked))
        })
        .await?;
    Ok(Json(
        json!({"success": true, "totalPlayTime": total, "added": seconds,
               "stat": platform::STAT, "progressUnlocked": unlocked}),
    ))
}

/// `GET /api/platform/list-achievements`.
pub async fn list_achievements(State(st): State<AppState>) -> SysResult<Json<Value>> {
    let cfg = achievements(&st).await?;
    let p: platform::Progress = st.store.read(platform::DOC).await?.unwrap_or_default();
    let items = platform::list(&cfg, &p);
    Ok(Json(
        json!({"success": true, "count": items.len(), "achievements": items,
               "totalPlayTime": p.play_time_seconds, "stat": platform::STAT}),
    ))
}

//! Platform achievements and playtime: `/api/platform/...` and the original
//! pages' `/api/steam/...` paths of the same routes.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::Json;
use companiond_core::envelope::BodyOf;
use companiond_core::AppState;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::SysResult;
use crate::platform::{self, AchievementState, PlaytimeBody};

/// `POST /api/platform/set-achievement-status/{name}`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "achievement": "FIRST_CHAT", "newlyUnlocked": true,
    "alreadyUnlocked": false, "message": "achievement unlocked"}))]
pub struct AchievementSet {
    success: bool,
    achievement: String,
    #[serde(rename = "newlyUnlocked")]
    newly_unlocked: bool,
    #[serde(rename = "alreadyUnlocked")]
    already_unlocked: bool,
    message: &'static str,
}

/// `POST /api/platform/update-playtime`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "totalPlayTime": 70, "added": 60,
    "stat": "PLAY_TIME_SECONDS", "progressUnlocked": []}))]
pub struct PlaytimeRecorded {
    success: bool,
    /// Seconds played in total.
    #[serde(rename = "totalPlayTime")]
    total_play_time: i64,
    /// Seconds counted from this report.
    added: i64,
    /// Always `PLAY_TIME_SECONDS`.
    stat: &'static str,
    /// The playtime achievements unlocked so far.
    #[serde(rename = "progressUnlocked")]
    progress_unlocked: Vec<String>,
}

/// `GET /api/platform/list-achievements`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "count": 1, "achievements": [{"name": "FIRST_CHAT",
    "unlocked": false, "unlocked_at": null, "playtime_seconds": null}],
    "totalPlayTime": 0, "stat": "PLAY_TIME_SECONDS"}))]
pub struct Achievements {
    success: bool,
    count: usize,
    /// In configuration order.
    achievements: Vec<AchievementState>,
    #[serde(rename = "totalPlayTime")]
    total_play_time: i64,
    stat: &'static str,
}

/// `POST /api/platform/set-achievement-status/{name}`.
pub async fn set_achievement(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> SysResult<Json<AchievementSet>> {
    let newly = platform::set_achievement(&st, &name).await?;
    Ok(Json(AchievementSet {
        success: true,
        achievement: name,
        newly_unlocked: newly,
        already_unlocked: !newly,
        message: if newly {
            "achievement unlocked"
        } else {
            "achievement was already unlocked"
        },
    }))
}

/// `POST /api/platform/update-playtime` (`{seconds}`).
pub async fn update_playtime(
    State(st): State<AppState>,
    body: Body,
) -> SysResult<Json<PlaytimeRecorded>> {
    // The configuration is checked before the body, as it always was.
    let cfg = platform::configured(&st).await?;
    let seconds = BodyOf::<PlaytimeBody>::read(body).await?.seconds;
    let (total, unlocked) = platform::record_playtime(&st, cfg, seconds).await?;
    Ok(Json(PlaytimeRecorded {
        success: true,
        total_play_time: total,
        added: seconds,
        stat: platform::STAT,
        progress_unlocked: unlocked,
    }))
}

/// `GET /api/platform/list-achievements`.
pub async fn list_achievements(State(st): State<AppState>) -> SysResult<Json<Achievements>> {
    let (achievements, total) = platform::listing(&st).await?;
    Ok(Json(Achievements {
        success: true,
        count: achievements.len(),
        achievements,
        total_play_time: total,
        stat: platform::STAT,
    }))
}

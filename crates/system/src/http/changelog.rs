//! `/api/changelog`, `/api/survey` and `/api/survey/submit`.

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::Json;
use companiond_core::task::blocking;
use companiond_core::AppState;
use serde_json::{json, Value};

use super::{body_object, query};
use crate::error::{SysResult, SystemError};
use crate::{changelog, survey};

/// `GET /api/changelog?since=&lang=`.
pub async fn changelog(State(st): State<AppState>, q: RawQuery) -> SysResult<Json<Value>> {
    let since = query(&q, "since").unwrap_or_default();
    let lang = query(&q, "lang").unwrap_or_default();
    let bundle = st.bundle_dir().to_path_buf();
    let entries =
        blocking(move || Ok::<_, SystemError>(changelog::changelog(&bundle, &since, &lang)))
            .await?;
    Ok(Json(
        json!({"current_version": changelog::APP_VERSION, "entries": entries}),
    ))
}

/// `GET /api/survey?lang=`.
pub async fn survey(State(st): State<AppState>, q: RawQuery) -> SysResult<Json<Value>> {
    let lang = query(&q, "lang").unwrap_or_default();
    Ok(Json(match survey::current(&st, lang).await? {
        Some(s) => {
            json!({"has_survey": true, "survey_version": changelog::APP_VERSION, "survey": s})
        }
        None => json!({"has_survey": false, "survey_version": changelog::APP_VERSION}),
    }))
}

/// `POST /api/survey/submit`.
pub async fn survey_submit(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let s = survey::submit(&st, &b).await?;
    Ok(Json(
        json!({"ok": true, "success": true, "uploaded": s.uploaded, "action": s.action,
               "survey_version": changelog::APP_VERSION}),
    ))
}

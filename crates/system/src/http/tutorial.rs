//! `GET|PUT /api/seven-day-tutorial/state`.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use companiond_core::AppState;
use serde_json::Value;

use super::body_object;
use crate::error::SysResult;
use crate::tutorial;

/// `GET /api/seven-day-tutorial/state`.
pub async fn get_state(State(st): State<AppState>) -> SysResult<Json<tutorial::Public>> {
    let doc = tutorial::load(&st).await?;
    Ok(Json(tutorial::Public {
        ok: true,
        store: doc,
    }))
}

/// `PUT /api/seven-day-tutorial/state` (`{state, expectedRevision}`).
pub async fn put_state(
    State(st): State<AppState>,
    body: Body,
) -> SysResult<Json<tutorial::Public>> {
    let b = Value::Object(body_object(body).await?);
    let (state, expected) = tutorial::validate_put(&b)?;
    let next = tutorial::replace(&st, &state, expected).await?;
    Ok(Json(tutorial::Public {
        ok: true,
        store: next,
    }))
}

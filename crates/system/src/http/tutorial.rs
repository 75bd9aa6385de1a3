//! `GET|PUT /api/seven-day-tutorial/state`.

use axum::extract::State;
use axum::Json;
use companiond_core::envelope::BodyOf;
use companiond_core::AppState;

use super::bodies::TutorialPutBody;
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
    BodyOf(body): BodyOf<TutorialPutBody>,
) -> SysResult<Json<tutorial::Public>> {
    let (state, expected) = tutorial::validate_put(body.state, body.expected_revision)?;
    let next = tutorial::replace(&st, &state, expected).await?;
    Ok(Json(tutorial::Public {
        ok: true,
        store: next,
    }))
}

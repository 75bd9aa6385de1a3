//! The memory toggles (`review_config`, `powerful_memory_config`).

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, BodyOf};
use companiond_core::{AppState, Ext};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::toggles::{self, Toggle};
use crate::MemoryRuntime;

use super::Answer;

/// The toggle a toggle route is about (`toggle_get::<Review>`).
pub(crate) trait ToggleRoute {
    const TOGGLE: Toggle;
}

/// `/api/memory/review_config`.
pub(crate) struct Review;
impl ToggleRoute for Review {
    const TOGGLE: Toggle = Toggle::Review;
}

/// `/api/memory/powerful_memory_config`.
pub(crate) struct Powerful;
impl ToggleRoute for Powerful {
    const TOGGLE: Toggle = Toggle::Powerful;
}

/// A toggle's state.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"enabled": true}))]
pub(crate) struct ToggleState {
    enabled: bool,
}

/// A toggle's saved state.
#[derive(Serialize, ToSchema)]
pub(crate) struct ToggleSaved {
    success: bool,
    enabled: bool,
}

/// The body of a toggle's `POST`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"enabled": false}))]
pub(crate) struct ToggleBody {
    enabled: bool,
}

/// `GET` of a toggle: `{enabled}`, or 503 `{error, code?}`.
pub(crate) async fn toggle_get<T: ToggleRoute>(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
) -> Response {
    no_store(
        toggles::read(&st, &rt, T::TOGGLE)
            .await
            .map(|enabled| Json(ToggleState { enabled })),
    )
}

/// `POST` of a toggle (`{enabled}`): `{success, enabled}`.
pub(crate) async fn toggle_post<T: ToggleRoute>(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    BodyOf(body): BodyOf<ToggleBody>,
) -> Answer<ToggleSaved> {
    let enabled = toggles::write(&st, &rt, T::TOGGLE, body.enabled).await?;
    Ok(Json(ToggleSaved {
        success: true,
        enabled,
    }))
}

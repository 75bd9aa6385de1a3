//! First-run personality onboarding and presets.

use axum::extract::{Path as UrlPath, State};
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, JsonBody};
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use super::*;

// ------------------------------------------------------------------ onboarding, presets

const ONBOARDING_DOC: &str = "config/persona_onboarding.json";

pub(crate) async fn onboarding_get(State(st): State<AppState>) -> Response {
    let saved = st
        .store
        .read::<Value>(ONBOARDING_DOC)
        .await
        .ok()
        .flatten()
        .filter(Value::is_object);
    // Without presets there is nothing to choose: report the first run as done.
    let state = saved.unwrap_or_else(|| {
        json!({"version": 1, "status": "completed", "handled_at": null,
               "manual_reselect_character_name": null, "manual_reselect_requested_at": null})
    });
    no_store(Json(json!({"success": true, "state": state})))
}

pub(crate) async fn onboarding_set(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Answer<Json<Value>> {
    let status = body.get("status").and_then(Value::as_str).unwrap_or("");
    if !matches!(status, "pending" | "completed" | "skipped") {
        return Err(bad("status must be pending, completed or skipped"));
    }
    let state = json!({"version": 1, "status": status, "handled_at": companiond_core::now_rfc3339(),
                       "manual_reselect_character_name": null, "manual_reselect_requested_at": null});
    st.store
        .write(ONBOARDING_DOC, state.clone())
        .await
        .map_err(|e| FrontendError::Storage(format!("cannot save: {e}")))?;
    Ok(Json(json!({"success": true, "state": state})))
}

pub(crate) async fn persona_selection_get(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Json<Value>> {
    existing(&st, &name)?;
    Ok(Json(
        json!({"success": true, "selection": {"mode": "default", "preset_id": null,
                   "source": null, "selected_at": null, "profile": null}}),
    ))
}

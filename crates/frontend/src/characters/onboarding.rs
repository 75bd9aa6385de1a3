//! First-run personality onboarding and presets.

use axum::extract::{Path as UrlPath, State};
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{body_refused, loose, no_store, BodyOf, SuccessEnvelope};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::*;

// ------------------------------------------------------------------ bodies and answers

/// The first-run onboarding state (as saved; `completed` before any save:
/// without presets there is nothing to choose).
#[derive(Clone, Serialize, Deserialize, ToSchema)]
pub(crate) struct OnboardingState {
    version: Option<u32>,
    /// `pending`, `completed` or `skipped`.
    status: Option<String>,
    /// When it was recorded (RFC 3339).
    handled_at: Option<String>,
    manual_reselect_character_name: Option<String>,
    manual_reselect_requested_at: Option<String>,
    /// Other keys of the stored document, shown as stored.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

impl OnboardingState {
    /// The state recorded now with `status`.
    fn recorded(status: &str, handled_at: Option<String>) -> Self {
        OnboardingState {
            version: Some(1),
            status: Some(status.to_string()),
            handled_at,
            manual_reselect_character_name: None,
            manual_reselect_requested_at: None,
            rest: Map::new(),
        }
    }
}

/// The onboarding state.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "state": {"version": 1, "status": "completed",
    "handled_at": null, "manual_reselect_character_name": null, "manual_reselect_requested_at": null}}))]
pub(crate) struct Onboarding {
    success: bool,
    state: OnboardingState,
}

/// The onboarding outcome to record (anything else, text or not, is a 400).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"status": "completed"}))]
pub(crate) struct OnboardingBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, pattern = "^(pending|completed|skipped)$")]
    status: Option<String>,
}

companiond_core::body_rejected!(Response, body_refused::<SuccessEnvelope> => OnboardingBody);

/// Personality presets (none in companiond).
#[derive(Serialize, ToSchema)]
pub(crate) struct Presets {
    success: bool,
    #[schema(value_type = Vec<Object>)]
    presets: Vec<Value>,
}

/// A character's preset selection (always the default: no presets).
#[derive(Serialize, ToSchema)]
pub(crate) struct PersonaSelection {
    success: bool,
    selection: Selection,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct Selection {
    mode: &'static str,
    #[schema(required = true, value_type = Option<String>)]
    preset_id: Option<String>,
    #[schema(required = true, value_type = Option<String>)]
    source: Option<String>,
    #[schema(required = true, value_type = Option<String>)]
    selected_at: Option<String>,
    #[schema(required = true, value_type = Option<Object>)]
    profile: Option<Value>,
}

/// `GET /api/characters/persona-presets`.
pub(crate) async fn presets() -> Json<Presets> {
    Json(Presets {
        success: true,
        presets: Vec::new(),
    })
}

// ------------------------------------------------------------------ onboarding, presets

const ONBOARDING_DOC: &str = "config/persona_onboarding.json";

pub(crate) async fn onboarding_get(State(st): State<AppState>) -> Response {
    // Read as a value first: a document of another shape (hand-edited, another
    // release) is shown as the default, and left as it is on disk.
    let saved = st
        .store
        .read::<Value>(ONBOARDING_DOC)
        .await
        .ok()
        .flatten()
        .and_then(|v| serde_json::from_value::<OnboardingState>(v).ok());
    // Without presets there is nothing to choose: report the first run as done.
    let state = saved.unwrap_or_else(|| OnboardingState::recorded("completed", None));
    no_store(Json(Onboarding {
        success: true,
        state,
    }))
}

pub(crate) async fn onboarding_set(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<OnboardingBody>,
) -> Answer<Json<Onboarding>> {
    let status = body.status.as_deref().unwrap_or("");
    if !matches!(status, "pending" | "completed" | "skipped") {
        return Err(bad("status must be pending, completed or skipped"));
    }
    let state = OnboardingState::recorded(status, Some(companiond_core::now_rfc3339()));
    st.store
        .write(ONBOARDING_DOC, state.clone())
        .await
        .map_err(|e| FrontendError::Storage(format!("cannot save: {e}")))?;
    Ok(Json(Onboarding {
        success: true,
        state,
    }))
}

pub(crate) async fn persona_selection_get(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Json<PersonaSelection>> {
    existing(&st, &name)?;
    Ok(Json(PersonaSelection {
        success: true,
        selection: Selection {
            mode: "default",
            preset_id: None,
            source: None,
            selected_at: None,
            profile: None,
        },
    }))
}

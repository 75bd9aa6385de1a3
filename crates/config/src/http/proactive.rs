//! `GET|POST /api/proactive/mode` and `GET|POST /api/proactive/settings`.
//!
//! These routes answer every failure with HTTP 200 and
//! `{success:false, ok:false, error, error_code, reason}` (the proactive clients
//! branch on `reason`).

use std::marker::PhantomData;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{loose, ok_json, BodyFault, BodyOf, BodyRejection, SuccessError};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use crate::conversation;
use crate::error::ConfigError;
use crate::proactive_settings as settings;

/// `GET /api/proactive/mode`.
#[derive(Serialize, ToSchema)]
pub struct ProactiveMode {
    success: bool,
    /// `off`, `normal`, `focus`, `frequent`, or `custom` when the fields match no preset.
    mode: &'static str,
    available_modes: &'static [&'static str],
    /// The proactive fields (docs/config.md).
    settings: Map<String, Value>,
}

/// `GET /api/proactive/settings`.
#[derive(Serialize, ToSchema)]
pub struct ProactiveSettings {
    success: bool,
    settings: Map<String, Value>,
    mode: &'static str,
}

/// `POST /api/proactive/mode`: the preset applied.
#[derive(Serialize, ToSchema)]
pub struct ModeApplied {
    success: bool,
    mode: String,
    applied: Map<String, Value>,
    /// Only when a field was refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(nullable = false)]
    rejected: Vec<String>,
    revision: String,
}

/// `POST /api/proactive/settings`: the fields written.
#[derive(Serialize, ToSchema)]
pub struct SettingsApplied {
    success: bool,
    applied: Map<String, Value>,
    rejected: Vec<String>,
    /// Fields the user owns (never written here).
    rejected_user_owned: Vec<String>,
    mode: &'static str,
    revision: String,
}

/// The body of `POST /api/proactive/mode`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"mode": "normal"}))]
pub struct ModeBody {
    /// `off`, `normal`, `focus` or `frequent` (other text, null or nothing is
    /// an unknown mode; another type is `invalid_body`).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String)]
    mode: Option<String>,
}

/// A body that is not a JSON object is the 200 `invalid_body` answer.
impl BodyRejection for ModeBody {
    type Error = Response;
    fn rejected(fault: BodyFault) -> Response {
        let error = ConfigError::body(fault);
        fail("invalid_body", error.message().to_string()).status(StatusCode::OK)
    }
}

/// The body of `POST /api/proactive/settings`: proactive fields to write
/// (`proactive*Enabled` booleans, `proactiveChatInterval` / `proactiveVisionInterval`
/// 1..3600 s); other fields are refused or reported.
// `settings::sort` judges every key on its own and in the order sent (a bad
// value is reported in `rejected`, never a refusal of the body): the body is
// read as its object, in order (`fields`); the named fields state the known
// keys, judged inside it.
#[derive(Default, Deserialize, ToSchema)]
#[serde(from = "Map<String, Value>")]
#[schema(example = json!({"proactiveChatEnabled": true, "proactiveChatInterval": 60}))]
pub struct ProactiveFields {
    #[serde(rename = "proactiveChatEnabled")]
    #[schema(value_type = Option<bool>)]
    proactive_chat_enabled: PhantomData<bool>,
    #[serde(rename = "proactiveChatInterval")]
    #[schema(value_type = Option<f64>)]
    proactive_chat_interval: PhantomData<f64>,
    #[serde(flatten)]
    fields: Map<String, Value>,
}

companiond_core::ordered_body!(ProactiveFields => fields);

/// A body that is not a JSON object is the 200 `invalid_body` answer.
impl BodyRejection for ProactiveFields {
    type Error = Response;
    fn rejected(fault: BodyFault) -> Response {
        ModeBody::rejected(fault)
    }
}

/// Every failure of the proactive routes: HTTP 200 with
/// `{success:false, ok:false, error, error_code, reason}`.
pub struct ProactiveFailure;

impl DocumentedError for ProactiveFailure {
    fn answers() -> Vec<ErrorDoc> {
        let refused = |reason: &str, e: &str| fail(reason, e.to_string()).status(StatusCode::OK);
        vec![
            ErrorDoc::observed(
                "the body is not a JSON object",
                refused("invalid_body", "the request body must be a JSON object"),
            ),
            ErrorDoc::observed(
                "unknown mode",
                refused(
                    "unknown_mode",
                    "unknown mode; available: off, normal, focus, frequent",
                ),
            ),
            ErrorDoc::observed(
                "no recognised proactive-chat fields",
                refused(
                    "no_fields",
                    "no recognised proactive-chat fields were given",
                ),
            ),
            ErrorDoc::observed(
                "the settings document is unreadable",
                storage_failed(ConfigError::Unreadable("unreadable".into())),
            ),
            ErrorDoc::observed(
                "the disk refused a read or write",
                storage_failed(ConfigError::Storage("disk full".into())),
            ),
        ]
    }
}

fn fail(reason: &str, error: impl Into<String>) -> SuccessError {
    SuccessError::new(error)
        .code(reason)
        .with("ok", false)
        .with("reason", reason)
}

fn storage_failed(e: ConfigError) -> Response {
    fail(e.code(), e.message().to_string())
        .with("settings", json!({}))
        .status(StatusCode::OK)
}

/// `GET /api/proactive/mode`.
pub async fn get_mode(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => ok_json(ProactiveMode {
            success: true,
            mode: settings::infer_mode(&doc.settings),
            available_modes: settings::MODES,
            settings: settings::subset(&doc.settings),
        }),
        Err(e) => fail(e.code(), e.message().to_string())
            .with("mode", "custom")
            .with("settings", json!({}))
            .status(StatusCode::OK),
    }
}

/// `POST /api/proactive/mode` (`{mode}`): apply a preset.
pub async fn post_mode(State(st): State<AppState>, BodyOf(body): BodyOf<ModeBody>) -> Response {
    let mode = body.mode.as_deref().unwrap_or("");
    let Some(preset) = settings::preset(mode) else {
        let shown = body.mode.map_or(Value::Null, Value::String);
        return fail(
            "unknown_mode",
            format!(
                "unknown mode {shown}; available: {}",
                settings::MODES.join(", ")
            ),
        )
        .with("available_modes", settings::MODES)
        .status(StatusCode::OK);
    };
    let mode = mode.to_string();
    match settings::write_fields(&st, preset, Vec::new()).await {
        Ok(a) => ok_json(ModeApplied {
            success: true,
            mode,
            applied: a.applied,
            rejected: a.rejected,
            revision: a.doc.revision.to_string(),
        }),
        Err(e) => storage_failed(e),
    }
}

/// `GET /api/proactive/settings`.
pub async fn get_settings(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => ok_json(ProactiveSettings {
            success: true,
            settings: settings::subset(&doc.settings),
            mode: settings::infer_mode(&doc.settings),
        }),
        Err(e) => storage_failed(e),
    }
}

/// `POST /api/proactive/settings`: write the recognised proactive fields.
pub async fn post_settings(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<ProactiveFields>,
) -> Response {
    let sorted = settings::sort(body.fields);
    if sorted.writable.is_empty() && sorted.rejected.is_empty() {
        return fail(
            "no_fields",
            "no recognised proactive-chat fields were given",
        )
        .with("rejected_user_owned", &sorted.user_owned)
        .status(StatusCode::OK);
    }
    let user_owned = sorted.user_owned;
    match settings::write_fields(&st, sorted.writable, sorted.rejected).await {
        Ok(a) => ok_json(SettingsApplied {
            success: true,
            applied: a.applied,
            rejected: a.rejected,
            rejected_user_owned: user_owned,
            mode: settings::infer_mode(&a.doc.settings),
            revision: a.doc.revision.to_string(),
        }),
        Err(e) => storage_failed(e),
    }
}

//! `GET|POST /api/proactive/mode` and `GET|POST /api/proactive/settings`.
//!
//! These routes answer every failure with HTTP 200 and
//! `{success:false, ok:false, error, error_code, reason}` (the proactive clients
//! branch on `reason`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use companiond_core::envelope::{ok_json, SuccessError};
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use super::RawJson;
use crate::conversation;
use crate::error::ConfigError;
use crate::proactive_settings as settings;

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

/// The body as an object, or the 200 `invalid_body` answer.
fn object(body: RawJson) -> Result<Map<String, Value>, Box<Response>> {
    let refused = |e: String| Box::new(fail("invalid_body", e).status(StatusCode::OK));
    match body.0 {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(refused(
            "the request body must be a JSON object".to_string(),
        )),
        Err(e) => Err(refused(e)),
    }
}

/// `GET /api/proactive/mode`.
pub async fn get_mode(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => ok_json(json!({
            "success": true,
            "mode": settings::infer_mode(&doc.settings),
            "available_modes": settings::MODES,
            "settings": settings::subset(&doc.settings),
        })),
        Err(e) => fail(e.code(), e.message().to_string())
            .with("mode", "custom")
            .with("settings", json!({}))
            .status(StatusCode::OK),
    }
}

/// `POST /api/proactive/mode` (`{mode}`): apply a preset.
pub async fn post_mode(State(st): State<AppState>, body: RawJson) -> Response {
    let body = match object(body) {
        Ok(b) => b,
        Err(answer) => return *answer,
    };
    let mode = body.get("mode").and_then(Value::as_str).unwrap_or("");
    let Some(preset) = settings::preset(mode) else {
        let shown = body.get("mode").cloned().unwrap_or(Value::Null);
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
        Ok(a) => {
            let mut out = json!({"success": true, "mode": mode, "applied": a.applied});
            if !a.rejected.is_empty() {
                out["rejected"] = json!(a.rejected);
            }
            out["revision"] = json!(a.doc.revision.to_string());
            ok_json(out)
        }
        Err(e) => storage_failed(e),
    }
}

/// `GET /api/proactive/settings`.
pub async fn get_settings(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => ok_json(json!({
            "success": true,
            "settings": settings::subset(&doc.settings),
            "mode": settings::infer_mode(&doc.settings),
        })),
        Err(e) => storage_failed(e),
    }
}

/// `POST /api/proactive/settings`: write the recognised proactive fields.
pub async fn post_settings(State(st): State<AppState>, body: RawJson) -> Response {
    let body = match object(body) {
        Ok(b) => b,
        Err(answer) => return *answer,
    };
    let sorted = settings::sort(body);
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
        Ok(a) => ok_json(json!({
            "success": true,
            "applied": a.applied,
            "rejected": a.rejected,
            "rejected_user_owned": user_owned,
            "mode": settings::infer_mode(&a.doc.settings),
            "revision": a.doc.revision.to_string(),
        })),
        Err(e) => storage_failed(e),
    }
}

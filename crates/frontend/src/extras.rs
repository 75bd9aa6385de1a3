//! `steam_language` and the features companiond does not have, answered in the
//! shape the original pages read as "unavailable" (docs/frontend.md): agent
//! (502 `down`), music (no domains), widget mode (in-memory flags), card drop (in-memory active character), galgame (canned options), the
//! workshop (no subscriptions) and the shutdown beacon (a no-op).

use std::sync::Mutex;

use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, JsonBody};
use companiond_core::{AppState, Ext};
use serde_json::{json, Map, Value};

use crate::error::{Answer, FrontendError, NO_AGENT};

pub(crate) async fn steam_language(State(st): State<AppState>) -> Response {
    let ui = st
        .store
        .read::<Value>("config/conversation_settings.json")
        .await
        .ok()
        .flatten()
        .and_then(|v| v.get("uiLanguage").cloned())
        .filter(|v| v.as_str().is_some_and(|s| !s.trim().is_empty()))
        .unwrap_or(Value::Null);
    no_store(Json(json!({
        "success": false,
        "error": "no game platform client is running (companiond has no Steam integration)",
        "uiLanguage": ui,
        "steam_language": null,
        "i18n_language": null,
        "ip_country": null,
        "is_mainland_china": false,
    })))
}

// ------------------------------------------------------------------ agent

/// The agent routes without companiond's (absent) agent server: 502 `down`.
pub(crate) async fn agent_down() -> FrontendError {
    FrontendError::AgentDown
}

/// `GET /api/agent/{capability}/availability` (`computer_use`, `browser_use`,
/// `user_plugin`, `openclaw`, `mcp`): the original's answer without its tool
/// server, 502 `{ready:false, reasons}` (`mcp`: 200, it was removed there).
pub(crate) async fn agent_availability(
    UrlPath(capability): UrlPath<String>,
) -> Answer<Json<Value>> {
    if capability == "mcp" {
        return Ok(Json(
            json!({"ready": false, "capabilities_count": 0, "reasons": [NO_AGENT]}),
        ));
    }
    Err(FrontendError::AgentUnavailable)
}

// ------------------------------------------------------------------ widget mode, card drop

#[derive(Default)]
struct Widget {
    enabled: bool,
    stealth: bool,
}

/// The in-memory state of the pages' unavailable features (provided by
/// [`crate::start`]): widget-mode flags and the card-drop snapshot.
#[derive(Default)]
pub struct Extras {
    widget: Mutex<Widget>,
    card_drop: Mutex<Option<Map<String, Value>>>,
}

fn widget_json(w: &Widget) -> Value {
    json!({"enabled": w.enabled, "stealthEnabled": w.stealth})
}

pub(crate) async fn widget_get(Ext(extras): Ext<Extras>) -> Response {
    let w = extras.widget.lock().unwrap_or_else(|e| e.into_inner());
    no_store(Json(json!({"success": true, "state": widget_json(&w)})))
}

/// Set one widget flag from the body's boolean `enabled`: the new state, or 400.
fn widget_set(
    extras: &Extras,
    body: &Map<String, Value>,
    flag: fn(&mut Widget) -> &mut bool,
) -> Answer<Json<Value>> {
    let Some(on) = body.get("enabled").and_then(Value::as_bool) else {
        return Err(FrontendError::BadRequest(
            "enabled must be a boolean".into(),
        ));
    };
    let mut w = extras.widget.lock().unwrap_or_else(|e| e.into_inner());
    *flag(&mut w) = on;
    Ok(Json(json!({"success": true, "state": widget_json(&w)})))
}

pub(crate) async fn widget_enabled(
    Ext(extras): Ext<Extras>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Answer<Json<Value>> {
    widget_set(&extras, &body, |w| &mut w.enabled)
}

pub(crate) async fn widget_stealth(
    Ext(extras): Ext<Extras>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Answer<Json<Value>> {
    widget_set(&extras, &body, |w| &mut w.stealth)
}

/// Largest avatar data URL kept in the card-drop snapshot.
const MAX_DATA_URL: usize = 8 * 1024 * 1024;

pub(crate) async fn card_drop_set(
    Ext(extras): Ext<Extras>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Answer<Json<Value>> {
    let mut snap = extras.card_drop.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = snap.clone().unwrap_or_default();
    if let Some(n) = body.get("name") {
        let Some(n) = n.as_str() else {
            return Err(FrontendError::BadRequest("name must be a string".into()));
        };
        if next.get("name").and_then(Value::as_str) != Some(n) {
            next.clear();
        }
        next.insert("name".into(), json!(n));
    }
    for k in ["dataUrl", "characterReferenceDataUrl"] {
        if let Some(v) = body.get(k).and_then(Value::as_str) {
            if v.len() <= MAX_DATA_URL && v.starts_with("data:image/") {
                next.insert(k.into(), json!(v));
            }
        }
    }
    *snap = Some(next);
    Ok(Json(json!({"ok": true})))
}

pub(crate) async fn card_drop_get(
    State(st): State<AppState>,
    Ext(extras): Ext<Extras>,
) -> Json<Value> {
    let name = extras
        .card_drop
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
        .filter(|n| st.characters.exists(n))
        .unwrap_or_else(|| st.characters.current());
    Json(json!({"name": name}))
}

// ------------------------------------------------------------------ galgame

pub(crate) async fn galgame_options(
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Answer<Json<Value>> {
    let has_assistant = body
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|m| {
            m.iter()
                .any(|x| x.get("role").and_then(Value::as_str) == Some("assistant"))
        });
    if !has_assistant {
        return Err(FrontendError::Refused {
            code: "no_assistant_turn",
            error: "no_assistant_turn".into(),
        });
    }
    Ok(Json(json!({
        "success": true, "fallback": true, "reason": "not_supported",
        "options": [
            {"label": "继续", "text": "Tell me more."},
            {"label": "好的", "text": "Okay!"},
            {"label": "换话题", "text": "Let's talk about something else."},
        ],
    })))
}

// ------------------------------------------------------------------ workshop

pub(crate) async fn workshop_meta(UrlPath(_name): UrlPath<String>) -> Json<Value> {
    Json(json!({"success": true, "has_uploaded": false, "meta": null}))
}

pub(crate) async fn music_search(RawQuery(q): RawQuery) -> Json<Value> {
    let query = crate::pages::query_param(q.as_deref().unwrap_or(""), "query").unwrap_or_default();
    if query.trim().is_empty() {
        return Json(json!({"success": false, "error": "EMPTY_QUERY", "data": []}));
    }
    Json(
        json!({"success": false, "error": "MUSIC_UNAVAILABLE", "data": [],
                   "message": "companiond has no music search"}),
    )
}

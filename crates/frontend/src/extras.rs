//! `steam_language` and the features companiond does not have, answered in the
//! shape the original pages read as "unavailable" (reference frontend.md § 3.7,
//! § 3.9–3.15): agent (502 `down`), music (no domains), widget mode (in-memory
//! flags), card drop (in-memory active character), galgame (canned options), the
//! workshop (no subscriptions) and the shutdown beacon (a no-op).

use std::sync::Mutex;

use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json, JsonBody, SuccessError};
use companiond_core::guards::Csrf;
use companiond_core::{Api, AppState};
use serde_json::{json, Map, Value};

async fn steam_language(State(st): State<AppState>) -> Response {
    let ui = st
        .store
        .read::<Value>("config/conversation_settings.json")
        .await
        .ok()
        .flatten()
        .and_then(|v| v.get("uiLanguage").cloned())
        .filter(|v| v.as_str().is_some_and(|s| !s.trim().is_empty()))
        .unwrap_or(Value::Null);
    no_store(ok_json(json!({
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

fn agent_down() -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({"success": false, "status": "down",
                    "error": "companiond has no agent server"})),
    )
        .into_response()
}

/// `GET /api/agent/{capability}/availability` (`computer_use`, `browser_use`,
/// `user_plugin`, `openclaw`, `mcp`): the original's answer without its tool
/// server, 502 `{ready:false, reasons}` (`mcp`: 200, it was removed there).
async fn agent_availability(UrlPath(capability): UrlPath<String>) -> Response {
    let reasons = json!(["companiond has no agent server"]);
    if capability == "mcp" {
        return Json(json!({"ready": false, "capabilities_count": 0, "reasons": reasons}))
            .into_response();
    }
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({"ready": false, "reasons": reasons})),
    )
        .into_response()
}

// ------------------------------------------------------------------ widget mode, card drop

#[derive(Default)]
struct Widget {
    enabled: bool,
    stealth: bool,
}

#[derive(Default)]
struct CardDrop {
    snapshot: Mutex<Option<Map<String, Value>>>,
}

#[derive(Default)]
struct WidgetState(Mutex<Widget>);

fn widget_json(w: &Widget) -> Value {
    json!({"enabled": w.enabled, "stealthEnabled": w.stealth})
}

async fn widget_get(State(st): State<AppState>) -> Response {
    let ws = st.ext::<WidgetState>();
    let w = ws.0.lock().unwrap_or_else(|e| e.into_inner());
    no_store(ok_json(json!({"success": true, "state": widget_json(&w)})))
}

fn enabled_of(body: &Map<String, Value>) -> Option<bool> {
    body.get("enabled").and_then(Value::as_bool)
}

fn not_bool() -> Response {
    SuccessError::new("enabled must be a boolean")
        .code("invalid_request")
        .status(StatusCode::BAD_REQUEST)
}

async fn widget_enabled(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(on) = enabled_of(&body) else {
        return not_bool();
    };
    let ws = st.ext::<WidgetState>();
    let mut w = ws.0.lock().unwrap_or_else(|e| e.into_inner());
    w.enabled = on;
    ok_json(json!({"success": true, "state": widget_json(&w)}))
}

async fn widget_stealth(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(on) = enabled_of(&body) else {
        return not_bool();
    };
    let ws = st.ext::<WidgetState>();
    let mut w = ws.0.lock().unwrap_or_else(|e| e.into_inner());
    w.stealth = on;
    ok_json(json!({"success": true, "state": widget_json(&w)}))
}

/// Largest avatar data URL kept in the card-drop snapshot.
const MAX_DATA_URL: usize = 8 * 1024 * 1024;

async fn card_drop_set(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let cd = st.ext::<CardDrop>();
    let mut snap = cd.snapshot.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = snap.clone().unwrap_or_default();
    if let Some(n) = body.get("name") {
        let Some(n) = n.as_str() else {
            return SuccessError::new("name must be a string")
                .code("invalid_request")
                .status(StatusCode::BAD_REQUEST);
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
    ok_json(json!({"ok": true}))
}

async fn card_drop_get(State(st): State<AppState>) -> Response {
    let cd = st.ext::<CardDrop>();
    let name = cd
        .snapshot
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
        .filter(|n| st.characters.exists(n))
        .unwrap_or_else(|| st.characters.current());
    ok_json(json!({"name": name}))
}

// ------------------------------------------------------------------ galgame

async fn galgame_options(JsonBody(body, ..): JsonBody<Map<String, Value>>) -> Response {
    let has_assistant = body
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|m| {
            m.iter()
                .any(|x| x.get("role").and_then(Value::as_str) == Some("assistant"))
        });
    if !has_assistant {
        return SuccessError::new("no_assistant_turn")
            .code("no_assistant_turn")
            .status(StatusCode::BAD_REQUEST);
    }
    ok_json(json!({
        "success": true, "fallback": true, "reason": "not_supported",
        "options": [
            {"label": "继续", "text": "Tell me more."},
            {"label": "好的", "text": "Okay!"},
            {"label": "换话题", "text": "Let's talk about something else."},
        ],
    }))
}

// ------------------------------------------------------------------ workshop

async fn workshop_meta(UrlPath(_name): UrlPath<String>) -> Response {
    ok_json(json!({"success": true, "has_uploaded": false, "meta": null}))
}

async fn music_search(RawQuery(q): RawQuery) -> Response {
    let query = crate::pages::query_param(q.as_deref().unwrap_or(""), "query").unwrap_or_default();
    if query.trim().is_empty() {
        return ok_json(json!({"success": false, "error": "EMPTY_QUERY", "data": []}));
    }
    ok_json(
        json!({"success": false, "error": "MUSIC_UNAVAILABLE", "data": [],
                   "message": "companiond has no music search"}),
    )
}

/// The routes.
pub fn api(state: &AppState) -> Api {
    let api = Api::new(state, "frontend")
        .get(
            "/api/config/steam_language",
            "platform language (no platform: success false, uiLanguage override)",
            steam_language,
        )
        .get(
            "/api/agent/health",
            "agent server health (none: 502 down)",
            || async { agent_down() },
        )
        .get("/api/agent/flags", "agent flags (none: 502)", || async {
            agent_down()
        })
        .get("/api/agent/state", "agent state (none: 502)", || async {
            agent_down()
        })
        .get(
            "/api/agent/{capability}/availability",
            "availability of an agent capability (none: 502 ready false)",
            agent_availability,
        )
        .get(
            "/api/music/domains",
            "allowed music hosts (none)",
            || async { ok_json(json!({"success": true, "domains": []})) },
        )
        .get(
            "/api/music/search",
            "music search (unavailable)",
            music_search,
        )
        .get(
            "/api/widget-mode/state",
            "widget-mode flags (in memory)",
            widget_get,
        )
        .get(
            "/api/card-drop/active-character",
            "the character shown in the card-drop window",
            card_drop_get,
        )
        .get(
            "/api/steam/workshop/subscribed-items",
            "workshop subscriptions (none)",
            || async { ok_json(json!({"success": true, "items": [], "total": 0})) },
        )
        .get("/api/steam/workshop/status", "workshop status", || async {
            ok_json(json!({"success": true, "steamworks_initialized": false}))
        })
        .get(
            "/api/steam/workshop/meta/{character}",
            "workshop upload metadata of a character (none)",
            workshop_meta,
        )
        .guarded(
            Method::POST,
            "/api/agent/flags",
            "set agent flags (none: 502)",
            Csrf::Success,
            || async { agent_down() },
        )
        .guarded(
            Method::POST,
            "/api/widget-mode/enabled",
            "turn widget mode on or off",
            Csrf::Success,
            widget_enabled,
        )
        .guarded(
            Method::POST,
            "/api/widget-mode/stealth-enabled",
            "turn widget stealth on or off",
            Csrf::Success,
            widget_stealth,
        );
    let api = api.post(
        "/api/card-drop/active-character",
        "remember the active character for the card-drop window",
        card_drop_set,
    );
    let api = api.post(
        "/api/galgame/options",
        "reply options after an assistant turn (canned fallback)",
        galgame_options,
    );
    let api = api.post(
        "/api/steam/workshop/sync-characters",
        "import workshop characters (nothing to import)",
        || async {
            ok_json(
                json!({"success": true, "added": 0, "backfilled_faces": 0, "skipped": 0,
                           "errors": [], "message": "no workshop subscriptions"}),
            )
        },
    );
    // The original shuts down only in its "open browser" mode; companiond never does.
    api.post(
        "/api/beacon/shutdown",
        "page-unload beacon (a no-op: companiond keeps running)",
        || async { ok_json(Value::Null) },
    )
}

//! Page configuration, languages and the proxy mode: `/api/config/page_config`,
//! `/api/config/character_reserved_fields`, `/api/config/platform_language`,
//! `/api/config/user_language` and `/api/config/set_proxy_mode`.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::AppState;
use serde_json::{json, Value};

use super::RawJson;
use crate::error::ConfigError;
use crate::{conversation, page, proxy};

/// `GET /api/config/page_config?persona_name=` (no-store).
pub async fn page_config(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let q = q.unwrap_or_default();
    let requested = url::form_urlencoded::parse(q.as_bytes())
        .find(|(k, _)| k == "persona_name" || k == "lanlan_name")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let name = requested.unwrap_or_else(|| st.characters.current());
    let exists = st.characters.exists(&name);
    let profile = st.characters.profile(&name).unwrap_or_else(|| json!({}));
    let bundle_static = st.bundle_dir().join("static");
    let frontend_static = st.opts.frontend_dir.as_ref().map(|d| d.join("static"));
    let roots = page::Roots {
        bundle_static: &bundle_static,
        frontend_static: frontend_static.as_deref(),
        data: st.data_dir(),
    };
    let mut body = page::page_config(&name, &profile, st.csrf_token(), &roots);
    body.insert("character_exists".into(), json!(exists));
    no_store(ok_json(body))
}

/// `GET /api/config/character_reserved_fields`.
pub async fn reserved_fields() -> Json<Value> {
    Json(page::reserved_fields())
}

async fn ui_language(st: &AppState) -> (Option<String>, Option<String>) {
    match conversation::load(st).await {
        Ok(doc) => (
            doc.extra
                .get("uiLanguage")
                .and_then(Value::as_str)
                .map(str::to_string),
            doc.settings
                .get("userLanguage")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
        Err(_) => (None, None),
    }
}

/// `GET /api/config/platform_language`.
pub async fn platform_language(State(st): State<AppState>) -> Response {
    let (ui, _) = ui_language(&st).await;
    let locale = page::os_locale();
    let i18n = page::i18n_language(locale.as_deref().unwrap_or(""));
    ok_json(json!({
        "success": true,
        "uiLanguage": ui,
        "platform_language": locale,
        "i18n_language": i18n,
        "source": if locale.is_some() { "os_locale" } else { "default" },
    }))
}

/// `GET /api/config/user_language`.
pub async fn user_language(State(st): State<AppState>) -> Response {
    let (ui, user) = ui_language(&st).await;
    let (code, source) = if let Some(u) = user.filter(|s| !s.trim().is_empty()) {
        (u, "conversation_settings")
    } else if let Some(u) = ui.filter(|s| !s.trim().is_empty()) {
        (u, "ui_language")
    } else if let Some(l) = page::os_locale() {
        (l, "os_locale")
    } else {
        ("en".to_string(), "default")
    };
    ok_json(json!({
        "success": true,
        "language": page::short_language(&code),
        "locale": page::i18n_language(&code),
        "source": source,
    }))
}

/// `POST /api/config/set_proxy_mode` (`{direct}`).
pub async fn set_proxy_mode(body: RawJson) -> Result<Json<Value>, ConfigError> {
    let direct = match body.object()?.get("direct") {
        Some(Value::Bool(d)) => *d,
        None => return Err(ConfigError::bad("direct (boolean) is required")),
        Some(_) => return Err(ConfigError::bad("direct must be a boolean")),
    };
    let after = proxy::set_direct(direct);
    Ok(Json(
        json!({"success": true, "direct": direct, "proxies_after": after}),
    ))
}

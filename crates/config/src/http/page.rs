//! Page configuration, languages and the proxy mode: `/api/config/page_config`,
//! `/api/config/character_reserved_fields`, `/api/config/platform_language`,
//! `/api/config/user_language` and `/api/config/set_proxy_mode`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{lenient, BodyOf, QueryOf};
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::error::ConfigError;
use crate::{conversation, page, proxy};

/// Which character `page_config` describes (default: the current one).
#[derive(Deserialize, IntoParams)]
pub struct PageConfigQuery {
    /// The character.
    #[serde(default, deserialize_with = "lenient::text")]
    pub persona_name: Option<String>,
    /// The original application's name of `persona_name`.
    #[serde(default, deserialize_with = "lenient::text")]
    pub lanlan_name: Option<String>,
}

companiond_core::query_rejected!(
    ConfigError,
    |m| ConfigError::bad_code(m, "invalid_query") => PageConfigQuery
);

/// `GET /api/config/platform_language`.
#[derive(Serialize, ToSchema)]
pub struct PlatformLanguage {
    success: bool,
    #[serde(rename = "uiLanguage")]
    ui_language: Option<String>,
    platform_language: Option<String>,
    i18n_language: String,
    /// `os_locale` or `default`.
    source: &'static str,
}

/// `GET /api/config/user_language`.
#[derive(Serialize, ToSchema)]
pub struct UserLanguage {
    success: bool,
    language: String,
    locale: String,
    /// `conversation_settings`, `ui_language`, `os_locale` or `default`.
    source: &'static str,
}

/// `{direct}`.
#[derive(Deserialize, ToSchema)]
pub struct ProxyModeBody {
    /// true: clear the proxy variables of this process; false: restore them.
    direct: bool,
}

companiond_core::body_rejected!(ConfigError, ConfigError::body => ProxyModeBody);

/// The proxy mode applied.
#[derive(Serialize, ToSchema)]
pub struct ProxyMode {
    success: bool,
    direct: bool,
    /// The proxy variables after the change.
    proxies_after: Map<String, Value>,
}

/// `GET /api/config/page_config?persona_name=` (no-store).
pub async fn page_config(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<PageConfigQuery>,
) -> Response {
    let name = q
        .persona_name
        .or(q.lanlan_name)
        .unwrap_or_else(|| st.characters.current());
    let exists = st.characters.exists(&name);
    let profile = st.characters.profile(&name).unwrap_or_default();
    let bundle_static = st.bundle_dir().join("static");
    let frontend_static = st.opts.frontend_dir.as_ref().map(|d| d.join("static"));
    let roots = page::Roots {
        bundle_static: &bundle_static,
        frontend_static: frontend_static.as_deref(),
        data: st.data_dir(),
    };
    no_store(Json(page::page_config(
        &name,
        exists,
        &profile,
        st.csrf_token(),
        &roots,
    )))
}

/// `GET /api/config/character_reserved_fields`.
pub async fn reserved_fields() -> Json<page::ReservedFields> {
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
    let source = if locale.is_some() {
        "os_locale"
    } else {
        "default"
    };
    ok_json(PlatformLanguage {
        success: true,
        ui_language: ui,
        platform_language: locale,
        i18n_language: i18n,
        source,
    })
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
    ok_json(UserLanguage {
        success: true,
        language: page::short_language(&code),
        locale: page::i18n_language(&code),
        source,
    })
}

/// `POST /api/config/set_proxy_mode` (`{direct}`).
pub async fn set_proxy_mode(
    BodyOf(ProxyModeBody { direct }): BodyOf<ProxyModeBody>,
) -> Result<Json<ProxyMode>, ConfigError> {
    let after = proxy::set_direct(direct);
    Ok(Json(ProxyMode {
        success: true,
        direct,
        proxies_after: after,
    }))
}

//! Provider settings and probes: `/api/config/core_api`, `/api/config/api_providers`,
//! `/api/config/test_connectivity` and `/api/config/list_models`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, JsonBody};
use companiond_core::layout as docs;
use companiond_core::{AppState, Ext};
use serde_json::{json, Map, Value};

use super::RawJson;
use crate::error::ConfigError;
use crate::probes::connectivity::{self, ConnectivityRequest};
use crate::probes::models::{self, ListModelsRequest};
use crate::state::ConfigState;
use crate::{catalog, core_api};

/// The stored provider settings as an object (missing = empty); any other JSON is
/// left untouched and answered 503.
fn settings_object(stored: Option<Value>) -> Result<Map<String, Value>, ConfigError> {
    match stored {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(ConfigError::Unreadable(format!(
            "{} is not a JSON object and was left untouched",
            docs::CORE_CONFIG
        ))),
    }
}

/// `GET /api/config/core_api`: the effective settings, secrets masked (no-store).
pub async fn get_core_api(State(st): State<AppState>, Ext(family): Ext<ConfigState>) -> Response {
    let (catalog, _) = family.catalog.get(st.bundle_dir());
    let stored = st.store.read::<Value>(docs::CORE_CONFIG).await;
    match stored.map_err(ConfigError::from).and_then(settings_object) {
        Ok(cfg) => no_store(Json(core_api::view(&cfg, &catalog))),
        Err(e) => no_store(e),
    }
}

/// `POST /api/config/core_api`: validate, merge and save; open chats are told when
/// a change affects them.
pub async fn post_core_api(
    State(st): State<AppState>,
    Ext(family): Ext<ConfigState>,
    body: RawJson,
) -> Result<Json<Value>, ConfigError> {
    let body = body.object()?;
    let (catalog, _) = family.catalog.get(st.bundle_dir());
    let merged = st
        .store
        .try_update(docs::CORE_CONFIG, move |cur: Option<Value>| {
            let merged = core_api::merge(settings_object(cur)?, body, &catalog)?;
            let cfg = Value::Object(merged.config.clone());
            Ok::<_, ConfigError>((cfg, merged))
        })
        .await??;
    let notified = if core_api::affects_sessions(&merged.changed) {
        st.sessions.notify_all(json!({
            "type": "provider_changed",
            "message": "provider settings changed; the next model request uses them",
        }))
    } else {
        0
    };
    Ok(Json(json!({
        "success": true,
        "message": "provider settings saved",
        "changed": merged.changed,
        "ignored": merged.ignored,
        "sessions_notified": notified,
        "sessions_ended": 0,
        "resolvedProviderUrls": merged.config.get("resolvedProviderUrls").cloned().unwrap_or(json!({})),
    })))
}

/// `GET /api/config/api_providers`.
pub async fn api_providers(
    State(st): State<AppState>,
    Ext(family): Ext<ConfigState>,
) -> Json<Map<String, Value>> {
    let (catalog, source) = family.catalog.get(st.bundle_dir());
    Json(catalog::view(&catalog, source))
}

/// What a provider probe reads: the effective core settings and the catalog.
async fn probe_inputs(
    st: &AppState,
    family: &ConfigState,
) -> (
    Map<String, Value>,
    std::sync::Arc<companiond_core::providers::Catalog>,
) {
    let cfg = st.llm.core_config().await;
    let (catalog, _) = family.catalog.get(st.bundle_dir());
    (cfg, catalog)
}

/// `POST /api/config/test_connectivity`.
pub async fn test_connectivity(
    State(st): State<AppState>,
    Ext(family): Ext<ConfigState>,
    JsonBody(req, ..): JsonBody<ConnectivityRequest>,
) -> Result<Json<Value>, ConfigError> {
    let (cfg, catalog) = probe_inputs(&st, &family).await;
    let r = connectivity::test_connectivity(req, &cfg, &catalog).await?;
    Ok(Json(json!({
        "success": true,
        "resolved_url": r.resolved_url,
        "latency_ms": r.latency_ms,
    })))
}

/// `POST /api/config/list_models`.
pub async fn list_models(
    State(st): State<AppState>,
    Ext(family): Ext<ConfigState>,
    JsonBody(req, ..): JsonBody<ListModelsRequest>,
) -> Result<Json<Value>, ConfigError> {
    let (cfg, catalog) = probe_inputs(&st, &family).await;
    let list = models::list_models(req, &cfg, &catalog).await?;
    Ok(Json(
        json!({"success": true, "models": list.models, "resolved_url": list.resolved_url}),
    ))
}

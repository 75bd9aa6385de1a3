//! Provider settings and probes: `/api/config/core_api`, `/api/config/api_providers`,
//! `/api/config/test_connectivity` and `/api/config/list_models`.

use std::marker::PhantomData;

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, BodyOf, JsonBody};
use companiond_core::frames::ServerFrame;
use companiond_core::layout as docs;
use companiond_core::{AppState, Ext};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

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

/// The provider settings as `GET /api/config/core_api` shows them: every stored
/// field plus defaults for the known ones, secrets masked (docs/config.md). An
/// open object: the catalog's keybook fields and the per-slot `<slot>Model<Suffix>`
/// fields are among the others.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of the object `core_api::view` builds
#[schema(example = json!({"success": true, "coreApi": "openai", "assistApi": "",
    "coreApiKey": "__NEKO_SECRET_MASKED__", "enableCustomApi": false,
    "api_key": "__NEKO_SECRET_MASKED__", "api_key_display": "sk-*****abc"}))]
pub struct ProviderSettingsView {
    success: bool,
    #[serde(rename = "coreApi")]
    core_api: String,
    #[serde(rename = "assistApi")]
    assist_api: String,
    /// Masked: `__NEKO_SECRET_MASKED__` when set, `""` when empty.
    #[serde(rename = "coreApiKey")]
    core_api_key: String,
    #[serde(rename = "enableCustomApi")]
    enable_custom_api: bool,
    #[serde(rename = "useMimoTokenPlan")]
    use_mimo_token_plan: bool,
    #[serde(rename = "disableTts")]
    disable_tts: bool,
    #[serde(rename = "mcpToken")]
    mcp_token: String,
    #[serde(rename = "ttsProvider")]
    tts_provider: String,
    #[serde(rename = "ttsVoiceId")]
    tts_voice_id: String,
    #[serde(rename = "resolvedProviderUrls")]
    resolved_provider_urls: Map<String, Value>,
    api_key: String,
    api_key_display: String,
    assist_api_key_display: String,
    /// The other stored and default fields.
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// The body of `POST /api/config/core_api`: the fields to change (all or nothing;
/// a placeholder secret keeps the stored one). Open: any stored field may be sent.
// `core_api::merge` judges the keys in the order sent (view-only and other
// families' keys listed in `ignored`, placeholders keeping stored secrets, the
// first bad value refusing the save): the body is read as its object, in order
// (`fields`); the named fields state the known keys, judged inside it.
#[derive(Default, Deserialize, ToSchema)]
#[serde(from = "Map<String, Value>")]
#[schema(example = json!({"coreApi": "openai", "coreApiKey": "sk-..."}))]
pub struct ProviderSettings {
    #[serde(rename = "coreApi")]
    #[schema(value_type = Option<String>)]
    core_api: PhantomData<String>,
    #[serde(rename = "assistApi")]
    #[schema(value_type = Option<String>)]
    assist_api: PhantomData<String>,
    #[serde(rename = "coreApiKey")]
    #[schema(value_type = Option<String>)]
    core_api_key: PhantomData<String>,
    #[serde(rename = "enableCustomApi")]
    #[schema(value_type = Option<bool>, nullable = false)]
    enable_custom_api: PhantomData<bool>,
    #[serde(rename = "useMimoTokenPlan")]
    #[schema(value_type = Option<bool>, nullable = false)]
    use_mimo_token_plan: PhantomData<bool>,
    #[serde(rename = "disableTts")]
    #[schema(value_type = Option<bool>, nullable = false)]
    disable_tts: PhantomData<bool>,
    #[serde(rename = "gptsovitsEnabled")]
    #[schema(value_type = Option<bool>, nullable = false)]
    gptsovits_enabled: PhantomData<bool>,
    #[serde(rename = "resolvedProviderUrls")]
    #[schema(value_type = Option<Map<String, Value>>, nullable = false)]
    resolved_provider_urls: PhantomData<Map<String, Value>>,
    /// Any other provider field.
    #[serde(flatten)]
    fields: Map<String, Value>,
}

companiond_core::ordered_body!(ProviderSettings => fields);

companiond_core::body_rejected!(ConfigError, ConfigError::body => ProviderSettings);

/// `POST /api/config/core_api` saved.
#[derive(Serialize, ToSchema)]
pub struct ProviderSettingsSaved {
    success: bool,
    message: &'static str,
    /// Keys whose stored value changed.
    changed: Vec<String>,
    /// Keys of the body that were not stored (view-only or another family's).
    ignored: Vec<String>,
    /// Open chat connections told of the change.
    sessions_notified: usize,
    sessions_ended: usize,
    #[serde(rename = "resolvedProviderUrls")]
    #[schema(value_type = Object)]
    resolved_provider_urls: Value,
}

/// The provider catalog (`<bundle>/providers.json` or the built-in one) and the
/// views the settings page reads; other top-level keys of the file pass through.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of the object `catalog::view` builds
pub struct ProviderCatalog {
    /// The catalog's providers as the file lists them.
    #[schema(value_type = Vec<Object>)]
    providers: Value,
    #[schema(value_type = Vec<Object>)]
    core_api_providers: Value,
    #[schema(value_type = Vec<Object>)]
    assist_api_providers: Value,
    /// `bundle` or `builtin`.
    source: String,
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// A probe that reached the endpoint.
#[derive(Serialize, ToSchema)]
pub struct ConnectivityOk {
    success: bool,
    resolved_url: String,
    latency_ms: u64,
}

/// The endpoint's models.
#[derive(Serialize, ToSchema)]
pub struct ModelListAnswer {
    success: bool,
    /// Normalised, sorted model entries.
    #[schema(value_type = Vec<Object>)]
    models: Vec<Value>,
    resolved_url: String,
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
    BodyOf(body): BodyOf<ProviderSettings>,
) -> Result<Json<ProviderSettingsSaved>, ConfigError> {
    let body = body.fields;
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
        st.sessions.notify_all(ServerFrame::ProviderChanged {
            message: "provider settings changed; the next model request uses them",
        })
    } else {
        0
    };
    Ok(Json(ProviderSettingsSaved {
        success: true,
        message: "provider settings saved",
        changed: merged.changed,
        ignored: merged.ignored,
        sessions_notified: notified,
        sessions_ended: 0,
        resolved_provider_urls: merged
            .config
            .get("resolvedProviderUrls")
            .cloned()
            .unwrap_or(json!({})),
    }))
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
) -> Result<Json<ConnectivityOk>, ConfigError> {
    if is_local_probe(&req.provider_key, &req.url) {
        return local_connectivity(&st).await.map(Json);
    }
    let (cfg, catalog) = probe_inputs(&st, &family).await;
    let r = connectivity::test_connectivity(req, &cfg, &catalog).await?;
    Ok(Json(ConnectivityOk {
        success: true,
        resolved_url: r.resolved_url,
        latency_ms: r.latency_ms,
    }))
}

/// `POST /api/config/list_models`.
pub async fn list_models(
    State(st): State<AppState>,
    Ext(family): Ext<ConfigState>,
    JsonBody(req, ..): JsonBody<ListModelsRequest>,
) -> Result<Json<ModelListAnswer>, ConfigError> {
    if is_local_probe(&req.provider_key, &req.url) {
        let Some(local) = st.llm.local() else {
            return Err(ConfigError::probe(
                "unsupported",
                "the built-in local model is not part of this build",
            ));
        };
        return Ok(Json(ModelListAnswer {
            success: true,
            models: local.models().await,
            resolved_url: companiond_core::local_model::BASE_URL.into(),
        }));
    }
    let (cfg, catalog) = probe_inputs(&st, &family).await;
    let list = models::list_models(req, &cfg, &catalog).await?;
    Ok(Json(ModelListAnswer {
        success: true,
        models: list.models,
        resolved_url: list.resolved_url,
    }))
}

/// Is a probe about the built-in local model (provider `local`, or its URL)?
fn is_local_probe(provider: &Option<String>, url: &Option<String>) -> bool {
    use companiond_core::local_model;
    provider.as_deref().map(str::trim) == Some(local_model::PROVIDER)
        || url.as_deref().is_some_and(local_model::is_local)
}

/// `test_connectivity` of the built-in model: one tiny completion (loads the
/// model when it is not loaded yet).
async fn local_connectivity(st: &AppState) -> Result<ConnectivityOk, ConfigError> {
    use companiond_core::llm::{CallOptions, ChatMessage};
    use companiond_core::providers::Slot;
    let Some(ep) = st.llm.local_endpoint().await else {
        return Err(ConfigError::probe(
            "no_model",
            "no local model is available: pull one (companiond model pull NAME) or give a GGUF file's path",
        ));
    };
    let t = std::time::Instant::now();
    let opts = CallOptions {
        max_tokens: Some(4),
        timeout: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    st.llm
        .complete_at(
            &ep,
            Slot::Conversation,
            &[ChatMessage::user("Say hi.")],
            &[],
            &opts,
        )
        .await
        .map_err(|e| ConfigError::probe(e.code(), e.to_string()))?;
    Ok(ConnectivityOk {
        success: true,
        resolved_url: ep.base_url,
        latency_ms: t.elapsed().as_millis() as u64,
    })
}

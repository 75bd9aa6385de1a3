//! Thin HTTP handlers over the domain modules.

use std::convert::Infallible;

use axum::extract::{FromRequest, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json, read_json_body, JsonBody, SuccessError};
use companiond_core::layout as docs;
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use crate::conversation::{self, Decision, Outcome, Write};
use crate::core_api;
use crate::error::ConfigError;
use crate::probes::{self, ConnectivityRequest, ListModelsRequest};
use crate::{catalog, page, preferences, proactive, proxy, voice};

/// A JSON body that never rejects: the handler decides how to answer a body that
/// is not JSON (`Err` holds the parse error).
pub struct RawJson(pub Result<Value, String>);

impl<S: Send + Sync> FromRequest<S> for RawJson {
    type Rejection = Infallible;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(RawJson(
            read_json_body::<Value>(req).await.map_err(|(_, m)| m),
        ))
    }
}

impl RawJson {
    /// The body as an object, or a 400 in the family envelope.
    fn object(self) -> Result<Map<String, Value>, ConfigError> {
        match self.0 {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(ConfigError::bad_code(
                "the request body must be a JSON object",
                "invalid_body",
            )),
            Err(e) => Err(ConfigError::bad_code(e, "invalid_body")),
        }
    }
}

fn respond(r: Result<Value, ConfigError>) -> Response {
    match r {
        Ok(v) => ok_json(v),
        Err(e) => e.into_response(),
    }
}

// ------------------------------------------------------------------ provider settings

async fn read_core_config(st: &AppState) -> Result<Map<String, Value>, ConfigError> {
    match st.store.read::<Value>(docs::CORE_CONFIG).await? {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(ConfigError::Unreadable(format!(
            "{} is not a JSON object and was left untouched",
            docs::CORE_CONFIG
        ))),
    }
}

pub async fn get_core_api(State(st): State<AppState>) -> Response {
    let (catalog, _) = catalog::load(st.bundle_dir());
    match read_core_config(&st).await {
        Ok(cfg) => no_store(ok_json(core_api::view(&cfg, &catalog))),
        Err(e) => no_store(e),
    }
}

pub async fn post_core_api(State(st): State<AppState>, body: RawJson) -> Response {
    let body = match body.object() {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let (catalog, _) = catalog::load(st.bundle_dir());
    let r = st
        .store
        .try_update(docs::CORE_CONFIG, move |cur: Option<Value>| {
            let cur = match cur {
                None => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(ConfigError::Unreadable(format!(
                        "{} is not a JSON object and was left untouched",
                        docs::CORE_CONFIG
                    )))
                }
            };
            let merged = core_api::merge(cur, body, &catalog)?;
            let cfg = Value::Object(merged.config.clone());
            Ok((cfg, merged))
        })
        .await;
    let merged = match r {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => return e.into_response(),
        Err(e) => return ConfigError::from(e).into_response(),
    };
    let notified = if core_api::affects_sessions(&merged.changed) {
        st.sessions.notify_all(json!({
            "type": "provider_changed",
            "message": "provider settings changed; the next model request uses them",
        }))
    } else {
        0
    };
    ok_json(json!({
        "success": true,
        "message": "provider settings saved",
        "changed": merged.changed,
        "ignored": merged.ignored,
        "sessions_notified": notified,
        "sessions_ended": 0,
        "resolvedProviderUrls": merged.config.get("resolvedProviderUrls").cloned().unwrap_or(json!({})),
    }))
}

pub async fn api_providers(State(st): State<AppState>) -> Response {
    let (catalog, source) = catalog::load(st.bundle_dir());
    ok_json(catalog::view(&catalog, source))
}

pub async fn test_connectivity(
    State(st): State<AppState>,
    JsonBody(req, ..): JsonBody<ConnectivityRequest>,
) -> Response {
    let cfg = st.llm.core_config().await;
    let (catalog, _) = catalog::load(st.bundle_dir());
    respond(probes::test_connectivity(req, &cfg, &catalog).await)
}

pub async fn list_models(
    State(st): State<AppState>,
    JsonBody(req, ..): JsonBody<ListModelsRequest>,
) -> Response {
    let cfg = st.llm.core_config().await;
    let (catalog, _) = catalog::load(st.bundle_dir());
    respond(probes::list_models(req, &cfg, &catalog).await)
}

// ------------------------------------------------------------------ voice server

fn timeout_field(
    body: &Map<String, Value>,
    default: std::time::Duration,
) -> Result<std::time::Duration, ConfigError> {
    match body.get("timeout_seconds") {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .map(|s| crate::net::pick_timeout(Some(s), default))
            .ok_or_else(|| ConfigError::bad("timeout_seconds must be a number")),
    }
}

pub async fn voice_list(body: RawJson) -> Response {
    let r = async {
        let body = body.object()?;
        let base = voice::base_url(body.get("api_url"), None)?;
        let timeout = timeout_field(&body, voice::LIST_TIMEOUT)?;
        voice::list_voices(&base, timeout).await
    }
    .await;
    respond(r)
}

pub async fn voice_test(body: RawJson) -> Response {
    let r = async {
        let body = body.object()?;
        let p = voice::test_params(&body)?;
        voice::test_connectivity(p).await
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ preferences

fn existing_list(cur: Option<Value>) -> Result<Vec<Value>, ConfigError> {
    match cur {
        None => Ok(Vec::new()),
        Some(v @ Value::Array(_)) => Ok(preferences::normalise(Some(v))),
        Some(Value::Object(o)) if o.contains_key("model_path") => {
            Ok(preferences::normalise(Some(Value::Object(o))))
        }
        Some(_) => Err(ConfigError::Unreadable(format!(
            "{} is not a list of preference records and was left untouched",
            preferences::DOC
        ))),
    }
}

pub async fn get_preferences(State(st): State<AppState>) -> Response {
    match st.store.read::<Value>(preferences::DOC).await {
        Ok(cur) => match existing_list(cur) {
            Ok(list) => no_store(Json(Value::Array(list))),
            Err(e) => e.into_response(),
        },
        Err(e) => ConfigError::from(e).into_response(),
    }
}

pub async fn post_preferences(State(st): State<AppState>, body: RawJson) -> Response {
    let rec = match body.object().and_then(|b| preferences::validate(&b)) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let r = st
        .store
        .try_update(preferences::DOC, move |cur: Option<Value>| {
            let list = preferences::upsert(existing_list(cur)?, rec)?;
            Ok::<_, ConfigError>((Value::Array(list), ()))
        })
        .await;
    match r {
        Ok(Ok(())) => ok_json(json!({"success": true, "message": "preferences saved"})),
        Ok(Err(e)) => e.into_response(),
        Err(e) => ConfigError::from(e).into_response(),
    }
}

pub async fn set_preferred(State(st): State<AppState>, body: RawJson) -> Response {
    let path = match body.object().and_then(|b| match b.get("model_path") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err(ConfigError::bad("model_path is required"))
        }
        Some(_) => Err(ConfigError::bad("model_path must be a string")),
    }) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let r = st
        .store
        .try_update(preferences::DOC, move |cur: Option<Value>| {
            let list = preferences::set_preferred(existing_list(cur)?, &path)?;
            Ok::<_, ConfigError>((Value::Array(list), ()))
        })
        .await;
    match r {
        Ok(Ok(())) => ok_json(json!({"success": true, "message": "preferred model updated"})),
        Ok(Err(e)) => e.into_response(),
        Err(e) => ConfigError::from(e).into_response(),
    }
}

// ------------------------------------------------------------------ conversation settings

/// Header of the ASR decision tuple.
pub const ASR_HEADER: &str = "x-conversation-settings-asr-decision";
/// Header marking a full-snapshot write.
pub const FULL_SNAPSHOT_HEADER: &str = "x-conversation-settings-full-snapshot";

fn with_etag(mut resp: Response, etag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    no_store(resp)
}

pub async fn get_conversation(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => {
            let mut body = doc.snapshot();
            body.insert("success".into(), json!(true));
            body.insert("telemetryBranch".into(), json!("main"));
            with_etag(ok_json(body), &doc.etag())
        }
        Err(e) => no_store(e),
    }
}

fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ConfigError> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| ConfigError::bad(format!("the {name} header is not valid text"))),
    }
}

fn parse_write(headers: &HeaderMap, body: RawJson) -> Result<Write, ConfigError> {
    let body = body.object()?;
    let if_match = match header_str(headers, "if-match")? {
        None => None,
        Some(raw) => Some(conversation::parse_if_match(raw).ok_or_else(|| {
            ConfigError::bad_code(
                "invalid If-Match: expected \"conversation-settings-<revision>\"",
                "invalid_if_match",
            )
        })?),
    };
    let decision = match header_str(headers, ASR_HEADER)?.map(str::trim) {
        None | Some("") => None,
        Some(raw) => {
            let now = companiond_core::now_millis().max(0) as u64;
            let d = serde_json::from_str::<Value>(raw)
                .ok()
                .and_then(|v| Decision::parse(&v, now))
                .ok_or_else(|| {
                    ConfigError::bad_code(
                        "invalid ASR decision header: expected {writeId, writerId, value}",
                        "invalid_asr_decision",
                    )
                })?;
            Some(d)
        }
    };
    let full_snapshot = header_str(headers, FULL_SNAPSHOT_HEADER)?.map(str::trim) == Some("1");
    Ok(Write {
        body,
        if_match,
        decision,
        full_snapshot,
    })
}

pub async fn post_conversation(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: RawJson,
) -> Response {
    let w = match parse_write(&headers, body) {
        Ok(w) => w,
        Err(e) => return no_store(e),
    };
    let noise = w.body.get("noiseReductionEnabled").and_then(Value::as_bool);
    match conversation::save(&st, w).await {
        Err(e) => no_store(e),
        Ok(Outcome::Conflict(doc)) => {
            let mut body = doc.snapshot();
            body.insert("success".into(), json!(false));
            body.insert(
                "error".into(),
                json!("conversation settings version conflict"),
            );
            body.insert("error_code".into(), json!("revision_conflict"));
            with_etag(
                (StatusCode::PRECONDITION_FAILED, Json(body)).into_response(),
                &doc.etag(),
            )
        }
        Ok(Outcome::Saved {
            doc,
            changed,
            rejected,
            ignored,
        }) => {
            let applied = match noise {
                Some(v) => conversation::apply_noise_reduction(&st, v),
                None => 0,
            };
            let mut body = doc.snapshot();
            body.insert("success".into(), json!(true));
            body.insert("message".into(), json!("conversation settings saved"));
            body.insert("changed".into(), json!(changed));
            body.insert("rejected".into(), json!(rejected));
            body.insert("ignored".into(), json!(ignored));
            body.insert("sessions_applied".into(), json!(applied));
            with_etag(ok_json(body), &doc.etag())
        }
    }
}

// ------------------------------------------------------------------ page and language

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

pub async fn reserved_fields() -> Response {
    ok_json(page::reserved_fields())
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

pub async fn set_proxy_mode(body: RawJson) -> Response {
    let direct = match body.object().and_then(|b| match b.get("direct") {
        Some(Value::Bool(d)) => Ok(*d),
        None => Err(ConfigError::bad("direct (boolean) is required")),
        Some(_) => Err(ConfigError::bad("direct must be a boolean")),
    }) {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let after = proxy::set_direct(direct);
    ok_json(json!({"success": true, "direct": direct, "proxies_after": after}))
}

// ------------------------------------------------------------------ proactive

fn proactive_fail(reason: &str, error: impl Into<String>) -> SuccessError {
    SuccessError::new(error)
        .code(reason)
        .with("ok", false)
        .with("reason", reason)
}

fn proactive_storage(e: ConfigError) -> Response {
    proactive_fail(e.code(), e.message().to_string())
        .with("settings", json!({}))
        .status(StatusCode::OK)
}

pub async fn get_mode(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => ok_json(json!({
            "success": true,
            "mode": proactive::infer_mode(&doc.settings),
            "available_modes": proactive::MODES,
            "settings": proactive::subset(&doc.settings),
        })),
        Err(e) => proactive_fail(e.code(), e.message().to_string())
            .with("mode", "custom")
            .with("settings", json!({}))
            .status(StatusCode::OK),
    }
}

pub async fn post_mode(State(st): State<AppState>, body: RawJson) -> Response {
    let body = match body.0 {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return proactive_fail("invalid_body", "the request body must be a JSON object")
                .status(StatusCode::OK)
        }
        Err(e) => return proactive_fail("invalid_body", e).status(StatusCode::OK),
    };
    let mode = body.get("mode").and_then(Value::as_str).unwrap_or("");
    let Some(preset) = proactive::preset(mode) else {
        let shown = body.get("mode").cloned().unwrap_or(Value::Null);
        return proactive_fail(
            "unknown_mode",
            format!(
                "unknown mode {shown}; available: {}",
                proactive::MODES.join(", ")
            ),
        )
        .with("available_modes", proactive::MODES)
        .status(StatusCode::OK);
    };
    let mode = mode.to_string();
    match proactive::write_fields(&st, preset, Vec::new()).await {
        Ok(a) => {
            let mut out = json!({"success": true, "mode": mode, "applied": a.applied});
            if !a.rejected.is_empty() {
                out["rejected"] = json!(a.rejected);
            }
            out["revision"] = json!(a.doc.revision.to_string());
            ok_json(out)
        }
        Err(e) => proactive_storage(e),
    }
}

pub async fn get_settings(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => ok_json(json!({
            "success": true,
            "settings": proactive::subset(&doc.settings),
            "mode": proactive::infer_mode(&doc.settings),
        })),
        Err(e) => proactive_storage(e),
    }
}

pub async fn post_settings(State(st): State<AppState>, body: RawJson) -> Response {
    let body = match body.0 {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return proactive_fail("invalid_body", "the request body must be a JSON object")
                .status(StatusCode::OK)
        }
        Err(e) => return proactive_fail("invalid_body", e).status(StatusCode::OK),
    };
    let sorted = proactive::sort(body);
    if sorted.writable.is_empty() && sorted.rejected.is_empty() {
        return proactive_fail(
            "no_fields",
            "no recognised proactive-chat fields were given",
        )
        .with("rejected_user_owned", &sorted.user_owned)
        .status(StatusCode::OK);
    }
    let user_owned = sorted.user_owned;
    match proactive::write_fields(&st, sorted.writable, sorted.rejected).await {
        Ok(a) => ok_json(json!({
            "success": true,
            "applied": a.applied,
            "rejected": a.rejected,
            "rejected_user_owned": user_owned,
            "mode": proactive::infer_mode(&a.doc.settings),
            "revision": a.doc.revision.to_string(),
        })),
        Err(e) => proactive_storage(e),
    }
}

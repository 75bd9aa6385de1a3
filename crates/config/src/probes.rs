//! `test_connectivity` and `list_models`: real calls to OpenAI-compatible (and
//! Anthropic-style) endpoints with bounded timeouts. Only HTTP(S) (and WS(S) for
//! realtime probes) URLs are ever contacted; anything else is refused before a
//! request is built.

use std::time::{Duration, Instant};

use companiond_core::providers::{Catalog, ProviderEntry};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::catalog;
use crate::core_api::{is_masked, keybook_field, str_field, FREE_ACCESS, SLOTS};
use crate::error::ConfigError;
use crate::net::{self, NetFail};

/// Total time budget of `list_models`.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(15);
/// Time budget of one connectivity probe.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a realtime probe waits for the server's first event.
const WS_REPLY_WAIT: Duration = Duration::from_secs(5);
/// The one provider host whose model ids carry a `models/` prefix to remove.
pub const GEMINI_HOST: &str = "generativelanguage.googleapis.com";

/// Body of `POST /api/config/list_models` (wrong types are answered with 422).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ListModelsRequest {
    pub provider_key: Option<String>,
    pub url: Option<String>,
    pub api_key: Option<String>,
    pub provider_type: Option<String>,
    pub model_type: Option<String>,
    /// Optional shorter time budget in seconds (never longer than the default).
    pub timeout_seconds: Option<f64>,
}

/// Body of `POST /api/config/test_connectivity` (wrong types are answered with 422).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConnectivityRequest {
    pub provider_key: Option<String>,
    pub provider_scope: Option<String>,
    pub url: Option<String>,
    pub api_key: Option<String>,
    pub model: Option<String>,
    pub provider_type: Option<String>,
    pub sub_type: Option<String>,
    pub voice_id: Option<String>,
    pub is_free: Option<bool>,
    pub timeout_seconds: Option<f64>,
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().map(str::trim).unwrap_or("")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    OpenAi,
    Anthropic,
    Websocket,
    Tts,
}

fn kind_of(s: &str) -> Kind {
    match s.trim().to_ascii_lowercase().as_str() {
        "anthropic" => Kind::Anthropic,
        "websocket" => Kind::Websocket,
        "tts" => Kind::Tts,
        _ => Kind::OpenAi,
    }
}

fn entry_kind(p: &ProviderEntry) -> Kind {
    kind_of(
        p.extra
            .get("provider_type")
            .and_then(Value::as_str)
            .unwrap_or(""),
    )
}

/// The base URL of a built-in provider. A `url` override is honoured only when the
/// catalog lists it among the provider's `alternate_base_urls` and it is HTTPS;
/// any other override is ignored (the endpoint comes from the catalog).
fn provider_base(p: &ProviderEntry, override_url: &str) -> String {
    if !override_url.is_empty() {
        if let (Some(alts), Some(u)) = (
            p.extra.get("alternate_base_urls").and_then(Value::as_array),
            net::parse_url(override_url, &["https"]),
        ) {
            let hit = alts
                .iter()
                .filter_map(Value::as_str)
                .any(|a| net::same_endpoint(a, u.as_str()));
            if hit {
                return override_url.trim().trim_end_matches('/').to_string();
            }
        }
    }
    p.base_url.trim().trim_end_matches('/').to_string()
}

/// The stored key of a built-in provider: its Key Book field, else the core key
/// when it is the core provider.
fn stored_provider_key(cfg: &Map<String, Value>, catalog: &Catalog, provider: &str) -> String {
    if catalog
        .get(provider)
        .is_some_and(|p| catalog::flag(p, "free"))
    {
        return FREE_ACCESS.to_string();
    }
    let kb = str_field(cfg, &keybook_field(provider));
    if !kb.is_empty() {
        return kb.to_string();
    }
    if str_field(cfg, "coreApi") == provider {
        let k = str_field(cfg, "coreApiKey");
        if k != FREE_ACCESS {
            return k.to_string();
        }
    }
    String::new()
}

fn key_required() -> ConfigError {
    ConfigError::probe(
        "key_required",
        "a saved key can only be used with the address it was saved for; enter the API key again",
    )
}

/// The stored key of a custom slot whose saved URL is the same endpoint as `url`.
fn stored_slot_key(cfg: &Map<String, Value>, slot: &str, url: &str) -> Option<String> {
    if !SLOTS.contains(&slot) {
        return None;
    }
    let saved = str_field(cfg, &format!("{slot}ModelUrl"));
    let key = str_field(cfg, &format!("{slot}ModelApiKey"));
    (!saved.is_empty() && !key.is_empty() && net::same_endpoint(saved, url))
        .then(|| key.to_string())
}

#[derive(Debug)]
enum Auth {
    None,
    Bearer(String),
    Anthropic(String),
}

impl Auth {
    fn new(kind: Kind, key: &str) -> Auth {
        if key.is_empty() {
            Auth::None
        } else if kind == Kind::Anthropic {
            Auth::Anthropic(key.to_string())
        } else {
            Auth::Bearer(key.to_string())
        }
    }
    fn apply(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::None => req,
            Auth::Bearer(k) => req.bearer_auth(k),
            Auth::Anthropic(k) => req
                .header("x-api-key", k)
                .header("anthropic-version", "2023-06-01"),
        }
    }
}

// ------------------------------------------------------------------ list_models

/// The models an endpoint lists.
#[derive(Debug)]
pub struct ModelList {
    /// Normalised, sorted model entries.
    pub models: Vec<Value>,
    /// The base URL that was asked.
    pub resolved_url: String,
}

/// `list_models`: the endpoint's models or a probe failure.
pub async fn list_models(
    req: ListModelsRequest,
    cfg: &Map<String, Value>,
    catalog: &Catalog,
) -> Result<ModelList, ConfigError> {
    let timeout = net::pick_timeout(req.timeout_seconds, LIST_TIMEOUT);
    let submitted = opt(&req.api_key);
    let provider = opt(&req.provider_key);
    let (base, key, kind, strip) = if !provider.is_empty() {
        let Some(p) = catalog.get(provider) else {
            return Err(ConfigError::probe(
                "unsupported",
                format!("unknown provider {provider:?}"),
            ));
        };
        if catalog::flag(p, "free") || catalog::flag(p, "fixed_model") {
            return Err(ConfigError::probe(
                "unsupported",
                "this provider's models are fixed",
            ));
        }
        let base = provider_base(p, opt(&req.url));
        if net::parse_url(&base, &["http", "https"]).is_none() {
            return Err(ConfigError::probe(
                "unsupported",
                "this provider has no HTTP endpoint to list models from",
            ));
        }
        let key = if !submitted.is_empty() && !is_masked(submitted) {
            submitted.to_string()
        } else {
            stored_provider_key(cfg, catalog, provider)
        };
        if key.is_empty() {
            return Err(ConfigError::probe(
                "key_required",
                "no API key is saved for this provider; enter one",
            ));
        }
        let strip = catalog::flag(p, "strip_models_prefix");
        (base, key, entry_kind(p), strip)
    } else {
        let url = opt(&req.url);
        if url.is_empty() {
            return Err(ConfigError::probe(
                "missing_params",
                "the API URL is missing",
            ));
        }
        let Some(u) = net::parse_url(url, &["http", "https"]) else {
            return Err(ConfigError::probe(
                "unsupported",
                "only http:// and https:// endpoints can list models",
            ));
        };
        let key = if is_masked(submitted) {
            stored_slot_key(cfg, opt(&req.model_type), url).ok_or_else(key_required)?
        } else {
            submitted.to_string()
        };
        let kind = match kind_of(opt(&req.provider_type)) {
            Kind::Anthropic => Kind::Anthropic,
            _ if u.host_str() == Some("api.anthropic.com") => Kind::Anthropic,
            _ => Kind::OpenAi,
        };
        (url.trim_end_matches('/').to_string(), key, kind, false)
    };
    let models = fetch_models(&base, &Auth::new(kind, &key), strip, timeout).await?;
    Ok(ModelList {
        models,
        resolved_url: base,
    })
}

/// `GET <base>/models` and the normalised, sorted model list.
async fn fetch_models(
    base: &str,
    auth: &Auth,
    strip_flag: bool,
    timeout: Duration,
) -> Result<Vec<Value>, ConfigError> {
    let Some(u) = net::parse_url(base, &["http", "https"]) else {
        return Err(ConfigError::probe(
            "unsupported",
            "only http:// and https:// endpoints can list models",
        ));
    };
    let strip = strip_flag || u.host_str() == Some(GEMINI_HOST);
    let client = net::http_client(&u, timeout).map_err(NetFail::probe)?;
    let req = auth.apply(client.get(net::join(base, "models")));
    let (status, body) = net::send_capped(req, net::MAX_PROBE_BODY, timeout)
        .await
        .map_err(|f| match f {
            NetFail::Timeout => ConfigError::probe("timeout", "listing models timed out"),
            f => f.probe(),
        })?;
    match status {
        200..=299 => {}
        404 | 405 => {
            return Err(ConfigError::probe(
                "unsupported",
                format!("the endpoint has no /models route (HTTP {status})"),
            ))
        }
        s => return Err(NetFail::Status(s).probe()),
    }
    let v: Value = serde_json::from_slice(&body).map_err(|_| {
        ConfigError::probe(
            "unknown",
            "the endpoint did not answer with a JSON model list",
        )
    })?;
    let models = normalise_models(&v, strip);
    if models.is_empty() {
        return Err(ConfigError::probe(
            "empty",
            "the upstream returned no models",
        ));
    }
    Ok(models)
}

/// Ids trimmed, `models/` removed when `strip`, empty and duplicate ids dropped,
/// `name` only when the upstream gives one different from the id, sorted by id
/// (case-insensitive).
pub fn normalise_models(v: &Value, strip: bool) -> Vec<Value> {
    let items: &[Value] = v
        .get("data")
        .and_then(Value::as_array)
        .or_else(|| v.get("models").and_then(Value::as_array))
        .or_else(|| v.as_array())
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let clean = |s: &str| -> String {
        let s = s.trim();
        let s = if strip {
            s.strip_prefix("models/").unwrap_or(s)
        } else {
            s
        };
        s.to_string()
    };
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for it in items {
        let (id, name) = match it {
            Value::String(s) => (clean(s), None),
            Value::Object(o) => {
                let (id, from_name) = match o.get("id").and_then(Value::as_str) {
                    Some(id) => (clean(id), false),
                    None => match o.get("name").and_then(Value::as_str) {
                        Some(n) => (clean(n), true),
                        None => continue,
                    },
                };
                let name = o
                    .get("display_name")
                    .or_else(|| o.get("displayName"))
                    .or_else(|| if from_name { None } else { o.get("name") })
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|n| !n.is_empty() && *n != id)
                    .map(str::to_string);
                (id, name)
            }
            _ => continue,
        };
        if id.is_empty() || !seen.insert(id.clone()) {
            continue;
        }
        out.push((id, name));
    }
    out.sort_by(|a, b| {
        a.0.to_lowercase()
            .cmp(&b.0.to_lowercase())
            .then_with(|| a.0.cmp(&b.0))
    });
    out.into_iter()
        .map(|(id, name)| match name {
            Some(n) => json!({"id": id, "name": n}),
            None => json!({"id": id}),
        })
        .collect()
}

// ------------------------------------------------------------------ test_connectivity

struct Target {
    url: String,
    key: String,
    model: String,
    kind: Kind,
    sub_type: String,
    voice: String,
    is_free: bool,
}

fn resolve_target(
    req: &ConnectivityRequest,
    cfg: &Map<String, Value>,
    catalog: &Catalog,
) -> Result<Target, ConfigError> {
    let submitted = opt(&req.api_key);
    let provider = opt(&req.provider_key);
    let scope = opt(&req.provider_scope);
    if !provider.is_empty() && !scope.is_empty() {
        if scope != "core" && scope != "assist" {
            return Err(ConfigError::probe(
                "missing_params",
                "provider_scope must be core or assist",
            ));
        }
        let Some(p) = catalog.get(provider) else {
            return Err(ConfigError::probe(
                "missing_params",
                format!("provider {provider:?} cannot be tested"),
            ));
        };
        let url = provider_base(p, opt(&req.url));
        if url.is_empty() {
            return Err(ConfigError::probe(
                "unsupported",
                format!("provider {provider:?} has no endpoint to test"),
            ));
        }
        let slot = if scope == "core" {
            "conversation"
        } else {
            "summary"
        };
        let model = p
            .models
            .get(slot)
            .or_else(|| p.models.get("conversation"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let is_free = catalog::flag(p, "free");
        let key = if !submitted.is_empty() && !is_masked(submitted) {
            submitted.to_string()
        } else if scope == "core" && str_field(cfg, "coreApi") == provider {
            let k = str_field(cfg, "coreApiKey");
            if k.is_empty() {
                stored_provider_key(cfg, catalog, provider)
            } else {
                k.to_string()
            }
        } else {
            stored_provider_key(cfg, catalog, provider)
        };
        if key.is_empty() && !is_free {
            return Err(ConfigError::probe(
                "key_required",
                "no API key is saved for this provider; enter one",
            ));
        }
        return Ok(Target {
            url,
            key,
            model,
            kind: entry_kind(p),
            sub_type: String::new(),
            voice: String::new(),
            is_free,
        });
    }
    let url = opt(&req.url);
    if url.is_empty() {
        return Err(ConfigError::probe(
            "missing_params",
            "url (or provider_key with provider_scope) is required",
        ));
    }
    let key = if is_masked(submitted) {
        SLOTS
            .iter()
            .find_map(|s| stored_slot_key(cfg, s, url))
            .ok_or_else(key_required)?
    } else {
        submitted.to_string()
    };
    let model = match opt(&req.model) {
        "" => "gpt-3.5-turbo".to_string(),
        m => m.to_string(),
    };
    Ok(Target {
        url: url.trim_end_matches('/').to_string(),
        key,
        model,
        kind: kind_of(opt(&req.provider_type)),
        sub_type: opt(&req.sub_type).to_string(),
        voice: opt(&req.voice_id).to_string(),
        is_free: req.is_free.unwrap_or(false),
    })
}

/// An endpoint that answered a probe.
#[derive(Debug)]
pub struct Reachable {
    pub resolved_url: String,
    pub latency_ms: u64,
}

/// `test_connectivity`: the endpoint answered, or a probe failure.
pub async fn test_connectivity(
    req: ConnectivityRequest,
    cfg: &Map<String, Value>,
    catalog: &Catalog,
) -> Result<Reachable, ConfigError> {
    let timeout = net::pick_timeout(req.timeout_seconds, CONNECT_TIMEOUT);
    let t = resolve_target(&req, cfg, catalog)?;
    let started = Instant::now();
    match t.kind {
        Kind::Websocket => probe_ws(&t, timeout).await?,
        _ => probe_http(&t, timeout).await?,
    }
    Ok(Reachable {
        resolved_url: t.url,
        latency_ms: started.elapsed().as_millis() as u64,
    })
}

async fn probe_http(t: &Target, timeout: Duration) -> Result<(), ConfigError> {
    let Some(u) = net::parse_url(&t.url, &["http", "https"]) else {
        return Err(ConfigError::probe(
            "unsupported",
            "only http:// and https:// endpoints can be tested",
        ));
    };
    let client = net::http_client(&u, timeout).map_err(NetFail::probe)?;
    let (path, body) = match t.kind {
        Kind::Anthropic => (
            "messages",
            json!({"model": t.model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}),
        ),
        Kind::Tts => {
            if t.sub_type != "openai_tts" {
                return Err(ConfigError::probe(
                    "unsupported",
                    "this TTS probe protocol is not supported (sub_type openai_tts is)",
                ));
            }
            let voice = if t.voice.is_empty() {
                "alloy"
            } else {
                &t.voice
            };
            (
                "audio/speech",
                json!({"model": t.model, "input": "test", "voice": voice}),
            )
        }
        _ => (
            "chat/completions",
            json!({"model": t.model, "max_tokens": 1, "stream": false, "messages": [{"role": "user", "content": "hi"}]}),
        ),
    };
    let auth = Auth::new(t.kind, &t.key);
    let req = auth.apply(client.post(net::join(&t.url, path)).json(&body));
    let (status, resp) = net::send_capped(req, net::MAX_PROBE_BODY, timeout)
        .await
        .map_err(NetFail::probe)?;
    match status {
        200..=299 if t.kind == Kind::Tts && resp.is_empty() => Err(ConfigError::probe(
            "empty_response",
            "the TTS endpoint returned no audio",
        )),
        200..=299 | 429 => Ok(()),
        400 if t.is_free => Ok(()),
        s => Err(NetFail::Status(s).probe()),
    }
}

async fn probe_ws(t: &Target, timeout: Duration) -> Result<(), ConfigError> {
    let Some(mut u) = net::parse_url(&t.url, &["ws", "wss"]) else {
        return Err(ConfigError::probe(
            "unsupported",
            "realtime probes need a ws:// or wss:// URL",
        ));
    };
    let handshake_only = t.model == "free-model" || t.sub_type == "vllm_omni_tts";
    if !t.model.is_empty() && t.model != "free-model" {
        u.query_pairs_mut().append_pair("model", &t.model);
    }
    let deadline = Instant::now() + timeout;
    let mut ws = net::ws_connect(&u, Some(&t.key), timeout)
        .await
        .map_err(|f| match f {
            NetFail::Status(_)
            | NetFail::Timeout
            | NetFail::Unsupported(_)
            | NetFail::Tls(_)
            | NetFail::Dns(_) => f.probe(),
            other => ConfigError::probe(
                "ws_error",
                format!("WebSocket connection failed: {}", other.message()),
            ),
        })?;
    if handshake_only {
        let _ = ws.close(None).await;
        return Ok(());
    }
    let update = json!({"type": "session.update", "session": {"modalities": ["text"], "instructions": "connectivity test"}});
    ws.send(Message::Text(update.to_string()))
        .await
        .map_err(|e| ConfigError::probe("ws_error", format!("WebSocket send failed: {e}")))?;
    let wait = WS_REPLY_WAIT.min(deadline.saturating_duration_since(Instant::now()));
    let outcome = tokio::time::timeout(wait, async {
        while let Some(msg) = ws.next().await {
            match msg {
                Ok(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    if v.get("type").and_then(Value::as_str) == Some("error") {
                        let text = v
                            .get("error")
                            .map(|e| {
                                e.get("message")
                                    .and_then(Value::as_str)
                                    .map(str::to_string)
                                    .unwrap_or_else(|| e.to_string())
                            })
                            .unwrap_or_default();
                        let lower = text.to_ascii_lowercase();
                        let auth = [
                            "auth",
                            "api key",
                            "apikey",
                            "unauthorized",
                            "401",
                            "403",
                            "permission",
                            "invalid key",
                        ]
                        .iter()
                        .any(|w| lower.contains(w));
                        return Err(if auth {
                            ConfigError::probe(
                                "auth_failed",
                                format!("authentication failed: {text}"),
                            )
                        } else {
                            ConfigError::probe("unknown", format!("server error: {text}"))
                        });
                    }
                    return Ok(());
                }
                Ok(Message::Binary(_)) => return Ok(()),
                Ok(Message::Close(_)) => {
                    return Err(ConfigError::probe(
                        "ws_error",
                        "the server closed the connection",
                    ))
                }
                Ok(_) => continue,
                Err(e) => {
                    return Err(ConfigError::probe(
                        "ws_error",
                        format!("WebSocket error: {e}"),
                    ))
                }
            }
        }
        Err(ConfigError::probe(
            "ws_error",
            "the server closed the connection",
        ))
    })
    .await;
    let _ = ws.close(None).await;
    match outcome {
        // No reply within the wait: the session was accepted.
        Err(_) => Ok(()),
        Ok(r) => r,
    }
}

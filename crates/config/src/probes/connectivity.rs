//! `POST /api/config/test_connectivity`: one request (HTTP) or one session start
//! (realtime WebSocket) against the resolved endpoint.

use std::time::{Duration, Instant};

use companiond_core::providers::Catalog;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio_tungstenite::tungstenite::Message;

use super::{
    entry_kind, key_required, kind_of, opt, provider_base, stored_provider_key, stored_slot_key,
    Auth, Kind,
};
use crate::catalog;
use crate::core_api::is_masked;
use crate::core_api::{str_field, SLOTS};
use crate::error::ConfigError;
use crate::net;
use crate::net::NetFail;

/// The realtime probe's one client event: a text-only `session.update`, the
/// smallest event a realtime server answers (with `session.updated` or an
/// `error` naming what it refuses).
const SESSION_UPDATE: &str = r#"{"type":"session.update","session":{"modalities":["text"],"instructions":"connectivity test"}}"#;

/// Time budget of one connectivity probe.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a realtime probe waits for the server's first event.
const WS_REPLY_WAIT: Duration = Duration::from_secs(5);

/// Body of `POST /api/config/test_connectivity` (wrong types are answered with 422).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
#[schema(example = json!({"provider_key": "openai", "api_key": "sk-...", "model": "gpt-4o-mini"}))]
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
    ws.send(Message::Text(SESSION_UPDATE.to_string()))
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

//! Provider probes: `list_models` ([`models`]) and `test_connectivity`
//! ([`connectivity`]), real calls to OpenAI-compatible (and Anthropic-style)
//! endpoints with bounded timeouts. Only HTTP(S) (and WS(S) for realtime probes)
//! URLs are ever contacted; anything else is refused before a request is built.
//! This file holds what both share: provider kinds, stored keys, authentication.

pub mod connectivity;
pub mod models;

use companiond_core::providers::{Catalog, ProviderEntry};
use serde_json::{Map, Value};

use crate::catalog;
use crate::core_api::{keybook_field, str_field, FREE_ACCESS, SLOTS};
use crate::error::ConfigError;
use crate::net;

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

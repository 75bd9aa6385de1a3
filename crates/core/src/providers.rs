//! The provider catalog (`<bundle>/providers.json`, else the built-in default)
//! and the resolution of a model slot to an OpenAI-compatible endpoint
//! (the provider settings of `config/core_config.json`, one per slot).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One built-in provider.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProviderEntry {
    pub key: String,
    #[serde(default)]
    pub name: String,
    /// Base URL of the OpenAI-compatible API (`<base>/chat/completions`, `<base>/models`).
    #[serde(default)]
    pub base_url: String,
    /// Default model per slot (`conversation`, `summary`, ...).
    #[serde(default)]
    pub models: Map<String, Value>,
    /// Everything else the frontend wants (flags, labels, alternate nodes ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The catalog.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Catalog {
    #[serde(default)]
    pub providers: Vec<ProviderEntry>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Catalog {
    pub fn get(&self, key: &str) -> Option<&ProviderEntry> {
        self.providers.iter().find(|p| p.key == key)
    }
}

const DEFAULT_CATALOG: &str = include_str!("default_providers.json");

/// The built-in default catalog.
pub fn default_catalog() -> Catalog {
    serde_json::from_str(DEFAULT_CATALOG).unwrap_or_default()
}

/// `<bundle>/providers.json` when present and valid, else the built-in default.
pub fn load_catalog(bundle: &Path) -> Catalog {
    match std::fs::read(bundle.join("providers.json")) {
        Ok(bytes) => match serde_json::from_slice::<Catalog>(&bytes) {
            Ok(c) if !c.providers.is_empty() => c,
            Ok(_) => default_catalog(),
            Err(e) => {
                tracing::warn!(
                    "bundle providers.json is invalid ({e}); using the built-in catalog"
                );
                default_catalog()
            }
        },
        Err(_) => default_catalog(),
    }
}

/// The model slots: which configured model a call uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Conversation,
    Summary,
    Correction,
    Emotion,
    Vision,
    Agent,
}

impl Slot {
    pub const ALL: [Slot; 6] = [
        Slot::Conversation,
        Slot::Summary,
        Slot::Correction,
        Slot::Emotion,
        Slot::Vision,
        Slot::Agent,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Slot::Conversation => "conversation",
            Slot::Summary => "summary",
            Slot::Correction => "correction",
            Slot::Emotion => "emotion",
            Slot::Vision => "vision",
            Slot::Agent => "agent",
        }
    }
    pub fn parse(s: &str) -> Option<Slot> {
        Slot::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// Where a slot's requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub base_url: String,
    pub model: String,
    pub api_key: String,
}

fn str_field<'a>(cfg: &'a Map<String, Value>, key: &str) -> &'a str {
    cfg.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("")
}

/// Resolve a slot from the stored core configuration:
/// with `enableCustomApi` true and `<slot>ModelUrl` set, the per-slot fields win;
/// otherwise the built-in provider (`coreApi` for conversation, `assistApi` for the
/// others, falling back to `coreApi`) from the catalog with `coreApiKey`.
pub fn resolve(cfg: &Map<String, Value>, catalog: &Catalog, slot: Slot) -> Option<Endpoint> {
    let s = slot.as_str();
    if cfg.get("enableCustomApi").and_then(Value::as_bool) == Some(true) {
        let url = str_field(cfg, &format!("{s}ModelUrl"));
        if !url.is_empty() {
            return Some(Endpoint {
                base_url: url.trim_end_matches('/').to_string(),
                model: str_field(cfg, &format!("{s}ModelId")).to_string(),
                api_key: str_field(cfg, &format!("{s}ModelApiKey")).to_string(),
            });
        }
    }
    let provider = match slot {
        Slot::Conversation => str_field(cfg, "coreApi"),
        _ => Some(str_field(cfg, "assistApi"))
            .filter(|a| !a.is_empty())
            .unwrap_or(str_field(cfg, "coreApi")),
    };
    let entry = catalog.get(provider)?;
    if entry.base_url.is_empty() {
        return None;
    }
    let key = {
        let specific = str_field(cfg, &format!("assistApiKey{}", capitalise(provider)));
        if slot != Slot::Conversation && !specific.is_empty() {
            specific
        } else {
            str_field(cfg, "coreApiKey")
        }
    };
    let model = entry
        .models
        .get(s)
        .or_else(|| entry.models.get("conversation"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let flag = |k: &str| entry.extra.get(k).and_then(Value::as_bool) == Some(true);
    // `no_key`: the built-in local model needs none.
    if key.is_empty() && !flag("free") && !flag("no_key") {
        return None;
    }
    Some(Endpoint {
        base_url: entry.base_url.trim_end_matches('/').to_string(),
        model,
        api_key: key.to_string(),
    })
}

/// Where embedding requests go (`<base_url>/embeddings`, OpenAI-compatible), or
/// `None` when `embeddingModelId` is empty. `embeddingModelUrl` (http(s) only)
/// defaults to the `summary` slot's URL; `embeddingModelApiKey` defaults to the
/// key of the slot whose URL is the embedding URL (the summary slot's when the
/// URL is not set). Independent of `enableCustomApi`.
pub fn resolve_embedding(cfg: &Map<String, Value>, catalog: &Catalog) -> Option<Endpoint> {
    let model = str_field(cfg, "embeddingModelId");
    if model.is_empty() {
        return None;
    }
    let url = str_field(cfg, "embeddingModelUrl").trim_end_matches('/');
    let key = str_field(cfg, "embeddingModelApiKey");
    let (base_url, api_key) = if url.is_empty() {
        let summary = resolve(cfg, catalog, Slot::Summary)?;
        let key = if key.is_empty() {
            summary.api_key
        } else {
            key.to_string()
        };
        (summary.base_url, key)
    } else {
        let ok = url::Url::parse(url)
            .ok()
            .is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        if !ok {
            return None;
        }
        let key = if key.is_empty() {
            Slot::ALL
                .into_iter()
                .filter_map(|s| resolve(cfg, catalog, s))
                .find(|ep| ep.base_url == url)
                .map(|ep| ep.api_key)
                .unwrap_or_default()
        } else {
            key.to_string()
        };
        (url.to_string(), key)
    };
    Some(Endpoint {
        base_url,
        model: model.to_string(),
        api_key,
    })
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn custom_slot_wins_when_enabled() {
        let cfg = json!({"enableCustomApi": true, "conversationModelUrl": "http://127.0.0.1:9/v1/", "conversationModelId": "m", "conversationModelApiKey": "k", "coreApi": "openai", "coreApiKey": "x"});
        let ep = resolve(
            cfg.as_object().unwrap(),
            &default_catalog(),
            Slot::Conversation,
        )
        .unwrap();
        assert_eq!(
            ep,
            Endpoint {
                base_url: "http://127.0.0.1:9/v1".into(),
                model: "m".into(),
                api_key: "k".into()
            }
        );
        let ep = resolve(cfg.as_object().unwrap(), &default_catalog(), Slot::Emotion).unwrap();
        assert_eq!(ep.api_key, "x");
    }

    #[test]
    fn embedding_endpoint() {
        let cat = default_catalog();
        let cfg = json!({"enableCustomApi": true, "summaryModelUrl": "http://127.0.0.1:9/v1", "summaryModelId": "m", "summaryModelApiKey": "k"});
        assert!(resolve_embedding(cfg.as_object().unwrap(), &cat).is_none());
        let mut c = cfg.as_object().unwrap().clone();
        c.insert("embeddingModelId".into(), json!("e"));
        let ep = resolve_embedding(&c, &cat).unwrap();
        assert_eq!(
            (ep.base_url.as_str(), ep.model.as_str(), ep.api_key.as_str()),
            ("http://127.0.0.1:9/v1", "e", "k")
        );
        c.insert("embeddingModelUrl".into(), json!("http://127.0.0.1:9/v1/"));
        assert_eq!(resolve_embedding(&c, &cat).unwrap().api_key, "k");
        c.insert("embeddingModelUrl".into(), json!("http://127.0.0.1:10/v1"));
        assert_eq!(resolve_embedding(&c, &cat).unwrap().api_key, "");
        c.insert("embeddingModelApiKey".into(), json!("ek"));
        let ep = resolve_embedding(&c, &cat).unwrap();
        assert_eq!(
            (ep.base_url.as_str(), ep.api_key.as_str()),
            ("http://127.0.0.1:10/v1", "ek")
        );
        c.insert("embeddingModelUrl".into(), json!("file:///etc"));
        assert!(resolve_embedding(&c, &cat).is_none());
    }

    #[test]
    fn nothing_configured_is_none() {
        assert!(resolve(&Map::new(), &default_catalog(), Slot::Conversation).is_none());
        let cfg = json!({"coreApi": "openai"});
        assert!(resolve(
            cfg.as_object().unwrap(),
            &default_catalog(),
            Slot::Conversation
        )
        .is_none());
        assert!(!default_catalog().providers.is_empty());
    }
}

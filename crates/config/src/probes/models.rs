//! `POST /api/config/list_models`: the models of a built-in provider or of a custom
//! endpoint, normalised and sorted.

use std::time::Duration;

use companiond_core::providers::Catalog;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{
    entry_kind, key_required, kind_of, opt, provider_base, stored_provider_key, stored_slot_key,
    Auth, Kind,
};
use crate::catalog;
use crate::core_api::is_masked;
use crate::error::ConfigError;
use crate::net;
use crate::net::NetFail;

/// Time budget of one model listing.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(15);
/// The one provider host whose model ids carry a `models/` prefix to remove.
pub const GEMINI_HOST: &str = "generativelanguage.googleapis.com";

/// Body of `POST /api/config/list_models` (wrong types are answered with 422).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
#[schema(example = json!({"url": "http://127.0.0.1:11434/v1", "provider_type": "openai_compatible"}))]
pub struct ListModelsRequest {
    pub provider_key: Option<String>,
    pub url: Option<String>,
    pub api_key: Option<String>,
    pub provider_type: Option<String>,
    pub model_type: Option<String>,
    /// Optional shorter time budget in seconds (never longer than the default).
    pub timeout_seconds: Option<f64>,
}

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

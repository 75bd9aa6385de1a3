//! Provider settings (`config/core_config.json`): masking on read, validation and
//! merge on write. The stored field names are the ones
//! `companiond_core::providers::resolve` reads; the two must agree.

use companiond_core::providers::Catalog;
use serde_json::{json, Map, Value};
use url::Url;

use crate::error::ConfigError;

/// The value sent in place of a stored secret.
pub const MASKED: &str = "__NEKO_SECRET_MASKED__";

/// Value of `coreApiKey` for the free tier (not a secret, never masked).
pub const FREE_ACCESS: &str = "free-access";

/// Model slots with per-slot `<slot>Model{Provider,Url,Id,ApiKey}` fields.
pub const SLOTS: &[&str] = &[
    "conversation",
    "summary",
    "correction",
    "emotion",
    "vision",
    "agent",
    "gameMain",
    "gameSummary",
    "omni",
    "tts",
    "image",
    // Speech recognition (docs/voice.md, "Hearing"): asrModelUrl/Id/ApiKey.
    "asr",
];

/// Suffixes of the per-slot fields.
pub const SLOT_SUFFIXES: &[&str] = &["Provider", "Url", "Id", "ApiKey"];

/// Boolean provider fields.
const BOOL_FIELDS: &[&str] = &[
    "enableCustomApi",
    "useMimoTokenPlan",
    "disableTts",
    "gptsovitsEnabled",
];

/// Fields of the response of `GET /core_api` that are not settings; a client that
/// posts a whole GET body back must not store them.
const VIEW_ONLY: &[&str] = &[
    "success",
    "message",
    "api_key",
    "api_key_display",
    "assist_api_key_display",
    "effectiveCoreApi",
];

/// Keys of `core_config.json` owned by the memory family (not provider settings).
const FOREIGN: &[&str] = &["recent_memory_auto_review", "powerful_memory_enabled"];

/// Longest accepted field name and string value.
const MAX_KEY_LEN: usize = 128;
const MAX_STRING_LEN: usize = 8192;
const MAX_FIELDS: usize = 512;

/// Is `key` a secret field of the provider settings?
pub fn is_secret(key: &str) -> bool {
    key.ends_with("ApiKey") || key.starts_with("assistApiKey") || key == "mcpToken"
}

/// Does `v` stand for "keep the stored secret"? The sentinel, three or more `*`,
/// bullets only, or a display mask (3 or 6 visible characters, at least three `*`,
/// 3 or 6 visible characters).
pub fn is_masked(v: &str) -> bool {
    let v = v.trim();
    if v.is_empty() {
        return false;
    }
    if v == MASKED {
        return true;
    }
    if v.chars().all(|c| c == '•') {
        return true;
    }
    if v.chars().count() >= 3 && v.chars().all(|c| c == '*') {
        return true;
    }
    let chars: Vec<char> = v.chars().collect();
    for edge in [3usize, 6] {
        if chars.len() < edge * 2 + 3 {
            continue;
        }
        let (head, rest) = chars.split_at(edge);
        let (mid, tail) = rest.split_at(rest.len() - edge);
        if head.iter().all(|c| *c != '*')
            && tail.iter().all(|c| *c != '*')
            && mid.iter().all(|c| *c == '*')
        {
            return true;
        }
    }
    false
}

/// The display mask of a secret: first 3 + `*`… + last 3 characters for keys of 9 or
/// more characters, else 12 bullets; empty for an empty key or the free tier.
pub fn display_mask(secret: &str) -> String {
    let s = secret.trim();
    if s.is_empty() || s == FREE_ACCESS {
        return String::new();
    }
    let chars: Vec<char> = s.chars().collect();
    if chars.len() >= 9 && !chars.contains(&'*') {
        let head: String = chars[..3].iter().collect();
        let tail: String = chars[chars.len() - 3..].iter().collect();
        return format!("{head}{}{tail}", "*".repeat(chars.len() - 6));
    }
    "•".repeat(12)
}

/// The Key Book field of a provider (same spelling as `providers::resolve`).
pub fn keybook_field(provider: &str) -> String {
    let mut c = provider.chars();
    let cap: String = match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    };
    format!("assistApiKey{cap}")
}

/// A trimmed string field of the stored configuration (`""` when absent or not a string).
pub fn str_field<'a>(cfg: &'a Map<String, Value>, key: &str) -> &'a str {
    cfg.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("")
}

/// Is `provider` the free tier of the catalog?
pub fn is_free(catalog: &Catalog, provider: &str) -> bool {
    catalog
        .get(provider)
        .and_then(|p| p.extra.get("free"))
        .and_then(Value::as_bool)
        == Some(true)
}

fn mask_value(v: &Value) -> Value {
    match v {
        Value::Null => json!(""),
        Value::String(s) if s.trim().is_empty() => json!(""),
        Value::String(s) if s.trim() == FREE_ACCESS => json!(FREE_ACCESS),
        _ => json!(MASKED),
    }
}

/// The body of `GET /api/config/core_api`: every stored field, secrets masked, with
/// defaults for the known fields.
pub fn view(cfg: &Map<String, Value>, catalog: &Catalog) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("success".into(), json!(true));
    let defaults: Vec<(String, Value)> = {
        let mut d = vec![
            ("coreApi".to_string(), json!("")),
            ("assistApi".to_string(), json!("")),
            ("coreApiKey".to_string(), json!("")),
            ("enableCustomApi".to_string(), json!(false)),
            ("useMimoTokenPlan".to_string(), json!(false)),
            ("disableTts".to_string(), json!(false)),
            ("mcpToken".to_string(), json!("")),
            ("ttsProvider".to_string(), json!("")),
            ("ttsVoiceId".to_string(), json!("")),
            ("resolvedProviderUrls".to_string(), json!({})),
        ];
        for p in &catalog.providers {
            d.push((keybook_field(&p.key), json!("")));
        }
        for slot in SLOTS {
            for suffix in SLOT_SUFFIXES {
                d.push((format!("{slot}Model{suffix}"), json!("")));
            }
        }
        d
    };
    for (k, v) in defaults {
        let stored = cfg.get(&k).cloned().unwrap_or(v);
        out.insert(k, stored);
    }
    for (k, v) in cfg {
        out.insert(k.clone(), v.clone());
    }
    if !out
        .get("resolvedProviderUrls")
        .is_some_and(Value::is_object)
    {
        out.insert("resolvedProviderUrls".into(), json!({}));
    }
    for (k, v) in out.iter_mut() {
        if is_secret(k) {
            *v = mask_value(v);
        }
    }
    let core_key = str_field(cfg, "coreApiKey");
    out.insert(
        "api_key".into(),
        mask_value(&Value::String(core_key.to_string())),
    );
    out.insert("api_key_display".into(), json!(display_mask(core_key)));
    let assist = str_field(cfg, "assistApi");
    let assist_key = if assist.is_empty() {
        ""
    } else {
        str_field(cfg, &keybook_field(assist))
    };
    out.insert(
        "assist_api_key_display".into(),
        json!(display_mask(assist_key)),
    );
    out
}

/// Result of a merge.
#[derive(Debug)]
pub struct Merged {
    pub config: Map<String, Value>,
    /// Keys whose stored value changed.
    pub changed: Vec<String>,
    /// Keys of the body that were not stored (view-only or owned by another family).
    pub ignored: Vec<String>,
}

fn per_slot(key: &str) -> Option<(&'static str, &'static str)> {
    for slot in SLOTS {
        if let Some(rest) = key.strip_prefix(slot).and_then(|r| r.strip_prefix("Model")) {
            for suffix in SLOT_SUFFIXES {
                if rest == *suffix {
                    return Some((slot, suffix));
                }
            }
        }
    }
    None
}

/// Is `s` an absolute HTTP(S) URL with a host?
pub fn http_url(s: &str) -> Option<Url> {
    let u = Url::parse(s.trim()).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    u.host_str().filter(|h| !h.is_empty())?;
    Some(u)
}

fn string_or_null<'a>(key: &str, v: &'a Value) -> Result<Option<&'a str>, ConfigError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) if s.len() > MAX_STRING_LEN => {
            Err(ConfigError::bad(format!("{key} is too long")))
        }
        Value::String(s) => Ok(Some(s)),
        _ => Err(ConfigError::bad(format!("{key} must be a string"))),
    }
}

/// Validate `body` and merge it into `cur`. All or nothing: on error nothing changes.
pub fn merge(
    cur: Map<String, Value>,
    body: Map<String, Value>,
    catalog: &Catalog,
) -> Result<Merged, ConfigError> {
    let before = cur.clone();
    let mut cfg = cur;
    let mut ignored = Vec::new();
    let fields: Vec<(String, Value)> = body
        .into_iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .collect();
    if fields.is_empty() {
        return Err(ConfigError::bad_code(
            "no provider settings were given",
            "empty_body",
        ));
    }
    if fields.len() > MAX_FIELDS {
        return Err(ConfigError::bad("too many fields"));
    }
    let mut core_key_sent: Option<bool> = None; // Some(true) = a real key was sent
    for (k, v) in fields {
        if k.is_empty() || k.len() > MAX_KEY_LEN {
            return Err(ConfigError::bad("invalid field name"));
        }
        if VIEW_ONLY.contains(&k.as_str()) || FOREIGN.contains(&k.as_str()) {
            ignored.push(k);
            continue;
        }
        match k.as_str() {
            "coreApi" | "assistApi" => {
                let Some(s) = string_or_null(&k, &v)? else {
                    continue;
                };
                let s = s.trim();
                if s.is_empty() {
                    continue;
                }
                if catalog.get(s).is_none() {
                    return Err(ConfigError::bad_code(
                        format!("{k}: unknown provider {s:?}"),
                        "unknown_provider",
                    ));
                }
                cfg.insert(k, json!(s));
            }
            "resolvedProviderUrls" => {
                let Value::Object(m) = v else {
                    return Err(ConfigError::bad("resolvedProviderUrls must be an object"));
                };
                let clean: Map<String, Value> = m
                    .into_iter()
                    .filter_map(|(k, v)| {
                        let k = k.trim().to_string();
                        let v = v.as_str()?.trim().to_string();
                        (!k.is_empty() && !v.is_empty() && http_url(&v).is_some())
                            .then(|| (k, Value::String(v)))
                    })
                    .collect();
                cfg.insert(k, Value::Object(clean));
            }
            f if BOOL_FIELDS.contains(&f) => {
                if !v.is_boolean() {
                    return Err(ConfigError::bad(format!("{k} must be a boolean")));
                }
                cfg.insert(k, v);
            }
            f if is_secret(f) => {
                let s = string_or_null(&k, &v)?.unwrap_or("");
                if is_masked(s) {
                    if f == "coreApiKey" {
                        core_key_sent = Some(false);
                    }
                    continue;
                }
                if f == "coreApiKey" {
                    core_key_sent = Some(true);
                }
                cfg.insert(k, json!(s.trim()));
            }
            f => {
                if let Some((_, suffix)) = per_slot(f) {
                    let s = string_or_null(&k, &v)?.unwrap_or("").trim();
                    // The speech and recognition URLs may also name a Wyoming
                    // server (docs/voice.md).
                    let wyoming = (f == "ttsModelUrl" || f == "asrModelUrl")
                        && companiond_core::speech::config::wyoming_target(s, "").is_ok();
                    if suffix == "Url" && !s.is_empty() && http_url(s).is_none() && !wyoming {
                        return Err(ConfigError::bad_code(
                            format!("{k} must be an http:// or https:// URL"),
                            "invalid_url",
                        ));
                    }
                    cfg.insert(k, json!(s));
                } else {
                    if let Value::String(s) = &v {
                        if s.len() > MAX_STRING_LEN {
                            return Err(ConfigError::bad(format!("{k} is too long")));
                        }
                    }
                    cfg.insert(k, v);
                }
            }
        }
    }
    // A change of the core provider keeps the old key in that provider's Key Book
    // slot and takes the new provider's key from the Key Book unless a real key was sent.
    let old_core = str_field(&before, "coreApi").to_string();
    let new_core = str_field(&cfg, "coreApi").to_string();
    if old_core != new_core {
        let old_key = str_field(&before, "coreApiKey").to_string();
        if !old_core.is_empty() && !old_key.is_empty() && old_key != FREE_ACCESS {
            let slot = keybook_field(&old_core);
            if str_field(&cfg, &slot).is_empty() {
                cfg.insert(slot, json!(old_key));
            }
        }
        if core_key_sent != Some(true) && !new_core.is_empty() {
            let promoted = if is_free(catalog, &new_core) {
                FREE_ACCESS.to_string()
            } else {
                str_field(&cfg, &keybook_field(&new_core)).to_string()
            };
            cfg.insert("coreApiKey".into(), json!(promoted));
        }
    } else if core_key_sent.is_none()
        && is_free(catalog, &new_core)
        && str_field(&cfg, "coreApiKey").is_empty()
    {
        cfg.insert("coreApiKey".into(), json!(FREE_ACCESS));
    }
    let mut changed: Vec<String> = cfg
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    changed.sort();
    Ok(Merged {
        config: cfg,
        changed,
        ignored,
    })
}

/// Does a change of these keys affect where model requests go?
pub fn affects_sessions(changed: &[String]) -> bool {
    changed.iter().any(|k| {
        matches!(
            k.as_str(),
            "coreApi" | "assistApi" | "coreApiKey" | "enableCustomApi"
        ) || k.starts_with("assistApiKey")
            || per_slot(k).is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert!(is_masked(MASKED));
        assert!(is_masked("***"));
        assert!(is_masked("••••"));
        assert!(is_masked("sk-*****abc"));
        assert!(is_masked("sk-abc***xyz123"));
        assert!(!is_masked(""));
        assert!(!is_masked("sk-real-key"));
        assert!(!is_masked("a*b"));
        assert_eq!(display_mask("sk-1234567890"), "sk-*******890");
        assert_eq!(display_mask("short"), "••••••••••••");
        assert_eq!(display_mask(""), "");
        assert!(is_masked(&display_mask("sk-1234567890")));
    }
}

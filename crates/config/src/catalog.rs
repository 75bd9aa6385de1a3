//! The provider catalog view of `GET /api/config/api_providers`.

use std::path::Path;

use companiond_core::providers::{self, Catalog, ProviderEntry};
use serde_json::{json, Map, Value};

use crate::core_api::keybook_field;

/// The catalog in force and where it came from (`bundle` or `builtin`).
pub fn load(bundle: &Path) -> (Catalog, &'static str) {
    let from_bundle = std::fs::read(bundle.join("providers.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Catalog>(&b).ok())
        .is_some_and(|c| !c.providers.is_empty());
    let source = if from_bundle { "bundle" } else { "builtin" };
    (providers::load_catalog(bundle), source)
}

/// Scopes a provider serves: `extra.scopes` (`["core","assist"]`) or both.
fn serves(p: &ProviderEntry, scope: &str) -> bool {
    match p.extra.get("scopes").and_then(Value::as_array) {
        Some(list) => list.iter().any(|s| s.as_str() == Some(scope)),
        None => true,
    }
}

fn flag(p: &ProviderEntry, key: &str) -> bool {
    p.extra.get(key).and_then(Value::as_bool) == Some(true)
}

fn summary(p: &ProviderEntry) -> Value {
    json!({
        "key": p.key,
        "name": if p.name.is_empty() { p.key.clone() } else { p.name.clone() },
        "description": p.extra.get("description").and_then(Value::as_str).unwrap_or(""),
        "is_free_version": flag(p, "free"),
        "fixed_model": flag(p, "fixed_model"),
    })
}

/// The body of `GET /api/config/api_providers`.
pub fn view(catalog: &Catalog, source: &str) -> Map<String, Value> {
    let mut out = Map::new();
    // Top-level extras of the bundled file (e.g. tts_providers) pass through first,
    // so the fixed fields below always win.
    for (k, v) in &catalog.extra {
        out.insert(k.clone(), v.clone());
    }
    let mut core = Vec::new();
    let mut assist = Vec::new();
    let mut core_full = Map::new();
    let mut assist_full = Map::new();
    let mut registry = Map::new();
    let mut defaults = Map::new();
    for p in &catalog.providers {
        let full = serde_json::to_value(p).unwrap_or(Value::Null);
        if serves(p, "core") {
            core.push(summary(p));
            core_full.insert(p.key.clone(), full.clone());
        }
        if serves(p, "assist") {
            assist.push(summary(p));
            assist_full.insert(p.key.clone(), full);
        }
        registry.insert(
            p.key.clone(),
            json!({"config_field": keybook_field(&p.key), "restricted": flag(p, "restricted")}),
        );
        defaults.insert(p.key.clone(), Value::Object(p.models.clone()));
    }
    out.insert("success".into(), json!(true));
    out.insert("source".into(), json!(source));
    out.insert(
        "providers".into(),
        serde_json::to_value(&catalog.providers).unwrap_or(json!([])),
    );
    out.insert("core_api_providers".into(), Value::Array(core));
    out.insert("assist_api_providers".into(), Value::Array(assist));
    out.insert("core_api_providers_full".into(), Value::Object(core_full));
    out.insert(
        "assist_api_providers_full".into(),
        Value::Object(assist_full),
    );
    out.insert("api_key_registry".into(), Value::Object(registry));
    out.insert("default_models".into(), Value::Object(defaults));
    if !out.contains_key("tts_providers") {
        out.insert("tts_providers".into(), json!([]));
    }
    out
}

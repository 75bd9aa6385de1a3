//! The provider catalog: the one in force (cached by file stamp) and its view for
//! `GET /api/config/api_providers`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use companiond_core::providers::{self, Catalog, ProviderEntry};
use companiond_core::stamp::{all_settled, stamp, Stamp};
use serde_json::{json, Map, Value};

use crate::core_api::keybook_field;

/// The catalog in force and where it came from (`bundle` or `builtin`): a valid,
/// non-empty `<bundle>/providers.json`, else the built-in catalog.
fn load(bundle: &Path) -> (Catalog, &'static str) {
    let from_bundle = std::fs::read(bundle.join(FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<Catalog>(&b).ok())
        .filter(|c| !c.providers.is_empty());
    match from_bundle {
        Some(c) => (c, "bundle"),
        None => (providers::load_catalog(bundle), "builtin"),
    }
}

/// The bundle's catalog file.
const FILE: &str = "providers.json";

struct Cached {
    stamp: Option<Stamp>,
    catalog: Arc<Catalog>,
    source: &'static str,
}

/// The catalog, parsed once and kept while the stamp of `<bundle>/providers.json`
/// (or its absence) stays the same. A value read from a file changed within
/// [`companiond_core::stamp::RACY`] is served but not kept, so a later change in the
/// same file-clock tick is never missed.
#[derive(Default)]
pub struct CatalogCache {
    entry: Mutex<Option<Cached>>,
}

impl CatalogCache {
    /// The catalog in force and its source (`bundle` or `builtin`).
    pub fn get(&self, bundle: &Path) -> (Arc<Catalog>, &'static str) {
        let path = bundle.join(FILE);
        let before = stamp(&path);
        {
            let entry = self.entry.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = entry.as_ref().filter(|c| c.stamp == before) {
                return (c.catalog.clone(), c.source);
            }
        }
        let computed_at = SystemTime::now();
        let (catalog, source) = load(bundle);
        let catalog = Arc::new(catalog);
        if stamp(&path) == before && all_settled([&before], computed_at) {
            *self.entry.lock().unwrap_or_else(|e| e.into_inner()) = Some(Cached {
                stamp: before,
                catalog: catalog.clone(),
                source,
            });
        }
        (catalog, source)
    }
}

/// Scopes a provider serves: `extra.scopes` (`["core","assist"]`) or both.
fn serves(p: &ProviderEntry, scope: &str) -> bool {
    match p.extra.get("scopes").and_then(Value::as_array) {
        Some(list) => list.iter().any(|s| s.as_str() == Some(scope)),
        None => true,
    }
}

/// Is the catalog entry's `key` flag set (`free`, `fixed_model`, `restricted`)?
pub fn flag(p: &ProviderEntry, key: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            let nanos = SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let p = std::env::temp_dir().join(format!("catalog-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(dir: &Path, key: &str) {
        let doc = json!({"providers": [{"key": key, "name": key, "base_url": "https://example.com/v1", "models": {}}]});
        std::fs::write(dir.join(FILE), doc.to_string()).unwrap();
    }

    #[test]
    fn the_cache_follows_the_file() {
        let dir = TempDir::new();
        let cache = CatalogCache::default();
        // No file: the built-in catalog, kept (absence is a stable stamp).
        let (a, source) = cache.get(dir.path());
        assert_eq!(source, "builtin");
        assert!(Arc::ptr_eq(&a, &cache.get(dir.path()).0));
        // A file just written is served but not kept (its stamp is not settled).
        write(dir.path(), "one");
        let (b, source) = cache.get(dir.path());
        assert_eq!((source, b.providers[0].key.as_str()), ("bundle", "one"));
        assert!(!Arc::ptr_eq(&b, &cache.get(dir.path()).0));
        // Once settled it is kept; a rewrite is seen on the next call.
        std::thread::sleep(companiond_core::stamp::RACY + std::time::Duration::from_millis(200));
        let (c, _) = cache.get(dir.path());
        assert!(Arc::ptr_eq(&c, &cache.get(dir.path()).0));
        write(dir.path(), "two");
        assert_eq!(cache.get(dir.path()).0.providers[0].key, "two");
        // An invalid file falls back to the built-in catalog.
        std::fs::write(dir.path().join(FILE), b"{").unwrap();
        assert_eq!(cache.get(dir.path()).1, "builtin");
    }
}

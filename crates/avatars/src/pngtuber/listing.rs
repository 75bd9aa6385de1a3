//! `GET /api/model/pngtuber/models` without re-reading every package: each
//! package's listing entry (or its "skip") is cached with the stamps of what
//! decided it — its `model.json` and every directory on the way to the files it
//! references (adding, removing or replacing a file changes its directory's
//! stamp). A request stats those (two or three per package) and reads and
//! validates only packages whose stamps changed. Entries computed from files
//! changed within [`companiond_core::stamp::RACY`] are not kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use companiond_core::stamp::{all_settled, stamp, Stamp};
use serde_json::{json, Map, Value};

use super::{normalize, raw_config, read_model_json, relative_segments, validate, URL_PREFIX};

struct Entry {
    model: Option<Stamp>,
    deps: Vec<(PathBuf, Option<Stamp>)>,
    /// The serialised listing entry; `None` when the folder is skipped.
    json: Option<Arc<str>>,
}

/// Per-folder cache of the listing (one per package store).
#[derive(Default)]
pub struct ListCache {
    entries: Mutex<HashMap<String, Entry>>,
}

/// The directories whose contents decide whether the files `model` references
/// exist: the package folder and every folder on the way to each file.
fn dependencies(model: &Map<String, Value>, pkg: &Path, folder: &str) -> Vec<PathBuf> {
    let mut out = vec![pkg.to_path_buf()];
    let own_prefix = format!("{URL_PREFIX}/{folder}/");
    for (k, v) in raw_config(model) {
        if !k.ends_with("_image") {
            continue;
        }
        let Some(s) = v.as_str().map(str::trim).filter(|s| !s.is_empty()) else {
            continue;
        };
        let s = s.replace('\\', "/");
        let rel = s.strip_prefix(own_prefix.as_str()).unwrap_or(&s);
        let Some(segs) = relative_segments(rel) else {
            continue;
        };
        let mut dir = pkg.to_path_buf();
        for seg in segs.iter().take(segs.len().saturating_sub(1)) {
            dir.push(seg);
            if !out.contains(&dir) {
                out.push(dir.clone());
            }
        }
    }
    out
}

/// The listing entry of one package, `None` when it is skipped.
fn entry_of(model: &Map<String, Value>, folder: &str) -> Value {
    let name = model
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| folder.to_string());
    let source_format = model
        .get("source_format")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("simple_package")
        .to_string();
    json!({
        "name": name,
        "folder": folder,
        "filename": folder,
        "location": "user",
        "type": "pngtuber",
        "model_type": "pngtuber",
        "url": format!("{URL_PREFIX}/{folder}/model.json"),
        "pngtuber": normalize(model, folder),
        "source_format": source_format,
    })
}

impl ListCache {
    /// The serialised entries of the valid packages under `root`, sorted by
    /// folder name (case-insensitive). Blocking.
    pub fn list(&self, root: &Path) -> std::io::Result<Vec<Arc<str>>> {
        let computed_at = SystemTime::now();
        let mut dirs: Vec<(String, PathBuf)> = match std::fs::read_dir(root) {
            Ok(rd) => rd
                .flatten()
                .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .filter(|(n, _)| !n.starts_with('.'))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        dirs.sort_by_key(|(n, _)| n.to_lowercase());
        let mut cache = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(dirs.len());
        let mut seen = std::collections::HashSet::with_capacity(dirs.len());
        for (folder, dir) in dirs {
            let model_path = dir.join("model.json");
            let model_stamp = stamp(&model_path);
            let hit = cache.get(&folder).is_some_and(|e| {
                e.model == model_stamp && e.deps.iter().all(|(p, s)| stamp(p) == *s)
            });
            if !hit {
                let fresh = Self::compute(&folder, &dir, &model_path, model_stamp);
                match fresh {
                    Some(e)
                        if all_settled(
                            std::iter::once(&e.model).chain(e.deps.iter().map(|(_, s)| s)),
                            computed_at,
                        ) =>
                    {
                        cache.insert(folder.clone(), e);
                    }
                    Some(e) => {
                        cache.remove(&folder);
                        if let Some(j) = e.json {
                            out.push(j);
                        }
                        seen.insert(folder);
                        continue;
                    }
                    None => {
                        cache.remove(&folder);
                        continue;
                    }
                }
            }
            if let Some(j) = cache.get(&folder).and_then(|e| e.json.clone()) {
                out.push(j);
            }
            seen.insert(folder);
        }
        cache.retain(|k, _| seen.contains(k));
        Ok(out)
    }

    /// Read and validate one package; `None` when it cannot be read (not cached).
    fn compute(
        folder: &str,
        dir: &Path,
        model_path: &Path,
        model_stamp: Option<Stamp>,
    ) -> Option<Entry> {
        // Stamps are taken before the reads, so a change racing with them shows
        // as a different stamp next time.
        let pkg_stamp = stamp(dir);
        let model = match read_model_json(model_path) {
            Ok(Some(m)) => m,
            Ok(None) => {
                return Some(Entry {
                    model: model_stamp,
                    deps: vec![(dir.to_path_buf(), pkg_stamp)],
                    json: None,
                })
            }
            Err(e) => {
                tracing::warn!("skipping PNGTuber package {folder}: {e}");
                return None;
            }
        };
        let deps: Vec<(PathBuf, Option<Stamp>)> = dependencies(&model, dir, folder)
            .into_iter()
            .map(|p| {
                let s = if p == dir { pkg_stamp } else { stamp(&p) };
                (p, s)
            })
            .collect();
        let json = match validate(&model, dir, Some(folder)) {
            Ok(()) => Some(Arc::from(entry_of(&model, folder).to_string())),
            Err(e) => {
                tracing::warn!("skipping invalid PNGTuber package {folder}: {e}");
                None
            }
        };
        Some(Entry {
            model: model_stamp,
            deps,
            json,
        })
    }
}

//! Legacy memory cleanup: scan and purge of the roots given by
//! `--legacy-memory-root` (docs/memory.md).
//!
//! A root is *recognised* when it exists, is a directory, and is neither the
//! runtime memory directory nor inside it (comparison of canonical paths). Purge targets must be absolute, free of `..`, and resolve
//! (parent canonicalised, the last component kept as is so a symlink entry is
//! removed itself, never followed) strictly below a recognised root, and must
//! neither contain nor lie inside the runtime memory directory.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::unit;

/// Directory entries visited per scanned entry before giving up (`size_bytes = -1`).
pub const SCAN_LIMIT: usize = 50_000;
/// Source label of configured roots.
pub const SOURCE: &str = "configured";

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LegacyEntry)]
pub struct Entry {
    pub name: String,
    pub path: String,
    pub is_dir: bool,
    pub size_bytes: i64,
    pub is_unlinked: bool,
    pub runtime_has_same_name: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LegacyRoot)]
pub struct Root {
    pub root: String,
    pub source: &'static str,
    pub exists: bool,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LegacyScan)]
pub struct Scan {
    pub success: bool,
    pub runtime_memory_dir: String,
    pub legacy_roots: Vec<Root>,
    pub total_entries: usize,
    pub total_size_bytes: i64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LegacyPurgeError)]
pub struct PurgeError {
    pub path: String,
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = LegacyPurge)]
pub struct Purge {
    pub success: bool,
    pub removed: Vec<String>,
    pub errors: Vec<PurgeError>,
}

fn canonical_or_absolute(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// The configured roots, deduplicated on their resolved path, in order, minus
/// any that is the runtime memory directory.
fn configured_roots(roots: &[PathBuf], runtime: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for r in roots {
        let Ok(r) = std::path::absolute(r) else {
            continue;
        };
        let canon = canonical_or_absolute(&r);
        if canon == runtime || !seen.insert(canon.clone()) {
            continue;
        }
        out.push((r, canon));
    }
    out
}

/// Roots purge may delete below (canonical paths).
fn recognised_roots(roots: &[PathBuf], runtime: &Path) -> Vec<PathBuf> {
    configured_roots(roots, runtime)
        .into_iter()
        .filter(|(_, c)| c.is_dir() && !c.starts_with(runtime))
        .map(|(_, c)| c)
        .collect()
}

fn runtime_memory_dir(data_dir: &Path) -> PathBuf {
    canonical_or_absolute(&unit::memory_root(data_dir))
}

/// Total size of a tree without following symlinks; `None` past [`SCAN_LIMIT`]
/// visited entries or on an error.
fn tree_size(path: &Path) -> Option<u64> {
    let meta = path.symlink_metadata().ok()?;
    if !meta.is_dir() {
        return Some(meta.len());
    }
    let mut total = 0u64;
    let mut visited = 0usize;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).ok()? {
            let e = e.ok()?;
            visited += 1;
            if visited > SCAN_LIMIT {
                return None;
            }
            let m = e.path().symlink_metadata().ok()?;
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                total += m.len();
            }
        }
    }
    Some(total)
}

/// `GET /api/memory/legacy/scan` (read-only).
pub fn scan(data_dir: &Path, roots: &[PathBuf], characters: &[String]) -> Scan {
    let runtime = runtime_memory_dir(data_dir);
    let runtime_raw = unit::memory_root(data_dir);
    let configured: HashSet<&str> = characters.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    let (mut total_entries, mut total_size) = (0usize, 0i64);
    for (raw, canon) in configured_roots(roots, &runtime) {
        let exists = canon.is_dir();
        let mut entries = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&canon) {
            let mut items: Vec<_> = rd.flatten().collect();
            items.sort_by_key(|e| e.file_name());
            for e in items {
                let Some(name) = e.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                if name.starts_with('.') || name.starts_with('_') {
                    continue;
                }
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_symlink() {
                    continue;
                }
                let size = tree_size(&e.path())
                    .and_then(|s| i64::try_from(s).ok())
                    .unwrap_or(-1);
                if size > 0 {
                    total_size += size;
                }
                let runtime_same = runtime_raw
                    .join(&name)
                    .symlink_metadata()
                    .map(|m| m.is_dir())
                    .unwrap_or(false);
                entries.push(Entry {
                    path: raw.join(&name).to_string_lossy().into_owned(),
                    is_unlinked: !configured.contains(name.as_str()),
                    runtime_has_same_name: runtime_same,
                    is_dir: ft.is_dir(),
                    size_bytes: size,
                    name,
                });
            }
        }
        total_entries += entries.len();
        out.push(Root {
            root: raw.to_string_lossy().into_owned(),
            source: SOURCE,
            exists,
            entries,
        });
    }
    Scan {
        success: true,
        runtime_memory_dir: runtime_raw.to_string_lossy().into_owned(),
        legacy_roots: out,
        total_entries,
        total_size_bytes: total_size,
    }
}

/// The `paths` of a purge body: 400 unless a non-empty array (its entries
/// are judged one by one by [`purge`]).
pub fn purge_paths(paths: Option<Vec<Value>>) -> Result<Vec<Value>, MemoryError> {
    match paths {
        Some(a) if !a.is_empty() => Ok(a),
        _ => Err(MemoryError::BadRequest(
            "paths (non-empty array of absolute paths) is required".into(),
        )),
    }
}

/// Resolve one purge target: the canonical parent joined with the last
/// component (deepest existing ancestor canonicalised when the parent is
/// missing too).
fn resolve_target(raw: &str) -> Result<PathBuf, String> {
    if raw.trim().is_empty() {
        return Err("empty path".into());
    }
    if raw.contains('\0') {
        return Err("path contains a NUL character".into());
    }
    if raw.replace('\\', "/").split('/').any(|s| s == "..") {
        return Err("path traversal (..) is not allowed".into());
    }
    let p = Path::new(raw);
    if !p.is_absolute() {
        return Err("path must be absolute".into());
    }
    let mut parts: Vec<_> = p
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let Some(Component::Normal(last)) = parts.pop() else {
        return Err("path has no entry name".into());
    };
    let parent: PathBuf = parts.iter().collect();
    // Canonicalise the deepest existing ancestor of the parent.
    let mut existing = parent.clone();
    let mut rest = Vec::new();
    let canon = loop {
        match existing.canonicalize() {
            Ok(c) => break c,
            Err(_) => {
                if existing.symlink_metadata().is_ok() {
                    return Err("path goes through a dangling link".into());
                }
                match existing.file_name() {
                    Some(n) => rest.push(n.to_os_string()),
                    None => return Err("path cannot be resolved".into()),
                }
                if !existing.pop() {
                    return Err("path cannot be resolved".into());
                }
            }
        }
    };
    let mut resolved = canon;
    for r in rest.iter().rev() {
        resolved.push(r);
    }
    resolved.push(last);
    Ok(resolved)
}

fn remove(path: &Path) -> std::io::Result<()> {
    let meta = match path.symlink_metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// `POST /api/memory/legacy/purge`. Best effort per entry.
pub fn purge(data_dir: &Path, roots: &[PathBuf], paths: &[Value]) -> Result<Purge, MemoryError> {
    let runtime = runtime_memory_dir(data_dir);
    let recognised = recognised_roots(roots, &runtime);
    if recognised.is_empty() {
        return Err(MemoryError::NoLegacyRoots);
    }
    let data_canon = canonical_or_absolute(data_dir);
    let mut removed = Vec::new();
    let mut errors = Vec::new();
    for item in paths {
        let shown = match item {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let fail = |errors: &mut Vec<PurgeError>, e: String| {
            errors.push(PurgeError {
                path: shown.clone(),
                error: e,
            })
        };
        let Value::String(raw) = item else {
            fail(&mut errors, "path must be a string".into());
            continue;
        };
        let resolved = match resolve_target(raw) {
            Ok(r) => r,
            Err(e) => {
                fail(&mut errors, e);
                continue;
            }
        };
        if resolved.starts_with(&runtime) || runtime.starts_with(&resolved) {
            fail(
                &mut errors,
                "the runtime memory directory cannot be purged".into(),
            );
            continue;
        }
        if data_canon.starts_with(&resolved) {
            fail(&mut errors, "the data directory cannot be purged".into());
            continue;
        }
        let inside = recognised
            .iter()
            .any(|root| resolved.starts_with(root) && resolved != *root);
        if !inside {
            fail(
                &mut errors,
                "path is not strictly below a recognized legacy root".into(),
            );
            continue;
        }
        let mut r = remove(&resolved);
        if matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied) {
            std::thread::sleep(Duration::from_millis(300));
            r = remove(&resolved);
        }
        match r {
            Ok(()) => removed.push(resolved.to_string_lossy().into_owned()),
            Err(e) => fail(&mut errors, format!("cannot delete: {e}")),
        }
    }
    Ok(Purge {
        success: true,
        removed,
        errors,
    })
}

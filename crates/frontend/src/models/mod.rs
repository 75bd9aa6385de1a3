//! Live2D and VRM model lists and the user mounts the pages load them from
//! (docs/frontend.md).
//!
//! Live2D models are folders holding a `*.model3.json`: found under the served
//! static roots (`--frontend-dir`'s `static/`, then the bundle's `static/`, at most
//! three levels deep; URL `/static/<rel>`), the data dir's `user_live2d/` (URL
//! `/user_live2d/<rel>`) and workshop items (`/workshop/<item>/<rel>`). VRM models are
//! `static/vrm/*.vrm` (project) and `<data>/user_vrm/*.vrm` (user); animations
//! `static/vrm/animation/*.vrma` and `<data>/user_vrm/animation/*.vrma`.
//!
//! This module finds and looks the models up; the routes that list and serve
//! them are in [`crate::http`], the VRM uploads in [`upload`].

use std::path::{Path, PathBuf};

use companiond_core::AppState;
use serde::Serialize;
use utoipa::ToSchema;

mod upload;

pub use upload::MAX_VRM_BYTES;
pub(crate) use upload::{store_vrm, upload_refused};

/// A Live2D model: its folder name, the served path of its `*.model3.json` and
/// where it was found (`static`, `documents`: the data dir's `user_live2d/`,
/// `steam_workshop`).
#[derive(Clone, Serialize, ToSchema)]
#[schema(example = json!({"name": "yui-lolita", "display_name": "yui-lolita",
    "path": "/static/yui-lolita/yui-lolita.model3.json", "source": "static"}))]
pub struct Live2dModel {
    pub name: String,
    pub display_name: String,
    pub path: String,
    pub source: &'static str,
    /// The workshop item (workshop models only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub item_id: Option<String>,
    /// `true` when shown in place of a character's missing model.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub is_fallback: Option<bool>,
}

/// Data-dir folder of user Live2D models (`/user_live2d/...`).
pub const USER_LIVE2D: &str = "user_live2d";
/// Data-dir folder of user VRM models and animations (`/user_vrm/...`).
pub const USER_VRM: &str = "user_vrm";
/// The model name reported when none is bound.
pub const DEFAULT_LIVE2D_NAME: &str = "yui-lolita";

/// The static roots in precedence order: `(filesystem dir, URL prefix)`.
pub(crate) fn static_roots(st: &AppState) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(f) = &st.opts.frontend_dir {
        v.push(f.join("static"));
    }
    v.push(st.bundle_dir().join("static"));
    v
}

pub(crate) fn url_path(prefix: &str, rel: &Path) -> String {
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("{prefix}/{}", parts.join("/"))
}

/// Folders under `root` (to `depth` levels) holding a `*.model3.json`:
/// `(folder name, path of the model file relative to root)`.
pub(crate) fn scan_live2d(root: &Path, depth: usize) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, level)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        let mut found = false;
        for e in &entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_file() && name.ends_with(".model3.json") && !found && level > 0 {
                if let Ok(rel) = e.path().strip_prefix(root) {
                    let folder = dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    out.push((folder, rel.to_path_buf()));
                    found = true;
                }
            }
        }
        if found || level >= depth {
            continue;
        }
        for e in entries.iter().rev() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || matches!(name.as_str(), "node_modules" | "libs") {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((e.path(), level + 1));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

impl Live2dModel {
    fn new(name: String, path: String, source: &'static str, item_id: Option<String>) -> Self {
        Live2dModel {
            display_name: name.clone(),
            name,
            path,
            source,
            item_id,
            is_fallback: None,
        }
    }
}

/// Every Live2D model.
pub fn live2d_models_blocking(
    roots: &[PathBuf],
    data: &Path,
    workshop: Option<&Path>,
) -> Vec<Live2dModel> {
    let mut out: Vec<Live2dModel> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for root in roots {
        for (name, rel) in scan_live2d(root, 3) {
            if seen.insert(name.clone()) {
                let path = url_path("/static", &rel);
                out.push(Live2dModel::new(name, path, "static", None));
            }
        }
    }
    for (name, rel) in scan_live2d(&data.join(USER_LIVE2D), 2) {
        let path = url_path("/user_live2d", &rel);
        out.push(Live2dModel::new(name, path, "documents", None));
    }
    if let Some(ws) = workshop {
        if let Ok(rd) = std::fs::read_dir(ws) {
            let mut items: Vec<_> = rd.flatten().filter(|e| e.path().is_dir()).collect();
            items.sort_by_key(|e| e.file_name());
            for item in items {
                let id = item.file_name().to_string_lossy().into_owned();
                for (name, rel) in scan_live2d(&item.path(), 3) {
                    let path = url_path(&format!("/workshop/{id}"), &rel);
                    out.push(Live2dModel::new(
                        name,
                        path,
                        "steam_workshop",
                        Some(id.clone()),
                    ));
                }
            }
        }
    }
    out
}

pub(crate) async fn live2d_all(st: &AppState) -> Vec<Live2dModel> {
    let roots = static_roots(st);
    let data = st.data_dir().to_path_buf();
    let ws = st.opts.workshop_dir.clone();
    tokio::task::spawn_blocking(move || live2d_models_blocking(&roots, &data, ws.as_deref()))
        .await
        .unwrap_or_default()
}

/// The model named `name_or_path` (a folder name, or a model URL path).
pub async fn find_live2d(st: &AppState, name_or_path: &str) -> Option<Live2dModel> {
    let key = name_or_path.trim();
    if key.is_empty() {
        return None;
    }
    live2d_all(st)
        .await
        .into_iter()
        .find(|m| m.name == key || m.path == key)
}

/// The served path of the model named `name` (what page_config passes through).
pub async fn live2d_path_of(st: &AppState, name: &str) -> Option<String> {
    if name.starts_with('/') {
        return Some(name.to_string());
    }
    find_live2d(st, name).await.map(|m| m.path)
}

pub(crate) fn files_with_ext(dir: &Path, ext: &str) -> Vec<(String, u64)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(String, u64)> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.to_ascii_lowercase()
                .ends_with(ext)
                .then(|| (n, e.metadata().map(|m| m.len()).unwrap_or(0)))
        })
        .collect();
    v.sort();
    v
}

/// The folder of the Live2D model `name` on disk, with its model file.
pub(crate) fn live2d_dir(roots: &[PathBuf], data: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    let mut all: Vec<PathBuf> = roots.to_vec();
    all.push(data.join(USER_LIVE2D));
    for root in all {
        for (n, rel) in scan_live2d(&root, 3) {
            if n == name {
                let file = root.join(&rel);
                let dir = file.parent()?.to_path_buf();
                return Some((dir, file));
            }
        }
    }
    None
}

/// `f` of the folder of the Live2D model `name`, off the async threads;
/// `None` when there is no such model.
pub(crate) async fn in_live2d_dir<T: Send + 'static>(
    st: &AppState,
    name: String,
    f: impl FnOnce(&Path) -> T + Send + 'static,
) -> Option<T> {
    let roots = static_roots(st);
    let data = st.data_dir().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let (dir, _) = live2d_dir(&roots, &data, &name)?;
        Some(f(&dir))
    })
    .await
    .ok()
    .flatten()
}

pub(crate) fn walk_files(dir: &Path, suffix: &str, depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, level)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if level < depth {
                    stack.push((p, level + 1));
                }
            } else if p.to_string_lossy().ends_with(suffix) {
                if let Ok(rel) = p.strip_prefix(dir) {
                    out.push(url_path("", rel).trim_start_matches('/').to_string());
                }
            }
        }
    }
    out.sort();
    out
}

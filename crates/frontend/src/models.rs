//! Live2D and VRM model lists and the user mounts the pages load them from
//! (reference frontend.md § 3.6, § 1.3).
//!
//! Live2D models are folders holding a `*.model3.json`: found under the served
//! static roots (`--frontend-dir`'s `static/`, then the bundle's `static/`, at most
//! three levels deep; URL `/static/<rel>`), the data dir's `user_live2d/` (URL
//! `/user_live2d/<rel>`) and workshop items (`/workshop/<item>/<rel>`). VRM models are
//! `static/vrm/*.vrm` (project) and `<data>/user_vrm/*.vrm` (user); animations
//! `static/vrm/animation/*.vrma` and `<data>/user_vrm/animation/*.vrma`.

use std::path::{Path, PathBuf};

use axum::extract::{Path as UrlPath, RawQuery, Request, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use companiond_core::envelope::ok_json;
use companiond_core::static_files::serve_contained;
use companiond_core::{Api, AppState};
use serde_json::{json, Value};

/// Data-dir folder of user Live2D models (`/user_live2d/...`).
pub const USER_LIVE2D: &str = "user_live2d";
/// Data-dir folder of user VRM models and animations (`/user_vrm/...`).
pub const USER_VRM: &str = "user_vrm";
/// The model name reported when none is bound.
pub const DEFAULT_LIVE2D_NAME: &str = "yui-lolita";

/// The static roots in precedence order: `(filesystem dir, URL prefix)`.
fn static_roots(st: &AppState) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(f) = &st.opts.frontend_dir {
        v.push(f.join("static"));
    }
    v.push(st.bundle_dir().join("static"));
    v
}

fn url_path(prefix: &str, rel: &Path) -> String {
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("{prefix}/{}", parts.join("/"))
}

/// Folders under `root` (to `depth` levels) holding a `*.model3.json`:
/// `(folder name, path of the model file relative to root)`.
fn scan_live2d(root: &Path, depth: usize) -> Vec<(String, PathBuf)> {
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

/// Every Live2D model: `[{name, display_name, path, source, item_id?}]`.
pub fn live2d_models_blocking(
    roots: &[PathBuf],
    data: &Path,
    workshop: Option<&Path>,
) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for root in roots {
        for (name, rel) in scan_live2d(root, 3) {
            if seen.insert(name.clone()) {
                out.push(json!({"name": name, "display_name": name,
                                "path": url_path("/static", &rel), "source": "static"}));
            }
        }
    }
    for (name, rel) in scan_live2d(&data.join(USER_LIVE2D), 2) {
        out.push(json!({"name": name, "display_name": name,
                        "path": url_path("/user_live2d", &rel), "source": "documents"}));
    }
    if let Some(ws) = workshop {
        if let Ok(rd) = std::fs::read_dir(ws) {
            let mut items: Vec<_> = rd.flatten().filter(|e| e.path().is_dir()).collect();
            items.sort_by_key(|e| e.file_name());
            for item in items {
                let id = item.file_name().to_string_lossy().into_owned();
                for (name, rel) in scan_live2d(&item.path(), 3) {
                    out.push(json!({"name": name, "display_name": name,
                                    "path": url_path(&format!("/workshop/{id}"), &rel),
                                    "source": "steam_workshop", "item_id": id}));
                }
            }
        }
    }
    out
}

async fn live2d_all(st: &AppState) -> Vec<Value> {
    let roots = static_roots(st);
    let data = st.data_dir().to_path_buf();
    let ws = st.opts.workshop_dir.clone();
    tokio::task::spawn_blocking(move || live2d_models_blocking(&roots, &data, ws.as_deref()))
        .await
        .unwrap_or_default()
}

/// The model named `name_or_path` (a folder name, or a model URL path).
pub async fn find_live2d(st: &AppState, name_or_path: &str) -> Option<Value> {
    let key = name_or_path.trim();
    if key.is_empty() {
        return None;
    }
    live2d_all(st).await.into_iter().find(|m| {
        m.get("name").and_then(Value::as_str) == Some(key)
            || m.get("path").and_then(Value::as_str) == Some(key)
    })
}

/// The served path of the model named `name` (what page_config passes through).
pub async fn live2d_path_of(st: &AppState, name: &str) -> Option<String> {
    if name.starts_with('/') {
        return Some(name.to_string());
    }
    find_live2d(st, name)
        .await
        .and_then(|m| m.get("path").and_then(Value::as_str).map(str::to_string))
}

async fn live2d_models(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let models = live2d_all(&st).await;
    let simple = crate::pages::query_param(q.as_deref().unwrap_or(""), "simple")
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"));
    if simple {
        let names: Vec<Value> = models
            .iter()
            .filter_map(|m| m.get("name").cloned())
            .collect();
        return ok_json(json!({"success": true, "models": names}));
    }
    ok_json(Value::Array(models))
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<(String, u64)> {
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

async fn live2d_user_models(State(st): State<AppState>) -> Response {
    let data = st.data_dir().to_path_buf();
    let models = tokio::task::spawn_blocking(move || {
        let root = data.join(USER_LIVE2D);
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&root) {
            let mut dirs: Vec<_> = rd.flatten().filter(|e| e.path().is_dir()).collect();
            dirs.sort_by_key(|e| e.file_name());
            for d in dirs {
                let name = d.file_name().to_string_lossy().into_owned();
                match scan_live2d(&d.path(), 2).into_iter().next() {
                    Some((_, rel)) => out.push(json!({"name": name,
                        "path": url_path(&format!("/user_live2d/{name}"), &rel),
                        "source": "user_documents"})),
                    None => out.push(json!({"name": name, "path": "",
                        "source": "user_documents", "broken": true})),
                }
            }
        }
        for (f, _) in files_with_ext(&data.join(USER_VRM), ".vrm") {
            let stem = f
                .trim_end_matches(".vrm")
                .trim_end_matches(".VRM")
                .to_string();
            out.push(json!({"name": stem, "path": format!("/user_vrm/{f}"),
                            "source": "user_documents", "type": "vrm"}));
        }
        out
    })
    .await
    .unwrap_or_default();
    ok_json(json!({"success": true, "models": models}))
}

/// The folder of the Live2D model `name` on disk, with its model file.
fn live2d_dir(roots: &[PathBuf], data: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
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

fn walk_files(dir: &Path, suffix: &str, depth: usize) -> Vec<String> {
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

async fn live2d_model_files(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    let roots = static_roots(&st);
    let data = st.data_dir().to_path_buf();
    let r = tokio::task::spawn_blocking(move || {
        let (dir, _) = live2d_dir(&roots, &data, &name)?;
        Some((
            walk_files(&dir, ".motion3.json", 3),
            walk_files(&dir, ".exp3.json", 3),
        ))
    })
    .await
    .ok()
    .flatten();
    match r {
        Some((motions, exps)) => {
            ok_json(json!({"success": true, "motion_files": motions, "expression_files": exps}))
        }
        None => companiond_core::envelope::SuccessError::new("no Live2D model of that name")
            .code("model_not_found")
            .with("motion_files", Vec::<String>::new())
            .with("expression_files", Vec::<String>::new())
            .status(axum::http::StatusCode::NOT_FOUND),
    }
}

async fn live2d_emotion_mapping(UrlPath(_name): UrlPath<String>) -> Response {
    ok_json(json!({"success": true, "config": {"motions": {}, "expressions": {}}}))
}

async fn vrm_models(State(st): State<AppState>) -> Response {
    let roots = static_roots(&st);
    let data = st.data_dir().to_path_buf();
    let models = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for root in &roots {
            for (f, size) in files_with_ext(&root.join("vrm"), ".vrm") {
                if seen.insert(f.clone()) {
                    let url = format!("/static/vrm/{f}");
                    out.push(json!({"name": f.trim_end_matches(".vrm"), "filename": f,
                        "path": url, "url": url, "type": "vrm", "size": size,
                        "location": "project"}));
                }
            }
        }
        for (f, size) in files_with_ext(&data.join(USER_VRM), ".vrm") {
            let url = format!("/user_vrm/{f}");
            out.push(json!({"name": f.trim_end_matches(".vrm"), "filename": f,
                "path": url, "url": url, "type": "vrm", "size": size, "location": "user"}));
        }
        out
    })
    .await
    .unwrap_or_default();
    ok_json(json!({"success": true, "models": models}))
}

async fn vrm_animations(State(st): State<AppState>) -> Response {
    let roots = static_roots(&st);
    let data = st.data_dir().to_path_buf();
    let anims = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for root in &roots {
            for (f, size) in files_with_ext(&root.join("vrm").join("animation"), ".vrma") {
                out.push(json!({"name": f.trim_end_matches(".vrma"), "filename": f,
                    "url": format!("/static/vrm/animation/{f}"), "type": "vrma", "size": size}));
            }
        }
        for (f, size) in files_with_ext(&data.join(USER_VRM).join("animation"), ".vrma") {
            out.push(json!({"name": f.trim_end_matches(".vrma"), "filename": f,
                "url": format!("/user_vrm/animation/{f}"), "type": "vrma", "size": size}));
        }
        out
    })
    .await
    .unwrap_or_default();
    ok_json(json!({"success": true, "animations": anims}))
}

async fn vrm_config() -> Response {
    ok_json(json!({"success": true, "paths": {
        "user_vrm": "/user_vrm", "static_vrm": "/static/vrm",
        "static_animation": "/static/vrm/animation", "user_animation": "/user_vrm/animation"}}))
}

async fn vrm_emotion_mapping(UrlPath(_name): UrlPath<String>) -> Response {
    ok_json(json!({"success": true, "config": {}}))
}

async fn user_live2d(
    State(st): State<AppState>,
    UrlPath(rel): UrlPath<String>,
    req: Request,
) -> Response {
    serve_contained(st.data_dir().join(USER_LIVE2D), &rel, req).await
}

async fn user_vrm(
    State(st): State<AppState>,
    UrlPath(rel): UrlPath<String>,
    req: Request,
) -> Response {
    serve_contained(st.data_dir().join(USER_VRM), &rel, req).await
}

/// The routes and the user mounts.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "frontend")
        .get(
            "/api/live2d/models",
            "Live2D models (a bare array; ?simple=true: names)",
            live2d_models,
        )
        .get(
            "/api/live2d/user_models",
            "user Live2D models and user VRM files",
            live2d_user_models,
        )
        .get(
            "/api/live2d/model_files/{name}",
            "motion and expression files of a Live2D model",
            live2d_model_files,
        )
        .get(
            "/api/live2d/emotion_mapping/{name}",
            "emotion mapping of a Live2D model (empty)",
            live2d_emotion_mapping,
        )
        .get(
            "/api/model/vrm/models",
            "VRM models (project and user)",
            vrm_models,
        )
        .get(
            "/api/model/vrm/animations",
            "VRM animations (project and user)",
            vrm_animations,
        )
        .get(
            "/api/model/vrm/config",
            "where VRM files are served",
            vrm_config,
        )
        .get(
            "/api/model/vrm/emotion_mapping/{name}",
            "emotion mapping of a VRM model (empty)",
            vrm_emotion_mapping,
        )
        .raw(
            Router::new()
                .route("/user_live2d/{*path}", get(user_live2d))
                .route("/user_vrm/{*path}", get(user_vrm)),
        )
}

//! Live2D and VRM model lists and the user mounts the pages load them from
//! (docs/frontend.md).
//!
//! Live2D models are folders holding a `*.model3.json`: found under the served
//! static roots (`--frontend-dir`'s `static/`, then the bundle's `static/`, at most
//! three levels deep; URL `/static/<rel>`), the data dir's `user_live2d/` (URL
//! `/user_live2d/<rel>`) and workshop items (`/workshop/<item>/<rel>`). VRM models are
//! `static/vrm/*.vrm` (project) and `<data>/user_vrm/*.vrm` (user); animations
//! `static/vrm/animation/*.vrma` and `<data>/user_vrm/animation/*.vrma`.

use std::path::{Path, PathBuf};

use axum::extract::{Path as UrlPath, RawQuery, Request, State};
use axum::routing::{get, MethodRouter};
use axum::Json;
use companiond_core::envelope::JsonBody;
use companiond_core::static_files::serve_contained;
use companiond_core::AppState;
use serde_json::{json, Value};

use crate::error::{Answer, FrontendError};

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

pub(crate) async fn live2d_all(st: &AppState) -> Vec<Value> {
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

pub(crate) async fn live2d_models(
    State(st): State<AppState>,
    RawQuery(q): RawQuery,
) -> Json<Value> {
    let models = live2d_all(&st).await;
    let simple = crate::pages::query_param(q.as_deref().unwrap_or(""), "simple")
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"));
    if simple {
        let names: Vec<Value> = models
            .iter()
            .filter_map(|m| m.get("name").cloned())
            .collect();
        return Json(json!({"success": true, "models": names}));
    }
    Json(Value::Array(models))
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

pub(crate) async fn live2d_user_models(State(st): State<AppState>) -> Json<Value> {
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
    Json(json!({"success": true, "models": models}))
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

pub(crate) async fn live2d_model_files(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Json<Value>> {
    let r = in_live2d_dir(&st, name, |dir| {
        (
            walk_files(dir, ".motion3.json", 3),
            walk_files(dir, ".exp3.json", 3),
        )
    })
    .await;
    match r {
        Some((motions, exps)) => Ok(Json(
            json!({"success": true, "motion_files": motions, "expression_files": exps}),
        )),
        None => Err(FrontendError::Live2dModelNotFound),
    }
}

pub(crate) async fn live2d_emotion_mapping(UrlPath(_name): UrlPath<String>) -> Json<Value> {
    Json(json!({"success": true, "config": {"motions": {}, "expressions": {}}}))
}

/// `<model dir>/parameters.json` of a Live2D model (what the parameter editor
/// saved): `{success, parameters}`, `{}` when there is none. An unknown model is
/// the original's 200 `{success:false}`.
pub(crate) async fn live2d_load_parameters(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Json<Value> {
    let r = in_live2d_dir(&st, name, |dir| {
        std::fs::read(dir.join("parameters.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}))
    })
    .await;
    match r {
        Some(p) => Json(json!({"success": true, "parameters": p})),
        None => Json(
            json!({"success": false, "error": "no Live2D model of that name",
                               "parameters": {}}),
        ),
    }
}

/// The parameters and parameter groups of a Live2D model, from its `*.cdi3.json`.
pub(crate) async fn live2d_model_parameters(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Json<Value> {
    let roots = static_roots(&st);
    let data = st.data_dir().to_path_buf();
    let r = tokio::task::spawn_blocking(move || {
        let (dir, _) = live2d_dir(&roots, &data, &name).ok_or("no Live2D model of that name")?;
        let cdi = walk_files(&dir, ".cdi3.json", 0)
            .into_iter()
            .next()
            .ok_or("the model has no .cdi3.json file")?;
        let v: Value = std::fs::read(dir.join(&cdi))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or("the .cdi3.json file is not valid JSON")?;
        let list = |key: &str| {
            v.get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let params: Vec<Value> = list("Parameters")
            .iter()
            .filter_map(|p| {
                let id = p.get("Id")?.clone();
                Some(json!({"id": id,
                    "groupId": p.get("GroupId").cloned().unwrap_or(json!("")),
                    "name": p.get("Name").cloned().unwrap_or(id.clone())}))
            })
            .collect();
        let mut groups = serde_json::Map::new();
        for g in list("ParameterGroups") {
            if let Some(id) = g.get("Id").and_then(Value::as_str) {
                groups.insert(
                    id.to_string(),
                    json!({"id": id,
                    "name": g.get("Name").cloned().unwrap_or(json!(id))}),
                );
            }
        }
        Ok::<_, &str>(json!({"success": true, "parameters": params, "parameter_groups": groups}))
    })
    .await
    .unwrap_or(Err("the model could not be read"));
    match r {
        Ok(v) => Json(v),
        Err(e) => Json(json!({"success": false, "error": e})),
    }
}

/// Largest VRM model or animation accepted by an upload (the original's 200 MB).
pub const MAX_VRM_BYTES: u64 = 200 << 20;

fn upload_refused(msg: impl Into<String>, code: &'static str) -> FrontendError {
    FrontendError::UploadRefused {
        code,
        error: msg.into(),
    }
}

/// `POST /api/model/vrm/upload` (`.vrm` into `<data>/user_vrm/`) and
/// `/upload_animation` (`.vrma` into `<data>/user_vrm/animation/`): the part named
/// `file`, stored under its base name; a taken name, a wrong extension, a bad
/// name or more than [`MAX_VRM_BYTES`] → 400, nothing stored.
pub(crate) async fn vrm_upload_model(
    State(st): State<AppState>,
    req: Request,
) -> Answer<Json<Value>> {
    vrm_upload(st, req, false).await
}

/// `POST /api/model/vrm/upload_animation`: [`vrm_upload`] of a `.vrma` animation.
pub(crate) async fn vrm_upload_animation(
    State(st): State<AppState>,
    req: Request,
) -> Answer<Json<Value>> {
    vrm_upload(st, req, true).await
}

async fn vrm_upload(st: AppState, req: Request, animation: bool) -> Answer<Json<Value>> {
    use futures::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let (ext, label) = if animation {
        (".vrma", "VRM animation")
    } else {
        (".vrm", "VRM model")
    };
    let mut mp = match companiond_core::multipart::multipart(req).await {
        Ok(m) => m,
        Err(e) => return Err(upload_refused(e, "invalid_multipart")),
    };
    let mut field = loop {
        match mp.next_field().await {
            Ok(Some(f)) if f.name() == Some("file") => break f,
            Ok(Some(_)) => continue,
            Ok(None) => {
                return Err(upload_refused(
                    "no file was uploaded (part \"file\")",
                    "no_file",
                ))
            }
            Err(e) => {
                return Err(upload_refused(
                    format!("invalid multipart body: {e}"),
                    "invalid_multipart",
                ))
            }
        }
    };
    let raw = field.file_name().unwrap_or("").to_string();
    let name = raw
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if !name.to_ascii_lowercase().ends_with(ext) || name.len() <= ext.len() {
        return Err(upload_refused(
            format!("the file must be a {ext} file"),
            "invalid_extension",
        ));
    }
    if let Err(e) = companiond_core::paths::check_file_name(&name) {
        return Err(upload_refused(
            format!("invalid file name: {e}"),
            "invalid_name",
        ));
    }
    let mut dir = st.data_dir().join(USER_VRM);
    if animation {
        dir = dir.join("animation");
    }
    let target = dir.join(&name);
    let tmp = dir.join(format!(
        ".{name}.{}.tmp",
        companiond_core::options::random_token()
    ));
    let written = async {
        tokio::fs::create_dir_all(&dir).await?;
        if tokio::fs::try_exists(&target).await.unwrap_or(false) {
            return Ok(Err(format!(
                "{label} {name} already exists: delete or rename the existing one first"
            )));
        }
        let mut f = tokio::fs::File::create(&tmp).await?;
        let mut total: u64 = 0;
        while let Some(chunk) = field.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => return Ok(Err(format!("the upload was interrupted: {e}"))),
            };
            total += chunk.len() as u64;
            if total > MAX_VRM_BYTES {
                return Ok(Err(format!(
                    "the file is too large (at most {} MB)",
                    MAX_VRM_BYTES >> 20
                )));
            }
            f.write_all(&chunk).await?;
        }
        f.sync_all().await?;
        drop(f);
        // No-clobber publish: a concurrent upload of the same name loses.
        match tokio::fs::hard_link(&tmp, &target).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Ok(Err(format!("{label} {name} already exists")))
            }
            Err(_) => {
                if tokio::fs::try_exists(&target).await.unwrap_or(false) {
                    return Ok(Err(format!("{label} {name} already exists")));
                }
                tokio::fs::rename(&tmp, &target).await?;
            }
        }
        Ok::<_, std::io::Error>(Ok(total))
    }
    .await;
    let _ = tokio::fs::remove_file(&tmp).await;
    match written {
        Ok(Ok(size)) if animation => Ok(Json(json!({"success": true,
            "message": format!("{label} {name} uploaded"), "filename": name,
            "file_path": format!("/user_vrm/animation/{name}"), "file_size": size}))),
        Ok(Ok(size)) => Ok(Json(json!({"success": true,
            "message": format!("{label} {name} uploaded"),
            "model_name": name[..name.len() - ext.len()].to_string(),
            "model_url": format!("/user_vrm/{name}"), "file_size": size}))),
        Ok(Err(msg)) => Err(upload_refused(msg, "upload_refused")),
        Err(e) => Err(FrontendError::Storage(format!(
            "cannot store the {label}: {e}"
        ))),
    }
}

/// `DELETE /api/model/vrm/model` `{url}`: a user VRM model (`/user_vrm/<file>.vrm`).
pub(crate) async fn vrm_delete(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Value>,
) -> Answer<Json<Value>> {
    let bad = |m: &str| Err(FrontendError::BadRequest(m.into()));
    let Some(url) = body
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    else {
        return bad("url (a /user_vrm/<file>.vrm path) is required");
    };
    let Some(rel) = url.strip_prefix("/user_vrm/") else {
        return bad("only imported models (/user_vrm/...) can be deleted");
    };
    if rel.contains(['/', '\\'])
        || !rel.to_ascii_lowercase().ends_with(".vrm")
        || companiond_core::paths::check_file_name(rel).is_err()
    {
        return bad("invalid model path");
    }
    let target = st.data_dir().join(USER_VRM).join(rel);
    match tokio::fs::remove_file(&target).await {
        Ok(()) => Ok(Json(json!({"success": true,
            "message": format!("VRM model {} deleted", &rel[..rel.len() - 4])}))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(FrontendError::NotFound("no such model file".into()))
        }
        Err(e) => Err(FrontendError::Storage(format!(
            "cannot delete the model: {e}"
        ))),
    }
}

pub(crate) async fn vrm_models(State(st): State<AppState>) -> Json<Value> {
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
    Json(json!({"success": true, "models": models}))
}

pub(crate) async fn vrm_animations(State(st): State<AppState>) -> Json<Value> {
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
    Json(json!({"success": true, "animations": anims}))
}

pub(crate) async fn vrm_config() -> Json<Value> {
    Json(json!({"success": true, "paths": {
        "user_vrm": "/user_vrm", "static_vrm": "/static/vrm",
        "static_animation": "/static/vrm/animation", "user_animation": "/user_vrm/animation"}}))
}

pub(crate) async fn vrm_emotion_mapping(UrlPath(_name): UrlPath<String>) -> Json<Value> {
    Json(json!({"success": true, "config": {}}))
}

/// `GET /user_live2d/{*path}`, `/user_vrm/{*path}`: a file below
/// `<data>/<dir>`, served by core's contained static-file route.
pub(crate) fn user_files(dir: &'static str) -> MethodRouter<AppState> {
    get(
        move |State(st): State<AppState>, UrlPath(rel): UrlPath<String>, req: Request| async move {
            serve_contained(st.data_dir().join(dir), &rel, req).await
        },
    )
}

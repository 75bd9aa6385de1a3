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

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Json;
use companiond_core::envelope::QueryOf;
use companiond_core::envelope::{body_refused, loose, BodyFault, BodyOf, BodyRejection};
use companiond_core::envelope::{SuccessEnvelope, SuccessError};
use companiond_core::static_files::serve_contained;
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::characters::cards::{message, Message};
use crate::error::{Answer, FrontendError};

// ------------------------------------------------------------------ bodies and answers

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

/// `?simple=`: `true`, `1` or `yes` lists the names only.
#[derive(Deserialize, IntoParams)]
pub(crate) struct SimpleQuery {
    simple: Option<String>,
}

companiond_core::query_rejected!(
    crate::error::FrontendError,
    crate::error::FrontendError::BadRequest => SimpleQuery
);

/// The Live2D models: a bare array, or with `?simple=true` their names.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum Live2dModels {
    Full(Vec<Live2dModel>),
    Names(Live2dNames),
}

/// The names of the Live2D models.
#[derive(Serialize, ToSchema)]
pub(crate) struct Live2dNames {
    success: bool,
    models: Vec<String>,
}

/// A user Live2D model folder (`broken` when it has no model file) or a user VRM file (`type: vrm`).
#[derive(Serialize, ToSchema)]
pub(crate) struct UserModel {
    name: String,
    path: String,
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    broken: Option<bool>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    kind: Option<&'static str>,
}

/// The user's Live2D models and VRM files.
#[derive(Serialize, ToSchema)]
pub(crate) struct UserModels {
    success: bool,
    models: Vec<UserModel>,
}

/// A Live2D model's motion and expression files (paths in its folder).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "motion_files": ["motions/idle.motion3.json"],
    "expression_files": ["exp/smile.exp3.json"]}))]
pub(crate) struct ModelFiles {
    success: bool,
    motion_files: Vec<String>,
    expression_files: Vec<String>,
}

/// A Live2D model's emotion mapping (empty).
#[derive(Serialize, ToSchema)]
pub(crate) struct Live2dEmotionMapping {
    success: bool,
    config: Live2dEmotionConfig,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct Live2dEmotionConfig {
    #[schema(value_type = Object)]
    motions: Map<String, Value>,
    #[schema(value_type = Object)]
    expressions: Map<String, Value>,
}

/// A VRM model (`location`: `project` for `static/vrm/`, `user` for the data dir's `user_vrm/`).
#[derive(Serialize, ToSchema)]
pub(crate) struct VrmModel {
    name: String,
    filename: String,
    path: String,
    url: String,
    #[serde(rename = "type")]
    kind: &'static str,
    size: u64,
    location: &'static str,
}

/// The VRM models.
#[derive(Serialize, ToSchema)]
pub(crate) struct VrmModels {
    success: bool,
    models: Vec<VrmModel>,
}

/// A VRM animation (`.vrma`).
#[derive(Serialize, ToSchema)]
pub(crate) struct VrmAnimation {
    name: String,
    filename: String,
    url: String,
    #[serde(rename = "type")]
    kind: &'static str,
    size: u64,
}

/// The VRM animations.
#[derive(Serialize, ToSchema)]
pub(crate) struct VrmAnimations {
    success: bool,
    animations: Vec<VrmAnimation>,
}

/// Where VRM files are served.
#[derive(Serialize, ToSchema)]
pub(crate) struct VrmConfig {
    success: bool,
    paths: VrmPaths,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct VrmPaths {
    user_vrm: &'static str,
    static_vrm: &'static str,
    static_animation: &'static str,
    user_animation: &'static str,
}

/// A VRM model's emotion mapping (empty).
#[derive(Serialize, ToSchema)]
pub(crate) struct VrmEmotionMapping {
    success: bool,
    #[schema(value_type = Object)]
    config: Map<String, Value>,
}

/// A Live2D model's saved parameters (`{}` when none).
#[derive(Serialize, ToSchema)]
pub(crate) struct SavedParameters {
    success: bool,
    /// Parameter values by id, as the parameter editor saved them.
    #[schema(value_type = Object)]
    parameters: Value,
}

/// A Live2D model's parameters and parameter groups (from its `.cdi3.json`).
#[derive(Serialize, ToSchema)]
pub(crate) struct ModelParameters {
    success: bool,
    parameters: Vec<ModelParameter>,
    /// Groups by id.
    #[schema(value_type = std::collections::BTreeMap<String, ParameterGroup>)]
    parameter_groups: indexmap::IndexMap<String, ParameterGroup>,
}

/// A parameter (`Id`, `GroupId` and `Name` of the `.cdi3.json`; the name
/// defaults to the id, the group to empty).
#[derive(Serialize, ToSchema)]
pub(crate) struct ModelParameter {
    id: String,
    #[serde(rename = "groupId")]
    group_id: String,
    name: String,
}

/// A parameter group (`Id` and `Name`; the name defaults to the id).
#[derive(Serialize, ToSchema)]
pub(crate) struct ParameterGroup {
    id: String,
    name: String,
}

/// An uploaded VRM model.
#[derive(Serialize, ToSchema)]
pub(crate) struct VrmUploaded {
    success: bool,
    message: String,
    model_name: String,
    model_url: String,
    file_size: u64,
}

/// An uploaded VRM animation.
#[derive(Serialize, ToSchema)]
#[schema(as = FrontendAnimationUploaded)]
pub(crate) struct AnimationUploaded {
    success: bool,
    message: String,
    filename: String,
    file_path: String,
    file_size: u64,
}

/// `{url}`: the imported model to delete.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"url": "/user_vrm/Alicia.vrm"}))]
pub(crate) struct VrmDeleteBody {
    /// `/user_vrm/<file>.vrm` (empty or not text: missing).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, pattern = "^/user_vrm/[^/\\\\]+\\.[vV][rR][mM]$")]
    url: Option<String>,
}

const VRM_URL_REQUIRED: &str = "url (a /user_vrm/<file>.vrm path) is required";

/// JSON that is not an object names no `url` (400, as a missing one); a body
/// that is not JSON is answered as `JsonBody` does.
impl BodyRejection for VrmDeleteBody {
    type Error = Response;
    fn rejected(fault: BodyFault) -> Response {
        match fault {
            BodyFault::NotObject => {
                FrontendError::BadRequest(VRM_URL_REQUIRED.into()).into_response()
            }
            f => body_refused::<SuccessEnvelope>(f),
        }
    }
}

/// `200 {success:false, error, ...}`: the original's answer for a model it cannot read.
fn not_read(body: SuccessError) -> Response {
    body.status(StatusCode::OK)
}

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

pub(crate) async fn live2d_models(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<SimpleQuery>,
) -> Json<Live2dModels> {
    let models = live2d_all(&st).await;
    let simple = q
        .simple
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"));
    if simple {
        return Json(Live2dModels::Names(Live2dNames {
            success: true,
            models: models.into_iter().map(|m| m.name).collect(),
        }));
    }
    Json(Live2dModels::Full(models))
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

pub(crate) async fn live2d_user_models(State(st): State<AppState>) -> Json<UserModels> {
    let data = st.data_dir().to_path_buf();
    let models = tokio::task::spawn_blocking(move || {
        let root = data.join(USER_LIVE2D);
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&root) {
            let mut dirs: Vec<_> = rd.flatten().filter(|e| e.path().is_dir()).collect();
            dirs.sort_by_key(|e| e.file_name());
            for d in dirs {
                let name = d.file_name().to_string_lossy().into_owned();
                out.push(match scan_live2d(&d.path(), 2).into_iter().next() {
                    Some((_, rel)) => UserModel {
                        path: url_path(&format!("/user_live2d/{name}"), &rel),
                        name,
                        source: "user_documents",
                        broken: None,
                        kind: None,
                    },
                    None => UserModel {
                        name,
                        path: String::new(),
                        source: "user_documents",
                        broken: Some(true),
                        kind: None,
                    },
                });
            }
        }
        for (f, _) in files_with_ext(&data.join(USER_VRM), ".vrm") {
            let stem = f
                .trim_end_matches(".vrm")
                .trim_end_matches(".VRM")
                .to_string();
            out.push(UserModel {
                name: stem,
                path: format!("/user_vrm/{f}"),
                source: "user_documents",
                broken: None,
                kind: Some("vrm"),
            });
        }
        out
    })
    .await
    .unwrap_or_default();
    Json(UserModels {
        success: true,
        models,
    })
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
) -> Answer<Json<ModelFiles>> {
    let r = in_live2d_dir(&st, name, |dir| {
        (
            walk_files(dir, ".motion3.json", 3),
            walk_files(dir, ".exp3.json", 3),
        )
    })
    .await;
    match r {
        Some((motion_files, expression_files)) => Ok(Json(ModelFiles {
            success: true,
            motion_files,
            expression_files,
        })),
        None => Err(FrontendError::Live2dModelNotFound),
    }
}

pub(crate) async fn live2d_emotion_mapping(
    UrlPath(_name): UrlPath<String>,
) -> Json<Live2dEmotionMapping> {
    Json(Live2dEmotionMapping {
        success: true,
        config: Live2dEmotionConfig {
            motions: Map::new(),
            expressions: Map::new(),
        },
    })
}

/// `<model dir>/parameters.json` of a Live2D model (what the parameter editor
/// saved): `{success, parameters}`, `{}` when there is none. An unknown model is
/// the original's 200 `{success:false}`.
pub(crate) async fn live2d_load_parameters(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    let r = in_live2d_dir(&st, name, |dir| {
        std::fs::read(dir.join("parameters.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}))
    })
    .await;
    match r {
        Some(parameters) => Json(SavedParameters {
            success: true,
            parameters,
        })
        .into_response(),
        None => not_read(
            SuccessError::new("no Live2D model of that name").with("parameters", json!({})),
        ),
    }
}

/// The parameters and parameter groups of a Live2D model, from its `*.cdi3.json`.
pub(crate) async fn live2d_model_parameters(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Response {
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
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        let parameters: Vec<ModelParameter> = list("Parameters")
            .iter()
            .filter_map(|p| {
                let id = text(p, "Id")?;
                Some(ModelParameter {
                    group_id: text(p, "GroupId").unwrap_or_default(),
                    name: text(p, "Name").unwrap_or_else(|| id.clone()),
                    id,
                })
            })
            .collect();
        let mut parameter_groups = indexmap::IndexMap::new();
        for g in list("ParameterGroups") {
            if let Some(id) = text(&g, "Id") {
                let name = text(&g, "Name").unwrap_or_else(|| id.clone());
                parameter_groups.insert(id.clone(), ParameterGroup { id, name });
            }
        }
        Ok::<_, &str>(ModelParameters {
            success: true,
            parameters,
            parameter_groups,
        })
    })
    .await
    .unwrap_or(Err("the model could not be read"));
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => not_read(SuccessError::new(e)),
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
) -> Answer<Json<VrmUploaded>> {
    let (name, size) = vrm_upload(st, req, false).await?;
    let stem = name[..name.len() - ".vrm".len()].to_string();
    Ok(Json(VrmUploaded {
        success: true,
        message: format!("VRM model {name} uploaded"),
        model_name: stem,
        model_url: format!("/user_vrm/{name}"),
        file_size: size,
    }))
}

/// `POST /api/model/vrm/upload_animation`: [`vrm_upload`] of a `.vrma` animation.
pub(crate) async fn vrm_upload_animation(
    State(st): State<AppState>,
    req: Request,
) -> Answer<Json<AnimationUploaded>> {
    let (name, size) = vrm_upload(st, req, true).await?;
    Ok(Json(AnimationUploaded {
        success: true,
        message: format!("VRM animation {name} uploaded"),
        file_path: format!("/user_vrm/animation/{name}"),
        filename: name,
        file_size: size,
    }))
}

/// Store the upload: its file name (ending in the extension, longer than it)
/// and size.
async fn vrm_upload(st: AppState, req: Request, animation: bool) -> Answer<(String, u64)> {
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
        Ok(Ok(size)) => Ok((name, size)),
        Ok(Err(msg)) => Err(upload_refused(msg, "upload_refused")),
        Err(e) => Err(FrontendError::Storage(format!(
            "cannot store the {label}: {e}"
        ))),
    }
}

/// `DELETE /api/model/vrm/model` `{url}`: a user VRM model (`/user_vrm/<file>.vrm`).
pub(crate) async fn vrm_delete(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<VrmDeleteBody>,
) -> Answer<Json<Message>> {
    let bad = |m: &str| Err(FrontendError::BadRequest(m.into()));
    let Some(url) = body.url.as_deref().filter(|u| !u.is_empty()) else {
        return bad(VRM_URL_REQUIRED);
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
        Ok(()) => Ok(message(format!(
            "VRM model {} deleted",
            &rel[..rel.len() - 4]
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(FrontendError::NotFound("no such model file".into()))
        }
        Err(e) => Err(FrontendError::Storage(format!(
            "cannot delete the model: {e}"
        ))),
    }
}

pub(crate) async fn vrm_models(State(st): State<AppState>) -> Json<VrmModels> {
    let roots = static_roots(&st);
    let data = st.data_dir().to_path_buf();
    let models = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for root in &roots {
            for (f, size) in files_with_ext(&root.join("vrm"), ".vrm") {
                if seen.insert(f.clone()) {
                    out.push(VrmModel::new(f, "/static/vrm", size, "project"));
                }
            }
        }
        for (f, size) in files_with_ext(&data.join(USER_VRM), ".vrm") {
            out.push(VrmModel::new(f, "/user_vrm", size, "user"));
        }
        out
    })
    .await
    .unwrap_or_default();
    Json(VrmModels {
        success: true,
        models,
    })
}

impl VrmModel {
    /// The model file `f` served under `prefix`.
    fn new(f: String, prefix: &str, size: u64, location: &'static str) -> Self {
        let url = format!("{prefix}/{f}");
        VrmModel {
            name: f.trim_end_matches(".vrm").to_string(),
            filename: f,
            path: url.clone(),
            url,
            kind: "vrm",
            size,
            location,
        }
    }
}

impl VrmAnimation {
    /// The animation file `f` served under `prefix`.
    fn new(f: String, prefix: &str, size: u64) -> Self {
        VrmAnimation {
            name: f.trim_end_matches(".vrma").to_string(),
            url: format!("{prefix}/{f}"),
            filename: f,
            kind: "vrma",
            size,
        }
    }
}

pub(crate) async fn vrm_animations(State(st): State<AppState>) -> Json<VrmAnimations> {
    let roots = static_roots(&st);
    let data = st.data_dir().to_path_buf();
    let anims = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for root in &roots {
            for (f, size) in files_with_ext(&root.join("vrm").join("animation"), ".vrma") {
                out.push(VrmAnimation::new(f, "/static/vrm/animation", size));
            }
        }
        for (f, size) in files_with_ext(&data.join(USER_VRM).join("animation"), ".vrma") {
            out.push(VrmAnimation::new(f, "/user_vrm/animation", size));
        }
        out
    })
    .await
    .unwrap_or_default();
    Json(VrmAnimations {
        success: true,
        animations: anims,
    })
}

pub(crate) async fn vrm_config() -> Json<VrmConfig> {
    Json(VrmConfig {
        success: true,
        paths: VrmPaths {
            user_vrm: "/user_vrm",
            static_vrm: "/static/vrm",
            static_animation: "/static/vrm/animation",
            user_animation: "/user_vrm/animation",
        },
    })
}

pub(crate) async fn vrm_emotion_mapping(
    UrlPath(_name): UrlPath<String>,
) -> Json<VrmEmotionMapping> {
    Json(VrmEmotionMapping {
        success: true,
        config: Map::new(),
    })
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

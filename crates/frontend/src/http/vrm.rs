//! The VRM routes: model and animation lists, where they are served, the
//! (empty) emotion mapping, uploads of user models and animations (stored by
//! [`crate::models::store_vrm`]) and deletion of a user model.

use axum::extract::{Path as UrlPath, Request, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::SuccessEnvelope;
use companiond_core::envelope::{body_refused, loose, BodyFault, BodyOf, BodyRejection};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::characters::cards::{message, Message};
use crate::error::{Answer, FrontendError};
use crate::models::{files_with_ext, static_roots, store_vrm, upload_refused, USER_VRM};

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

/// The part named `file` of the upload `req`, stored by [`store_vrm`]: its
/// file name and size.
async fn vrm_upload(st: AppState, req: Request, animation: bool) -> Answer<(String, u64)> {
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
    store_vrm(st.data_dir(), &raw, &mut field, animation).await
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

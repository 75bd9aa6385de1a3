//! The Live2D routes: the model lists, a model's motion, expression and
//! parameter files, and its (empty) emotion mapping.

use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::QueryOf;
use companiond_core::envelope::SuccessError;
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::error::{Answer, FrontendError};
use crate::models::{
    files_with_ext, in_live2d_dir, live2d_all, live2d_dir, scan_live2d, static_roots, url_path,
    walk_files, Live2dModel, USER_LIVE2D, USER_VRM,
};

use super::not_read;

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

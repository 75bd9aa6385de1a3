//! The model bound to a character (Live2D, VRM, MMD or PNGTuber) and the
//! Live2D model a page shows for it.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{body_refused, loose, QueryOf, SuccessEnvelope};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::{IntoParams, ToSchema};

use super::cards::{message, Message};
use super::*;
use crate::models::Live2dModel;

// ------------------------------------------------------------------ bodies and answers

/// The model to bind: `model_type` `live2d` (default; `live2d` the model's
/// name or served path), `vrm`/`mmd`/`live3d` (`vrm` or `mmd` a served path under
/// `/user_<kind>/`, `/static/<kind>/` or `/workshop/`) or `pngtuber` (image
/// paths in `pngtuber` or flat keys). Only `live2d_idle_animation`: that alone
/// changes. Other keys are ignored.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"model_type": "live2d", "live2d": "yui-lolita"}))]
// The binding is decided by which keys are present (an idle-animation-only
// body, flat PNGTuber keys) and the values are kept as sent: every field is
// read as `Given` or as its value, and `bind_model` judges them in a fixed
// order (a text field of another type is a 400 naming it).
pub(crate) struct BindBody {
    /// `live2d`, `live3d`, `vrm`, `mmd` or `pngtuber` (any case).
    #[serde(default)]
    #[schema(
        value_type = Option<String>,
        pattern = "^ *([lL][iI][vV][eE][23][dD]|[vV][rR][mM]|[mM][mM][dD]|[pP][nN][gG][tT][uU][bB][eE][rR])? *$"
    )]
    model_type: Given<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    live2d: Given<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    live2d_item_id: Given<String>,
    /// The older spelling of `live2d_item_id`.
    #[serde(default)]
    #[schema(ignore)]
    item_id: Given<String>,
    #[serde(default, deserialize_with = "loose::present")]
    live2d_idle_animation: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    vrm: Given<String>,
    #[serde(default, deserialize_with = "loose::present")]
    vrm_animation: Option<Value>,
    /// One name or a list of names.
    #[serde(default, deserialize_with = "loose::present")]
    idle_animation: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    mmd: Given<String>,
    #[serde(default, deserialize_with = "loose::present")]
    mmd_animation: Option<Value>,
    #[serde(default, deserialize_with = "loose::present")]
    mmd_idle_animation: Option<Value>,
    /// Image paths by state (local served paths).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pngtuber: Given<Map<String, Value>>,
    /// Other keys (the flat PNGTuber image keys are read, the rest ignored).
    #[serde(flatten)]
    rest: Map<String, Value>,
}

companiond_core::body_rejected!(Response, body_refused::<SuccessEnvelope> => BindBody);

/// `?catgirl_name=`: whose model (default: the current character).
#[derive(Deserialize, IntoParams)]
pub(crate) struct ModelOf {
    catgirl_name: Option<String>,
}

companiond_core::query_rejected!(
    crate::error::FrontendError,
    crate::error::FrontendError::BadRequest => ModelOf
);

/// The Live2D model a character shows (the default model, `is_fallback`, when
/// it has none or its model is gone); `success:false` with `model_info: null`
/// when not even the default model exists.
#[derive(Serialize, ToSchema)]
pub(crate) struct CurrentLive2d {
    success: bool,
    catgirl_name: String,
    model_name: String,
    #[schema(required = true)]
    model_info: Option<Live2dModel>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    error: Option<&'static str>,
}

// ------------------------------------------------------------------ model binding

fn check_model_path(path: &str, kind: &str) -> Result<(), String> {
    let p = path.trim();
    let lower = p.to_ascii_lowercase();
    if p.contains("..") || lower.contains("://") || lower.starts_with("javascript:") {
        return Err(format!(
            "{kind} path must be a local served path without .."
        ));
    }
    let allowed = [
        format!("/user_{kind}/"),
        format!("/static/{kind}/"),
        "/workshop/".to_string(),
    ];
    if !allowed.iter().any(|a| p.starts_with(a.as_str())) {
        return Err(format!(
            "{kind} path must start with /user_{kind}/, /static/{kind}/ or /workshop/"
        ));
    }
    Ok(())
}

/// A text field, trimmed; `None` when absent, blank or not text.
fn str_field(v: &Given<String>) -> Option<&str> {
    v.value().map(|s| s.trim()).filter(|s| !s.is_empty())
}

pub(crate) async fn bind_model(
    State(st): State<AppState>,
    CharacterEdit { name, body }: CharacterEdit<BindBody>,
) -> Answer<Json<Message>> {
    existing(&st, &name)?;
    for (key, v) in [
        ("model_type", &body.model_type),
        ("live2d", &body.live2d),
        ("live2d_item_id", &body.live2d_item_id),
        ("item_id", &body.item_id),
        ("vrm", &body.vrm),
        ("mmd", &body.mmd),
    ] {
        if v.is_other() {
            return Err(bad(format!("{key} must be a string")));
        }
    }
    if body.pngtuber.is_other() {
        return Err(bad("pngtuber must be an object"));
    }
    let mut set = Map::new();
    let model_type = str_field(&body.model_type).map(str::to_ascii_lowercase);
    let idle_only = model_type.is_none()
        && body.live2d_idle_animation.is_some()
        && !body.live2d.is_given()
        && !body.vrm.is_given()
        && !body.mmd.is_given();
    if idle_only {
        set.insert(
            "live2d_idle_animation".into(),
            body.live2d_idle_animation.clone().unwrap_or(Value::Null),
        );
    } else {
        let model_type = match model_type.as_deref() {
            None | Some("live2d") => "live2d",
            Some("live3d" | "vrm" | "mmd") => "live3d",
            Some("pngtuber") => "pngtuber",
            Some(other) => return Err(bad(format!("unknown model_type {other:?}"))),
        };
        set.insert("model_type".into(), json!(model_type));
        match model_type {
            "live2d" => {
                let Some(l2d) = str_field(&body.live2d) else {
                    return Err(bad("live2d (the model name) is required"));
                };
                if l2d.contains("..") || l2d.contains("://") {
                    return Err(bad("invalid Live2D model name"));
                }
                let path = crate::models::live2d_path_of(&st, l2d).await;
                set.insert(
                    "live2d".into(),
                    json!(path.unwrap_or_else(|| l2d.to_string())),
                );
                let item = str_field(&body.live2d_item_id).or_else(|| str_field(&body.item_id));
                set.insert("live2d_item_id".into(), json!(item.unwrap_or("")));
                if let Some(v) = &body.live2d_idle_animation {
                    set.insert("live2d_idle_animation".into(), v.clone());
                }
            }
            "live3d" => {
                let vrm = str_field(&body.vrm);
                let mmd = str_field(&body.mmd);
                match (vrm, mmd) {
                    (Some(_), Some(_)) => return Err(bad("give either vrm or mmd, not both")),
                    (None, None) => return Err(bad("vrm or mmd (the model path) is required")),
                    (Some(v), None) => {
                        check_model_path(v, "vrm").map_err(bad)?;
                        set.insert("live3d_sub_type".into(), json!("vrm"));
                        set.insert("vrm".into(), json!(v));
                        if let Some(x) = &body.vrm_animation {
                            set.insert("vrm_animation".into(), x.clone());
                        }
                        set_idle(&mut set, body.idle_animation.as_ref(), "idleAnimation");
                    }
                    (None, Some(m)) => {
                        check_model_path(m, "mmd").map_err(bad)?;
                        set.insert("live3d_sub_type".into(), json!("mmd"));
                        set.insert("mmd".into(), json!(m));
                        if let Some(x) = &body.mmd_animation {
                            set.insert("mmd_animation".into(), x.clone());
                        }
                        set_idle(
                            &mut set,
                            body.mmd_idle_animation.as_ref(),
                            "mmd_idle_animation",
                        );
                    }
                }
            }
            _ => {
                let mut png = body.pngtuber.value().cloned().unwrap_or_default();
                for k in companiond_core::characters::PNGTUBER_IMAGE_KEYS {
                    let flat = format!("pngtuber_{k}");
                    if let Some(v) = body.rest.get(*k).or_else(|| body.rest.get(&flat)) {
                        png.insert((*k).to_string(), v.clone());
                    }
                }
                for (k, v) in &png {
                    if let Some(s) = v.as_str() {
                        if s.contains("..") || s.contains("://") {
                            return Err(bad(format!(
                                "pngtuber.{k} must be a local path without .."
                            )));
                        }
                    }
                }
                set.insert("pngtuber".into(), Value::Object(png));
            }
        }
    }
    update_profile(&st, &name, move |p| {
        for (k, v) in set {
            p.insert(k, v);
        }
        Ok(())
    })
    .await?;
    Ok(message("model saved"))
}

/// Store an idle-animation setting given as a list or one name: its first
/// entry under `one`, the list under `one` + `s` (`idleAnimations`,
/// `mmd_idle_animations`); absent, nothing changes.
fn set_idle(set: &mut Map<String, Value>, idle: Option<&Value>, one: &str) {
    let Some(idle) = idle else { return };
    let list = match idle {
        Value::Array(a) => a.clone(),
        Value::String(s) if !s.is_empty() => vec![json!(s)],
        _ => vec![],
    };
    set.insert(one.into(), list.first().cloned().unwrap_or(json!("")));
    set.insert(format!("{one}s"), Value::Array(list));
}

pub(crate) async fn current_live2d_model(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<ModelOf>,
) -> Json<CurrentLive2d> {
    let asked = q.catgirl_name.unwrap_or_default();
    let name = st
        .characters
        .resolve(Some(&asked))
        .unwrap_or_else(|| st.characters.current());
    let raw = st
        .characters
        .profile(&name)
        .and_then(|p| p.get("live2d").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    let model = match crate::models::find_live2d(&st, &raw).await {
        Some(m) => Some(m),
        // Unbound, or bound to a model that is gone: the default model, marked as
        // the fallback (as the original answers).
        None => crate::models::find_live2d(&st, crate::models::DEFAULT_LIVE2D_NAME)
            .await
            .map(|mut m| {
                m.is_fallback = Some(true);
                m
            }),
    };
    Json(match model {
        Some(m) => CurrentLive2d {
            success: true,
            catgirl_name: name,
            model_name: m.name.clone(),
            model_info: Some(m),
            error: None,
        },
        None => CurrentLive2d {
            success: false,
            catgirl_name: name,
            model_name: crate::models::DEFAULT_LIVE2D_NAME.to_string(),
            model_info: None,
            error: Some("no Live2D model is bound or the bound model was not found"),
        },
    })
}

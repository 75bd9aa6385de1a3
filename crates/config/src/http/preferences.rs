//! `/api/config/preferences` and `/api/config/preferences/set-preferred`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::no_store;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::RawJson;
use crate::error::ConfigError;
use crate::preferences;

/// A point or vector of the display record.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of what `preferences::validate` accepts
pub struct Vector {
    x: f64,
    y: f64,
    z: Option<f64>,
}

/// One model's display record (`config/preferences.json` holds a list, preferred
/// model first). The known fields are validated (`preferences::validate`); the
/// optional objects are stored as sent.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of what `preferences::validate` accepts and stores
#[schema(example = json!({"model_path": "/static/models/mao/mao.model3.json",
    "position": {"x": 0.5, "y": 0.2}, "scale": {"x": 1.0, "y": 1.0}}))]
pub struct ModelPreference {
    /// Non-empty, at most 2048 bytes, not `__global_conversation__`.
    #[schema(min_length = 1, max_length = 2048)]
    model_path: String,
    position: Vector,
    scale: Vector,
    /// At most 4096 entries.
    #[schema(value_type = Option<Object>)]
    parameters: Option<Value>,
    #[schema(value_type = Option<Object>)]
    display: Option<Value>,
    #[schema(value_type = Option<Object>)]
    rotation: Option<Value>,
    #[schema(value_type = Option<Object>)]
    camera_position: Option<Value>,
    /// `{width, height}` > 0; an invalid one is dropped.
    #[schema(value_type = Option<Object>)]
    viewport: Option<Value>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// `{model_path}`.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of the object `set_preferred` reads
pub struct ModelPathBody {
    #[schema(min_length = 1)]
    model_path: String,
}

/// `{success: true, message}`.
#[derive(Serialize, ToSchema)]
pub struct PreferenceSaved {
    pub success: bool,
    pub message: &'static str,
}

/// The stored list (an older single record counts as a list of one); anything
/// else is left untouched and answered 503.
fn existing_list(cur: Option<Value>) -> Result<Vec<Value>, ConfigError> {
    match cur {
        None => Ok(Vec::new()),
        Some(v @ Value::Array(_)) => Ok(preferences::normalise(Some(v))),
        Some(Value::Object(o)) if o.contains_key("model_path") => {
            Ok(preferences::normalise(Some(Value::Object(o))))
        }
        Some(_) => Err(ConfigError::Unreadable(format!(
            "{} is not a list of preference records and was left untouched",
            preferences::DOC
        ))),
    }
}

/// Replace the stored list with `f(list)` under the document lock.
async fn update_list(
    st: &AppState,
    f: impl FnOnce(Vec<Value>) -> Result<Vec<Value>, ConfigError> + Send + 'static,
) -> Result<(), ConfigError> {
    st.store
        .try_update(preferences::DOC, move |cur: Option<Value>| {
            let list = f(existing_list(cur)?)?;
            Ok::<_, ConfigError>((Value::Array(list), ()))
        })
        .await?
}

/// `GET /api/config/preferences` (no-store).
pub async fn get(State(st): State<AppState>) -> Result<Response, ConfigError> {
    let list = existing_list(st.store.read::<Value>(preferences::DOC).await?)?;
    Ok(no_store(Json(Value::Array(list))))
}

/// `POST /api/config/preferences`: save one model's record.
pub async fn post(
    State(st): State<AppState>,
    body: RawJson,
) -> Result<Json<PreferenceSaved>, ConfigError> {
    let rec = body.object().and_then(|b| preferences::validate(&b))?;
    update_list(&st, move |list| preferences::upsert(list, rec)).await?;
    Ok(Json(PreferenceSaved {
        success: true,
        message: "preferences saved",
    }))
}

/// `POST /api/config/preferences/set-preferred` (`{model_path}`).
pub async fn set_preferred(
    State(st): State<AppState>,
    body: RawJson,
) -> Result<Json<PreferenceSaved>, ConfigError> {
    let path = match body.object()?.get("model_path") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(ConfigError::bad("model_path is required"))
        }
        Some(_) => return Err(ConfigError::bad("model_path must be a string")),
    };
    update_list(&st, move |list| preferences::set_preferred(list, &path)).await?;
    Ok(Json(PreferenceSaved {
        success: true,
        message: "preferred model updated",
    }))
}

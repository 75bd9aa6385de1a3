//! `/api/config/preferences` and `/api/config/preferences/set-preferred`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, BodyOf};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::ConfigError;
use crate::preferences;

pub use crate::preferences::ModelPreference;

/// `{model_path}`.
#[derive(Deserialize, ToSchema)]
pub struct ModelPathBody {
    /// Trimmed; required (absent, null or blank: `model_path is required`).
    #[schema(value_type = String, required = true, min_length = 1, pattern = "\\S")]
    model_path: Option<String>,
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
    BodyOf(body): BodyOf<ModelPreference>,
) -> Result<Json<PreferenceSaved>, ConfigError> {
    let rec = preferences::validate(body)?;
    update_list(&st, move |list| preferences::upsert(list, rec)).await?;
    Ok(Json(PreferenceSaved {
        success: true,
        message: "preferences saved",
    }))
}

/// `POST /api/config/preferences/set-preferred` (`{model_path}`).
pub async fn set_preferred(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<ModelPathBody>,
) -> Result<Json<PreferenceSaved>, ConfigError> {
    let path = match body.model_path.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => return Err(ConfigError::bad("model_path is required")),
    };
    update_list(&st, move |list| preferences::set_preferred(list, &path)).await?;
    Ok(Json(PreferenceSaved {
        success: true,
        message: "preferred model updated",
    }))
}

companiond_core::body_rejected!(ConfigError, ConfigError::body => ModelPreference, ModelPathBody);

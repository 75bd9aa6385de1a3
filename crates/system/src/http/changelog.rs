//! `/api/changelog`, `/api/survey` and `/api/survey/submit`.

use axum::extract::State;
use companiond_core::envelope::{BodyOf, QueryOf};

use super::queries::*;
use axum::Json;
use companiond_core::task::blocking;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::bodies::SurveySubmitBody;
use crate::error::{SysResult, SystemError};
use crate::{changelog, survey};

/// `GET /api/changelog`: the entries newer than `since`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"current_version": "0.1.0",
    "entries": [{"version": "0.1.0", "content": "## New\n- ..."}]}))]
pub struct Changelog {
    current_version: &'static str,
    /// Oldest first.
    entries: Vec<changelog::Entry>,
}

/// `GET /api/survey`: this version's survey, when one is due.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"has_survey": false, "survey_version": "0.1.0"}))]
pub struct SurveyAnswer {
    has_survey: bool,
    survey_version: &'static str,
    /// The survey document as shipped (`questions` list, optional `locales` and
    /// `expires_at`, and `survey_version`); absent when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    survey: Option<Map<String, Value>>,
}

/// `POST /api/survey/submit`.
#[derive(Serialize, ToSchema)]
pub struct SurveySubmitted {
    ok: bool,
    success: bool,
    /// Whether the answers reached the survey server.
    uploaded: bool,
    /// `submit` or `skip`.
    action: &'static str,
    survey_version: &'static str,
}

/// `GET /api/changelog?since=&lang=`.
pub async fn changelog(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<ChangelogQuery>,
) -> SysResult<Json<Changelog>> {
    let since = q.since.unwrap_or_default();
    let lang = q.lang.unwrap_or_default();
    let bundle = st.bundle_dir().to_path_buf();
    let entries =
        blocking(move || Ok::<_, SystemError>(changelog::changelog(&bundle, &since, &lang)))
            .await?;
    Ok(Json(Changelog {
        current_version: changelog::APP_VERSION,
        entries,
    }))
}

/// `GET /api/survey?lang=`.
pub async fn survey(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<SurveyQuery>,
) -> SysResult<Json<SurveyAnswer>> {
    let lang = q.lang.unwrap_or_default();
    let survey = survey::current(&st, lang).await?.and_then(|s| match s {
        Value::Object(m) => Some(m),
        _ => None,
    });
    Ok(Json(SurveyAnswer {
        has_survey: survey.is_some(),
        survey_version: changelog::APP_VERSION,
        survey,
    }))
}

/// `POST /api/survey/submit`.
pub async fn survey_submit(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<SurveySubmitBody>,
) -> SysResult<Json<SurveySubmitted>> {
    let s = survey::submit(&st, body).await?;
    Ok(Json(SurveySubmitted {
        ok: true,
        success: true,
        uploaded: s.uploaded,
        action: s.action,
        survey_version: changelog::APP_VERSION,
    }))
}

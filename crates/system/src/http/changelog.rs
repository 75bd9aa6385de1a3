//! `/api/changelog`, `/api/survey` and `/api/survey/submit`.

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::Json;
use companiond_core::task::blocking;
use companiond_core::{now_millis, AppState};
use serde_json::{json, Map, Value};

use super::{body_object, query};
use crate::error::{SysResult, SystemError};
use crate::{changelog, survey};

/// `GET /api/changelog?since=&lang=`.
pub async fn changelog(State(st): State<AppState>, q: RawQuery) -> SysResult<Json<Value>> {
    let since = query(&q, "since").unwrap_or_default();
    let lang = query(&q, "lang").unwrap_or_default();
    let bundle = st.bundle_dir().to_path_buf();
    let entries =
        blocking(move || Ok::<_, SystemError>(changelog::changelog(&bundle, &since, &lang)))
            .await?;
    Ok(Json(entries))
}

/// `GET /api/survey?lang=`.
pub async fn survey(State(st): State<AppState>, q: RawQuery) -> SysResult<Json<Value>> {
    let lang = query(&q, "lang").unwrap_or_default();
    let bundle = st.bundle_dir().to_path_buf();
    let data = st.data_dir().to_path_buf();
    let workshop = st.opts.workshop_dir.clone();
    let none = json!({"has_survey": false, "survey_version": changelog::APP_VERSION});
    let done: Option<Value> = st.store.read(survey::STATE_DOC).await.ok().flatten();
    if done
        .as_ref()
        .and_then(|d| d.get("responses"))
        .and_then(|r| r.get(changelog::APP_VERSION))
        .is_some()
    {
        return Ok(Json(none));
    }
    let found = blocking(move || {
        if survey::opted_out(&data) || !survey::platform_user(&bundle, workshop.as_deref()) {
            return Ok::<_, SystemError>(None);
        }
        Ok(survey::load(&bundle, &lang))
    })
    .await?;
    Ok(Json(match found {
        Some(s) => {
            json!({"has_survey": true, "survey_version": changelog::APP_VERSION, "survey": s})
        }
        None => none,
    }))
}

/// `POST /api/survey/submit`.
pub async fn survey_submit(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let action = match b.get("action").and_then(Value::as_str) {
        Some("skip") => "skip",
        _ => "submit",
    };
    let bundle = st.bundle_dir().to_path_buf();
    let data = st.data_dir().to_path_buf();
    let (exists, opted_out, target) = blocking(move || {
        Ok::<_, SystemError>((
            survey::load(&bundle, "").is_some()
                || bundle
                    .join("surveys")
                    .join(format!("{}.json", changelog::APP_VERSION))
                    .is_file(),
            survey::opted_out(&data),
            survey::upload_target(&bundle),
        ))
    })
    .await?;
    if !exists {
        return Err(SystemError::not_found(
            "no_survey",
            "there is no survey for this version",
        ));
    }
    let answers = if action == "skip" {
        Map::new()
    } else {
        survey::clean_answers(b.get("answers"))
    };
    let lang = b
        .get("lang")
        .and_then(Value::as_str)
        .map(changelog::sanitize_lang)
        .unwrap_or_default();
    let payload = json!({
        "survey_version": changelog::APP_VERSION, "action": action, "answers": answers,
        "locale": lang, "submitted_at": companiond_core::now_rfc3339(), "client": "companiond",
    });
    let uploaded = match (&target, opted_out) {
        (Some((url, key)), false) => survey::upload(&st.http, url, key.as_deref(), &payload).await,
        _ => false,
    };
    let at = now_millis();
    st.store
        .update(survey::STATE_DOC, move |cur: Option<Value>| {
            let mut v = cur.filter(Value::is_object).unwrap_or_else(|| json!({}));
            if !v.get("responses").is_some_and(Value::is_object) {
                v["responses"] = json!({});
            }
            v["responses"][changelog::APP_VERSION] =
                json!({"action": action, "at": at, "uploaded": uploaded});
            (v, ())
        })
        .await?;
    Ok(Json(
        json!({"ok": true, "success": true, "uploaded": uploaded, "action": action,
               "survey_version": changelog::APP_VERSION}),
    ))
}

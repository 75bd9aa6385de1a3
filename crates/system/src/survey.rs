//! `GET /api/survey` and `POST /api/survey/submit`.
//!
//! * The survey of the server's own version is `<bundle>/surveys/<version>.json`,
//!   localised as `<bundle>/surveys/<locale>/<version>.json` (same chain as the changelog).
//! * Delivery needs: reporting not opted out (env `DO_NOT_TRACK` / `COMPANIOND_DO_NOT_TRACK`
//!   = 1/true/yes/on, or `<data>/config/reporting.json` `{"do_not_track": true}`), a platform
//!   user (the platform integration is configured: `<bundle>/achievements.json`, or a workshop
//!   dir), a survey file, its `locales`/`expires_at` filters, and no earlier submit/skip of
//!   this version (`<data>/state/survey.json`).
//! * Upload (best effort, 10 s): `POST <upload_url>/api/v1/survey` where `upload_url` comes from
//!   env `COMPANIOND_SURVEY_URL` or `<bundle>/surveys/config.json`; signed with HMAC-SHA256 over
//!   `"{ts}|{sha256(body)}"` when that config has an `upload_key`.

use std::path::Path;
use std::time::Duration;

use companiond_core::envelope::loose;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use companiond_core::task::blocking;
use companiond_core::{now_millis, AppState};

use crate::changelog::{localized_file, sanitize_lang, APP_VERSION};
use crate::error::{SysResult, SystemError};

/// Survey progress document.
pub const STATE_DOC: &str = "state/survey.json";
/// Largest survey file read.
const MAX_FILE: u64 = 512 * 1024;
/// Answer caps.
pub const MAX_ANSWERS: usize = 50;
pub const MAX_KEY: usize = 64;
pub const MAX_STRING: usize = 2000;
pub const MAX_LIST: usize = 50;
pub const MAX_ITEM: usize = 200;

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// Is reporting opted out?
pub fn opted_out(data: &Path) -> bool {
    if ["DO_NOT_TRACK", "COMPANIOND_DO_NOT_TRACK"]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| truthy(&v)))
    {
        return true;
    }
    companiond_core::store::read_json::<Value>(&data.join("config/reporting.json"))
        .ok()
        .flatten()
        .and_then(|v| v.get("do_not_track").and_then(Value::as_bool))
        .unwrap_or(false)
}

/// Is this install a platform user (the platform integration is configured)?
pub fn platform_user(bundle: &Path, workshop: Option<&Path>) -> bool {
    bundle.join("achievements.json").is_file() || workshop.is_some_and(|w| w.is_dir())
}

/// Upload target from env or the bundle config: (url, optional key).
pub fn upload_target(bundle: &Path) -> Option<(String, Option<String>)> {
    let cfg = companiond_core::store::read_json::<Value>(&bundle.join("surveys/config.json"))
        .ok()
        .flatten()
        .unwrap_or(Value::Null);
    let url = std::env::var("COMPANIOND_SURVEY_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .or_else(|| {
            cfg.get("upload_url")
                .and_then(Value::as_str)
                .map(str::to_string)
        })?;
    let url = url.trim().trim_end_matches('/').to_string();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return None;
    }
    let key = cfg
        .get("upload_key")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some((url, key))
}

fn today_utc() -> time::Date {
    time::OffsetDateTime::now_utc().date()
}

fn parse_date(s: &str) -> Option<time::Date> {
    let s = s.get(..10)?;
    let b = s.as_bytes();
    if b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y: i32 = s[..4].parse().ok()?;
    let m: u8 = s[5..7].parse().ok()?;
    let d: u8 = s[8..10].parse().ok()?;
    time::Date::from_calendar_date(y, time::Month::try_from(m).ok()?, d).ok()
}

/// Load the current survey for `lang`, applying the filters (blocking).
pub fn load(bundle: &Path, lang: &str) -> Option<Value> {
    let root = bundle.join("surveys");
    let p = localized_file(&root, lang, &format!("{APP_VERSION}.json"))?;
    if std::fs::metadata(&p).ok()?.len() > MAX_FILE {
        return None;
    }
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
    let obj = v.as_object_mut()?;
    if !obj.get("questions").is_some_and(Value::is_array) {
        return None;
    }
    match obj.get("locales") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            let lang = sanitize_lang(lang);
            if !list.is_empty() && !list.iter().any(|l| l.as_str() == Some(lang.as_str())) {
                return None;
            }
        }
        Some(_) => return None,
    }
    match obj.get("expires_at") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            if parse_date(s)? < today_utc() {
                return None;
            }
        }
        Some(_) => return None,
    }
    obj.insert("survey_version".into(), json!(APP_VERSION));
    Some(v)
}

/// Clean submitted answers: at most 50 keys (≤ 64 chars), scalars kept, strings ≤ 2000,
/// lists ≤ 50 scalar items of ≤ 200 chars; anything else dropped.
pub fn clean_answers(v: Option<&Value>) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(Value::Object(m)) = v else {
        return out;
    };
    for (k, v) in m {
        if out.len() >= MAX_ANSWERS {
            break;
        }
        let k = k.trim();
        if k.is_empty() {
            continue;
        }
        let key: String = k.chars().take(MAX_KEY).collect();
        let cleaned = match v {
            Value::Bool(_) | Value::Number(_) => v.clone(),
            Value::String(s) => Value::String(s.chars().take(MAX_STRING).collect()),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .filter_map(|i| match i {
                        Value::String(s) => Some(s.chars().take(MAX_ITEM).collect::<String>()),
                        Value::Number(n) => Some(n.to_string()),
                        Value::Bool(b) => Some(b.to_string()),
                        _ => None,
                    })
                    .take(MAX_LIST)
                    .map(Value::String)
                    .collect(),
            ),
            _ => continue,
        };
        out.insert(key, cleaned);
    }
    out
}

/// Upload best effort; whether the remote answered 200.
pub async fn upload(http: &reqwest::Client, url: &str, key: Option<&str>, payload: &Value) -> bool {
    let body = serde_json::to_vec(payload).unwrap_or_default();
    let ts = companiond_core::now_millis() / 1000;
    let mut req = http
        .post(format!("{url}/api/v1/survey"))
        .header("content-type", "application/json")
        .header("x-survey-timestamp", ts.to_string())
        .timeout(Duration::from_secs(10));
    if let Some(k) = key {
        let digest = hex::encode(Sha256::digest(&body));
        if let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(k.as_bytes()) {
            mac.update(format!("{ts}|{digest}").as_bytes());
            req = req.header(
                "x-survey-signature",
                hex::encode(mac.finalize().into_bytes()),
            );
        }
    }
    match req.body(body).send().await {
        Ok(r) => r.status() == reqwest::StatusCode::OK,
        Err(e) => {
            tracing::info!("survey upload failed (kept offline): {e}");
            false
        }
    }
}

// ------------------------------------------------------------------ routes' work

/// The survey to show (`None` when this version's survey was answered or skipped,
/// reporting is opted out, the user is not a platform user, or there is none).
pub async fn current(st: &AppState, lang: String) -> SysResult<Option<Value>> {
    let bundle = st.bundle_dir().to_path_buf();
    let data = st.data_dir().to_path_buf();
    let workshop = st.opts.workshop_dir.clone();
    let done: Option<Value> = st.store.read(STATE_DOC).await.ok().flatten();
    if done
        .as_ref()
        .and_then(|d| d.get("responses"))
        .and_then(|r| r.get(APP_VERSION))
        .is_some()
    {
        return Ok(None);
    }
    blocking(move || {
        if opted_out(&data) || !platform_user(&bundle, workshop.as_deref()) {
            return Ok::<_, SystemError>(None);
        }
        Ok(load(&bundle, &lang))
    })
    .await
}

/// A recorded submit or skip.
#[derive(Debug)]
pub struct Submitted {
    /// `submit` or `skip`.
    pub action: &'static str,
    /// Whether the upload reached the survey server.
    pub uploaded: bool,
}

/// Record a submit or skip of this version's survey (`{action, answers, lang}`),
/// uploading it unless reporting is opted out; 404 `no_survey` when there is none.
/// `POST /api/survey/submit`. Fields of another type count as absent.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"action": "submit", "answers": {"q1": "yes"}, "lang": "en"}))]
pub struct SurveySubmitBody {
    /// `skip`, else a submit.
    #[serde(default, deserialize_with = "loose::or_none")]
    action: Option<String>,
    /// Answers by question id (ignored for a skip).
    #[serde(default, deserialize_with = "loose::or_none")]
    answers: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "loose::or_none")]
    lang: Option<String>,
}

pub async fn submit(st: &AppState, b: SurveySubmitBody) -> SysResult<Submitted> {
    let action = match b.action.as_deref() {
        Some("skip") => "skip",
        _ => "submit",
    };
    let bundle = st.bundle_dir().to_path_buf();
    let data = st.data_dir().to_path_buf();
    let (exists, opted_out, target) = blocking(move || {
        Ok::<_, SystemError>((
            load(&bundle, "").is_some()
                || bundle
                    .join("surveys")
                    .join(format!("{}.json", APP_VERSION))
                    .is_file(),
            opted_out(&data),
            upload_target(&bundle),
        ))
    })
    .await?;
    if !exists {
        return Err(SystemError::NoSurvey(
            "there is no survey for this version".into(),
        ));
    }
    let answers = if action == "skip" {
        Map::new()
    } else {
        clean_answers(b.answers.map(Value::Object).as_ref())
    };
    let lang = b.lang.as_deref().map(sanitize_lang).unwrap_or_default();
    let payload = json!({
        "survey_version": APP_VERSION, "action": action, "answers": answers,
        "locale": lang, "submitted_at": companiond_core::now_rfc3339(), "client": "companiond",
    });
    let uploaded = match (&target, opted_out) {
        (Some((url, key)), false) => upload(&st.http, url, key.as_deref(), &payload).await,
        _ => false,
    };
    let at = now_millis();
    st.store
        .update(STATE_DOC, move |cur: Option<Value>| {
            let mut v = cur.filter(Value::is_object).unwrap_or_else(|| json!({}));
            if !v.get("responses").is_some_and(Value::is_object) {
                v["responses"] = json!({});
            }
            v["responses"][APP_VERSION] = json!({"action": action, "at": at, "uploaded": uploaded});
            (v, ())
        })
        .await?;
    Ok(Submitted { action, uploaded })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_capped() {
        let mut m = Map::new();
        for i in 0..80 {
            m.insert(format!("q{i:02}"), json!(i));
        }
        m.insert("".into(), json!(1));
        assert_eq!(clean_answers(Some(&Value::Object(m))).len(), MAX_ANSWERS);
        let a = clean_answers(Some(&json!({
            "s": "x".repeat(5000), "l": (0..99).collect::<Vec<_>>(), "o": {"a": 1},
            "n": null, "b": true, "k".repeat(100): 1, "mixed": ["a", {"x": 1}, 2]
        })));
        assert_eq!(a["s"].as_str().unwrap().len(), MAX_STRING);
        assert_eq!(a["l"].as_array().unwrap().len(), MAX_LIST);
        assert!(!a.contains_key("o") && !a.contains_key("n"));
        assert_eq!(a["b"], json!(true));
        assert!(a.contains_key(&"k".repeat(64)));
        assert_eq!(a["mixed"], json!(["a", "2"]));
        assert!(clean_answers(Some(&json!([1]))).is_empty());
    }

    #[test]
    fn dates() {
        assert!(parse_date("2030-01-02").is_some());
        assert!(parse_date("2030-13-02").is_none());
        assert!(parse_date("soon").is_none());
    }
}

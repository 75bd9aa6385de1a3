//! `GET|POST /api/config/conversation-settings`.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::AppState;
use serde_json::{json, Value};

use super::RawJson;
use crate::conversation::{self, Decision, Outcome, Write};
use crate::error::ConfigError;

/// Header of the ASR decision tuple.
pub const ASR_HEADER: &str = "x-conversation-settings-asr-decision";
/// Header marking a full-snapshot write.
pub const FULL_SNAPSHOT_HEADER: &str = "x-conversation-settings-full-snapshot";

fn with_etag(mut resp: Response, etag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    no_store(resp)
}

/// `GET /api/config/conversation-settings` (ETag, no-store).
pub async fn get(State(st): State<AppState>) -> Response {
    match conversation::load(&st).await {
        Ok(doc) => {
            let mut body = doc.snapshot();
            body.insert("success".into(), json!(true));
            body.insert("telemetryBranch".into(), json!("main"));
            with_etag(ok_json(body), &doc.etag())
        }
        Err(e) => no_store(e),
    }
}

fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ConfigError> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| ConfigError::bad(format!("the {name} header is not valid text"))),
    }
}

fn parse_write(headers: &HeaderMap, body: RawJson) -> Result<Write, ConfigError> {
    let body = body.object()?;
    let if_match = match header_str(headers, "if-match")? {
        None => None,
        Some(raw) => Some(conversation::parse_if_match(raw).ok_or_else(|| {
            ConfigError::bad_code(
                "invalid If-Match: expected \"conversation-settings-<revision>\"",
                "invalid_if_match",
            )
        })?),
    };
    let decision = match header_str(headers, ASR_HEADER)?.map(str::trim) {
        None | Some("") => None,
        Some(raw) => {
            let now = companiond_core::now_millis().max(0) as u64;
            let d = serde_json::from_str::<Value>(raw)
                .ok()
                .and_then(|v| Decision::parse(&v, now))
                .ok_or_else(|| {
                    ConfigError::bad_code(
                        "invalid ASR decision header: expected {writeId, writerId, value}",
                        "invalid_asr_decision",
                    )
                })?;
            Some(d)
        }
    };
    let full_snapshot = header_str(headers, FULL_SNAPSHOT_HEADER)?.map(str::trim) == Some("1");
    Ok(Write {
        body,
        if_match,
        decision,
        full_snapshot,
    })
}

/// `POST /api/config/conversation-settings` (`If-Match`, ASR decision header,
/// full-snapshot header; 412 with the current document on a stale revision).
pub async fn post(State(st): State<AppState>, headers: HeaderMap, body: RawJson) -> Response {
    let w = match parse_write(&headers, body) {
        Ok(w) => w,
        Err(e) => return no_store(e),
    };
    let noise = w.body.get("noiseReductionEnabled").and_then(Value::as_bool);
    match conversation::save(&st, w).await {
        Err(e) => no_store(e),
        Ok(Outcome::Conflict(doc)) => {
            let mut body = doc.snapshot();
            body.insert("success".into(), json!(false));
            body.insert(
                "error".into(),
                json!("conversation settings version conflict"),
            );
            body.insert("error_code".into(), json!("revision_conflict"));
            with_etag(
                (StatusCode::PRECONDITION_FAILED, Json(body)).into_response(),
                &doc.etag(),
            )
        }
        Ok(Outcome::Saved {
            doc,
            changed,
            rejected,
            ignored,
        }) => {
            let applied = match noise {
                Some(v) => conversation::apply_noise_reduction(&st, v),
                None => 0,
            };
            let mut body = doc.snapshot();
            body.insert("success".into(), json!(true));
            body.insert("message".into(), json!("conversation settings saved"));
            body.insert("changed".into(), json!(changed));
            body.insert("rejected".into(), json!(rejected));
            body.insert("ignored".into(), json!(ignored));
            body.insert("sessions_applied".into(), json!(applied));
            with_etag(ok_json(body), &doc.etag())
        }
    }
}

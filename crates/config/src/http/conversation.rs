//! `GET|POST /api/config/conversation-settings`.

use std::marker::PhantomData;

use axum::body::Body;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json, BodyOf};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::conversation::{self, Decision, Outcome, Snapshot, Write};
use crate::error::ConfigError;

/// Header of the ASR decision tuple.
pub const ASR_HEADER: &str = "x-conversation-settings-asr-decision";
/// Header marking a full-snapshot write.
pub const FULL_SNAPSHOT_HEADER: &str = "x-conversation-settings-full-snapshot";

/// `GET /api/config/conversation-settings` (an `ETag` header carries the revision).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"settings": {"userLanguage": "en"}, "revision": "3", "decisions": {},
    "reset": false, "success": true, "telemetryBranch": "main"}))]
pub struct ConversationSettings {
    #[serde(flatten)]
    #[schema(inline)]
    doc: Snapshot,
    success: bool,
    #[serde(rename = "telemetryBranch")]
    telemetry_branch: &'static str,
}

/// `POST /api/config/conversation-settings` saved.
#[derive(Serialize, ToSchema)]
pub struct ConversationSaved {
    #[serde(flatten)]
    #[schema(inline)]
    doc: Snapshot,
    success: bool,
    message: &'static str,
    /// Whether a stored value changed.
    changed: bool,
    /// Fields refused by the validator.
    rejected: Vec<String>,
    /// Fields that are not conversation settings.
    ignored: Vec<String>,
    /// Chat sessions the noise-reduction switch was applied to.
    sessions_applied: usize,
}

/// `412`: the current document with the failure fields.
#[derive(Serialize)]
struct Conflict {
    #[serde(flatten)]
    doc: Snapshot,
    success: bool,
    error: &'static str,
    error_code: &'static str,
}

/// The body of `POST /api/config/conversation-settings`: the settings to change
/// (unknown fields are reported in `ignored`, invalid ones in `rejected`).
// `conversation::save` judges every key on its own and in the order sent (a bad
// value is listed in `rejected`, an unknown key in `ignored`, never a refusal of
// the body): the body is read as its object, in order (`settings`); the named
// fields state the known keys, judged inside it.
#[derive(Deserialize, ToSchema)]
#[serde(from = "Map<String, Value>")]
#[schema(example = json!({"userLanguage": "en", "noiseReductionEnabled": true}))]
pub struct ConversationSettingsWrite {
    #[serde(rename = "userLanguage")]
    #[schema(value_type = Option<String>)]
    user_language: PhantomData<String>,
    /// Applied to the open chats when it is a boolean.
    #[serde(rename = "noiseReductionEnabled")]
    noise_reduction_enabled: Option<bool>,
    #[serde(flatten)]
    settings: Map<String, Value>,
}

impl From<Map<String, Value>> for ConversationSettingsWrite {
    fn from(settings: Map<String, Value>) -> Self {
        ConversationSettingsWrite {
            user_language: PhantomData,
            noise_reduction_enabled: settings
                .get("noiseReductionEnabled")
                .and_then(Value::as_bool),
            settings,
        }
    }
}

companiond_core::body_rejected!(ConfigError, ConfigError::body => ConversationSettingsWrite);

/// The headers of a conversation-settings write, read before the store is
/// touched (a header that is not text, a malformed `If-Match` or ASR decision is
/// a 400 naming it).
#[derive(IntoParams)]
pub struct WriteHeaders {
    /// `"conversation-settings-N"` (also `W/`, and the bare revision; blank is
    /// absent): refused with 412 and the current document when stale.
    #[param(
        rename = "If-Match",
        value_type = Option<String>,
        pattern = "^\\s*((W/)?(\"(conversation-settings-)?[0-9]{1,16}\"|(conversation-settings-)?[0-9]{1,16}))?\\s*$"
    )]
    if_match: Option<u64>,
    /// JSON `{writeId, writerId, value}`: the ASR decision tuple.
    #[param(rename = "X-Conversation-Settings-ASR-Decision", value_type = Option<String>)]
    asr_decision: Option<Decision>,
    /// `1`: the body is a full snapshot.
    #[param(rename = "X-Conversation-Settings-Full-Snapshot", value_type = Option<String>)]
    full_snapshot: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for WriteHeaders {
    type Rejection = ConfigError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ConfigError> {
        let headers = &parts.headers;
        let if_match = match header_str(headers, "if-match")?.map(str::trim) {
            None | Some("") => None,
            Some(raw) => Some(conversation::parse_if_match(raw).ok_or_else(|| {
                ConfigError::bad_code(
                    "invalid If-Match: expected \"conversation-settings-<revision>\"",
                    "invalid_if_match",
                )
            })?),
        };
        let asr_decision = match header_str(headers, ASR_HEADER)?.map(str::trim) {
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
        Ok(WriteHeaders {
            if_match,
            asr_decision,
            full_snapshot,
        })
    }
}

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
            let body = ConversationSettings {
                doc: doc.snapshot(),
                success: true,
                telemetry_branch: "main",
            };
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

/// `POST /api/config/conversation-settings` (`If-Match`, ASR decision header,
/// full-snapshot header; 412 with the current document on a stale revision).
pub async fn post(
    State(st): State<AppState>,
    headers: Result<WriteHeaders, ConfigError>,
    body: Body,
) -> Response {
    // The body is judged before the headers.
    let parsed = async {
        let body = BodyOf::<ConversationSettingsWrite>::read(body).await?;
        Ok::<_, ConfigError>((body, headers?))
    };
    let (body, headers) = match parsed.await {
        Ok(p) => p,
        Err(e) => return no_store(e),
    };
    let noise = body.noise_reduction_enabled;
    let w = Write {
        body: body.settings,
        if_match: headers.if_match,
        decision: headers.asr_decision,
        full_snapshot: headers.full_snapshot,
    };
    match conversation::save(&st, w).await {
        Err(e) => no_store(e),
        Ok(Outcome::Conflict(doc)) => {
            let body = Conflict {
                doc: doc.snapshot(),
                success: false,
                error: "conversation settings version conflict",
                error_code: "revision_conflict",
            };
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
            let body = ConversationSaved {
                doc: doc.snapshot(),
                success: true,
                message: "conversation settings saved",
                changed,
                rejected,
                ignored,
                sessions_applied: applied,
            };
            with_etag(ok_json(body), &doc.etag())
        }
    }
}

//! `/api/system/status`, `/api/token-usage`, `/api/pending-notices` and
//! `/api/activity_signal`.

use axum::body::Body;
use axum::extract::State;
use companiond_core::envelope::{BodyOf, QueryOf};

use super::queries::*;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json, parse_body};
use companiond_core::state::StorageStatus;
use companiond_core::task::blocking;
use companiond_core::{now_millis, AppState, Ext};
use serde::Serialize;
use serde_json::Value;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};
use utoipa::ToSchema;

use super::bodies::{ActivityBody, NoticesAckBody};
use crate::error::{SysResult, SystemError};
use crate::state::SystemState;
use crate::{activity, status, token_usage};

/// The answer of `GET /api/system/status`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "status": "ready", "ready": true, "storage": {
    "selection_required": false, "migration_pending": false, "recovery_required": false,
    "legacy_cleanup_pending": false, "blocking_reason": "", "last_error_summary": "",
    "stage": ""}}))]
pub struct SystemStatus {
    ok: bool,
    /// `starting`, `migration_required` or `ready`.
    status: &'static str,
    ready: bool,
    #[schema(schema_with = storage_schema)]
    storage: StorageStatus,
}

/// The schema of core's `StorageStatus` (the storage-migration flags); the
/// status test checks that it names every field the server sends.
fn storage_schema() -> Object {
    let flag = || ObjectBuilder::new().schema_type(Type::Boolean);
    let text = || ObjectBuilder::new().schema_type(Type::String);
    let mut o = ObjectBuilder::new().schema_type(Type::Object);
    for name in [
        "selection_required",
        "migration_pending",
        "recovery_required",
        "legacy_cleanup_pending",
    ] {
        o = o.property(name, flag()).required(name);
    }
    for name in ["blocking_reason", "last_error_summary", "stage"] {
        o = o.property(name, text()).required(name);
    }
    o.build()
}

/// `GET /api/pending-notices`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"notices": [{"type": "info", "message": "Saved"}], "cursor": 1}))]
pub struct PendingNotices {
    /// Queued notices as they were pushed (open objects).
    notices: Vec<Value>,
    /// The newest notice's cursor (ack up to it).
    cursor: u64,
}

/// `POST /api/pending-notices/ack`.
#[derive(Serialize, ToSchema)]
pub struct NoticesAcked {
    success: bool,
    ok: bool,
    /// How many notices were drained.
    acknowledged: usize,
    cursor: u64,
}

/// `{success: true}`.
#[derive(Serialize, ToSchema)]
pub struct ActivityAccepted {
    success: bool,
}

/// `GET /api/system/status`.
pub async fn status(State(st): State<AppState>) -> Response {
    let s = status::snapshot(&st).await;
    no_store(ok_json(SystemStatus {
        ok: true,
        status: s.status,
        ready: s.status == "ready",
        storage: s.storage,
    }))
}

/// `GET /api/token-usage?days=`.
pub async fn token_usage(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<TokenUsageQuery>,
) -> SysResult<Json<token_usage::Statistics>> {
    let days = q.days.unwrap_or(token_usage::DEFAULT_DAYS);
    let now = now_millis() / 1000;
    let usage = st.usage.clone();
    let stats = blocking(move || {
        token_usage::statistics(&usage, days, now).map_err(SystemError::UsageUnavailable)
    })
    .await?;
    Ok(Json(stats))
}

/// `GET /api/pending-notices`.
pub async fn pending_notices(State(st): State<AppState>) -> Response {
    let (notices, cursor) = st.notices.peek();
    no_store(ok_json(PendingNotices { notices, cursor }))
}

/// `POST /api/pending-notices/ack`.
pub async fn ack(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<NoticesAckBody>,
) -> SysResult<Json<NoticesAcked>> {
    let drained = st.notices.ack(body.cursor);
    let (_, cursor) = st.notices.peek();
    Ok(Json(NoticesAcked {
        success: true,
        ok: true,
        acknowledged: drained,
        cursor,
    }))
}

async fn push_activity(st: &AppState, sys: &SystemState, body: Body) -> SysResult<()> {
    let bytes = axum::body::to_bytes(body, activity::MAX_BODY)
        .await
        .map_err(|_| SystemError::BodyTooLarge("activity payload is too large".into()))?;
    // An empty body is not JSON here (the signal requires a name).
    if bytes.is_empty() {
        return Err(SystemError::InvalidJson("invalid JSON body".into()));
    }
    let body = parse_body::<ActivityBody>(&bytes).map_err(SystemError::body)?;
    let (name, snap) = activity::validate(&body)?;
    if !st.characters.exists(&name) {
        return Err(SystemError::CharacterNotFound(format!(
            "persona_name '{name}' not registered"
        )));
    }
    sys.tracker.push(&name, snap)
}

/// `POST /api/activity_signal`: every answer no-store; a throttled push carries
/// `Retry-After`.
pub async fn activity_signal(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    body: Body,
) -> Response {
    match push_activity(&st, &sys, body).await {
        Ok(()) => no_store(ok_json(ActivityAccepted { success: true })),
        Err(e) => {
            let retry = match &e {
                SystemError::RateLimited {
                    retry_after_seconds,
                } => Some(*retry_after_seconds as u64 + 1),
                _ => None,
            };
            let mut resp = no_store(e.into_response());
            if let Some(s) = retry {
                if let Ok(h) = HeaderValue::from_str(&s.to_string()) {
                    resp.headers_mut().insert(header::RETRY_AFTER, h);
                }
            }
            resp
        }
    }
}

//! `/api/system/status`, `/api/token-usage`, `/api/pending-notices` and
//! `/api/activity_signal`.

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::task::blocking;
use companiond_core::{now_millis, AppState, Ext};
use serde_json::{json, Value};

use super::{body_object, query};
use crate::error::{SysResult, SystemError};
use crate::state::SystemState;
use crate::{activity, status, token_usage};

/// `GET /api/system/status`.
pub async fn status(State(st): State<AppState>) -> Response {
    let s = status::snapshot(&st).await;
    no_store(ok_json(json!({
        "ok": true,
        "status": s.status,
        "ready": s.status == "ready",
        "storage": s.storage,
    })))
}

/// `GET /api/token-usage?days=`.
pub async fn token_usage(
    State(st): State<AppState>,
    q: RawQuery,
) -> SysResult<Json<token_usage::Statistics>> {
    let days = match query(&q, "days") {
        None => token_usage::DEFAULT_DAYS,
        Some(d) => d
            .trim()
            .parse::<i64>()
            .map_err(|_| SystemError::InvalidDays("days must be an integer".into()))?,
    };
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
    no_store(ok_json(json!({"notices": notices, "cursor": cursor})))
}

/// `POST /api/pending-notices/ack`.
pub async fn ack(State(st): State<AppState>, body: Body) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let cursor = match b.get("cursor") {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.trim().parse::<u64>().unwrap_or(0),
        _ => 0,
    };
    let drained = st.notices.ack(cursor);
    let (_, cursor) = st.notices.peek();
    Ok(Json(
        json!({"success": true, "ok": true, "acknowledged": drained, "cursor": cursor}),
    ))
}

async fn push_activity(st: &AppState, sys: &SystemState, body: Body) -> SysResult<()> {
    let bytes = axum::body::to_bytes(body, activity::MAX_BODY)
        .await
        .map_err(|_| SystemError::BodyTooLarge("activity payload is too large".into()))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|_| SystemError::InvalidJson("invalid JSON body".into()))?;
    let (name, snap) = activity::validate(&v)?;
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
        Ok(()) => no_store(ok_json(json!({"success": true}))),
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

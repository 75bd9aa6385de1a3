//! Guide handoff tokens: `/api/guide/handoff/{create,consume}` and the original
//! pages' `/api/yui-guide/...` paths of the same routes (every answer no-store).

use axum::body::Body;
use axum::http::{header, HeaderMap};
use axum::Json;
use companiond_core::{now_millis, Ext};
use serde_json::{json, Value};

use super::body_object;
use crate::error::SysResult;
use crate::state::SystemState;

/// The request origin: `Origin`, else the origin of `Referer`, else the server's own.
fn request_origin(headers: &HeaderMap) -> String {
    let norm = |s: &str| -> Option<String> {
        let u = url::Url::parse(s.trim()).ok()?;
        if !matches!(u.scheme(), "http" | "https") {
            return None;
        }
        let o = u.origin().ascii_serialization();
        (o != "null").then(|| o.to_ascii_lowercase())
    };
    let header_origin = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(norm)
    };
    header_origin(header::ORIGIN)
        .or_else(|| header_origin(header::REFERER))
        .or_else(|| {
            headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .and_then(|h| norm(&format!("http://{h}")))
        })
        .unwrap_or_default()
}

/// What a handoff route does with its token.
#[derive(Clone, Copy)]
enum Step {
    Create,
    Consume,
}

async fn answer(
    sys: &SystemState,
    headers: &HeaderMap,
    body: Body,
    step: Step,
) -> SysResult<Json<Value>> {
    let b = body_object(body).await?;
    let origin = request_origin(headers);
    let now = now_millis();
    let token = match step {
        Step::Create => sys.handoff.create(&b, &origin, now).await?,
        Step::Consume => sys.handoff.consume(&b, &origin, now).await?,
    };
    Ok(Json(json!({"ok": true, "success": true, "token": token})))
}

/// `POST /api/guide/handoff/create`.
pub async fn create(
    Ext(sys): Ext<SystemState>,
    headers: HeaderMap,
    body: Body,
) -> SysResult<Json<Value>> {
    answer(&sys, &headers, body, Step::Create).await
}

/// `POST /api/guide/handoff/consume`.
pub async fn consume(
    Ext(sys): Ext<SystemState>,
    headers: HeaderMap,
    body: Body,
) -> SysResult<Json<Value>> {
    answer(&sys, &headers, body, Step::Consume).await
}

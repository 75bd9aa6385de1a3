//! Guide handoff tokens: `/api/guide/handoff/{create,consume}` and the original
//! pages' `/api/yui-guide/...` paths of the same routes (every answer no-store).

use axum::http::{header, HeaderMap};
use axum::Json;
use companiond_core::envelope::BodyOf;
use companiond_core::{now_millis, Ext};
use serde::Serialize;
use utoipa::ToSchema;

use super::bodies::{HandoffConsumeBody, HandoffCreateBody};
use crate::error::SysResult;
use crate::handoff::PublicToken;
use crate::state::SystemState;

/// A created or consumed handoff token.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "success": true, "token": {"token": "q1…", "token_version": 1,
    "flow_id": "home_yui_guide_v1", "source_page": "home", "source_path": "", "target_page": "chat",
    "target_path": "", "resume_scene": null, "created_at": 1764100000000_i64,
    "expires_at": 1764100120000_i64, "consumed": false, "consumed_by": "", "consumed_at": 0,
    "signature": "9f…", "authority": "server"}}))]
pub struct HandoffToken {
    ok: bool,
    success: bool,
    token: PublicToken,
}

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

fn answer(token: PublicToken) -> Json<HandoffToken> {
    Json(HandoffToken {
        ok: true,
        success: true,
        token,
    })
}

/// `POST /api/guide/handoff/create`.
pub async fn create(
    Ext(sys): Ext<SystemState>,
    headers: HeaderMap,
    BodyOf(body): BodyOf<HandoffCreateBody>,
) -> SysResult<Json<HandoffToken>> {
    let origin = request_origin(&headers);
    Ok(answer(
        sys.handoff.create(&body, &origin, now_millis()).await?,
    ))
}

/// `POST /api/guide/handoff/consume`.
pub async fn consume(
    Ext(sys): Ext<SystemState>,
    headers: HeaderMap,
    BodyOf(body): BodyOf<HandoffConsumeBody>,
) -> SysResult<Json<HandoffToken>> {
    let origin = request_origin(&headers);
    Ok(answer(
        sys.handoff.consume(&body, &origin, now_millis()).await?,
    ))
}

//! Thin HTTP handlers of `/api/tools` over [`crate::registry`].
//!
//! Every route admits loopback TCP peers only (403 otherwise, judged before the
//! body is read). Errors use the request-validation envelope `{detail}`:
//! 403 forbidden, 404 `unknown role: <role>`, 422 schema errors.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::{no_store, ok_json, Detail, DetailEnvelope, JsonBody};
use companiond_core::guards::LoopbackPeer;
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use crate::registry::{self, ToolsError};

type Loopback = LoopbackPeer<DetailEnvelope>;
type Body = JsonBody<Map<String, Value>, DetailEnvelope>;

impl IntoResponse for ToolsError {
    fn into_response(self) -> Response {
        let status = match self {
            ToolsError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ToolsError::UnknownRole(_) => StatusCode::NOT_FOUND,
        };
        Detail::new(self.to_string()).status(status)
    }
}

/// `POST /api/tools/register`.
pub async fn register(_peer: Loopback, State(st): State<AppState>, body: Body) -> Response {
    let reg = match registry::parse_registration(&body.0) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    match registry::register(&st, &reg) {
        Ok(out) => {
            let ok = !out.affected_roles.is_empty();
            let mut reply = json!({
                "ok": ok,
                "registered": reg.tool.name,
                "affected_roles": out.affected_roles,
                "failed_roles": out.failed_roles,
            });
            if !ok {
                reply["error"] = json!("no role accepted the registration");
            }
            no_store(ok_json(reply))
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /api/tools/unregister`.
pub async fn unregister(_peer: Loopback, State(st): State<AppState>, body: Body) -> Response {
    let parsed = registry::parse_name(body.0.get("name"))
        .and_then(|n| Ok((n, registry::parse_role(body.0.get("role"))?)));
    let (name, role) = match parsed {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    match registry::unregister(&st, &name, role.as_deref()) {
        Ok(out) => no_store(ok_json(json!({
            "ok": out.failed_roles.is_empty() || out.removed > 0,
            "removed": out.removed > 0,
            "name": name,
            "affected_roles": out.affected_roles,
            "failed_roles": out.failed_roles,
        }))),
        Err(e) => e.into_response(),
    }
}

/// `POST /api/tools/clear`.
pub async fn clear(_peer: Loopback, State(st): State<AppState>, body: Body) -> Response {
    let parsed = registry::parse_source(body.0.get("source"))
        .and_then(|s| Ok((s, registry::parse_role(body.0.get("role"))?)));
    let (source, role) = match parsed {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    match registry::clear(&st, &source, role.as_deref()) {
        Ok(out) => no_store(ok_json(json!({
            "ok": out.failed_roles.is_empty() || out.removed > 0,
            "removed": out.removed,
            "source": source,
            "affected_roles": out.affected_roles,
            "failed_roles": out.failed_roles,
        }))),
        Err(e) => e.into_response(),
    }
}

/// `GET /api/tools[?role=]`.
pub async fn list(_peer: Loopback, State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let role = q.as_deref().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "role")
            .map(|(_, v)| v.into_owned())
            .filter(|v| !v.is_empty())
    });
    match registry::list_body(&st, role.as_deref()) {
        Ok(body) => no_store((
            [(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            )],
            body,
        )),
        Err(e) => e.into_response(),
    }
}

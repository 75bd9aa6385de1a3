//! Thin HTTP handlers of `/api/tools` over [`crate::registry`].
//!
//! Every route admits loopback TCP peers only (403 otherwise, judged before the
//! body is read). Errors use the request-validation envelope `{detail}`:
//! 403 forbidden, 404 `unknown role: <role>`, 422 schema errors.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::{no_store, ok_json, DetailEnvelope, JsonBody};
use companiond_core::guards::LoopbackPeer;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::ToolsError;
use crate::registry::{self, FailedRole, Outcome};
use crate::validation;

type Loopback = LoopbackPeer<DetailEnvelope>;
type Body = JsonBody<Map<String, Value>, DetailEnvelope>;

/// The answer of `register`.
#[derive(Serialize)]
struct Registered {
    ok: bool,
    registered: String,
    affected_roles: Vec<String>,
    failed_roles: Vec<FailedRole>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

/// What `unregister` and `clear` removed: a tool by name, or a source's tools.
#[derive(Serialize)]
#[serde(untagged)]
enum Removal {
    Name { removed: bool, name: String },
    Source { removed: usize, source: String },
}

/// The answer of `unregister` and `clear`: ok unless every role failed and
/// nothing was removed.
#[derive(Serialize)]
struct Removed {
    ok: bool,
    #[serde(flatten)]
    removal: Removal,
    affected_roles: Vec<String>,
    failed_roles: Vec<FailedRole>,
}

impl Removed {
    fn new(out: Outcome, removal: impl FnOnce(usize) -> Removal) -> Removed {
        Removed {
            ok: out.failed_roles.is_empty() || out.changed > 0,
            removal: removal(out.changed),
            affected_roles: out.affected_roles,
            failed_roles: out.failed_roles,
        }
    }
}

/// `200` with the answer (never cached), or the error's envelope.
fn respond<T: Serialize>(r: Result<T, ToolsError>) -> Response {
    match r {
        Ok(v) => no_store(ok_json(v)),
        Err(e) => e.into_response(),
    }
}

/// `POST /api/tools/register`: ok when at least one role accepted it.
pub async fn register(_peer: Loopback, State(st): State<AppState>, body: Body) -> Response {
    respond(validation::parse_registration(&body.0).and_then(|reg| {
        let out = registry::register(&st, &reg)?;
        let ok = !out.affected_roles.is_empty();
        Ok(Registered {
            ok,
            registered: reg.tool.name,
            affected_roles: out.affected_roles,
            failed_roles: out.failed_roles,
            error: (!ok).then_some("no role accepted the registration"),
        })
    }))
}

/// `POST /api/tools/unregister` `{name, role?}`.
pub async fn unregister(_peer: Loopback, State(st): State<AppState>, body: Body) -> Response {
    respond(validation::parse_name(body.0.get("name")).and_then(|name| {
        let role = validation::parse_role(body.0.get("role"))?;
        let out = registry::unregister(&st, &name, role.as_deref())?;
        Ok(Removed::new(out, |n| Removal::Name {
            removed: n > 0,
            name,
        }))
    }))
}

/// `POST /api/tools/clear` `{source, role?}`.
pub async fn clear(_peer: Loopback, State(st): State<AppState>, body: Body) -> Response {
    respond(
        validation::parse_source(body.0.get("source")).and_then(|source| {
            let role = validation::parse_role(body.0.get("role"))?;
            let out = registry::clear(&st, &source, role.as_deref())?;
            Ok(Removed::new(out, |n| Removal::Source {
                removed: n,
                source,
            }))
        }),
    )
}

/// `GET /api/tools[?role=]`: `{ok, tools_by_role}`, written straight to bytes.
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

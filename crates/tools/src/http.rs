//! Thin HTTP handlers of `/api/tools` over [`crate::registry`].
//!
//! Every route admits loopback TCP peers only (403 otherwise, judged before the
//! body is read). Errors use the request-validation envelope `{detail}`:
//! 403 forbidden, 404 `unknown role: <role>`, 422 schema errors.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::{lenient, loose, BodyFault, BodyOf, QueryOf};
use companiond_core::envelope::{no_store, ok_json, DetailEnvelope};
use companiond_core::guards::LoopbackPeer;
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::error::ToolsError;
use crate::registry::{self, FailedRole, Outcome};
use crate::validation;

type Loopback = LoopbackPeer<DetailEnvelope>;

/// The answer of `register`: ok when at least one role accepted it.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "registered": "get_weather", "affected_roles": ["Mika"],
    "failed_roles": []}))]
pub struct Registered {
    ok: bool,
    registered: String,
    affected_roles: Vec<String>,
    failed_roles: Vec<FailedRole>,
    /// `no role accepted the registration` when none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

/// The answer of `unregister`: whether the tool was removed (ok unless every
/// role failed and nothing was removed).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "removed": true, "name": "get_weather",
    "affected_roles": ["Mika"], "failed_roles": []}))]
pub struct Unregistered {
    ok: bool,
    removed: bool,
    name: String,
    affected_roles: Vec<String>,
    failed_roles: Vec<FailedRole>,
}

/// The answer of `clear`: how many registrations of the source were removed
/// (ok unless every role failed and nothing was removed).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "removed": 2, "source": "weather-plugin",
    "affected_roles": ["Mika"], "failed_roles": []}))]
pub struct Cleared {
    ok: bool,
    removed: usize,
    source: String,
    affected_roles: Vec<String>,
    failed_roles: Vec<FailedRole>,
}

/// Ok unless every role failed and nothing was removed.
fn removal_ok(out: &Outcome) -> bool {
    out.failed_roles.is_empty() || out.changed > 0
}

/// `POST /api/tools/register` body; `validation` checks the limits.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}, "callback_url": "http://127.0.0.1:9100/call",
    "source": "weather-plugin", "timeout_seconds": 10}))]
pub struct RegisterBody {
    /// 1 to 64 characters; a tool of the same name is replaced.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    pub description: Option<String>,
    /// The arguments' JSON Schema (default: no arguments).
    pub parameters: Option<ToolParameters>,
    /// HTTP(S) URL on a loopback host (`localhost`, 127.0.0.0/8, `::1`, an
    /// IPv4-mapped loopback address), at most 2048 characters; names are never
    /// resolved. The pattern shows the usual forms.
    #[schema(
        max_length = 2048,
        pattern = r"^https?://(localhost|127\.(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})\.(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})\.(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})|\[::1\])(:([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?#].*)?$",
        example = "http://127.0.0.1:9100/call"
    )]
    pub callback_url: String,
    /// One character; null or empty: every character.
    pub role: Option<String>,
    /// Tag for `clear` (default `external`).
    pub source: Option<String>,
    /// Seconds, greater than 0 and at most 300 (default 30).
    #[schema(exclusive_minimum = 0, maximum = 300, default = 30)]
    pub timeout_seconds: Option<f64>,
}

/// The arguments' JSON Schema, kept as sent: an object schema (other JSON
/// Schema keywords are allowed and passed to the model). Given keys may not be null.
#[derive(Deserialize, Serialize, ToSchema)]
pub struct ToolParameters {
    /// `object` when given.
    #[serde(rename = "type")]
    #[serde(default, deserialize_with = "loose::present")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^object$", nullable = false)]
    pub kind: Option<String>,
    /// Argument name to its JSON Schema.
    #[serde(default, deserialize_with = "loose::present")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, nullable = false)]
    pub properties: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "loose::present")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub required: Option<Vec<String>>,
    /// Other JSON Schema keywords.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `POST /api/tools/unregister` body.
#[derive(Deserialize, ToSchema)]
pub struct UnregisterBody {
    #[schema(min_length = 1, max_length = 64)]
    name: String,
    /// One character; null or empty: every character.
    role: Option<String>,
}

/// `POST /api/tools/clear` body.
#[derive(Deserialize, ToSchema)]
pub struct ClearBody {
    #[schema(min_length = 1)]
    source: String,
    /// One character; null or empty: every character.
    role: Option<String>,
}

// A body that does not parse is a 422 `{detail}` naming the field.
companiond_core::body_rejected!(ToolsError, |f: BodyFault| ToolsError::Invalid(f.to_string())
    => RegisterBody, UnregisterBody, ClearBody);

/// `GET /api/tools` query.
#[derive(Deserialize, IntoParams)]
pub struct ListQuery {
    /// One character (404 when there is none of that name); absent or empty: every character.
    #[serde(default, deserialize_with = "lenient::text")]
    pub role: Option<String>,
}

companiond_core::query_rejected!(ToolsError, ToolsError::Invalid => ListQuery);

/// `200` with the answer (never cached), or the error's envelope.
fn respond<T: Serialize>(r: Result<T, ToolsError>) -> Response {
    match r {
        Ok(v) => no_store(ok_json(v)),
        Err(e) => e.into_response(),
    }
}

/// `POST /api/tools/register`: ok when at least one role accepted it.
pub async fn register(
    _peer: Loopback,
    State(st): State<AppState>,
    BodyOf(body): BodyOf<RegisterBody>,
) -> Response {
    respond(validation::registration(body).and_then(|reg| {
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
pub async fn unregister(
    _peer: Loopback,
    State(st): State<AppState>,
    BodyOf(body): BodyOf<UnregisterBody>,
) -> Response {
    respond(validation::name(body.name).and_then(|name| {
        let role = validation::role(body.role);
        let out = registry::unregister(&st, &name, role.as_deref())?;
        Ok(Unregistered {
            ok: removal_ok(&out),
            removed: out.changed > 0,
            name,
            affected_roles: out.affected_roles,
            failed_roles: out.failed_roles,
        })
    }))
}

/// `POST /api/tools/clear` `{source, role?}`.
pub async fn clear(
    _peer: Loopback,
    State(st): State<AppState>,
    BodyOf(body): BodyOf<ClearBody>,
) -> Response {
    respond(validation::source(body.source).and_then(|source| {
        let role = validation::role(body.role);
        let out = registry::clear(&st, &source, role.as_deref())?;
        Ok(Cleared {
            ok: removal_ok(&out),
            removed: out.changed,
            source,
            affected_roles: out.affected_roles,
            failed_roles: out.failed_roles,
        })
    }))
}

/// `GET /api/tools[?role=]`: `{ok, tools_by_role}`, written straight to bytes.
pub async fn list(
    _peer: Loopback,
    State(st): State<AppState>,
    QueryOf(q): QueryOf<ListQuery>,
) -> Response {
    match registry::list_body(&st, q.role.as_deref()) {
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

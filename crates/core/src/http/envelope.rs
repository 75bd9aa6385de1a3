//! The error envelopes of the families (each family answers its errors in one
//! of these shapes; docs/CONVENTIONS.md), the JSON body extractor that answers
//! 422, and the no-store helper.
//!
//! Each family keeps one error enum and maps it to its envelope with the
//! builders here; nobody writes JSON by hand.

use std::marker::PhantomData;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Set `key` of an envelope's extra fields to `value` as JSON (null when it
/// does not serialize).
fn put(map: &mut Map<String, Value>, key: &str, value: impl Serialize) {
    map.insert(
        key.to_string(),
        serde_json::to_value(value).unwrap_or(Value::Null),
    );
}

/// `status` with the JSON of `body`.
fn json_status(status: StatusCode, body: impl Serialize) -> Response {
    (status, Json(body)).into_response()
}

/// The builder methods every envelope has: `status` (the answer), and `with`
/// (an extra top-level field) for those with extra fields.
macro_rules! envelope_builders {
    ($($envelope:ident),* ; extra: $($with_extra:ident),*) => {
        $(impl $envelope {
            pub fn status(self, status: StatusCode) -> Response {
                json_status(status, self)
            }
        })*
        $(impl $with_extra {
            pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
                put(&mut self.extra, key, value);
                self
            }
        })*
    };
}

envelope_builders!(SuccessError, OkReason, Detail, CloudError; extra: SuccessError, OkReason, CloudError);

/// `{success:false, error, error_code?, ...extra}` — config, preferences, memory, MMD,
/// PNGTuber, characters and the system helpers.
#[derive(Debug, Serialize, ToSchema)]
pub struct SuccessError {
    pub success: bool,
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error_code: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SuccessError {
    pub fn new(error: impl Into<String>) -> Self {
        SuccessError {
            success: false,
            error: error.into(),
            error_code: None,
            extra: Map::new(),
        }
    }
    pub fn code(mut self, code: impl Into<String>) -> Self {
        self.error_code = Some(code.into());
        self
    }
}

/// `{ok:false, reason, ...extra}` — games, onboarding and the proactive-mode helpers.
#[derive(Debug, Serialize, ToSchema)]
pub struct OkReason {
    pub ok: bool,
    pub reason: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl OkReason {
    pub fn new(reason: impl Into<String>) -> Self {
        OkReason {
            ok: false,
            reason: reason.into(),
            extra: Map::new(),
        }
    }
}

/// `{detail}` — the jukebox's explicit route errors and request validation.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DetailError)] // `Detail` is a common name among the families' own types
pub struct Detail {
    pub detail: Value,
}

impl Detail {
    pub fn new(detail: impl Into<String>) -> Self {
        Detail {
            detail: Value::String(detail.into()),
        }
    }
}

/// The cloud-save envelope: `{success:false, error, code, message, message_key,
/// message_params, character_name, ...extra}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CloudError {
    pub success: bool,
    pub error: String,
    pub code: String,
    pub message: String,
    pub message_key: String,
    pub message_params: Map<String, Value>,
    #[schema(required = true)]
    pub character_name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CloudError {
    /// `code` is the machine code (e.g. `CLOUDSAVE_CHARACTER_NOT_FOUND`); the
    /// message key is derived from it (`cloudsave.error.character_not_found`).
    pub fn new(code: &str, message: impl Into<String>, character: Option<&str>) -> Self {
        let message = message.into();
        let key = code.trim_start_matches("CLOUDSAVE_").to_ascii_lowercase();
        CloudError {
            success: false,
            error: message.clone(),
            code: code.to_string(),
            message,
            message_key: format!("cloudsave.error.{key}"),
            message_params: Map::new(),
            character_name: character.map(str::to_string),
            extra: Map::new(),
        }
    }
    pub fn param(mut self, key: &str, value: impl Serialize) -> Self {
        put(&mut self.message_params, key, value);
        self
    }
}

/// How a family answers guard and body failures. `code` is a stable machine
/// reason (`invalid_body`, `csrf_validation_failed`, `forbidden`), `message` text for people.
pub trait Envelope: Send + Sync + 'static {
    fn reject(status: StatusCode, code: &str, message: &str) -> Response;
}

/// Families answering `{success:false, error, error_code}`.
pub struct SuccessEnvelope;
impl Envelope for SuccessEnvelope {
    fn reject(status: StatusCode, code: &str, message: &str) -> Response {
        SuccessError::new(message).code(code).status(status)
    }
}

/// Families answering `{ok:false, reason}`.
pub struct OkEnvelope;
impl Envelope for OkEnvelope {
    fn reject(status: StatusCode, code: &str, message: &str) -> Response {
        OkReason::new(code).with("error", message).status(status)
    }
}

/// Families answering `{detail}`.
pub struct DetailEnvelope;
impl Envelope for DetailEnvelope {
    fn reject(status: StatusCode, _code: &str, message: &str) -> Response {
        Detail::new(message).status(status)
    }
}

/// The four envelopes by name: which one answers the refusals (Host, CSRF,
/// body, panic) of a path, and how `/openapi.json` names its schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EnvelopeKind {
    /// [`SuccessError`].
    Success,
    /// [`OkReason`].
    Ok,
    /// [`Detail`].
    Detail,
    /// [`CloudError`].
    Cloud,
}

impl EnvelopeKind {
    /// The envelope of the family that owns `path`: `/api/game/` and
    /// `/api/icebreaker/` `{ok, reason}`, the jukebox `{detail}`, cloud save its
    /// own, `{success, error_code}` elsewhere.
    pub fn for_path(path: &str) -> EnvelopeKind {
        if path.starts_with("/api/game/") || path.starts_with("/api/icebreaker/") {
            EnvelopeKind::Ok
        } else if path.starts_with("/api/jukebox/") {
            EnvelopeKind::Detail
        } else if path.starts_with("/api/cloudsave/") {
            EnvelopeKind::Cloud
        } else {
            EnvelopeKind::Success
        }
    }

    /// Answer `status` with the stable machine `code` and a `message` for people.
    pub fn reject(self, status: StatusCode, code: &str, message: &str) -> Response {
        match self {
            EnvelopeKind::Success => SuccessEnvelope::reject(status, code, message),
            EnvelopeKind::Ok => OkEnvelope::reject(status, code, message),
            EnvelopeKind::Detail => DetailEnvelope::reject(status, code, message),
            EnvelopeKind::Cloud => {
                CloudError::new(&Self::cloud_code(code), message, None).status(status)
            }
        }
    }

    /// The value a machine `code` takes in this envelope's code field
    /// (cloud save spells it `CLOUDSAVE_<CODE>`).
    pub fn code_value(self, code: &str) -> String {
        match self {
            EnvelopeKind::Cloud => Self::cloud_code(code),
            _ => code.to_string(),
        }
    }

    fn cloud_code(code: &str) -> String {
        format!("CLOUDSAVE_{}", code.to_ascii_uppercase())
    }
}

/// A JSON body. Malformed JSON, a non-matching shape or a wrong field type is
/// answered with HTTP 422 in the family's envelope `E`. The body is parsed
/// whatever its Content-Type; an empty body counts as `{}`.
pub struct JsonBody<T, E: Envelope = SuccessEnvelope>(pub T, pub PhantomData<E>);

impl<T, E: Envelope> JsonBody<T, E> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

/// Largest JSON body accepted by [`JsonBody`] (uploads use multipart and stream).
pub const MAX_JSON_BODY: usize = 4 * 1024 * 1024;

/// Read a request body (at most [`MAX_JSON_BODY`]) and parse it as JSON.
/// An empty body counts as `{}`.
pub async fn read_json_body<T: DeserializeOwned>(req: Request) -> Result<T, (StatusCode, String)> {
    let bytes = axum::body::to_bytes(req.into_body(), MAX_JSON_BODY)
        .await
        .map_err(|_| {
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body too large or unreadable".to_string(),
            )
        })?;
    let slice: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
    let invalid = |e: serde_json::Error| {
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("invalid request body: {e}"),
        )
    };
    let value: Value = serde_json::from_slice(slice).map_err(invalid)?;
    match with_whole_numbers(&value) {
        Some(whole) => serde_json::from_value(value).or_else(|_| serde_json::from_value(whole)),
        None => serde_json::from_value(value),
    }
    .map_err(invalid)
}

impl<S, T, E> FromRequest<S> for JsonBody<T, E>
where
    S: Send + Sync,
    T: DeserializeOwned,
    E: Envelope,
{
    type Rejection = Response;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        match read_json_body(req).await {
            Ok(v) => Ok(JsonBody(v, PhantomData)),
            Err((status, msg)) => Err(E::reject(status, "invalid_body", &msg)),
        }
    }
}

/// Why a body did not become its type (what [`BodyOf`] hands the family's
/// [`BodyRejection`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyFault {
    /// Larger than the type's limit (or unreadable).
    TooLarge { limit: usize },
    /// Not JSON.
    NotJson(String),
    /// JSON, but not an object.
    NotObject,
    /// JSON of another shape: the field that failed (`outer.inner` deeper
    /// down, empty for the object itself, e.g. a missing field) and why.
    Invalid { field: String, why: String },
}

impl std::fmt::Display for BodyFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyFault::TooLarge { limit } => write!(f, "the body is larger than {limit} bytes"),
            BodyFault::NotJson(e) => write!(f, "invalid JSON body: {e}"),
            BodyFault::NotObject => f.write_str("body must be a JSON object"),
            BodyFault::Invalid { field, why } if field.is_empty() => f.write_str(why),
            BodyFault::Invalid { field, why } => write!(f, "{field}: {why}"),
        }
    }
}

/// How the family of a body type answers a body that does not parse, and how
/// large a body it reads.
pub trait BodyRejection {
    /// The family's error (its `IntoResponse` picks status and envelope).
    type Error: IntoResponse;
    /// Largest body read, in bytes.
    const LIMIT: usize = MAX_JSON_BODY;
    /// A body of JSON `null` reads as `{}` (the cloud-save options).
    const NULL_IS_EMPTY: bool = false;
    /// The error for a body that does not parse.
    fn rejected(fault: BodyFault) -> Self::Error;
}

/// `From<Map<String, Value>>` for body types read whole as their ordered JSON
/// object (`#[serde(from = "Map<String, Value>")]`, judged key by key in the
/// order sent): the map goes to `field`, and every other field (a `PhantomData`
/// naming a known key for the document) takes its default, so the type must
/// derive `Default`. `ordered_body!(CardForm => form, MasterForm => form);`
#[macro_export]
macro_rules! ordered_body {
    ($($t:ty => $field:ident),+ $(,)?) => {$(
        impl ::core::convert::From<::serde_json::Map<String, ::serde_json::Value>> for $t {
            fn from(map: ::serde_json::Map<String, ::serde_json::Value>) -> Self {
                Self {
                    $field: map,
                    ..::core::default::Default::default()
                }
            }
        }
    )+};
}

/// Implement [`BodyRejection`] for body types whose family answers a body that
/// does not parse with `make(fault)`, of type `err`:
/// `body_rejected!(ToolsError, |f: BodyFault| ToolsError::Invalid(f.to_string()) => RegisterBody);`
/// `limit = N;` after the error type sets [`BodyRejection::LIMIT`].
#[macro_export]
macro_rules! body_rejected {
    ($err:ty, limit = $limit:expr, $make:expr => $($t:ty),+ $(,)?) => {$(
        impl $crate::envelope::BodyRejection for $t {
            type Error = $err;
            const LIMIT: usize = $limit;
            fn rejected(fault: $crate::envelope::BodyFault) -> $err {
                ($make)(fault)
            }
        }
    )+};
    ($err:ty, $make:expr => $($t:ty),+ $(,)?) => {$(
        impl $crate::envelope::BodyRejection for $t {
            type Error = $err;
            fn rejected(fault: $crate::envelope::BodyFault) -> $err {
                ($make)(fault)
            }
        }
    )+};
}

/// The answer [`JsonBody`] gives a body that does not parse, in envelope `E`:
/// 413 past the limit, else 422 `invalid_body` (for a family whose routes
/// answered through `JsonBody` before their bodies were typed).
pub fn body_refused<E: Envelope>(fault: BodyFault) -> Response {
    match fault {
        BodyFault::TooLarge { .. } => E::reject(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_body",
            "request body too large or unreadable",
        ),
        f => E::reject(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            &format!("invalid request body: {f}"),
        ),
    }
}

/// A JSON object body parsed into `T`: the same type documents the route's body
/// (`Api::json_body::<T>()` / `own_json_body`), so the document and the parser
/// cannot differ. The body is read whatever its Content-Type, up to
/// `T::LIMIT` bytes; an empty body counts as `{}`. A body that does
/// not parse is answered by `T`'s family ([`BodyRejection`]), the message
/// naming the field that failed.
pub struct BodyOf<T>(pub T);

/// Parse `bytes` as the JSON object of `T` (an empty body is `{}`). Any other JSON
/// value is [`BodyFault::NotObject`] (serde would read an array as a struct's
/// fields in order).
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyFault> {
    parse_body_with(bytes, false)
}

/// [`parse_body`], with JSON `null` read as `{}` when `null_is_empty`.
pub fn parse_body_with<T: DeserializeOwned>(
    bytes: &[u8],
    null_is_empty: bool,
) -> Result<T, BodyFault> {
    let value: Value = if bytes.is_empty() {
        Value::Object(Map::new())
    } else {
        match serde_json::from_slice(bytes).map_err(|e| BodyFault::NotJson(e.to_string()))? {
            Value::Null if null_is_empty => Value::Object(Map::new()),
            v => v,
        }
    };
    if !value.is_object() {
        return Err(BodyFault::NotObject);
    }
    let value = match with_whole_numbers(&value) {
        // `5.0` for an integer field: read again with whole numbers written as
        // integers; a field stored as sent keeps `5.0` when the first read takes it.
        Some(whole) => match serde_json::from_value::<T>(value) {
            Ok(t) => return Ok(t),
            Err(_) => whole,
        },
        None => value,
    };
    serde_path_to_error::deserialize(value).map_err(|e| BodyFault::Invalid {
        field: if e.path().iter().next().is_none() {
            String::new()
        } else {
            e.path().to_string()
        },
        why: e.inner().to_string(),
    })
}

/// `v` with every number that has a zero fraction (`5.0`) written as the
/// integer it is, or `None` when it has none. JSON Schema's `integer`, which
/// the document promises, counts `5.0` as one; serde refuses it for an integer field.
fn with_whole_numbers(v: &Value) -> Option<Value> {
    fn whole(v: &Value) -> Option<i64> {
        v.as_f64()
            .filter(|f| v.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    }
    fn any(v: &Value) -> bool {
        match v {
            Value::Array(items) => items.iter().any(any),
            Value::Object(m) => m.values().any(any),
            n => whole(n).is_some(),
        }
    }
    fn rewrite(v: &Value) -> Value {
        match v {
            Value::Array(items) => Value::Array(items.iter().map(rewrite).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), rewrite(v))).collect())
            }
            n => whole(n).map(Value::from).unwrap_or_else(|| n.clone()),
        }
    }
    any(v).then(|| rewrite(v))
}

impl<T: DeserializeOwned + BodyRejection> BodyOf<T> {
    /// Read and parse `body` as [`BodyOf`] does, for a handler that must
    /// check something else before the body (it takes `axum::body::Body`).
    pub async fn read(body: axum::body::Body) -> Result<T, T::Error> {
        let bytes = axum::body::to_bytes(body, T::LIMIT)
            .await
            .map_err(|_| T::rejected(BodyFault::TooLarge { limit: T::LIMIT }))?;
        parse_body_with(&bytes, T::NULL_IS_EMPTY).map_err(T::rejected)
    }
}

impl<S, T> FromRequest<S> for BodyOf<T>
where
    S: Send + Sync,
    T: DeserializeOwned + BodyRejection,
{
    type Rejection = Response;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        Self::read(req.into_body())
            .await
            .map(BodyOf)
            .map_err(IntoResponse::into_response)
    }
}

/// A query string parsed into `T`: the same type documents the route's
/// parameters (`Api::query::<T>()`, `T: IntoParams`), so the document and the
/// parser cannot differ. A query that does not parse (a number that is not one,
/// a value out of its set) is answered by `T`'s family ([`QueryRejection`]).
/// Unknown parameters are ignored; a missing query is an empty one.
pub struct QueryOf<T>(pub T);

/// How the family of a query type answers a query that does not parse.
pub trait QueryRejection {
    /// The family's error (its `IntoResponse` picks status and envelope).
    type Error: IntoResponse;
    /// The error for a query that does not parse; `message` says why.
    fn rejected(message: String) -> Self::Error;
}

/// Implement [`QueryRejection`] for query types whose family answers a query
/// that does not parse with `make(message)`, of type `err`:
/// `query_rejected!(SystemError, SystemError::InvalidQuery => ChangelogQuery, SurveyQuery);`
#[macro_export]
macro_rules! query_rejected {
    ($err:ty, $make:expr => $($t:ty),+ $(,)?) => {$(
        impl $crate::envelope::QueryRejection for $t {
            type Error = $err;
            fn rejected(message: String) -> $err {
                ($make)(message)
            }
        }
    )+};
}

/// Parse a query string as `T`. A parameter given twice takes its last value,
/// as the original application's server did.
pub fn parse_query<T: DeserializeOwned>(query: Option<&str>) -> Result<T, String> {
    let raw = query.unwrap_or("");
    let invalid = |e: &dyn std::fmt::Display| format!("invalid query: {e}");
    let sent = serde_urlencoded::from_str::<Vec<(String, String)>>(raw).map_err(|e| invalid(&e))?;
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (k, v) in sent {
        match pairs.iter_mut().find(|(key, _)| *key == k) {
            Some(p) => p.1 = v,
            None => pairs.push((k, v)),
        }
    }
    let deduped = serde_urlencoded::to_string(&pairs).map_err(|e| invalid(&e))?;
    serde_urlencoded::from_str(&deduped).map_err(|e| invalid(&e))
}

/// Lenient readers of query values for `#[serde(default, deserialize_with = ..)]`:
/// values are trimmed and a blank one counts as absent.
pub mod lenient {
    use serde::{Deserialize, Deserializer};

    /// A trimmed text; blank is `None`.
    pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        Ok(s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
    }

    /// A switch: on for `true` or `1`, off for `false`, `0` or no parameter;
    /// anything else (blank too) is an error (the document says boolean).
    pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        match s.as_deref().map(str::trim) {
            Some("true" | "1") => Ok(true),
            None | Some("false" | "0") => Ok(false),
            Some(other) => Err(serde::de::Error::custom(format!(
                "{other:?} is not true or false"
            ))),
        }
    }

    /// An integer (surrounding blanks allowed); blank is `None`, anything else
    /// that is not an integer an error.
    pub fn int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        match text(d)? {
            None => Ok(None),
            Some(s) => s
                .parse::<i64>()
                .map(Some)
                .map_err(|_| serde::de::Error::custom(format!("{s:?} is not an integer"))),
        }
    }
}

/// Readers of JSON body fields for `#[serde(default, deserialize_with = ..)]`,
/// for the lenient shapes the original pages send.
pub mod loose {
    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    /// A field that may be absent but not null: `Some` of its value (with
    /// `#[serde(default)]`, absent is `None`; null is refused).
    pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        T::deserialize(d).map(Some)
    }

    /// A `T` or `null`, which counts as absent (the field takes its default),
    /// as the original pages send an unset field. A value of another type is
    /// refused: the document says which type the field is.
    pub fn or_none<'de, D: Deserializer<'de>, T: DeserializeOwned>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            v => serde_json::from_value(v)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }

    /// An integer, its decimal text (trimmed) or a number (truncated); anything
    /// else counts as absent.
    pub fn int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        })
    }
}

impl<S, T> FromRequestParts<S> for QueryOf<T>
where
    S: Send + Sync,
    T: DeserializeOwned + QueryRejection,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query())
            .map(QueryOf)
            .map_err(|m| T::rejected(m).into_response())
    }
}

/// Add `Cache-Control: no-store` to any response.
pub fn no_store(r: impl IntoResponse) -> Response {
    let mut resp = r.into_response();
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-store, no-cache, must-revalidate"),
    );
    resp.headers_mut()
        .insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    resp
}

/// `200` with a JSON body.
pub fn ok_json(v: impl Serialize) -> Response {
    Json(v).into_response()
}

#[cfg(test)]
mod query_tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Q {
        #[serde(default, deserialize_with = "lenient::int")]
        limit: Option<i64>,
        #[serde(default, deserialize_with = "lenient::text")]
        name: Option<String>,
    }

    #[test]
    fn lenient_last_wins() {
        let q = |s| parse_query::<Q>(Some(s));
        assert_eq!(
            q("limit=1&limit=%205&name=+a+").ok(),
            Some(Q {
                limit: Some(5),
                name: Some("a".into())
            })
        );
        assert_eq!(
            q("limit=&name=").ok(),
            Some(Q {
                limit: None,
                name: None
            })
        );
        assert_eq!(
            parse_query::<Q>(None).ok(),
            Some(Q {
                limit: None,
                name: None
            })
        );
        assert!(q("limit=abc").is_err_and(|e| e.contains("not an integer")));
        assert!(q("limit=99999999999999999999").is_err());
    }
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    struct B {
        name: String,
        #[serde(default, deserialize_with = "loose::int")]
        n: Option<i64>,
        #[serde(default, deserialize_with = "loose::or_none")]
        on: Option<bool>,
        #[serde(default, deserialize_with = "loose::present")]
        kept: Option<String>,
    }

    #[derive(Deserialize, Debug)]
    struct W {
        count: u32,
        #[serde(default)]
        kept: Option<Value>,
    }

    #[test]
    fn a_whole_number_is_an_integer_and_a_kept_value_stays_as_sent() {
        let w = parse_body::<W>(br#"{"count": 5.0}"#);
        assert!(w.is_ok_and(|w| w.count == 5));
        assert!(parse_body::<W>(br#"{"count": 5.5}"#).is_err());
        let w = parse_body::<W>(br#"{"count": 1, "kept": [2.0]}"#);
        assert!(w.is_ok_and(|w| w.kept == Some(serde_json::json!([2.0]))));
    }

    #[test]
    fn faults_name_the_field() {
        let p = |s: &str| parse_body::<B>(s.as_bytes());
        let b = p(r#"{"name": "a", "n": " 7 ", "on": null}"#);
        assert!(b
            .as_ref()
            .is_ok_and(|b| b.name == "a" && b.n == Some(7) && b.on.is_none()));
        assert!(
            p(r#"{"name": "a", "on": "yes"}"#).is_err_and(|f| f.to_string().starts_with("on: "))
        );
        assert!(p(r#"{"name": "a", "n": 2.9}"#).is_ok_and(|b| b.n == Some(2)));
        assert!(p("   ").is_err_and(|f| matches!(f, BodyFault::NotJson(_))));
        assert_eq!(
            p("").err(),
            Some(BodyFault::Invalid {
                field: String::new(),
                why: "missing field `name`".into()
            })
        );
        assert_eq!(p("[1]").err(), Some(BodyFault::NotObject));
        assert!(p(r#"{"name": "a", "kept": "k"}"#).is_ok_and(|b| b.kept.as_deref() == Some("k")));
        assert!(matches!(p("{x"), Err(BodyFault::NotJson(_))));
        assert!(p(r#"{"name": 5}"#).is_err_and(|f| f.to_string().starts_with("name: invalid type")));
        assert!(
            p(r#"{"name": "a", "kept": null}"#).is_err_and(|f| f.to_string().starts_with("kept: "))
        );
    }
}

//! The OpenAPI 3.1 document served at `/openapi.json` (docs/openapi.md).
//!
//! Each route states what it reads and answers where it is registered
//! ([`super::api::Api`]'s `query`, `json_body`, `multipart`, `ok`, `fails`);
//! this module turns those statements into the document. Schemas come from the
//! Rust types the handlers parse and serialize (`utoipa::ToSchema`,
//! `utoipa::IntoParams`), so the description follows the code.
//!
//! Besides what a route states, every operation lists the refusals of the front
//! door and guards that answer before its handler (docs/security.md, Host and
//! Origin, CSRF): 403 `host_not_allowed` everywhere, 403 `csrf_validation_failed` for
//! writes (a foreign `Origin`) and for CSRF-guarded routes (whose operations also
//! carry the `csrf` security scheme, the `X-CSRF-Token` header), and 413/422
//! `invalid_body` where a JSON body is read — each in the envelope of the path.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use axum::http::Method;
use axum::response::IntoResponse;
use futures::FutureExt;
use serde_json::Value;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::example::{Example, ExampleBuilder};
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, ArrayBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat,
    Type,
};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityRequirement, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, Content, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr, Required,
    ResponseBuilder,
};
use utoipa::ToSchema;

use super::envelope::{CloudError, Detail, EnvelopeKind, OkReason, SuccessError};
use super::guards::Csrf;

/// The name of the CSRF security scheme in `components.securitySchemes`.
pub const CSRF_SCHEME: &str = "csrf";

/// A schema and the named schemas it refers to (which go to `components.schemas`).
#[derive(Clone, Debug)]
pub struct Typed {
    pub schema: RefOr<Schema>,
    pub components: Vec<(String, RefOr<Schema>)>,
}

/// Names `ToSchema` gives to containers and primitives: such a type is written
/// inline, a named type is a `$ref` into the components.
const INLINE_NAMES: &[&str] = &[
    "Vec", "Option", "HashMap", "BTreeMap", "Value", "String", "str", "bool", "u8", "u16", "u32",
    "u64", "i32", "i64", "f32", "f64", "usize", "Box", "Arc", "IndexMap",
];

impl Typed {
    /// The schema of `T`: a `$ref` to `components.schemas[T::name()]` for a
    /// named type (a generic one is named after its arguments: `Succeeded_Summary`).
    pub fn of<T: ToSchema>() -> Typed {
        let mut components = Vec::new();
        T::schemas(&mut components);
        let name = component_name::<T>();
        let schema = if INLINE_NAMES.contains(&name.as_ref()) {
            T::schema()
        } else {
            components.push((name.to_string(), T::schema()));
            RefOr::Ref(Ref::from_schema_name(name))
        };
        Typed { schema, components }
    }
}

impl Typed {
    /// Whether this (object) schema lists a required field, looked up through
    /// its `$ref`, `allOf` parts included: then a blank body, read as `{}`, is refused.
    pub fn requires_a_field(&self) -> bool {
        fn requires(s: &RefOr<Schema>, comps: &[(String, RefOr<Schema>)], depth: u8) -> bool {
            if depth > 8 {
                return false;
            }
            match s {
                RefOr::Ref(r) => {
                    let name = r.ref_location.rsplit('/').next().unwrap_or_default();
                    comps
                        .iter()
                        .find(|(n, _)| n == name)
                        .is_some_and(|(_, s)| requires(s, comps, depth + 1))
                }
                RefOr::T(Schema::Object(o)) => !o.required.is_empty(),
                RefOr::T(Schema::AllOf(a)) => a.items.iter().any(|s| requires(s, comps, depth + 1)),
                RefOr::T(_) => false,
            }
        }
        requires(&self.schema, &self.components, 0)
    }

    /// An array of `T`, its items a `$ref` when `T` is named.
    pub fn list_of<T: ToSchema>() -> Typed {
        let item = Typed::of::<T>();
        Typed {
            schema: RefOr::T(Schema::Array(
                ArrayBuilder::new().items(item.schema).build(),
            )),
            components: item.components,
        }
    }
}

/// `T::name()`, with the last segment of each generic argument appended for a
/// generic type (whose derived name leaves them out).
fn component_name<T: ToSchema>() -> Cow<'static, str> {
    let full = std::any::type_name::<T>();
    let name = T::name();
    match full.split_once('<') {
        Some((_, args)) if !INLINE_NAMES.contains(&name.as_ref()) => {
            let mut out = name.to_string();
            for arg in args.split(['<', '>', ',', ' ']) {
                if let Some(last) = arg.rsplit("::").next().filter(|s| !s.is_empty()) {
                    out.push('_');
                    out.push_str(last);
                }
            }
            Cow::Owned(out)
        }
        _ => name,
    }
}

/// One field of a multipart body.
#[derive(Clone, Debug)]
pub struct Part {
    pub name: &'static str,
    pub file: bool,
    pub required: bool,
}

impl Part {
    /// A required file part (any content type).
    pub const fn file(name: &'static str) -> Part {
        Part {
            name,
            file: true,
            required: true,
        }
    }
    /// A required text part.
    pub const fn text(name: &'static str) -> Part {
        Part {
            name,
            file: false,
            required: true,
        }
    }
    /// The same part, optional.
    pub const fn optional(mut self) -> Part {
        self.required = false;
        self
    }
}

/// What a request carries.
#[derive(Clone, Debug)]
pub enum Body {
    /// Read with `JsonBody` (a bad body is answered 413/422 in the path's envelope).
    Json(Box<Typed>),
    /// Read by the handler itself, may be absent; its failures are the family enum's.
    OwnJson(Box<Typed>),
    Multipart(Vec<Part>),
}

/// A successful answer: its content type and schema (`None`: any bytes).
#[derive(Clone, Debug)]
pub struct Success {
    pub content_type: Cow<'static, str>,
    pub schema: Option<Typed>,
    pub description: Cow<'static, str>,
}

/// One answer an error enum can give: status, envelope and (when the variant
/// has one) the machine code its envelope carries.
#[derive(Clone, Debug)]
pub struct ErrorDoc {
    pub status: u16,
    pub envelope: EnvelopeKind,
    pub code: Option<Cow<'static, str>>,
    pub description: Cow<'static, str>,
    /// A body this answer really had (shown as the response's example).
    pub example: Option<Value>,
}

impl ErrorDoc {
    /// `status` in `envelope`, described for people.
    pub fn new(
        status: u16,
        envelope: EnvelopeKind,
        description: impl Into<Cow<'static, str>>,
    ) -> Self {
        ErrorDoc {
            status,
            envelope,
            code: None,
            description: description.into(),
            example: None,
        }
    }

    /// The answer `sample` really gives, read back: its status, its envelope
    /// (told by its fields), its machine code and its body as the example. An
    /// error enum lists one sample per variant, so the description is the
    /// answer itself and cannot drift from it.
    pub fn observed(description: impl Into<Cow<'static, str>>, sample: impl IntoResponse) -> Self {
        let response = sample.into_response();
        let status = response.status().as_u16();
        // The envelopes are built in memory: the body is ready at once.
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .now_or_never()
            .and_then(Result::ok)
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .unwrap_or(Value::Null);
        let envelope = if body.get("detail").is_some() {
            EnvelopeKind::Detail
        } else if body.get("ok").is_some() {
            EnvelopeKind::Ok
        } else if body.get("message_key").is_some() {
            EnvelopeKind::Cloud
        } else {
            EnvelopeKind::Success
        };
        let code = code_field(envelope)
            .and_then(|f| body.get(f))
            .and_then(Value::as_str)
            .map(|c| Cow::Owned(c.to_string()));
        ErrorDoc {
            status,
            envelope,
            code,
            description: description.into(),
            example: Some(body),
        }
    }
    /// This answer's machine code varies (e.g. one per validation rule): the
    /// envelope's code field is documented as any string.
    pub fn any_code(mut self) -> Self {
        self.code = None;
        self
    }

    /// The machine code this answer carries (`error_code`, `reason` or `code`),
    /// exactly as sent.
    pub fn code(mut self, code: impl Into<Cow<'static, str>>) -> Self {
        self.code = Some(code.into());
        self
    }
}

/// A family error enum lists every answer it can give (status, envelope, code),
/// including the `200` with `success:false` where the interface defines one.
/// `Api::fails::<E>()` adds them to an operation.
pub trait DocumentedError {
    fn answers() -> Vec<ErrorDoc>;
}

/// One documented operation.
#[derive(Clone, Debug)]
pub struct OpDoc {
    pub method: Method,
    pub path: String,
    pub summary: String,
    pub tag: String,
    /// Explicit operation id (after the tag); default: the summary's words.
    pub id: Option<String>,
    pub params: Vec<Parameter>,
    pub body: Option<Body>,
    pub ok: Option<Success>,
    pub errors: Vec<ErrorDoc>,
    pub csrf: Option<Csrf>,
}

impl OpDoc {
    pub fn new(method: Method, path: &str, summary: &str, tag: &str) -> OpDoc {
        OpDoc {
            method,
            path: path.to_string(),
            summary: summary.to_string(),
            tag: tag.to_string(),
            id: None,
            params: Vec::new(),
            body: None,
            ok: None,
            errors: Vec::new(),
            csrf: None,
        }
    }

    /// `{tag}_{id}`, or `{tag}_{summary words}`: reads as a generated method name.
    pub fn operation_id(&self) -> String {
        let rest = self.id.as_deref().unwrap_or(&self.summary);
        format!("{}_{}", slug(&self.tag), slug(rest))
    }

    /// The path in OpenAPI syntax (axum's `{*rest}` becomes `{rest}`).
    pub fn openapi_path(&self) -> String {
        self.path.replace("{*", "{")
    }
}

/// A family's tag: name and description.
#[derive(Clone, Debug)]
pub struct TagDoc {
    pub name: String,
    pub description: Option<String>,
}

/// The document's description (links the WebSocket protocol's docs).
const DESCRIPTION: &str = "Local backend of the desktop companion application.\n\n\
Every route answers errors in its family's envelope. Writes sent by a page of another site and \
requests whose `Host` is not a name of this machine are refused with 403 before any handler runs; \
CSRF-guarded routes need the token of `--csrf-token` (or `GET /api/config/page_config`) in \
`X-CSRF-Token`.\n\n\
The chat WebSocket (`/ws/{lanlan_name}`) is described frame by frame in \
[docs/chat-protocol.md](docs/chat-protocol.md); this document covers the HTTP routes \
(docs/openapi.md says how to browse it and generate a client).";

/// Build the OpenAPI 3.1 document for `ops` with the family tags `tags`.
pub fn document(ops: &[OpDoc], tags: &[TagDoc]) -> OpenApi {
    let mut paths = Paths::new();
    let mut components: BTreeMap<String, RefOr<Schema>> = BTreeMap::new();
    for (name, schema) in envelope_schemas() {
        components.insert(name, schema);
    }
    let mut ids = BTreeSet::new();
    let mut collisions = BTreeSet::new();
    for op in ops {
        let (mut operation, used) = operation(op);
        for (name, schema) in used {
            // Two types of one name would silently share one schema: recorded,
            // and `problems` reports it (rename one, e.g. `#[schema(as = ..)]`).
            if let Some(seen) = components.get(&name) {
                if serde_json::to_value(seen).ok() != serde_json::to_value(&schema).ok() {
                    collisions.insert(name.clone());
                }
            }
            components.entry(name).or_insert(schema);
        }
        // Two routes with the same summary: the later ones are numbered.
        let base = op.operation_id();
        let mut id = base.clone();
        let mut n = 1;
        while !ids.insert(id.clone()) {
            n += 1;
            id = format!("{base}_{n}");
        }
        operation.operation_id = Some(id);
        paths.add_path_operation(op.openapi_path(), vec![http_method(&op.method)], operation);
    }
    let mut comp = ComponentsBuilder::new().security_scheme(
        CSRF_SCHEME,
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "X-CSRF-Token",
            "the `--csrf-token` value (also `csrf_token` of GET /api/config/page_config)",
        ))),
    );
    for (name, schema) in components {
        comp = comp.schema(name, schema);
    }
    let mut seen = BTreeSet::new();
    let tags: Vec<_> = tags
        .iter()
        .filter(|t| seen.insert(t.name.clone()))
        .map(|t| {
            TagBuilder::new()
                .name(&t.name)
                .description(t.description.clone())
                .build()
        })
        .collect();
    let mut doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("companiond")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(DESCRIPTION))
                .build(),
        )
        .paths(paths)
        .components(Some(comp.build()))
        .tags(Some(tags))
        .build();
    if !collisions.is_empty() {
        tracing::error!("OpenAPI schema names used by two different types: {collisions:?}");
        doc.extensions = Some(
            ExtensionsBuilder::new()
                .add(COLLISIONS, collisions.into_iter().collect::<Vec<_>>())
                .build(),
        );
    }
    doc
}

/// Root extension listing schema names that two different types claim (only
/// present when there are some: a mistake [`problems`] reports).
const COLLISIONS: &str = "x-schema-name-collisions";

/// The envelopes' schemas (always present: the front door answers in them).
fn envelope_schemas() -> Vec<(String, RefOr<Schema>)> {
    let mut out = Vec::new();
    for t in [
        Typed::of::<SuccessError>(),
        Typed::of::<OkReason>(),
        Typed::of::<Detail>(),
        Typed::of::<CloudError>(),
    ] {
        out.extend(t.components);
    }
    out
}

fn envelope_name(kind: EnvelopeKind) -> &'static str {
    match kind {
        EnvelopeKind::Success => "SuccessError",
        EnvelopeKind::Ok => "OkReason",
        EnvelopeKind::Detail => "DetailError",
        EnvelopeKind::Cloud => "CloudError",
    }
}

/// The field that carries the machine code in `kind`.
fn code_field(kind: EnvelopeKind) -> Option<&'static str> {
    match kind {
        EnvelopeKind::Success => Some("error_code"),
        EnvelopeKind::Ok => Some("reason"),
        EnvelopeKind::Cloud => Some("code"),
        EnvelopeKind::Detail => None,
    }
}

fn http_method(m: &Method) -> HttpMethod {
    match *m {
        Method::GET => HttpMethod::Get,
        Method::PUT => HttpMethod::Put,
        Method::DELETE => HttpMethod::Delete,
        Method::PATCH => HttpMethod::Patch,
        _ => HttpMethod::Post,
    }
}

/// The answers every operation of `op` has before its handler runs.
fn front_answers(op: &OpDoc) -> Vec<ErrorDoc> {
    let path_env = EnvelopeKind::for_path(&op.path);
    let mut out = vec![ErrorDoc::new(
        403,
        path_env,
        "the Host header does not name this machine (DNS rebinding guard)",
    )
    .code(path_env.code_value("host_not_allowed"))];
    if op.method != Method::GET {
        out.push(
            ErrorDoc::new(
                403,
                path_env,
                "sent by a page of another site (foreign Origin)",
            )
            .code(path_env.code_value("csrf_validation_failed")),
        );
    }
    if let Some(csrf) = op.csrf {
        let env = match csrf {
            Csrf::Success => EnvelopeKind::Success,
            Csrf::Ok => EnvelopeKind::Ok,
        };
        out.push(
            ErrorDoc::new(403, env, "missing or wrong X-CSRF-Token").code("csrf_validation_failed"),
        );
    }
    if matches!(op.body, Some(Body::Json(_))) {
        out.push(
            ErrorDoc::new(
                422,
                path_env,
                "the body is not JSON of the documented shape",
            )
            .code(path_env.code_value("invalid_body")),
        );
        out.push(
            ErrorDoc::new(413, path_env, "the body is larger than 4 MiB")
                .code(path_env.code_value("invalid_body")),
        );
    }
    out
}

/// The operation of `op` and the component schemas it uses.
fn operation(
    op: &OpDoc,
) -> (
    utoipa::openapi::path::Operation,
    Vec<(String, RefOr<Schema>)>,
) {
    let mut used = Vec::new();
    let path = op.openapi_path();
    let mut b = OperationBuilder::new()
        .summary(Some(op.summary.clone()))
        .tag(op.tag.clone())
        .operation_id(Some(op.operation_id()));
    // Path parameters: the stated ones, a plain string for the others.
    for name in path_params(&path) {
        let stated = op
            .params
            .iter()
            .find(|p| p.name == name && p.parameter_in == ParameterIn::Path);
        b = b.parameter(stated.cloned().unwrap_or_else(|| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build()
        }));
    }
    for p in op
        .params
        .iter()
        .filter(|p| p.parameter_in != ParameterIn::Path)
    {
        b = b.parameter(p.clone());
    }
    match &op.body {
        Some(Body::Json(t)) | Some(Body::OwnJson(t)) => {
            used.extend(t.components.clone());
            // Every JSON body reader takes a blank body as `{}` (`parse_body`,
            // `read_json_body`, the families' own readers): the body is required
            // only when `{}` is not of its shape, i.e. its schema requires a field.
            let required = if t.requires_a_field() {
                Required::True
            } else {
                Required::False
            };
            b = b.request_body(Some(
                RequestBodyBuilder::new()
                    .required(Some(required))
                    .content("application/json", Content::new(Some(t.schema.clone())))
                    .build(),
            ));
        }
        Some(Body::Multipart(parts)) => {
            b = b.request_body(Some(
                RequestBodyBuilder::new()
                    .required(Some(Required::True))
                    .content(
                        "multipart/form-data",
                        Content::new(Some(multipart_schema(parts))),
                    )
                    .build(),
            ));
        }
        None => {}
    }
    if op.csrf.is_some() {
        b = b.security(SecurityRequirement::new(CSRF_SCHEME, Vec::<String>::new()));
    }
    // Responses by status: the success (200) and every error answer.
    let mut errors = op.errors.clone();
    errors.extend(front_answers(op));
    let mut statuses: BTreeSet<u16> = errors.iter().map(|e| e.status).collect();
    statuses.insert(200);
    for status in statuses {
        let here: Vec<&ErrorDoc> = errors.iter().filter(|e| e.status == status).collect();
        let mut schemas: Vec<RefOr<Schema>> = Vec::new();
        let mut descriptions: Vec<String> = Vec::new();
        let mut content_type: Cow<'static, str> = Cow::Borrowed("application/json");
        let mut any_bytes = false;
        if status == 200 {
            match &op.ok {
                Some(ok) => {
                    descriptions.push(ok.description.to_string());
                    content_type = ok.content_type.clone();
                    match &ok.schema {
                        Some(t) => {
                            used.extend(t.components.clone());
                            schemas.push(t.schema.clone());
                        }
                        None => any_bytes = true,
                    }
                }
                None => descriptions.push("success envelope".to_string()),
            }
        }
        for (kind, codes) in group_by_envelope(&here) {
            schemas.push(envelope_schema(kind, codes));
        }
        for e in &here {
            if !descriptions.iter().any(|d| d == e.description.as_ref()) {
                descriptions.push(e.description.to_string());
            }
        }
        let mut rb = ResponseBuilder::new().description(descriptions.join("; "));
        if any_bytes {
            // A file answer may come in several types (`ok_file("image/png, application/json")`):
            // bytes each, a JSON one any JSON value.
            for ct in content_type.split(',').map(str::trim) {
                let schema = if ct == "application/json" || ct.ends_with("+json") {
                    RefOr::T(Schema::Object(ObjectBuilder::new().build()))
                } else {
                    binary_schema()
                };
                rb = rb.content(ct.to_string(), Content::new(Some(schema)));
            }
        } else if !schemas.is_empty() {
            let schema = if schemas.len() == 1 {
                schemas.remove(0)
            } else {
                let mut any = AnyOfBuilder::new();
                for s in schemas {
                    any = any.item(s);
                }
                RefOr::T(Schema::AnyOf(any.build()))
            };
            let mut content = ContentBuilder::new().schema(Some(schema));
            let examples: Vec<(String, Example)> = here
                .iter()
                .filter_map(|e| {
                    let v = e.example.clone()?;
                    let name = e
                        .code
                        .as_deref()
                        .or_else(|| v.get(code_field(e.envelope)?)?.as_str())
                        .unwrap_or("error")
                        .to_string();
                    Some((
                        name,
                        ExampleBuilder::new()
                            .summary(e.description.to_string())
                            .value(Some(v))
                            .build(),
                    ))
                })
                .collect();
            if !examples.is_empty() {
                let mut seen = BTreeSet::new();
                content = content.examples_from_iter(
                    examples.into_iter().filter(|(n, _)| seen.insert(n.clone())),
                );
            }
            rb = rb.content(content_type.to_string(), content.build());
        }
        b = b.response(status.to_string(), rb.build());
    }
    (b.build(), used)
}

/// Error answers of one status grouped by envelope, with their codes (`None`:
/// some answer carries no fixed code, so the field is not restricted).
fn group_by_envelope(docs: &[&ErrorDoc]) -> BTreeMap<EnvelopeKind, Option<BTreeSet<String>>> {
    let mut out: BTreeMap<EnvelopeKind, Option<BTreeSet<String>>> = BTreeMap::new();
    for d in docs {
        let entry = out
            .entry(d.envelope)
            .or_insert_with(|| Some(BTreeSet::new()));
        match (&d.code, entry.as_mut()) {
            (Some(c), Some(set)) => {
                set.insert(c.to_string());
            }
            _ => *entry = None,
        }
    }
    out
}

/// `$ref` to the envelope, narrowed to its failure flag (`success`/`ok` false)
/// and to `codes` when every answer has one.
fn envelope_schema(kind: EnvelopeKind, codes: Option<BTreeSet<String>>) -> RefOr<Schema> {
    let r = RefOr::Ref(Ref::from_schema_name(envelope_name(kind)));
    let mut narrow = ObjectBuilder::new();
    if let Some(flag) = failure_flag(kind) {
        narrow = narrow
            .property(
                flag,
                ObjectBuilder::new()
                    .schema_type(Type::Boolean)
                    .enum_values(Some([false])),
            )
            .required(flag);
    }
    match (codes, code_field(kind)) {
        (Some(codes), Some(field)) if !codes.is_empty() => {
            narrow = narrow
                .property(
                    field,
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(codes.into_iter().collect::<Vec<_>>())),
                )
                .required(field);
        }
        _ if failure_flag(kind).is_none() => return r,
        _ => {}
    }
    RefOr::T(Schema::AllOf(
        AllOfBuilder::new().item(r).item(narrow).build(),
    ))
}

/// The field that is `false` in every answer of `kind`.
fn failure_flag(kind: EnvelopeKind) -> Option<&'static str> {
    match kind {
        EnvelopeKind::Success | EnvelopeKind::Cloud => Some("success"),
        EnvelopeKind::Ok => Some("ok"),
        EnvelopeKind::Detail => None,
    }
}

fn binary_schema() -> RefOr<Schema> {
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .build(),
    ))
}

fn multipart_schema(parts: &[Part]) -> RefOr<Schema> {
    let mut o = ObjectBuilder::new().schema_type(Type::Object);
    for p in parts {
        let field = if p.file {
            binary_schema()
        } else {
            RefOr::T(Schema::Object(
                ObjectBuilder::new().schema_type(Type::String).build(),
            ))
        };
        o = o.property(p.name, field);
        if p.required {
            o = o.required(p.name);
        }
    }
    RefOr::T(Schema::Object(o.build()))
}

fn path_params(path: &str) -> Vec<String> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|s| s.split(':').next().unwrap_or(s).to_string())
        .collect()
}

/// Lower-case words joined by `_` (`"Read one file"` → `read_one_file`).
fn slug(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join("_")
}

/// What is wrong with a served document (empty when nothing): not OpenAPI
/// 3.1, a `$ref` that does not resolve, a repeated operation id, an operation
/// without its 200 or without the Host refusal (403).
pub fn problems(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(names) = doc.get(COLLISIONS) {
        out.push(format!(
            "schema names claimed by two different types: {names}"
        ));
    }
    if doc["openapi"] != "3.1.0" {
        out.push(format!("openapi is {}, not 3.1.0", doc["openapi"]));
    }
    out.extend(
        dangling_refs(doc)
            .into_iter()
            .map(|r| format!("{r} does not resolve")),
    );
    let mut ids = BTreeSet::new();
    let paths = doc["paths"].as_object().into_iter().flatten();
    for (path, item) in paths {
        for (method, op) in item.as_object().into_iter().flatten() {
            let id = op["operationId"].as_str().unwrap_or("");
            if !ids.insert(id.to_string()) {
                out.push(format!("{method} {path}: operationId {id:?} repeated"));
            }
            for status in ["200", "403"] {
                if op["responses"].get(status).is_none() {
                    out.push(format!("{method} {path}: no {status} answer"));
                }
            }
        }
    }
    out
}

/// Every `$ref` of `doc` (a serialized document) that does not resolve inside it.
pub fn dangling_refs(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_refs(doc, doc, &mut out);
    out
}

fn collect_refs(root: &Value, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let found = r.strip_prefix('#').and_then(|p| root.pointer(p)).is_some();
                if !found {
                    out.push(r.clone());
                }
            }
            for x in m.values() {
                collect_refs(root, x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(root, x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use utoipa::IntoParams;

    #[derive(Serialize, ToSchema)]
    struct Inner {
        n: u32,
    }

    #[derive(Serialize, ToSchema)]
    struct Outer {
        name: String,
        items: Vec<Inner>,
        maybe: Option<Inner>,
    }

    #[derive(Deserialize, IntoParams)]
    #[allow(dead_code)]
    struct Q {
        /// How many.
        #[param(minimum = 1, maximum = 100)]
        limit: Option<u32>,
    }

    struct Failing;
    impl DocumentedError for Failing {
        fn answers() -> Vec<ErrorDoc> {
            vec![
                ErrorDoc::new(404, EnvelopeKind::Success, "no such thing").code("not_found"),
                ErrorDoc::new(200, EnvelopeKind::Success, "refused, answered 200"),
            ]
        }
    }

    fn sample() -> Value {
        let mut typed = OpDoc::new(Method::GET, "/api/t/{name}", "Read one thing", "t");
        typed.params = Q::into_params(|| Some(ParameterIn::Query));
        typed.ok = Some(Success {
            content_type: Cow::Borrowed("application/json"),
            schema: Some(Typed::of::<Outer>()),
            description: Cow::Borrowed("success"),
        });
        typed.errors = Failing::answers();
        let mut guarded = OpDoc::new(Method::POST, "/api/game/{*rest}", "Save", "games");
        guarded.csrf = Some(Csrf::Ok);
        guarded.body = Some(Body::Json(Box::new(Typed::of::<Outer>())));
        guarded.id = Some("save_it".into());
        let mut upload = OpDoc::new(Method::POST, "/api/t/upload", "Upload a file", "t");
        upload.body = Some(Body::Multipart(vec![
            Part::file("file"),
            Part::text("name").optional(),
        ]));
        let bare = OpDoc::new(Method::DELETE, "/api/t/{name}", "Delete one thing", "t");
        let tags = [TagDoc {
            name: "t".into(),
            description: Some("things".into()),
        }];
        let doc = document(&[typed, guarded, upload, bare], &tags);
        serde_json::to_value(&doc).expect("serializes")
    }

    #[test]
    fn the_document_is_openapi_3_1_and_every_ref_resolves() {
        let doc = sample();
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["info"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("docs/chat-protocol.md")));
        assert_eq!(dangling_refs(&doc), Vec::<String>::new());
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        for name in [
            "Outer",
            "Inner",
            "SuccessError",
            "OkReason",
            "DetailError",
            "CloudError",
        ] {
            assert!(schemas.contains_key(name), "{name} missing");
        }
        // Every operation: an id, a tag, a 200 and a description on each response.
        let mut ids = BTreeSet::new();
        for (_, item) in doc["paths"].as_object().expect("paths") {
            for (_, op) in item.as_object().expect("operations") {
                let id = op["operationId"].as_str().expect("id").to_string();
                assert!(ids.insert(id.clone()), "duplicate {id}");
                assert!(op["tags"][0].is_string());
                let responses = op["responses"].as_object().expect("responses");
                assert!(responses.contains_key("200"));
                assert!(responses.values().all(|r| r["description"].is_string()));
            }
        }
        assert!(
            ids.contains("t_read_one_thing") && ids.contains("games_save_it"),
            "{ids:?}"
        );
    }

    mod other {
        /// A different type of the same name as the outer `Inner`.
        #[derive(serde::Serialize, utoipa::ToSchema)]
        pub struct Inner {
            pub text: String,
        }
    }

    #[test]
    fn two_types_of_one_name_are_reported() {
        let mut a = OpDoc::new(Method::GET, "/api/a", "A", "t");
        a.ok = Some(Success {
            content_type: Cow::Borrowed("application/json"),
            schema: Some(Typed::of::<Inner>()),
            description: Cow::Borrowed("success"),
        });
        let mut b = OpDoc::new(Method::GET, "/api/b", "B", "t");
        b.ok = Some(Success {
            content_type: Cow::Borrowed("application/json"),
            schema: Some(Typed::of::<other::Inner>()),
            description: Cow::Borrowed("success"),
        });
        let same = serde_json::to_value(document(&[a.clone(), a.clone()], &[])).expect("json");
        assert_eq!(problems(&same), Vec::<String>::new());
        let doc = serde_json::to_value(document(&[a, b], &[])).expect("json");
        let found = problems(&doc);
        assert!(found.len() == 1 && found[0].contains("Inner"), "{found:?}");
    }

    #[test]
    fn an_operation_states_params_bodies_and_every_answer() {
        let doc = sample();
        let get = &doc["paths"]["/api/t/{name}"]["get"];
        let params = get["parameters"].as_array().expect("params");
        assert_eq!(params[0]["name"], "name");
        assert_eq!(params[0]["in"], "path");
        assert_eq!(params[1]["name"], "limit");
        assert_eq!(params[1]["schema"]["maximum"], 100);
        // 200: the success type or the success:false envelope.
        let ok = &get["responses"]["200"]["content"]["application/json"]["schema"];
        assert_eq!(ok["anyOf"][0]["$ref"], "#/components/schemas/Outer");
        assert_eq!(
            ok["anyOf"][1]["allOf"][0]["$ref"],
            "#/components/schemas/SuccessError"
        );
        assert_eq!(
            ok["anyOf"][1]["allOf"][1]["properties"]["success"]["enum"][0],
            false
        );
        let nf = &get["responses"]["404"]["content"]["application/json"]["schema"];
        assert_eq!(
            nf["allOf"][1]["properties"]["error_code"]["enum"][0],
            "not_found"
        );
        // Host refusal on every route; in the path's envelope.
        let host = &get["responses"]["403"]["content"]["application/json"]["schema"];
        assert_eq!(
            host["allOf"][1]["properties"]["error_code"]["enum"][0],
            "host_not_allowed"
        );
        // Guarded: the security scheme, its 403, the JSON body and its 422.
        let post = &doc["paths"]["/api/game/{rest}"]["post"];
        assert_eq!(post["security"][0][CSRF_SCHEME], serde_json::json!([]));
        let forbidden =
            post["responses"]["403"]["content"]["application/json"]["schema"].to_string();
        assert!(forbidden.contains("csrf_validation_failed") && forbidden.contains("OkReason"));
        assert!(post["responses"]["422"].is_object());
        assert_eq!(
            post["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Outer"
        );
        assert_eq!(
            doc["components"]["securitySchemes"][CSRF_SCHEME]["name"],
            "X-CSRF-Token"
        );
        // Multipart: the file part is binary.
        let mp = &doc["paths"]["/api/t/upload"]["post"]["requestBody"]["content"]
            ["multipart/form-data"]["schema"];
        assert_eq!(mp["properties"]["file"]["format"], "binary");
        assert_eq!(mp["required"], serde_json::json!(["file"]));
        // Untyped: still a valid operation with a 200.
        assert!(
            doc["paths"]["/api/t/{name}"]["delete"]["responses"]["200"]["description"].is_string()
        );
        assert_eq!(doc["tags"][0]["description"], "things");
    }
}

//! The route builder that keeps the router and `/openapi.json` in step.
//!
//! Every family builds its routes with [`Api`]: each registration adds the axum
//! route and its OpenAPI operation together, so a route cannot be served without
//! being listed (or listed without being served).
//!
//! What a route reads and answers is stated right after its registration, on
//! the operation just added (docs/openapi.md):
//! `.get(path, summary, handler).query::<Q>().ok::<T>().fails::<FamilyError>()`,
//! `.json_body::<B>()`, `.multipart(&[Part::file("file")])`, `.id("name")`.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use axum::Router;
use std::borrow::Cow;

use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::OpenApi;
use utoipa::{IntoParams, ToSchema};

use super::guards::{csrf_ok, csrf_success, Csrf};
pub use super::openapi::{Body, DocumentedError, ErrorDoc, OpDoc, Part, Success, TagDoc, Typed};
use crate::state::AppState;

/// Routes of one family plus their documentation.
pub struct Api {
    state: AppState,
    tag: String,
    router: Router<AppState>,
    ops: Vec<OpDoc>,
    tags: Vec<TagDoc>,
}

impl Api {
    /// A new builder; `tag` names the family in the OpenAPI document.
    pub fn new(state: &AppState, tag: &str) -> Self {
        Api {
            state: state.clone(),
            tag: tag.to_string(),
            router: Router::new(),
            ops: Vec::new(),
            tags: vec![TagDoc {
                name: tag.to_string(),
                description: None,
            }],
        }
    }

    /// Describe the family's tag (one or two sentences, for the OpenAPI document).
    pub fn about(mut self, description: &str) -> Self {
        if let Some(t) = self.tags.iter_mut().find(|t| t.name == self.tag) {
            t.description = Some(description.to_string());
        }
        self
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Register `mr` for `method` at `path` (axum path syntax `{param}` / `{*rest}`).
    pub fn route(
        mut self,
        method: Method,
        path: &str,
        summary: &str,
        mr: MethodRouter<AppState>,
    ) -> Self {
        self.router = self.router.route(path, mr);
        self.ops.push(OpDoc::new(method, path, summary, &self.tag));
        self
    }

    /// Change the operation registered last (a documentation call before any route is a no-op).
    fn last(mut self, f: impl FnOnce(&mut OpDoc)) -> Self {
        if let Some(op) = self.ops.last_mut() {
            f(op);
        }
        self
    }

    /// The operation id after the tag (default: the summary's words), e.g.
    /// `.id("read_recent_file")` → `memory_read_recent_file`.
    pub fn id(self, id: &str) -> Self {
        self.last(|op| op.id = Some(id.to_string()))
    }

    /// The query parameters the handler reads (`T: IntoParams`; ranges and
    /// defaults via `#[param(...)]`).
    pub fn query<T: IntoParams>(self) -> Self {
        self.last(|op| {
            op.params
                .extend(T::into_params(|| Some(ParameterIn::Query)))
        })
    }

    /// Typed path parameters (`T: IntoParams`); untyped ones are plain strings.
    pub fn path<T: IntoParams>(self) -> Self {
        self.last(|op| op.params.extend(T::into_params(|| Some(ParameterIn::Path))))
    }

    /// Request headers the handler reads (`T: IntoParams`, header names via `#[param(rename = ..)]`).
    pub fn headers<T: IntoParams>(self) -> Self {
        self.last(|op| {
            op.params
                .extend(T::into_params(|| Some(ParameterIn::Header)))
        })
    }

    /// The JSON request body.
    pub fn json_body<T: ToSchema>(self) -> Self {
        self.last(|op| op.body = Some(Body::Json(Box::new(Typed::of::<T>()))))
    }

    /// A JSON body the handler reads itself (not through `JsonBody`): it may be
    /// absent, and its failures are listed by the family enum (`fails`).
    pub fn own_json_body<T: ToSchema>(self) -> Self {
        self.last(|op| op.body = Some(Body::OwnJson(Box::new(Typed::of::<T>()))))
    }

    /// A `multipart/form-data` body with these parts.
    pub fn multipart(self, parts: &[Part]) -> Self {
        let parts = parts.to_vec();
        self.last(|op| op.body = Some(Body::Multipart(parts)))
    }

    /// The 200 answer: JSON of `T`.
    pub fn ok<T: ToSchema>(self) -> Self {
        self.ok_as::<T>("application/json")
    }

    /// The 200 answer: a JSON array of `T` (`T` named in the components).
    pub fn ok_list<T: ToSchema>(self) -> Self {
        self.last(|op| {
            op.ok = Some(Success {
                content_type: Cow::Borrowed("application/json"),
                schema: Some(Typed::list_of::<T>()),
                description: Cow::Borrowed("success"),
            })
        })
    }

    /// The 200 answer: `T` in another content type (e.g. `text/plain` for a `String`).
    pub fn ok_as<T: ToSchema>(self, content_type: &'static str) -> Self {
        self.last(|op| {
            op.ok = Some(Success {
                content_type: Cow::Borrowed(content_type),
                schema: Some(Typed::of::<T>()),
                description: Cow::Borrowed("success"),
            })
        })
    }

    /// The 200 answer: bytes of `content_type` (a file, an image, an archive).
    pub fn ok_file(self, content_type: &'static str) -> Self {
        self.last(|op| {
            op.ok = Some(Success {
                content_type: Cow::Borrowed(content_type),
                schema: None,
                description: Cow::Borrowed("the file's bytes"),
            })
        })
    }

    /// Every answer of the family error enum `E` (status, envelope, code).
    pub fn fails<E: DocumentedError>(self) -> Self {
        self.last(|op| op.errors.extend(E::answers()))
    }

    /// One more error answer of this route only.
    pub fn fails_with(self, answer: ErrorDoc) -> Self {
        self.last(|op| op.errors.push(answer))
    }

    pub fn get<H: Handler<T, AppState>, T: 'static>(self, path: &str, summary: &str, h: H) -> Self {
        self.route(Method::GET, path, summary, routing::get(h))
    }
    pub fn post<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        summary: &str,
        h: H,
    ) -> Self {
        self.route(Method::POST, path, summary, routing::post(h))
    }
    pub fn put<H: Handler<T, AppState>, T: 'static>(self, path: &str, summary: &str, h: H) -> Self {
        self.route(Method::PUT, path, summary, routing::put(h))
    }
    pub fn delete<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        summary: &str,
        h: H,
    ) -> Self {
        self.route(Method::DELETE, path, summary, routing::delete(h))
    }

    /// Register a CSRF-guarded route ([`super::guards`]) with the failure envelope `csrf`.
    pub fn guarded<H: Handler<T, AppState>, T: 'static>(
        self,
        method: Method,
        path: &str,
        summary: &str,
        csrf: Csrf,
        h: H,
    ) -> Self {
        let mr = routing::on(method_filter(&method), h);
        let state = self.state.clone();
        let mr = match csrf {
            Csrf::Success => mr.layer(axum::middleware::from_fn_with_state(state, csrf_success)),
            Csrf::Ok => mr.layer(axum::middleware::from_fn_with_state(state, csrf_ok)),
        };
        self.route(method, path, summary, mr)
            .last(|op| op.csrf = Some(csrf))
    }

    /// [`Api::guarded`] for a layered method router (a streamed upload with
    /// its own body limit): the CSRF guard is the outermost layer.
    pub fn guarded_route(
        self,
        method: Method,
        path: &str,
        summary: &str,
        csrf: Csrf,
        mr: MethodRouter<AppState>,
    ) -> Self {
        let state = self.state.clone();
        let mr = match csrf {
            Csrf::Success => mr.layer(axum::middleware::from_fn_with_state(state, csrf_success)),
            Csrf::Ok => mr.layer(axum::middleware::from_fn_with_state(state, csrf_ok)),
        };
        self.route(method, path, summary, mr)
            .last(|op| op.csrf = Some(csrf))
    }

    /// Add undocumented routes (static files, the WebSocket).
    pub fn raw(mut self, router: Router<AppState>) -> Self {
        self.router = self.router.merge(router);
        self
    }

    /// Combine with another family's routes.
    pub fn merge(mut self, other: Api) -> Self {
        self.router = self.router.merge(other.router);
        self.ops.extend(other.ops);
        self.tags.extend(other.tags);
        self
    }

    pub fn ops(&self) -> &[OpDoc] {
        &self.ops
    }

    pub fn tags(&self) -> &[TagDoc] {
        &self.tags
    }

    pub fn into_parts(self) -> (Router<AppState>, Vec<OpDoc>, Vec<TagDoc>) {
        (self.router, self.ops, self.tags)
    }
}

fn method_filter(m: &Method) -> routing::MethodFilter {
    match *m {
        Method::GET => routing::MethodFilter::GET,
        Method::PUT => routing::MethodFilter::PUT,
        Method::DELETE => routing::MethodFilter::DELETE,
        Method::PATCH => routing::MethodFilter::PATCH,
        _ => routing::MethodFilter::POST,
    }
}

/// Build the OpenAPI 3.1 document for `ops` (see [`super::openapi`]).
pub fn openapi_document(ops: &[OpDoc], tags: &[TagDoc]) -> OpenApi {
    super::openapi::document(ops, tags)
}

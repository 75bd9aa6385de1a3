//! The route builder that keeps the router and `/openapi.json` in step.
//!
//! Every family builds its routes with [`Api`]: each registration adds the axum
//! route and its OpenAPI operation together, so a route cannot be served without
//! being listed (or listed without being served).

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use axum::Router;
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::{InfoBuilder, OpenApi, OpenApiBuilder, Paths, Required, ResponseBuilder};

use super::guards::{csrf_ok, csrf_success, Csrf};
use crate::state::AppState;

/// One documented operation.
#[derive(Clone, Debug)]
pub struct OpDoc {
    pub method: Method,
    pub path: String,
    pub summary: String,
    pub tag: String,
}

/// Routes of one family plus their documentation.
pub struct Api {
    state: AppState,
    tag: String,
    router: Router<AppState>,
    ops: Vec<OpDoc>,
}

impl Api {
    /// A new builder; `tag` names the family in the OpenAPI document.
    pub fn new(state: &AppState, tag: &str) -> Self {
        Api {
            state: state.clone(),
            tag: tag.to_string(),
            router: Router::new(),
            ops: Vec::new(),
        }
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
        self.ops.push(OpDoc {
            method,
            path: path.to_string(),
            summary: summary.to_string(),
            tag: self.tag.clone(),
        });
        self
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
        self
    }

    pub fn ops(&self) -> &[OpDoc] {
        &self.ops
    }

    pub fn into_parts(self) -> (Router<AppState>, Vec<OpDoc>) {
        (self.router, self.ops)
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

/// Build the OpenAPI 3.1 document for `ops`. Axum's `{*rest}` becomes `{rest}`.
pub fn openapi_document(ops: &[OpDoc]) -> OpenApi {
    let mut paths = Paths::new();
    for op in ops {
        let path = op.path.replace("{*", "{");
        let mut b = OperationBuilder::new()
            .summary(Some(op.summary.clone()))
            .tag(op.tag.clone())
            .operation_id(Some(format!(
                "{}_{}",
                op.method.as_str().to_ascii_lowercase(),
                slug(&path)
            )))
            .response(
                "200",
                ResponseBuilder::new()
                    .description("success envelope")
                    .build(),
            );
        for name in path_params(&path) {
            b = b.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .build(),
            );
        }
        let operation: Operation = b.build();
        let method = match op.method {
            Method::GET => HttpMethod::Get,
            Method::PUT => HttpMethod::Put,
            Method::DELETE => HttpMethod::Delete,
            Method::PATCH => HttpMethod::Patch,
            _ => HttpMethod::Post,
        };
        paths.add_path_operation(path, vec![method], operation);
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("companiond")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some("Local backend of the desktop companion application"))
                .build(),
        )
        .paths(paths)
        .build()
}

fn path_params(path: &str) -> Vec<String> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|s| s.split(':').next().unwrap_or(s).to_string())
        .collect()
}

fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

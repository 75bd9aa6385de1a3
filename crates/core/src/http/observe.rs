//! What ran: a request id, a trace span and one log line per request, and the
//! request metrics (docs/operations.md).
//!
//! - `x-request-id`: kept from the request when it has one, else a new UUID;
//!   echoed in the answer (tower-http's request-id layers).
//! - tower-http's `TraceLayer`: a span per request (method, route template,
//!   family, request id) and one event when the answer's head goes out (status,
//!   latency), target `companiond::request`, at `debug`; a 5xx at `warn`. So
//!   `RUST_LOG=companiond=debug` shows every request.
//! - [`record`]: the request counter and latency histogram of `crate::metrics`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderName;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tracing::Span;

use crate::metrics::metrics;

/// The header carrying the request id.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Route template → the family (OpenAPI tag) that registered it.
pub type Families = Arc<HashMap<String, String>>;

fn route_of(req: &Request) -> &str {
    req.extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str)
        .unwrap_or("unmatched")
}

/// Add the request id, trace and metrics layers around `router` (outermost,
/// so a request the front door refuses is seen too).
pub fn layer(router: Router, families: Families) -> Router {
    let trace = TraceLayer::new_for_http()
        .make_span_with(move |req: &Request| {
            let route = route_of(req);
            let family = families.get(route).map(String::as_str).unwrap_or("-");
            let id = req
                .headers()
                .get(&REQUEST_ID)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            tracing::debug_span!(
                target: "companiond::request",
                "request",
                method = %req.method(),
                route = %route,
                family = %family,
                id = %id,
            )
        })
        .on_request(())
        .on_body_chunk(())
        .on_eos(())
        .on_response(|res: &Response, latency: Duration, _: &Span| {
            let status = res.status().as_u16();
            let ms = latency.as_secs_f64() * 1000.0;
            if res.status().is_server_error() {
                tracing::warn!(target: "companiond::request", status, ms, "answered");
            } else {
                tracing::debug!(target: "companiond::request", status, ms, "answered");
            }
        })
        .on_failure(());
    router
        .layer(axum::middleware::from_fn(record))
        .layer(trace)
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
}

/// Count the request and its time to the answer's head.
async fn record(req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_string();
    let route = route_of(&req).to_string();
    let t = Instant::now();
    let res = next.run(req).await;
    metrics().request(&method, &route, res.status().as_u16(), t.elapsed());
    res
}

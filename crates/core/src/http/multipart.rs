//! Request bodies that a handler did not read, and the multipart extractor of
//! the upload routes.
//!
//! A request answered before its body was read (refused upload, route without a
//! body, early validation error) has the rest of its body read and discarded
//! (bounded) before the answer goes out, so that a client still sending gets the
//! answer instead of a reset connection.

use std::time::Duration;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;

/// Most bytes of a refused body read and discarded.
pub const DRAIN_CAP: u64 = 8 << 20;
/// Longest time spent discarding a refused body.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);

/// A larger allowance for one answer: a handler that refuses big uploads puts
/// this in its response's extensions (see [`with_drain_cap`]) so that a client
/// still sending a large body reads the refusal rather than a reset.
#[derive(Clone, Copy, Debug)]
pub struct DrainCap {
    pub bytes: u64,
    pub time: Duration,
}

/// `response` with a [`DrainCap`] for the unread rest of its request's body.
pub fn with_drain_cap(mut response: Response, cap: DrainCap) -> Response {
    response.extensions_mut().insert(cap);
    response
}

/// Middleware: after the handler answered, discard what it left unread of the
/// request body (at most [`DRAIN_CAP`] bytes within [`DRAIN_TIME`], or the
/// response's own [`DrainCap`]).
pub async fn drain_unread(req: Request, next: Next) -> Response {
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0");
    if !has_body {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let shared = Arc::new(tokio::sync::Mutex::new(body.into_data_stream()));
    let handler_side = futures::stream::unfold(shared.clone(), |s| async move {
        let item = s.lock().await.next().await;
        item.map(|i| (i, s))
    });
    let response = next
        .run(Request::from_parts(parts, Body::from_stream(handler_side)))
        .await;
    let cap = response.extensions().get::<DrainCap>().copied();
    let (mut left, time) = cap.map_or((DRAIN_CAP, DRAIN_TIME), |c| (c.bytes, c.time));
    let mut rest = shared.lock().await;
    // Nothing to do when the handler read it all: the stream just ends.
    let _ = tokio::time::timeout(time, async {
        while let Some(Ok(chunk)) = rest.next().await {
            let n = chunk.len() as u64;
            if n >= left {
                return;
            }
            left -= n;
        }
    })
    .await;
    response
}

/// The request as a streaming multipart body, or why not (what is left of the
/// body is discarded by [`drain_unread`]).
pub async fn multipart(req: Request) -> Result<Multipart, String> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !ct.starts_with("multipart/form-data") || !ct.contains("boundary=") {
        return Err("the request must be multipart/form-data with a boundary".into());
    }
    Multipart::from_request(req, &())
        .await
        .map_err(|e| e.body_text())
}

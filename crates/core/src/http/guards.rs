//! The loopback guard (routes only a process on this machine may call, judged
//! by the TCP peer, never a header) and the CSRF guard (the token of
//! `--csrf-token` in `X-CSRF-Token` or the JSON body's `_csrf_token`, plus an
//! Origin/Referer of ours when one is sent); docs/security.md.

use std::marker::PhantomData;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::envelope::{Envelope, OkEnvelope, SuccessEnvelope, MAX_JSON_BODY};
use crate::state::AppState;

pub use crate::net::is_loopback;

/// The TCP peer address of a request (never taken from a header).
pub fn peer_addr(parts: &Parts) -> Option<SocketAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
}

/// Extractor that admits loopback TCP peers only; others get 403 in envelope `E`.
pub struct LoopbackPeer<E: Envelope = SuccessEnvelope>(pub SocketAddr, pub PhantomData<E>);

impl<S: Send + Sync, E: Envelope> FromRequestParts<S> for LoopbackPeer<E> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match peer_addr(parts) {
            Some(addr) if is_loopback(addr.ip()) => Ok(LoopbackPeer(addr, PhantomData)),
            _ => Err(E::reject(
                StatusCode::FORBIDDEN,
                "forbidden",
                "only loopback clients may use this route",
            )),
        }
    }
}

/// Constant-time token comparison.
pub fn token_matches(expected: &str, given: &str) -> bool {
    expected.len() == given.len() && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

/// The CSRF check: token in `X-CSRF-Token` (or the JSON body's `_csrf_token`
/// when the header is absent), plus a loopback Origin/Referer when one is present.
async fn csrf_check<E: Envelope>(state: &AppState, req: Request) -> Result<Request, Response> {
    let fail = || {
        E::reject(
            StatusCode::FORBIDDEN,
            "csrf_validation_failed",
            "CSRF validation failed",
        )
    };
    if state.host_policy().has_foreign_origin(req.headers()) {
        return Err(fail());
    }
    let expected = state.csrf_token();
    if let Some(h) = req.headers().get("x-csrf-token") {
        return match h.to_str() {
            Ok(t) if token_matches(expected, t) => Ok(req),
            _ => Err(fail()),
        };
    }
    // No header: look for `_csrf_token` in a JSON body, then rebuild the request.
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if !is_json {
        return Err(fail());
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_JSON_BODY)
        .await
        .map_err(|_| fail())?;
    let token = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| {
            v.get("_csrf_token")
                .and_then(|t| t.as_str())
                .map(str::to_string)
        });
    match token {
        Some(t) if token_matches(expected, &t) => {
            Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
        }
        _ => Err(fail()),
    }
}

/// Middleware: CSRF guard answering `{success:false, error_code:"csrf_validation_failed", error}`.
pub async fn csrf_success(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match csrf_check::<SuccessEnvelope>(&state, req).await {
        Ok(req) => next.run(req).await,
        Err(r) => r,
    }
}

/// Middleware: CSRF guard answering `{ok:false, reason:"csrf_validation_failed"}` (games, onboarding).
pub async fn csrf_ok(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match csrf_check::<OkEnvelope>(&state, req).await {
        Ok(req) => next.run(req).await,
        Err(r) => r,
    }
}

/// Which envelope a CSRF failure uses.
#[derive(Clone, Copy, Debug)]
pub enum Csrf {
    /// `{success:false, error_code, error}`.
    Success,
    /// `{ok:false, reason}`.
    Ok,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        assert!(is_loopback("127.0.0.1".parse().unwrap()));
        assert!(is_loopback("127.9.9.9".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("::ffff:10.0.0.1".parse().unwrap()));
        assert!(!is_loopback("192.168.1.2".parse().unwrap()));
        assert!(!is_loopback("0.0.0.0".parse().unwrap()));
    }
}

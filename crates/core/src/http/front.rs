//! The front door: what every request passes before any route sees it
//! (docs/security.md).
//!
//! * **Host allowlist** — a request is served only when its `Host` names this
//!   machine: a loopback literal (127.0.0.0/8, `[::1]`), `localhost` (any case,
//!   optional trailing dot), the host of `--listen`, or a name given with
//!   `--allowed-host`; any port. Anything else (a DNS-rebinding page) gets 403
//!   before any handler runs. A request without `Host` is refused too.
//! * **Cross-site writes** — a request other than GET/HEAD/OPTIONS whose `Origin`
//!   (or, without one, `Referer`) is not ours gets 403 on every route, guarded by
//!   the CSRF token or not (a page can *send* a form or `fetch` to us without CORS).
//! * **WebSocket Origin** — an upgrade that carries an `Origin` is accepted only
//!   from an allowed origin (the same rule as the CSRF guard's Origin check:
//!   [`HostPolicy::origin_allowed`]); without `Origin` (non-browser clients) it is accepted.
//!
//! Every refusal here is `Cache-Control: no-store`.
//! * **Panics** — a handler that panics answers 500 in its family's envelope and
//!   logs an ERROR line; the connection is never dropped.
//!
//! There is no CORS layer anywhere: no answer carries `Access-Control-Allow-Origin`,
//! so a foreign page can neither read answers nor pass a preflight.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use futures::FutureExt;

use super::envelope::{no_store, EnvelopeKind};
pub use crate::hosts::HostPolicy;

/// The request-facing half of [`HostPolicy`] (the names themselves are in `crate::hosts`).
impl HostPolicy {
    /// Is the value of a `Host` header (`name[:port]`, `[v6][:port]`) allowed?
    pub fn host_allowed(&self, value: &str) -> bool {
        let value = value.trim();
        if value.is_empty() || value.contains(['@', '/', '\\', ' ', '?', '#']) {
            return false;
        }
        let Ok(auth) = value.parse::<axum::http::uri::Authority>() else {
            return false;
        };
        // A port, when present, must be a number (`Authority` does not check).
        let after_host = &value[auth.host().len()..];
        if !(after_host.is_empty() || auth.port_u16().is_some()) {
            return false;
        }
        self.name_allowed(auth.host())
    }

    /// Does the request carry a foreign `Origin` (or, without one, a foreign `Referer`)?
    pub fn has_foreign_origin(&self, headers: &HeaderMap) -> bool {
        if let Some(o) = headers.get(header::ORIGIN) {
            return !o.to_str().is_ok_and(|o| self.origin_allowed(o));
        }
        if let Some(r) = headers.get(header::REFERER) {
            return !r.to_str().is_ok_and(|r| self.origin_allowed(r));
        }
        false
    }
}

/// Answer `status` in the envelope of the family that owns `path`
/// ([`EnvelopeKind::for_path`]), so a client reads a refusal the way it reads any
/// other error of that route.
pub fn reject_for_path(path: &str, status: StatusCode, code: &str, message: &str) -> Response {
    EnvelopeKind::for_path(path).reject(status, code, message)
}

fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Middleware: the Host allowlist and the WebSocket Origin rule.
pub async fn front_door(
    State(policy): State<Arc<HostPolicy>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    let host_ok = host.as_deref().is_some_and(|h| policy.host_allowed(h));
    if !host_ok {
        tracing::warn!(
            "refused a request for {path} with Host {:?} (not a name of this server)",
            host.as_deref().unwrap_or("")
        );
        return no_store(reject_for_path(
            path,
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            "this server answers only requests addressed to localhost or its own address",
        ));
    }
    // Anything but a read, sent by a page of another site (a cross-site form or
    // `fetch` needs no CORS to be *sent*): refused whatever the route, guarded or
    // not. Non-browser clients send no Origin and are not affected.
    let reads = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !reads && policy.has_foreign_origin(req.headers()) {
        tracing::warn!(
            "refused a {} of {path} sent by a page of another site",
            req.method()
        );
        return no_store(reject_for_path(
            path,
            StatusCode::FORBIDDEN,
            "csrf_validation_failed",
            "requests from pages of other sites are refused",
        ));
    }
    if is_websocket_upgrade(req.headers()) {
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            if !origin.to_str().is_ok_and(|o| policy.origin_allowed(o)) {
                tracing::warn!("refused a WebSocket upgrade for {path} from a foreign Origin");
                return no_store(reject_for_path(
                    path,
                    StatusCode::FORBIDDEN,
                    "origin_not_allowed",
                    "WebSocket connections are accepted only from pages of this server",
                ));
            }
        }
    }
    next.run(req).await
}

/// Middleware: the last line of defence against a panic in a handler. Written
/// here rather than tower-http's `CatchPanicLayer` because the answer must be in
/// the envelope of the route's family, which needs the request path.
pub async fn catch_panic(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    match std::panic::AssertUnwindSafe(next.run(req))
        .catch_unwind()
        .await
    {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            tracing::error!("panic while answering {method} {path}: {what}");
            reject_for_path(
                &path,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "internal error: the request could not be completed",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;

    fn policy(listen: &str, extra: &[&str]) -> HostPolicy {
        let opts = Options {
            listen: listen.to_string(),
            data_dir: "/tmp".into(),
            bundle_dir: "/tmp".into(),
            workshop_dir: None,
            cloud: String::new(),
            legacy_memory_roots: vec![],
            csrf_token: String::new(),
            allow_remote: false,
            allowed_hosts: extra.iter().map(|s| s.to_string()).collect(),
            frontend_dir: None,
            local_model: None,
        };
        HostPolicy::from_options(&opts)
    }

    #[test]
    fn hosts() {
        let p = policy("127.0.0.1:48911", &["Proxy.Example."]);
        for ok in [
            "127.0.0.1:48911",
            "127.0.0.1",
            "127.8.9.10:1",
            "[::1]:5",
            "[::1]",
            "localhost",
            "LOCALHOST.:80",
            "proxy.example:443",
            "PROXY.example.",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example:48911",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "0.0.0.0:48911",
            "192.168.1.2",
            "user@127.0.0.1",
            "127.0.0.1/x",
            "[::2]:1",
            "localhost:notaport",
        ] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
        let p = policy("192.168.1.5:48911", &[]);
        assert!(p.host_allowed("192.168.1.5:48911"));
        let p = policy("0.0.0.0:48911", &[]);
        assert!(!p.host_allowed("0.0.0.0:48911"));
    }

    #[test]
    fn origins() {
        let p = policy("127.0.0.1:0", &["proxy.example"]);
        assert!(p.origin_allowed("http://127.0.0.1:48911"));
        assert!(p.origin_allowed("http://localhost:1"));
        assert!(p.origin_allowed("http://[::1]:5"));
        assert!(p.origin_allowed("https://proxy.example"));
        assert!(p.origin_allowed("http://127.0.0.1:48911/page?x=1"));
        assert!(!p.origin_allowed("null"));
        assert!(!p.origin_allowed("https://evil.example"));
        assert!(!p.origin_allowed("http://localhost.evil.example"));
        assert!(!p.origin_allowed("file:///etc/passwd"));
    }

    #[tokio::test]
    async fn a_panic_becomes_the_family_envelope() {
        use axum::body::Body;
        use axum::routing::get;
        use tower::ServiceExt;
        async fn boom() -> &'static str {
            panic!("boom")
        }
        let app = axum::Router::new()
            .route("/api/game/x", get(boom))
            .route("/api/config/x", get(boom))
            .route("/api/jukebox/x", get(boom))
            .layer(axum::middleware::from_fn(catch_panic));
        for (path, key, value) in [
            ("/api/game/x", "reason", "internal_error"),
            ("/api/config/x", "error_code", "internal_error"),
            (
                "/api/jukebox/x",
                "detail",
                "internal error: the request could not be completed",
            ),
        ] {
            let req = axum::http::Request::get(path).body(Body::empty()).unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(v[key], value, "{path}: {v}");
        }
    }
}

//! The CSRF guard, the JSON body extractor (422 in the family envelope) and the
//! loopback guard, over real HTTP.

use companiond_core::testkit::{TestOptions, TestServer, CSRF};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn csrf_guard() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    let origin = format!("http://127.0.0.1:{}", s.addr.port());
    let send = |token: Option<&str>, origin: Option<&str>, referer: Option<&str>| {
        let mut b = s.http.post(s.url("/api/probe/csrf")).json(&json!({"x": 1}));
        if let Some(t) = token {
            b = b.header("X-CSRF-Token", t);
        }
        if let Some(o) = origin {
            b = b.header("Origin", o);
        }
        if let Some(r) = referer {
            b = b.header("Referer", r);
        }
        async move { companiond_core::testkit::split(b.send().await.unwrap()).await }
    };
    let (st, body) = send(None, Some(&origin), None).await;
    assert_eq!(st, 403);
    assert_eq!(body["error_code"], "csrf_validation_failed");
    assert_eq!(body["success"], false);
    assert_eq!(send(Some("wrong"), Some(&origin), None).await.0, 403);
    assert_eq!(
        send(Some(CSRF), Some("https://evil.example"), None).await.0,
        403
    );
    assert_eq!(send(Some(CSRF), Some("null"), None).await.0, 403);
    assert_eq!(
        send(Some(CSRF), None, Some("https://evil.example/x"))
            .await
            .0,
        403
    );
    assert_eq!(send(Some(CSRF), Some(&origin), None).await.0, 200);
    assert_eq!(
        send(Some(CSRF), Some("http://localhost:1"), None).await.0,
        200
    );
    assert_eq!(send(Some(CSRF), Some("http://[::1]:2"), None).await.0, 200);
    assert_eq!(send(Some(CSRF), None, None).await.0, 200);
    // Body token when the header is absent; the handler still sees the body.
    let (st, body) = s
        .post("/api/probe/csrf", json!({"_csrf_token": CSRF, "k": "v"}))
        .await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["echo"]["k"], "v");
    assert_eq!(
        s.post("/api/probe/csrf", json!({"_csrf_token": "nope"}))
            .await
            .0,
        403
    );
    // Game/onboarding envelope.
    let (st, body) = s.post("/api/probe/csrf-ok", json!({})).await;
    assert_eq!(st, 403);
    assert_eq!(
        body,
        json!({"ok": false, "reason": "csrf_validation_failed", "error": "CSRF validation failed"})
    );
}

#[tokio::test]
async fn json_body_errors_are_422_in_the_family_envelope() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    for bad in ["{", "[]", "{\"n\": \"x\"}", "{\"n\": -1}", "null"] {
        let r = s
            .http
            .post(s.url("/api/probe/typed"))
            .header("content-type", "application/json")
            .body(bad)
            .send()
            .await
            .unwrap();
        let (st, body) = companiond_core::testkit::split(r).await;
        assert_eq!(st, 422, "{bad}");
        assert_eq!(body["ok"], false);
        assert_eq!(body["reason"], "invalid_body");
    }
    assert_eq!(s.post("/api/probe/typed", json!({"n": 3})).await.0, 200);
}

#[tokio::test]
async fn loopback_guard_judges_the_tcp_peer() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    assert_eq!(s.post("/api/probe/local", json!({})).await.0, 200);
    for peer in [
        "192.0.2.7:5555",
        "[2001:db8::1]:80",
        "[::ffff:10.1.2.3]:9",
        "0.0.0.0:1",
    ] {
        let remote = TestServer::start_with(
            &[companiond_core::server::Family::routes(probe)],
            TestOptions {
                fake_peer: Some(peer.parse().unwrap()),
                ..Default::default()
            },
        )
        .await;
        let r = remote
            .http
            .post(remote.url("/api/probe/local"))
            .header("X-Forwarded-For", "127.0.0.1")
            .header("Forwarded", "for=127.0.0.1")
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{peer}");
    }
    let mapped = TestServer::start_with(
        &[companiond_core::server::Family::routes(probe)],
        TestOptions {
            fake_peer: Some("[::ffff:127.0.0.1]:9".parse().unwrap()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(mapped.post("/api/probe/local", json!({})).await.0, 200);
}

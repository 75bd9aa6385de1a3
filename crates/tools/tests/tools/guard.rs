//! The loopback guard of every `/api/tools` route.

use std::net::SocketAddr;

use companiond_core::testkit::{TestOptions, TestServer};
use serde_json::json;

#[tokio::test]
async fn non_loopback_peers_get_403_on_every_route() {
    let s = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            fake_peer: Some("192.0.2.7:5555".parse::<SocketAddr>().expect("addr")),
            ..Default::default()
        },
    )
    .await;
    let good = json!({"name": "t", "callback_url": "http://127.0.0.1:9/cb"});
    for (path, body) in [
        ("/api/tools/register", good.clone()),
        ("/api/tools/register", json!({"name": ""})),
        ("/api/tools/unregister", json!({"name": "t"})),
        ("/api/tools/clear", json!({"source": "external"})),
    ] {
        let (st, b) = s.post(path, body).await;
        assert_eq!(st, 403, "{path}");
        assert!(b["detail"].is_string(), "{b}");
    }
    for path in ["/api/tools", "/api/tools?role=Companion"] {
        let (st, _) = s.get(path).await;
        assert_eq!(st, 403, "{path}");
    }
    // A header cannot make the peer local.
    let r = s
        .http
        .get(s.url("/api/tools"))
        .header("X-Forwarded-For", "127.0.0.1")
        .header("Host", "127.0.0.1")
        .send()
        .await
        .expect("request");
    assert_eq!(r.status().as_u16(), 403);
    let mgr = s.state.sessions.get("Companion").expect("manager");
    assert!(mgr.tools().is_empty());

    // An IPv4-mapped loopback peer is loopback.
    let mapped = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            fake_peer: Some(
                "[::ffff:127.0.0.1]:5555"
                    .parse::<SocketAddr>()
                    .expect("addr"),
            ),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = mapped.post("/api/tools/register", good).await;
    assert_eq!(st, 200, "{b}");
}

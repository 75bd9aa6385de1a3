//! Eviction of a plugin origin after connection failures, and what does not evict.

use axum::http::HeaderValue;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use companiond_core::testkit::{MockLlm, MockReply};
use serde_json::json;

use crate::common::*;

/// Serve a tiny callback on a fixed loopback port until the returned sender fires.
async fn serve_on(
    port: u16,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("rebind port");
    let app = Router::new().route(
        "/cb",
        post(|| async {
            let mut r = Json(json!({"output": "fine"})).into_response();
            r.headers_mut()
                .insert("connection", HeaderValue::from_static("close"));
            r
        }),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await;
    });
    (tx, h)
}

/// One turn in which the model calls `tool` `n` times; the is_error flags.
async fn call_n(ws: &mut Ws, llm: &MockLlm, tool: &str, n: usize) -> Vec<bool> {
    let calls = (0..n)
        .map(|i| (format!("{tool}_{i}"), tool.to_string(), "{}".to_string()))
        .collect();
    llm.push(MockReply::ToolCalls(calls));
    llm.push(MockReply::Text("done".into()));
    let frames = turn(ws, "go").await;
    of_type(&frames, "tool_result")
        .iter()
        .map(|f| f["is_error"].as_bool().unwrap_or(false))
        .collect()
}

#[tokio::test]
async fn plugin_origin_is_evicted_after_exactly_three_connection_failures() {
    let (s, llm) = server_with_llm().await;
    create_character(&s, "Alice").await;
    let plug = plugin().await;
    let port = closed_port();
    let origin = format!("http://127.0.0.1:{port}");
    // Two tools of the plugin at the flaky origin (every role), one at a live origin.
    for name in ["flaky_a", "flaky_b"] {
        let (st, b) = register(
            &s,
            json!({"name": name, "callback_url": format!("{origin}/cb"), "source": "plugin:p1"}),
        )
        .await;
        assert_eq!(st, 200, "{b}");
        assert_eq!(sorted(&b["affected_roles"]), vec!["Alice", "Companion"]);
    }
    let (st, _) = register(
        &s,
        json!({"name": "steady", "callback_url": format!("{}/echo", plug.base), "source": "plugin:p1"}),
    )
    .await;
    assert_eq!(st, 200);
    let mut ws = connect(&s, "Companion").await;

    // Two failures, then a success on the same origin resets the count.
    assert_eq!(call_n(&mut ws, &llm, "flaky_a", 2).await, vec![true, true]);
    assert_eq!(s.state.tools.failure_count(&origin), 2);
    let (stop, handle) = serve_on(port).await;
    assert_eq!(call_n(&mut ws, &llm, "flaky_b", 1).await, vec![false]);
    assert_eq!(s.state.tools.failure_count(&origin), 0);
    let _ = stop.send(());
    let _ = handle.await;

    // Two more failures: still registered everywhere.
    assert_eq!(call_n(&mut ws, &llm, "flaky_a", 2).await, vec![true, true]);
    assert_eq!(s.state.tools.failure_count(&origin), 2);
    assert_eq!(
        listed(&s, "Companion").await,
        vec!["flaky_a", "flaky_b", "steady"]
    );
    assert_eq!(
        listed(&s, "Alice").await,
        vec!["flaky_a", "flaky_b", "steady"]
    );

    // The third consecutive failure evicts every tool of that origin from every role.
    assert_eq!(call_n(&mut ws, &llm, "flaky_b", 1).await, vec![true]);
    assert_eq!(listed(&s, "Companion").await, vec!["steady"]);
    assert_eq!(listed(&s, "Alice").await, vec!["steady"]);
    assert_eq!(s.state.tools.failure_count(&origin), 0);

    // The next model request no longer offers them.
    turn(&mut ws, "after eviction").await;
    let last = llm.chat_requests().last().cloned().expect("request");
    assert_eq!(offered(&last), vec!["steady"]);
}

#[tokio::test]
async fn timeouts_http_errors_and_is_error_replies_do_not_evict() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let dead = closed_port();
    for (name, path, timeout) in [
        ("slow", "/slow", 0.2),
        ("http500", "/http500", 30.0),
        ("is_error", "/is_error", 30.0),
    ] {
        let (st, _) = register(
            &s,
            json!({"name": name, "callback_url": format!("{}{path}", plug.base),
                   "source": "plugin:p2", "timeout_seconds": timeout}),
        )
        .await;
        assert_eq!(st, 200);
    }
    // A non-plugin source at a refused origin is never evicted either.
    let (st, _) = register(
        &s,
        json!({"name": "ext_dead", "callback_url": format!("http://127.0.0.1:{dead}/cb"), "source": "external"}),
    )
    .await;
    assert_eq!(st, 200);
    let mut ws = connect(&s, "Companion").await;
    for tool in ["slow", "http500", "is_error", "ext_dead"] {
        assert_eq!(
            call_n(&mut ws, &llm, tool, 4).await,
            vec![true; 4],
            "{tool}"
        );
    }
    assert_eq!(s.state.tools.failure_count(&plug.base), 0);
    assert_eq!(
        listed(&s, "Companion").await,
        vec!["slow", "http500", "is_error", "ext_dead"]
    );
    // All four slow calls happened, each cut at its own timeout.
    assert_eq!(plug.requests_to("/slow").len(), 4);
}

//! `POST /api/tools/register`: schema errors are 422 and change nothing.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn schema_errors_are_422_and_change_nothing() {
    let s = server().await;
    let url = "http://127.0.0.1:9/cb";
    let long = "n".repeat(65);
    let bad_register = [
        json!({"callback_url": url}),
        json!({"name": "", "callback_url": url}),
        json!({"name": long, "callback_url": url}),
        json!({"name": 5, "callback_url": url}),
        json!({"name": null, "callback_url": url}),
        json!({"name": "t"}),
        json!({"name": "t", "callback_url": ""}),
        json!({"name": "t", "callback_url": 7}),
        json!({"name": "t", "callback_url": "http://10.0.0.1/"}),
        json!({"name": "t", "callback_url": "http://example.com/"}),
        json!({"name": "t", "callback_url": "ftp://127.0.0.1/"}),
        json!({"name": "t", "callback_url": "http://localhost.:8080/"}),
        json!({"name": "t", "callback_url": "http://[::ffff:10.0.0.1]/"}),
        json!({"name": "t", "callback_url": "http://127.0.0.1@example.com/"}),
        json!({"name": "t", "callback_url": "not a url"}),
        json!({"name": "t", "callback_url": url, "parameters": "x"}),
        json!({"name": "t", "callback_url": url, "parameters": [1]}),
        json!({"name": "t", "callback_url": url, "parameters": {"type": "string"}}),
        json!({"name": "t", "callback_url": url, "parameters": {"properties": []}}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": 0}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": -1}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": 300.5}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": "30"}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": true}),
        json!({"name": "t", "callback_url": url, "role": 5}),
        json!({"name": "t", "callback_url": url, "role": ["Companion"]}),
        json!({"name": "t", "callback_url": url, "description": 1}),
        json!({"name": "t", "callback_url": url, "source": {}}),
        json!(["name", "t"]),
    ];
    for body in &bad_register {
        let (st, b) = register(&s, body.clone()).await;
        assert_eq!(st, 422, "{body} -> {b}");
        assert!(b["detail"].is_string(), "{b}");
    }
    // Malformed JSON and an empty body.
    for raw in ["{not json", ""] {
        let r = s
            .http
            .post(s.url("/api/tools/register"))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .expect("request");
        assert_eq!(r.status().as_u16(), 422, "{raw:?}");
    }
    // Schema errors win over an unknown role.
    let (st, _) = register(
        &s,
        json!({"name": "", "callback_url": url, "role": "Nobody"}),
    )
    .await;
    assert_eq!(st, 422);

    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": long}),
        json!({"name": "t", "role": 1}),
    ] {
        let (st, b) = s.post("/api/tools/unregister", body.clone()).await;
        assert_eq!(st, 422, "{body} -> {b}");
    }
    for body in [
        json!({}),
        json!({"source": ""}),
        json!({"source": 3}),
        json!({"source": "x", "role": false}),
    ] {
        let (st, b) = s.post("/api/tools/clear", body.clone()).await;
        assert_eq!(st, 422, "{body} -> {b}");
    }
    assert!(listed(&s, "Companion").await.is_empty());

    // The boundaries and the loopback forms are accepted.
    let ok = [
        json!({"name": "n".repeat(64), "callback_url": url}),
        json!({"name": "猫".repeat(64), "callback_url": url}),
        json!({"name": "mapped", "callback_url": "http://[::ffff:127.0.0.1]/"}),
        json!({"name": "v6", "callback_url": "http://[::1]:8/x"}),
        json!({"name": "net8", "callback_url": "http://127.45.6.7:1/"}),
        json!({"name": "host", "callback_url": "https://LOCALHOST/cb"}),
        json!({"name": "max_timeout", "callback_url": url, "timeout_seconds": 300}),
        json!({"name": "tiny_timeout", "callback_url": url, "timeout_seconds": 0.001}),
        json!({"name": "nulls", "callback_url": url, "description": null, "parameters": null, "role": null, "timeout_seconds": null}),
    ];
    for body in &ok {
        let (st, b) = register(&s, body.clone()).await;
        assert_eq!(st, 200, "{body} -> {b}");
        assert_eq!(b["ok"], true);
    }
    assert_eq!(listed(&s, "Companion").await.len(), ok.len());
}

//! `POST /api/config/test_connectivity` (HTTP and realtime WebSocket probes).

use crate::common::*;

#[tokio::test]
async fn test_connectivity_modes_and_errors() {
    let up = model_upstream().await;
    let s = server_with_catalog(json!({"providers": [
        {"key": "okp", "name": "OK", "base_url": format!("{}/ok", up.base), "models": {"conversation": "conv-m", "summary": "sum-m"}},
        {"key": "authp", "name": "Auth", "base_url": format!("{}/auth", up.base), "models": {"conversation": "c"}}
    ]}))
    .await;
    let url = |p: &str| format!("{}/{p}", up.base);
    let (st, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": url("ok"), "api_key": "sk-x", "model": "m1"}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["success"], json!(true), "{v}");
    assert_eq!(v["resolved_url"], json!(url("ok")));
    let req = up.requests_to("/ok/chat/completions").pop().unwrap();
    assert_eq!(req.json()["model"], json!("m1"));
    assert_eq!(req.headers["authorization"], "Bearer sk-x");
    // 429 means the key works.
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": url("rl"), "api_key": "k"}),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": url("auth"), "api_key": "k"}),
        )
        .await;
    assert_eq!(v["error_code"], json!("auth_failed"), "{v}");
    assert_eq!(v["resolved_url"], Value::Null);
    let t = Instant::now();
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": url("hang"), "api_key": "k", "timeout_seconds": 0.4}),
        )
        .await;
    assert_eq!(v["error_code"], json!("timeout"), "{v}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let (_, v) = s.post("/api/config/test_connectivity", json!({})).await;
    assert_eq!(v["error_code"], json!("missing_params"));
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": "file:///etc/passwd", "api_key": "k"}),
        )
        .await;
    assert_eq!(v["error_code"], json!("unsupported"));
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": url("ok"), "provider_type": "tts", "sub_type": "x"}),
        )
        .await;
    assert_eq!(v["error_code"], json!("unsupported"));
    // Mode A: catalog endpoint and model; the body key wins over nothing stored.
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"provider_key": "okp", "provider_scope": "core", "api_key": "sk-a"}),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    assert_eq!(
        up.requests_to("/ok/chat/completions").pop().unwrap().json()["model"],
        json!("conv-m")
    );
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"provider_key": "okp", "provider_scope": "assist", "api_key": MASKED}),
        )
        .await;
    assert_eq!(v["error_code"], json!("key_required"), "{v}");
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"provider_key": "authp", "provider_scope": "assist", "api_key": "sk"}),
        )
        .await;
    assert_eq!(v["error_code"], json!("auth_failed"), "{v}");
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"provider_key": "okp", "provider_scope": "elsewhere"}),
        )
        .await;
    assert_eq!(v["error_code"], json!("missing_params"));
}

#[tokio::test]
async fn test_connectivity_websocket_realtime() {
    let s = server().await;
    let (ok, seen) = realtime_server(Some(json!({"type": "session.updated"}))).await;
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": format!("ws://{ok}/realtime"), "provider_type": "websocket", "model": "rt-model", "api_key": "sk-rt"}),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    let first = seen.lock().unwrap()[0].clone();
    assert_eq!(first, "/realtime?model=rt-model Bearer sk-rt");
    let (bad, _) = realtime_server(Some(
        json!({"type": "error", "error": {"message": "Invalid API key provided"}}),
    ))
    .await;
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": format!("ws://{bad}/realtime"), "provider_type": "websocket", "api_key": "sk-bad"}),
        )
        .await;
    assert_eq!(v["error_code"], json!("auth_failed"), "{v}");
    let closed = closed_port().await;
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": format!("ws://{closed}/realtime"), "provider_type": "websocket"}),
        )
        .await;
    assert_eq!(v["success"], json!(false));
    assert_eq!(v["error_code"], json!("ws_error"), "{v}");
    // wss:// goes through TLS: a plain server fails the handshake as ssl_error.
    let (_, v) = s
        .post(
            "/api/config/test_connectivity",
            json!({"url": format!("wss://{ok}/realtime"), "provider_type": "websocket", "timeout_seconds": 3}),
        )
        .await;
    assert_eq!(v["error_code"], json!("ssl_error"), "{v}");
}

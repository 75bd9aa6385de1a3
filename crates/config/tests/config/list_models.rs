//! `POST /api/config/list_models`.

use crate::common::*;

#[tokio::test]
async fn list_models_custom_endpoint_and_every_error_code() {
    let up = model_upstream().await;
    let s = server().await;
    let url = |p: &str| format!("{}/{p}", up.base);

    let (st, v) = s
        .post(
            "/api/config/list_models",
            json!({"url": url("ok"), "api_key": "sk-live", "model_type": "conversation"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["success"], json!(true), "{v}");
    assert_eq!(
        v["models"],
        json!([
            {"id": "Beta"},
            {"id": "gamma"},
            {"id": "models/alpha", "name": "Alpha Display"},
            {"id": "zeta-model"}
        ])
    );
    assert_eq!(v["resolved_url"], json!(url("ok")));
    let req = up.requests_to("/ok/models").pop().unwrap();
    assert_eq!(req.headers["authorization"], "Bearer sk-live");

    let cases = [
        ("auth", "auth_failed"),
        ("rl", "rate_limited"),
        ("empty", "empty"),
        ("missing", "unsupported"),
        ("broken", "unknown"),
    ];
    for (path, code) in cases {
        let (st, v) = s
            .post(
                "/api/config/list_models",
                json!({"url": url(path), "api_key": "k"}),
            )
            .await;
        assert_eq!(st, 200, "{path}: {v}");
        assert_eq!(v["success"], json!(false), "{path}: {v}");
        assert_eq!(v["error_code"], json!(code), "{path}: {v}");
    }
    let started = Instant::now();
    let (st, v) = s
        .post(
            "/api/config/list_models",
            json!({"url": url("hang"), "api_key": "k", "timeout_seconds": 0.5}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["error_code"], json!("timeout"), "{v}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // Connection refused on a closed port.
    let closed = closed_port().await;
    let (_, v) = s
        .post(
            "/api/config/list_models",
            json!({"url": format!("http://{closed}/v1"), "api_key": "k"}),
        )
        .await;
    assert_eq!(v["error_code"], json!("connection_refused"), "{v}");

    // Non-HTTP(S) schemes are refused before any request.
    let before = up.requests().len();
    for bad in [
        "ftp://127.0.0.1/x",
        "file:///etc/passwd",
        "ws://127.0.0.1:1/x",
        "gopher://x",
        "not a url",
    ] {
        let (st, v) = s
            .post(
                "/api/config/list_models",
                json!({"url": bad, "api_key": "k"}),
            )
            .await;
        assert_eq!(st, 200);
        assert_eq!(v["error_code"], json!("unsupported"), "{bad}: {v}");
    }
    assert_eq!(up.requests().len(), before);
    let (_, v) = s.post("/api/config/list_models", json!({})).await;
    assert_eq!(v["success"], json!(false));
    assert_eq!(v["error_code"], json!("missing_params"));
}

#[tokio::test]
async fn list_models_masked_key_only_for_the_saved_endpoint() {
    let up = model_upstream().await;
    let s = server().await;
    let saved = format!("{}/ok", up.base);
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"enableCustomApi": true, "summaryModelUrl": saved, "summaryModelApiKey": "sk-stored-summary"}),
        )
        .await;
    assert_eq!(st, 200);
    // Same endpoint (trailing slash differs): the stored key is used.
    let (_, v) = s
        .post(
            "/api/config/list_models",
            json!({"url": format!("{saved}/"), "api_key": MASKED, "model_type": "summary"}),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    let req = up.requests_to("/ok/models").pop().unwrap();
    assert_eq!(req.headers["authorization"], "Bearer sk-stored-summary");
    // Another endpoint, another slot, or no slot: key_required and no request.
    let before = up.requests().len();
    for body in [
        json!({"url": format!("{}/rl", up.base), "api_key": MASKED, "model_type": "summary"}),
        json!({"url": saved.clone(), "api_key": MASKED, "model_type": "conversation"}),
        json!({"url": saved.clone(), "api_key": "****", "model_type": ""}),
        json!({"url": saved.replace("127.0.0.1", "localhost"), "api_key": MASKED, "model_type": "summary"}),
    ] {
        let (st, v) = s.post("/api/config/list_models", body.clone()).await;
        assert_eq!(st, 200);
        assert_eq!(v["error_code"], json!("key_required"), "{body}: {v}");
    }
    assert_eq!(up.requests().len(), before);
}

#[tokio::test]
async fn list_models_builtin_provider_uses_catalog_and_stored_key() {
    let up = model_upstream().await;
    let s = server_with_catalog(json!({"providers": [
        {"key": "gem", "name": "G", "base_url": format!("{}/ok", up.base), "strip_models_prefix": true,
         "alternate_base_urls": [format!("{}/rl", up.base)], "models": {"conversation": "m"}},
        {"key": "plain", "name": "P", "base_url": format!("{}/ok", up.base), "models": {}},
        {"key": "free", "name": "Free", "base_url": format!("{}/ok", up.base), "free": true, "models": {}},
        {"key": "fixed", "name": "Fixed", "base_url": format!("{}/ok", up.base), "fixed_model": true, "models": {}},
        {"key": "rt", "name": "Realtime", "base_url": "wss://example.invalid/realtime", "models": {}}
    ]}))
    .await;
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "plain", "coreApiKey": "sk-core", "assistApiKeyGem": "sk-gem"}),
        )
        .await;
    assert_eq!(st, 200);
    // Stored Key Book key, models/ prefix stripped for the flagged provider; the
    // http:// alternate node is ignored (alternates are HTTPS only).
    let (_, v) = s
        .post(
            "/api/config/list_models",
            json!({"provider_key": "gem", "api_key": MASKED, "url": format!("{}/rl", up.base)}),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    let ids: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alpha", "Beta", "gamma", "zeta-model"]);
    assert_eq!(v["resolved_url"], json!(format!("{}/ok", up.base)));
    assert_eq!(
        up.requests_to("/ok/models").pop().unwrap().headers["authorization"],
        "Bearer sk-gem"
    );
    assert!(up.requests_to("/rl/models").is_empty());
    // Core provider without a Key Book key: the core key.
    let (_, v) = s
        .post(
            "/api/config/list_models",
            json!({"provider_key": "plain", "api_key": ""}),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    assert!(v["models"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "models/alpha"));
    assert_eq!(
        up.requests_to("/ok/models").pop().unwrap().headers["authorization"],
        "Bearer sk-core"
    );
    let before = up.requests().len();
    for (key, code) in [
        ("free", "unsupported"),
        ("fixed", "unsupported"),
        ("rt", "unsupported"),
        ("nope", "unsupported"),
    ] {
        let (_, v) = s
            .post(
                "/api/config/list_models",
                json!({"provider_key": key, "api_key": "x"}),
            )
            .await;
        assert_eq!(v["error_code"], json!(code), "{key}: {v}");
    }
    assert_eq!(up.requests().len(), before);
}

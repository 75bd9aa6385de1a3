//! End-to-end tests of the configuration and proactive routes over real HTTP,
//! with real loopback upstreams (OpenAI-compatible `/models`, a voice server over
//! HTTP and WebSocket) and real files in a temporary data dir.

#![allow(clippy::result_large_err)] // tungstenite handshake callbacks return its large error type

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use companiond_core::providers::Slot;
use companiond_core::testkit::{split, TestOptions, TestServer, Upstream, CSRF};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

const MASKED: &str = companiond_config::MASKED;

async fn server() -> TestServer {
    TestServer::start(&[companiond_config::FAMILY]).await
}

async fn server_with_catalog(catalog: Value) -> TestServer {
    TestServer::start_with(
        &[companiond_config::FAMILY],
        TestOptions {
            prepare: Some(Box::new(move |_data, bundle| {
                std::fs::write(bundle.join("providers.json"), catalog.to_string()).unwrap();
            })),
            ..Default::default()
        },
    )
    .await
}

fn core_config(s: &TestServer) -> Value {
    let p = s.data.join("config/core_config.json");
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b).unwrap(),
        Err(_) => Value::Null,
    }
}

async fn post_with(
    s: &TestServer,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, HeaderMap, Value) {
    let mut b = s.http.post(s.url(path)).json(&body);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let r = b.send().await.unwrap();
    let h = r.headers().clone();
    let (st, v) = split(r).await;
    (st, h, v)
}

async fn get_with_headers(s: &TestServer, path: &str) -> (u16, HeaderMap, Value) {
    let r = s.http.get(s.url(path)).send().await.unwrap();
    let h = r.headers().clone();
    let (st, v) = split(r).await;
    (st, h, v)
}

async fn post_raw(s: &TestServer, path: &str, body: &'static str) -> (u16, Value) {
    let r = s
        .http
        .post(s.url(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    split(r).await
}

// ------------------------------------------------------------------ routes

#[tokio::test]
async fn every_route_is_in_openapi() {
    let s = server().await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    let paths = doc["paths"].as_object().unwrap();
    let want = [
        ("post", "/api/config/test_connectivity"),
        ("post", "/api/config/list_models"),
        ("get", "/api/config/core_api"),
        ("post", "/api/config/core_api"),
        ("get", "/api/config/api_providers"),
        ("post", "/api/config/voiceserver/list_voices"),
        ("post", "/api/config/voiceserver/test_connectivity"),
        ("get", "/api/config/preferences"),
        ("post", "/api/config/preferences"),
        ("post", "/api/config/preferences/set-preferred"),
        ("get", "/api/config/conversation-settings"),
        ("post", "/api/config/conversation-settings"),
        ("get", "/api/config/page_config"),
        ("get", "/api/config/character_reserved_fields"),
        ("get", "/api/config/platform_language"),
        ("get", "/api/config/user_language"),
        ("post", "/api/config/set_proxy_mode"),
        ("get", "/api/proactive/mode"),
        ("post", "/api/proactive/mode"),
        ("get", "/api/proactive/settings"),
        ("post", "/api/proactive/settings"),
    ];
    for (m, p) in want {
        assert!(
            paths.get(p).and_then(|o| o.get(m)).is_some(),
            "{m} {p} missing from /openapi.json"
        );
    }
}

#[tokio::test]
async fn wrong_typed_bodies_on_every_post_never_500() {
    let s = server().await;
    let posts = [
        "/api/config/test_connectivity",
        "/api/config/list_models",
        "/api/config/core_api",
        "/api/config/voiceserver/list_voices",
        "/api/config/voiceserver/test_connectivity",
        "/api/config/preferences",
        "/api/config/preferences/set-preferred",
        "/api/config/conversation-settings",
        "/api/config/set_proxy_mode",
        "/api/proactive/mode",
        "/api/proactive/settings",
    ];
    let bodies: [&'static str; 6] = ["[]", "\"text\"", "42", "null", "{not json", "[{\"a\":1}]"];
    for p in posts {
        for b in bodies {
            let (st, v) = post_raw(&s, p, b).await;
            assert!(st != 500 && st != 405 && st != 404, "{p} {b}: {st} {v}");
            assert_eq!(v["success"], json!(false), "{p} {b}: {v}");
        }
    }
    // Wrong field types inside an object.
    let typed = [
        ("/api/config/test_connectivity", json!({"url": 5}), 422),
        (
            "/api/config/test_connectivity",
            json!({"is_free": "yes"}),
            422,
        ),
        ("/api/config/list_models", json!({"provider_key": []}), 422),
        ("/api/config/list_models", json!({"api_key": {"a": 1}}), 422),
        ("/api/config/core_api", json!({"coreApi": 5}), 400),
        (
            "/api/config/core_api",
            json!({"enableCustomApi": "true"}),
            400,
        ),
        ("/api/config/core_api", json!({"coreApiKey": 123}), 400),
        (
            "/api/config/core_api",
            json!({"conversationModelUrl": "ftp://x/y"}),
            400,
        ),
        (
            "/api/config/core_api",
            json!({"resolvedProviderUrls": []}),
            400,
        ),
        (
            "/api/config/voiceserver/list_voices",
            json!({"api_url": 7}),
            400,
        ),
        (
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": true}),
            400,
        ),
        (
            "/api/config/voiceserver/test_connectivity",
            json!({"voice_id": 3}),
            400,
        ),
        (
            "/api/config/preferences",
            json!({"model_path": 3, "position": {"x":0,"y":0}, "scale": {"x":1,"y":1}}),
            400,
        ),
        (
            "/api/config/preferences/set-preferred",
            json!({"model_path": false}),
            400,
        ),
        ("/api/config/set_proxy_mode", json!({"direct": "yes"}), 400),
        ("/api/proactive/mode", json!({"mode": 3}), 200),
        (
            "/api/proactive/settings",
            json!({"proactiveVisionEnabled": "yes"}),
            200,
        ),
    ];
    for (p, b, want) in typed {
        let (st, v) = s.post(p, b.clone()).await;
        assert_eq!(st, want, "{p} {b}: {v}");
        assert_eq!(v["success"], json!(false), "{p} {b}: {v}");
    }
    // Nothing was written by any of these requests.
    assert_eq!(core_config(&s), Value::Null);
    assert!(!s.data.join("config/preferences.json").exists());
}

// ------------------------------------------------------------------ provider settings

#[tokio::test]
async fn custom_slots_persist_and_resolve() {
    let s = server().await;
    let mut body = json!({"enableCustomApi": true});
    for slot in [
        "conversation",
        "summary",
        "correction",
        "emotion",
        "vision",
        "agent",
    ] {
        body[format!("{slot}ModelUrl")] = json!("http://127.0.0.1:9/v1");
        body[format!("{slot}ModelId")] = json!(format!("{slot}-model"));
        body[format!("{slot}ModelApiKey")] = json!(format!("sk-{slot}"));
    }
    let (st, v) = s.post("/api/config/core_api", body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["success"], json!(true));
    let stored = core_config(&s);
    assert_eq!(stored["conversationModelApiKey"], json!("sk-conversation"));
    for slot in Slot::ALL {
        let ep = s.state.llm.endpoint(slot).await.expect("resolved");
        assert_eq!(ep.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(ep.model, format!("{}-model", slot.as_str()));
        assert_eq!(ep.api_key, format!("sk-{}", slot.as_str()));
    }
    let (_, h, g) = get_with_headers(&s, "/api/config/core_api").await;
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(g["enableCustomApi"], json!(true));
    assert_eq!(g["conversationModelUrl"], json!("http://127.0.0.1:9/v1"));
    assert_eq!(g["conversationModelApiKey"], json!(MASKED));
    assert!(!g.to_string().contains("sk-conversation"));
}

#[tokio::test]
async fn every_secret_is_masked_and_a_masked_value_never_replaces_it() {
    let s = server().await;
    let (_, cat) = s.get("/api/config/api_providers").await;
    let mut secrets: Vec<String> = vec!["coreApiKey".into(), "mcpToken".into()];
    for p in cat["providers"].as_array().unwrap() {
        let f = cat["api_key_registry"][p["key"].as_str().unwrap()]["config_field"]
            .as_str()
            .unwrap()
            .to_string();
        secrets.push(f);
    }
    for slot in companiond_config::core_api::SLOTS {
        secrets.push(format!("{slot}ModelApiKey"));
    }
    let mut body = json!({"coreApi": "openai", "assistApi": "qwen"});
    for (i, k) in secrets.iter().enumerate() {
        body[k] = json!(format!("secret-value-{i:03}-abcdef"));
    }
    let (st, v) = s.post("/api/config/core_api", body.clone()).await;
    assert_eq!(st, 200, "{v}");
    let stored_before = core_config(&s);

    // GET masks every secret and leaks none.
    let (_, g) = s.get("/api/config/core_api").await;
    let text = g.to_string();
    assert!(
        !text.contains("secret-value-"),
        "a raw secret leaked: {text}"
    );
    for k in &secrets {
        assert_eq!(g[k], json!(MASKED), "{k} not masked");
    }
    assert_eq!(g["api_key"], json!(MASKED));
    assert_eq!(
        g["api_key_display"],
        json!(format!("sec{}def", "*".repeat(17)))
    );

    // The whole GET body posted back changes no secret.
    let (st, v) = s.post("/api/config/core_api", g.clone()).await;
    assert_eq!(st, 200, "{v}");
    let after = core_config(&s);
    for k in &secrets {
        assert_eq!(
            after[k], stored_before[k],
            "{k} changed by a masked round trip"
        );
    }
    assert!(after.get("api_key_display").is_none());

    // Each placeholder shape, for every secret field.
    let display = g["api_key_display"].as_str().unwrap().to_string();
    for placeholder in [MASKED, "****", "••••••••••••", display.as_str()] {
        for k in &secrets {
            let (st, v) = s
                .post("/api/config/core_api", json!({ k.as_str(): placeholder }))
                .await;
            assert_eq!(st, 200, "{k} {placeholder}: {v}");
        }
    }
    let after = core_config(&s);
    for k in &secrets {
        assert_eq!(after[k], stored_before[k], "{k} replaced by a placeholder");
    }

    // A real new value replaces; an empty string clears.
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"mcpToken": "new-token-value", "assistApiKeyQwen": ""}),
        )
        .await;
    assert_eq!(st, 200);
    let after = core_config(&s);
    assert_eq!(after["mcpToken"], json!("new-token-value"));
    assert_eq!(after["assistApiKeyQwen"], json!(""));
    let (_, g) = s.get("/api/config/core_api").await;
    assert_eq!(g["assistApiKeyQwen"], json!(""));
}

#[tokio::test]
async fn core_api_validation_leaves_the_file_untouched() {
    let s = server().await;
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "openai", "coreApiKey": "sk-one"}),
        )
        .await;
    assert_eq!(st, 200);
    let before = std::fs::read(s.data.join("config/core_config.json")).unwrap();
    for bad in [
        json!({}),
        json!({"coreApi": "no-such-provider"}),
        json!({"coreApiKey": "sk-two", "disableTts": "no"}),
        json!({"coreApiKey": "sk-two", "agentModelUrl": "file:///etc/passwd"}),
        json!({"coreApiKey": ["sk"]}),
    ] {
        let (st, v) = s.post("/api/config/core_api", bad.clone()).await;
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["success"], json!(false));
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    assert_eq!(
        std::fs::read(s.data.join("config/core_config.json")).unwrap(),
        before
    );
    // A corrupt file is reported and never overwritten.
    std::fs::write(s.data.join("config/core_config.json"), b"{broken").unwrap();
    let (st, v) = s
        .post("/api/config/core_api", json!({"coreApiKey": "sk-3"}))
        .await;
    assert_eq!(st, 503, "{v}");
    let (st, _) = s.get("/api/config/core_api").await;
    assert_eq!(st, 503);
    assert_eq!(
        std::fs::read(s.data.join("config/core_config.json")).unwrap(),
        b"{broken"
    );
}

#[tokio::test]
async fn provider_change_keeps_old_key_and_notifies_active_sessions() {
    let s = server().await;
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "openai", "coreApiKey": "sk-openai-key"}),
        )
        .await;
    assert_eq!(st, 200);
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url("/ws/Companion"))
        .await
        .unwrap();
    wait_active(&s, "Companion").await;
    let (st, v) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "deepseek", "coreApiKey": "sk-deepseek-key"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["sessions_notified"], json!(1));
    let frame = next_of_type(&mut ws, "provider_changed").await;
    assert_eq!(frame["type"], json!("provider_changed"));
    let cfg = core_config(&s);
    assert_eq!(cfg["coreApi"], json!("deepseek"));
    assert_eq!(cfg["coreApiKey"], json!("sk-deepseek-key"));
    assert_eq!(cfg["assistApiKeyOpenai"], json!("sk-openai-key"));
    // Switching back promotes the Key Book key when the body carries a mask.
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "openai", "coreApiKey": MASKED}),
        )
        .await;
    assert_eq!(st, 200);
    let cfg = core_config(&s);
    assert_eq!(cfg["coreApiKey"], json!("sk-openai-key"));
    let ep = s.state.llm.endpoint(Slot::Conversation).await.unwrap();
    assert_eq!(ep.base_url, "https://api.openai.com/v1");
    assert_eq!(ep.api_key, "sk-openai-key");
}

async fn wait_active(s: &TestServer, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s.state.sessions.is_active(name) {
        assert!(Instant::now() < deadline, "session never became active");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn next_of_type<S>(ws: &mut S, ty: &str) -> Value
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let deadline = Duration::from_secs(5);
    loop {
        let m = tokio::time::timeout(deadline, ws.next())
            .await
            .expect("a frame")
            .expect("open")
            .expect("frame");
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == ty {
                return v;
            }
        }
    }
}

#[tokio::test]
async fn api_providers_from_builtin_and_bundle() {
    let s = server().await;
    let (st, v) = s.get("/api/config/api_providers").await;
    assert_eq!(st, 200);
    assert_eq!(v["success"], json!(true));
    assert_eq!(v["source"], json!("builtin"));
    let keys: Vec<&str> = v["core_api_providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"openai") && keys.contains(&"gemini"));
    assert_eq!(
        v["api_key_registry"]["openai"]["config_field"],
        json!("assistApiKeyOpenai")
    );
    let s = server_with_catalog(json!({
        "providers": [{"key": "local", "name": "Local", "base_url": "http://127.0.0.1:1/v1", "models": {"conversation": "m"}, "description": "d"}],
        "tts_providers": [{"key": "x"}]
    }))
    .await;
    let (_, v) = s.get("/api/config/api_providers").await;
    assert_eq!(v["source"], json!("bundle"));
    assert_eq!(
        v["core_api_providers"],
        json!([{"key": "local", "name": "Local", "description": "d", "is_free_version": false, "fixed_model": false}])
    );
    assert_eq!(
        v["assist_api_providers_full"]["local"]["base_url"],
        json!("http://127.0.0.1:1/v1")
    );
    assert_eq!(v["tts_providers"], json!([{"key": "x"}]));
}

// ------------------------------------------------------------------ list_models / test_connectivity

async fn model_upstream() -> Upstream {
    let router = Router::new()
        .route(
            "/ok/models",
            get(|| async {
                Json(json!({"object": "list", "data": [
                    {"id": "zeta-model", "object": "model"},
                    {"id": "models/alpha", "name": "Alpha Display"},
                    {"id": "Beta", "display_name": "Beta"},
                    {"id": " gamma "},
                    {"id": "zeta-model"},
                    {"id": ""}
                ]}))
            }),
        )
        .route(
            "/ok/chat/completions",
            post(|| async { Json(json!({"choices": [{"message": {"content": "hi"}}]})) }),
        )
        .route(
            "/auth/models",
            get(|| async { (StatusCode::UNAUTHORIZED, "bad key") }),
        )
        .route(
            "/auth/chat/completions",
            post(|| async { (StatusCode::FORBIDDEN, "bad key") }),
        )
        .route(
            "/rl/models",
            get(|| async { (StatusCode::TOO_MANY_REQUESTS, "slow down") }),
        )
        .route(
            "/rl/chat/completions",
            post(|| async { (StatusCode::TOO_MANY_REQUESTS, "slow down") }),
        )
        .route(
            "/hang/models",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route(
            "/hang/chat/completions",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route("/empty/models", get(|| async { Json(json!({"data": []})) }))
        .route(
            "/broken/models",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        );
    Upstream::start(router).await
}

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

async fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a
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

/// A realtime-style WebSocket server: answers the first text frame with `reply`
/// (or nothing when `None`).
async fn realtime_server(reply: Option<Value>) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let reply = reply.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let cb = |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                          resp| {
                    let auth = req
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    seen.lock().unwrap().push(format!("{} {auth}", req.uri()));
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, cb).await else {
                    return;
                };
                while let Some(Ok(m)) = ws.next().await {
                    if m.is_text() {
                        if let Some(r) = &reply {
                            let _ = ws.send(Message::Text(r.to_string())).await;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
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

// ------------------------------------------------------------------ voice server

#[derive(Clone, Copy, Debug)]
enum Voice {
    /// ready, then two audio chunks, a sentence event and done.
    Good,
    /// answers init with an error.
    InitFails,
    /// never answers init.
    Silent,
    /// ready, then an error event for the synthesis.
    SynthesisError,
}

async fn voice_server(mode: Voice) -> (SocketAddr, Arc<Mutex<Vec<Value>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let seen = seen2.clone();
            tokio::spawn(async move {
                let path = Arc::new(Mutex::new(String::new()));
                let p2 = path.clone();
                let cb = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                               resp| {
                    *p2.lock().unwrap() = req.uri().path().to_string();
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, cb).await else {
                    return;
                };
                seen.lock()
                    .unwrap()
                    .push(json!({"path": path.lock().unwrap().clone()}));
                while let Some(Ok(m)) = ws.next().await {
                    let Message::Text(t) = m else { continue };
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    seen.lock().unwrap().push(v.clone());
                    match (mode, v["cmd"].as_str()) {
                        (Voice::InitFails, Some("init")) => {
                            let _ = ws
                                .send(Message::Text(
                                    json!({"type": "error", "message": "unknown voice"})
                                        .to_string(),
                                ))
                                .await;
                        }
                        (Voice::Silent, _) => {}
                        (_, Some("init")) => {
                            let _ = ws
                                .send(Message::Text(json!({"type": "ready"}).to_string()))
                                .await;
                        }
                        (Voice::SynthesisError, Some("end")) => {
                            let _ = ws
                                .send(Message::Text(
                                    json!({"type": "error", "message": "model crashed"})
                                        .to_string(),
                                ))
                                .await;
                        }
                        (Voice::Good, Some("end")) => {
                            let _ = ws
                                .send(Message::Text(
                                    json!({"type": "sentence", "text": "x"}).to_string(),
                                ))
                                .await;
                            let _ = ws.send(Message::Binary(vec![1u8; 320])).await;
                            let _ = ws.send(Message::Binary(vec![2u8; 160])).await;
                            let _ = ws
                                .send(Message::Text(json!({"type": "done"}).to_string()))
                                .await;
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn voice_server_synthesis_flow_by_stage() {
    let s = server().await;
    let (good, seen) = voice_server(Voice::Good).await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{good}/"), "voice_id": "gsv:alice|{\"speed\":1.2}", "test_text": "hello there"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["success"], json!(true));
    assert_eq!(v["audio_chunks"], json!(2));
    assert_eq!(v["audio_bytes"], json!(480));
    assert_eq!(v["sentences"], json!(1));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0]["path"], json!("/api/v3/tts/stream-input"));
    assert_eq!(
        seen[1],
        json!({"cmd": "init", "voice_id": "alice", "speed": 1.2})
    );
    assert_eq!(seen[2], json!({"cmd": "append", "data": "hello there"}));
    assert_eq!(seen[3], json!({"cmd": "end"}));

    let (bad, _) = voice_server(Voice::InitFails).await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{bad}")}),
        )
        .await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["stage"], json!("init"));
    assert!(v["error"].as_str().unwrap().contains("unknown voice"));

    let (silent, _) = voice_server(Voice::Silent).await;
    let t = Instant::now();
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{silent}"), "timeout_seconds": 0.5}),
        )
        .await;
    assert_eq!(st, 504, "{v}");
    assert_eq!(v["error_code"], json!("timeout"));
    assert!(t.elapsed() < Duration::from_secs(5));

    let (synth, _) = voice_server(Voice::SynthesisError).await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{synth}")}),
        )
        .await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["stage"], json!("synthesis"));

    let closed = closed_port().await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{closed}")}),
        )
        .await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["error_code"], json!("connection_refused"));

    for bad in [
        json!({"api_url": "ftp://127.0.0.1"}),
        json!({"api_url": "http://"}),
        json!({"test_text": "x".repeat(600)}),
    ] {
        let (st, v) = s
            .post("/api/config/voiceserver/test_connectivity", bad.clone())
            .await;
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["success"], json!(false));
    }
}

#[tokio::test]
async fn voice_server_list_voices() {
    let up = Upstream::start(
        Router::new()
            .route(
                "/good/api/v3/voices",
                get(|| async { Json(json!({"voices": [{"id": "alice"}]})) }),
            )
            .route("/html/api/v3/voices", get(|| async { "<html>" }))
            .route(
                "/err/api/v3/voices",
                get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "x").into_response() }),
            )
            .route(
                "/slow/api/v3/voices",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "late"
                }),
            ),
    )
    .await;
    let s = server().await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/list_voices",
            json!({"api_url": format!("{}/good/", up.base)}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v,
        json!({"success": true, "voices": {"voices": [{"id": "alice"}]}, "api_url": format!("{}/good", up.base)})
    );
    for (p, status) in [("html", 502), ("err", 502), ("missing", 502)] {
        let (st, v) = s
            .post(
                "/api/config/voiceserver/list_voices",
                json!({"api_url": format!("{}/{p}", up.base)}),
            )
            .await;
        assert_eq!(st, status, "{p}: {v}");
        assert_eq!(v["code"], json!("TTS_CONNECTION_FAILED"));
    }
    let (st, v) = s
        .post(
            "/api/config/voiceserver/list_voices",
            json!({"api_url": format!("{}/slow", up.base), "timeout_seconds": 0.3}),
        )
        .await;
    assert_eq!(st, 504, "{v}");
    let (st, v) = s
        .post("/api/config/voiceserver/list_voices", json!({}))
        .await;
    assert_eq!(st, 400);
    assert_eq!(v["error_code"], json!("TTS_GPT_SOVITS_URL_REQUIRED"));
    let before = up.requests().len();
    let (st, v) = s
        .post(
            "/api/config/voiceserver/list_voices",
            json!({"api_url": "file:///etc/passwd"}),
        )
        .await;
    assert_eq!(st, 400);
    assert_eq!(v["error_code"], json!("TTS_GPT_SOVITS_URL_INVALID"));
    assert_eq!(up.requests().len(), before);
}

// ------------------------------------------------------------------ preferences

#[tokio::test]
async fn preferences_save_merge_and_order() {
    let s = server().await;
    let (st, v) = s.get("/api/config/preferences").await;
    assert_eq!((st, v), (200, json!([])));
    let rec = |p: &str, x: f64| json!({"model_path": p, "position": {"x": x, "y": 2}, "scale": {"x": 1, "y": 1}});
    for bad in [
        json!({}),
        json!({"model_path": "a", "position": {"x": 1}, "scale": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": [1, 2], "scale": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": {"x": "1", "y": 1}, "scale": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": {"x": 1, "y": 1}, "scale": {"x": 1, "y": 1}, "parameters": [1]}),
        json!({"model_path": "__global_conversation__", "position": {"x": 1, "y": 1}, "scale": {"x": 1, "y": 1}}),
    ] {
        let (st, v) = s.post("/api/config/preferences", bad.clone()).await;
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["success"], json!(false));
        assert!(v["error"].is_string());
    }
    assert!(!s.data.join("config/preferences.json").exists());
    let mut first = rec("a/a.model3.json", 1.0);
    first["parameters"] = json!({"ParamAngleX": 3.5});
    first["viewport"] = json!({"width": 800, "height": 600});
    let (st, v) = s.post("/api/config/preferences", first).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["success"], json!(true));
    let (st, _) = s.post("/api/config/preferences", rec("b.vrm", 5.0)).await;
    assert_eq!(st, 200);
    let (_, list) = s.get("/api/config/preferences").await;
    assert_eq!(list[0]["model_path"], json!("b.vrm"));
    assert_eq!(list[1]["model_path"], json!("a/a.model3.json"));
    // Update in place keeps its position and carries over absent optional fields;
    // an invalid viewport is dropped (the old one stays).
    let mut upd = rec("a/a.model3.json", 9.0);
    upd["viewport"] = json!({"width": -1, "height": 5});
    let (st, _) = s.post("/api/config/preferences", upd).await;
    assert_eq!(st, 200);
    let (_, list) = s.get("/api/config/preferences").await;
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(list[1]["position"]["x"], json!(9.0));
    assert_eq!(list[1]["parameters"], json!({"ParamAngleX": 3.5}));
    assert_eq!(list[1]["viewport"], json!({"width": 800, "height": 600}));
    // set-preferred moves it to the front.
    let (st, v) = s
        .post(
            "/api/config/preferences/set-preferred",
            json!({"model_path": "a/a.model3.json"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (_, list) = s.get("/api/config/preferences").await;
    assert_eq!(list[0]["model_path"], json!("a/a.model3.json"));
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("config/preferences.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk, list);
    let (st, v) = s
        .post(
            "/api/config/preferences/set-preferred",
            json!({"model_path": "nope"}),
        )
        .await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["success"], json!(false));
    let (st, _) = s
        .post("/api/config/preferences/set-preferred", json!({}))
        .await;
    assert_eq!(st, 400);
}

// ------------------------------------------------------------------ conversation settings

const CS: &str = "/api/config/conversation-settings";

#[tokio::test]
async fn conversation_settings_revision_etag_and_if_match() {
    let s = server().await;
    let (st, h, v) = get_with_headers(&s, CS).await;
    assert_eq!(st, 200);
    assert_eq!(h["etag"], "\"conversation-settings-0\"");
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(v["revision"], json!("0"));
    assert_eq!(v["settings"], json!({}));
    assert_eq!(v["reset"], json!(false));
    assert_eq!(v["telemetryBranch"], json!("main"));

    let (st, h, v) = post_with(
        &s,
        CS,
        &[("If-Match", "\"conversation-settings-0\"")],
        json!({"proactiveChatEnabled": true, "proactiveChatInterval": 0, "bogus": 1}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(h["etag"], "\"conversation-settings-1\"");
    assert_eq!(v["revision"], json!("1"));
    assert_eq!(v["settings"], json!({"proactiveChatEnabled": true}));
    assert_eq!(v["rejected"], json!(["proactiveChatInterval"]));
    assert_eq!(v["ignored"], json!(["bogus"]));

    // Stale If-Match: 412 with the current state, nothing written.
    let disk = std::fs::read(s.data.join("config/conversation_settings.json")).unwrap();
    let (st, h, v) = post_with(
        &s,
        CS,
        &[("If-Match", "\"conversation-settings-0\"")],
        json!({"subtitleEnabled": true}),
    )
    .await;
    assert_eq!(st, 412, "{v}");
    assert_eq!(h["etag"], "\"conversation-settings-1\"");
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(v["success"], json!(false));
    assert_eq!(v["settings"], json!({"proactiveChatEnabled": true}));
    assert_eq!(v["revision"], json!("1"));
    assert!(v["decisions"].is_object());
    assert_eq!(
        std::fs::read(s.data.join("config/conversation_settings.json")).unwrap(),
        disk
    );

    // Weak form and the body's bare revision both match; no If-Match is accepted.
    let (st, _, v) = post_with(
        &s,
        CS,
        &[("If-Match", "W/\"conversation-settings-1\"")],
        json!({"subtitleEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (st, _, v) = post_with(
        &s,
        CS,
        &[("If-Match", "2")],
        json!({"subtitleEnabled": false}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (st, _, v) = post_with(&s, CS, &[], json!({"mergeMessagesEnabled": true})).await;
    assert_eq!((st, v["revision"].clone()), (200, json!("4")));
    // A no-op write keeps the revision.
    let (st, h, v) = post_with(&s, CS, &[], json!({"mergeMessagesEnabled": true})).await;
    assert_eq!(st, 200);
    assert_eq!(v["changed"], json!(false));
    assert_eq!(h["etag"], "\"conversation-settings-4\"");
    for bad in [
        "*",
        "\"abc\"",
        "conversation-settings-",
        "\"conversation-settings-1",
        "1, 2",
    ] {
        let (st, _, v) = post_with(
            &s,
            CS,
            &[("If-Match", bad)],
            json!({"subtitleEnabled": true}),
        )
        .await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
    // Persisted across a re-read from disk.
    let (_, _, v) = get_with_headers(&s, CS).await;
    assert_eq!(v["revision"], json!("4"));
    assert_eq!(v["settings"]["mergeMessagesEnabled"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_writers_with_the_same_if_match_exactly_one_wins() {
    let s = server().await;
    let (st, _, _) = post_with(&s, CS, &[], json!({"focusModeEnabled": false})).await;
    assert_eq!(st, 200);
    for round in 0..5 {
        let (_, h, _) = get_with_headers(&s, CS).await;
        let etag = h["etag"].to_str().unwrap().to_string();
        let hdrs = [("If-Match", etag.as_str())];
        let a = post_with(
            &s,
            CS,
            &hdrs,
            json!({"focusModeEnabled": round % 2 == 0, "textGuardMaxLength": 100 + round}),
        );
        let b = post_with(
            &s,
            CS,
            &hdrs,
            json!({"focusModeEnabled": round % 2 == 0, "textGuardMaxLength": 200 + round}),
        );
        let ((sa, _, va), (sb, _, vb)) = tokio::join!(a, b);
        let mut statuses = [sa, sb];
        statuses.sort();
        assert_eq!(statuses, [200, 412], "round {round}: {va} {vb}");
        let winner = if sa == 200 { &va } else { &vb };
        let loser = if sa == 200 { &vb } else { &va };
        assert_eq!(loser["settings"], winner["settings"]);
        let (_, _, now) = get_with_headers(&s, CS).await;
        assert_eq!(now["settings"], winner["settings"]);
    }
}

#[tokio::test]
async fn asr_decision_rejects_an_older_window_even_when_it_arrives_last() {
    let s = server().await;
    let hdr = |wid: u64, writer: &str, value: bool| {
        json!({"writeId": wid, "writerId": writer, "value": value}).to_string()
    };
    let asr = "X-Conversation-Settings-ASR-Decision";
    let newer = hdr(2_000, "window-b", true);
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &newer)],
        json!({"independentAsrEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["decisions"]["independentAsrEnabled"],
        json!({"writeId": 2000, "writerId": "window-b", "value": true})
    );
    // The older window's write arrives last: 412 even without If-Match.
    let older = hdr(1_000, "window-a", false);
    let (st, h, v) = post_with(
        &s,
        CS,
        &[(asr, &older)],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 412, "{v}");
    assert_eq!(h["etag"], "\"conversation-settings-1\"");
    assert_eq!(v["settings"]["independentAsrEnabled"], json!(true));
    // Same writeId, writer ordering decides.
    let (st, _, _) = post_with(
        &s,
        CS,
        &[(asr, &hdr(2_000, "window-a", false))],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 412);
    // Same key with another value is a conflict; same key and value is fine.
    let (st, _, _) = post_with(
        &s,
        CS,
        &[(asr, &hdr(2_000, "window-b", false))],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 412);
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &newer)],
        json!({"independentAsrEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["changed"], json!(false));
    // A newer decision wins.
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &hdr(3_000, "window-a", false))],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["settings"]["independentAsrEnabled"], json!(false));
    // A decision whose value disagrees with the body is ignored (legacy path).
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &hdr(10, "stale", false))],
        json!({"independentAsrEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["decisions"]["independentAsrEnabled"]["writerId"],
        json!("server-legacy")
    );
    // Invalid headers are 400.
    let max_safe = 9_007_199_254_740_991u64.to_string();
    for bad in [
        "not json".to_string(),
        json!({"writeId": -1, "writerId": "w", "value": true}).to_string(),
        json!({"writeId": true, "writerId": "w", "value": true}).to_string(),
        json!({"writeId": 1, "writerId": "", "value": true}).to_string(),
        json!({"writeId": 1, "writerId": "wé", "value": true}).to_string(),
        json!({"writeId": 1, "writerId": "w", "value": "yes"}).to_string(),
        format!("{{\"writeId\": {max_safe}, \"writerId\": \"w\", \"value\": true}}"),
    ] {
        let (st, _, v) = post_with(
            &s,
            CS,
            &[(asr, &bad)],
            json!({"independentAsrEnabled": true}),
        )
        .await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
}

#[tokio::test]
async fn reset_marker_and_full_snapshot() {
    let s = TestServer::start_with(
        &[companiond_config::FAMILY],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("config")).unwrap();
                std::fs::write(
                    data.join("config/conversation_settings.json"),
                    json!({"settings": {"subtitleEnabled": true}, "revision": 9, "reset": true, "uiLanguage": "ja"}).to_string(),
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let (_, _, v) = get_with_headers(&s, CS).await;
    assert_eq!(v["reset"], json!(true));
    assert_eq!(v["revision"], json!("9"));
    // A partial (pre-hydration) write keeps the marker and bumps the revision.
    let (st, _, v) = post_with(&s, CS, &[], json!({"focusModeEnabled": true})).await;
    assert_eq!(st, 200);
    assert_eq!(v["reset"], json!(true));
    assert_eq!(v["revision"], json!("10"));
    // Only exactly "1" marks a full snapshot.
    let (_, _, v) = post_with(
        &s,
        CS,
        &[("X-Conversation-Settings-Full-Snapshot", "true")],
        json!({"focusModeEnabled": true}),
    )
    .await;
    assert_eq!(v["reset"], json!(true));
    let (st, h, v) = post_with(
        &s,
        CS,
        &[("X-Conversation-Settings-Full-Snapshot", "1")],
        json!({"focusModeEnabled": true}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(v["reset"], json!(false));
    assert_eq!(h["etag"], "\"conversation-settings-11\"");
    // Other keys of the document are kept.
    let (_, pl) = s.get("/api/config/platform_language").await;
    assert_eq!(pl["uiLanguage"], json!("ja"));
}

#[tokio::test]
async fn noise_reduction_is_applied_to_active_sessions_only() {
    let s = server().await;
    let (st, _) = s
        .post("/api/characters/profile", json!({"name": "Idle"}))
        .await;
    assert_eq!(st, 200);
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url("/ws/Companion"))
        .await
        .unwrap();
    wait_active(&s, "Companion").await;
    let (st, _, v) = post_with(&s, CS, &[], json!({"noiseReductionEnabled": false})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["sessions_applied"], json!(1));
    let frame = next_of_type(&mut ws, "settings_changed").await;
    assert_eq!(
        frame,
        json!({"type": "settings_changed", "settings": {"noiseReductionEnabled": false}})
    );
    let active = s.state.sessions.get("Companion").unwrap();
    assert_eq!(
        active.settings().get("noiseReductionEnabled"),
        Some(&json!(false))
    );
    let idle = s.state.sessions.get("Idle").unwrap();
    assert!(idle.settings().get("noiseReductionEnabled").is_none());
    // An invalid value is not applied anywhere.
    let (_, _, v) = post_with(&s, CS, &[], json!({"noiseReductionEnabled": "on"})).await;
    assert_eq!(v["sessions_applied"], json!(0));
    assert_eq!(v["rejected"], json!(["noiseReductionEnabled"]));
}

#[tokio::test]
async fn conversation_settings_bad_bodies() {
    let s = server().await;
    for b in ["[1]", "\"x\"", "{oops"] {
        let (st, v) = post_raw(&s, CS, b).await;
        assert_eq!(st, 400, "{b}: {v}");
        assert_eq!(v["success"], json!(false));
    }
    std::fs::write(s.data.join("config/conversation_settings.json"), b"[1,2").unwrap();
    let (st, _, v) = post_with(&s, CS, &[], json!({"subtitleEnabled": true})).await;
    assert_eq!(st, 503, "{v}");
    let (st, _) = s.get(CS).await;
    assert_eq!(st, 503);
    let (st, v) = s.get("/api/proactive/mode").await;
    assert_eq!((st, v["success"].clone()), (200, json!(false)));
    assert_eq!(
        std::fs::read(s.data.join("config/conversation_settings.json")).unwrap(),
        b"[1,2"
    );
}

// ------------------------------------------------------------------ proactive

fn preset(mode: &str) -> Value {
    let on = |b: bool| json!(b);
    let (flags, iv): ([bool; 9], Option<(i64, i64)>) = match mode {
        "off" => ([false; 9], None),
        "normal" => ([true; 9], Some((15, 10))),
        "focus" => (
            [true, false, false, false, true, false, false, false, false],
            Some((60, 60)),
        ),
        "frequent" => ([true; 9], Some((5, 5))),
        _ => unreachable!(),
    };
    let names = [
        "proactiveChatEnabled",
        "proactiveVisionChatEnabled",
        "proactiveNewsChatEnabled",
        "proactiveVideoChatEnabled",
        "proactivePersonalChatEnabled",
        "proactiveCommunityChatEnabled",
        "proactiveMusicEnabled",
        "proactiveMemeEnabled",
        "proactiveMiniGameInviteEnabled",
    ];
    let mut m = serde_json::Map::new();
    for (n, f) in names.iter().zip(flags) {
        m.insert(n.to_string(), on(f));
    }
    if let Some((a, b)) = iv {
        m.insert("proactiveChatInterval".into(), json!(a));
        m.insert("proactiveVisionInterval".into(), json!(b));
    }
    Value::Object(m)
}

async fn mode_of(s: &TestServer) -> String {
    let (_, v) = s.get("/api/proactive/mode").await;
    v["mode"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn proactive_every_transition() {
    let s = server().await;
    let (_, v) = s.get("/api/proactive/mode").await;
    assert_eq!(v["mode"], json!("custom"));
    assert_eq!(
        v["available_modes"],
        json!(["off", "normal", "focus", "frequent"])
    );
    assert_eq!(v["settings"], json!({}));
    // The user-owned switch, set through the conversation-settings path only.
    let (st, _, _) = post_with(&s, CS, &[], json!({"proactiveVisionEnabled": true})).await;
    assert_eq!(st, 200);
    let modes = ["off", "normal", "focus", "frequent"];
    // custom → each preset, and each preset → each preset.
    let mut starts: Vec<&str> = vec!["custom"];
    starts.extend(modes);
    for from in &starts {
        for to in modes {
            if *from == "custom" {
                let (_, v) = s.post("/api/proactive/settings", json!({"proactiveChatEnabled": true, "proactiveNewsChatEnabled": false, "proactiveVisionChatEnabled": true, "proactiveChatInterval": 77})).await;
                assert_eq!(v["success"], json!(true), "{v}");
                assert_eq!(mode_of(&s).await, "custom");
            } else {
                let (_, v) = s.post("/api/proactive/mode", json!({"mode": from})).await;
                assert_eq!(v["success"], json!(true), "{v}");
                assert_eq!(mode_of(&s).await, *from);
            }
            let (_, before) = s.get("/api/proactive/settings").await;
            let (st, v) = s.post("/api/proactive/mode", json!({"mode": to})).await;
            assert_eq!(st, 200);
            assert_eq!(v["success"], json!(true), "{from}->{to}: {v}");
            assert_eq!(v["mode"], json!(to));
            assert_eq!(v["applied"], preset(to), "{from}->{to}");
            assert!(v.get("rejected").is_none());
            assert_eq!(mode_of(&s).await, to, "{from}->{to}");
            let (_, after) = s.get("/api/proactive/settings").await;
            // A mode switch never changes proactiveVisionEnabled.
            assert_eq!(after["settings"]["proactiveVisionEnabled"], json!(true));
            if to == "off" {
                // off keeps the intervals.
                assert_eq!(
                    after["settings"]["proactiveChatInterval"],
                    before["settings"]["proactiveChatInterval"]
                );
                assert_eq!(
                    after["settings"]["proactiveVisionInterval"],
                    before["settings"]["proactiveVisionInterval"]
                );
            }
        }
    }
    // A preset → custom by changing fields; back to a preset by matching values.
    let (_, v) = s
        .post("/api/proactive/mode", json!({"mode": "normal"}))
        .await;
    assert_eq!(v["success"], json!(true));
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveMemeEnabled": false}),
        )
        .await;
    assert_eq!(v["applied"], json!({"proactiveMemeEnabled": false}));
    assert_eq!(v["mode"], json!("custom"));
    assert_eq!(mode_of(&s).await, "custom");
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveMemeEnabled": true}),
        )
        .await;
    assert_eq!(v["mode"], json!("normal"));
    // The file holds the preset values.
    let disk: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("config/conversation_settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(disk["settings"]["proactiveChatInterval"], json!(15));
    assert_eq!(disk["settings"]["proactiveVisionEnabled"], json!(true));
}

#[tokio::test]
async fn proactive_settings_rejections_and_user_owned() {
    let s = server().await;
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({
                "proactiveChatEnabled": true,
                "proactiveChatInterval": 0,
                "proactiveVisionInterval": 12.5,
                "proactiveMusicEnabled": 1,
                "proactiveVisionEnabled": false,
                "somethingElse": true
            }),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    assert_eq!(v["applied"], json!({"proactiveChatEnabled": true}));
    let mut rejected: Vec<String> = serde_json::from_value(v["rejected"].clone()).unwrap();
    rejected.sort();
    assert_eq!(
        rejected,
        [
            "proactiveChatInterval",
            "proactiveMusicEnabled",
            "proactiveVisionInterval"
        ]
    );
    assert_eq!(v["rejected_user_owned"], json!(["proactiveVisionEnabled"]));
    let (_, g) = s.get("/api/proactive/settings").await;
    assert_eq!(g["settings"], json!({"proactiveChatEnabled": true}));
    // Only the user-owned field: an application error, HTTP 200.
    let (st, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveVisionEnabled": true}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["success"], json!(false));
    assert_eq!(v["rejected_user_owned"], json!(["proactiveVisionEnabled"]));
    let (st, v) = s
        .post("/api/proactive/settings", json!({"unrelated": 1}))
        .await;
    assert_eq!((st, v["success"].clone()), (200, json!(false)));
    // Unknown modes.
    for m in [json!("custom"), json!("turbo"), json!(null), json!(["off"])] {
        let (st, v) = s.post("/api/proactive/mode", json!({"mode": m})).await;
        assert_eq!(st, 200);
        assert_eq!(v["success"], json!(false), "{m}: {v}");
        assert!(v["error"].as_str().unwrap().contains("unknown mode"));
    }
    // Proactive writes bump the revision: a UI holding the old ETag gets 412.
    let (_, h, _) = get_with_headers(&s, CS).await;
    let etag = h["etag"].to_str().unwrap().to_string();
    let (_, v) = s
        .post("/api/proactive/mode", json!({"mode": "focus"}))
        .await;
    assert_eq!(v["success"], json!(true));
    let (st, _, _) = post_with(
        &s,
        CS,
        &[("If-Match", &etag)],
        json!({"subtitleEnabled": true}),
    )
    .await;
    assert_eq!(st, 412);
    // Strict inference: an int stored where the preset has a bool is not a match.
    std::fs::write(
        s.data.join("config/conversation_settings.json"),
        json!({"settings": {"proactiveChatEnabled": 0, "proactiveVisionChatEnabled": false, "proactiveNewsChatEnabled": false,
            "proactiveVideoChatEnabled": false, "proactivePersonalChatEnabled": false, "proactiveCommunityChatEnabled": false,
            "proactiveMusicEnabled": false, "proactiveMemeEnabled": false, "proactiveMiniGameInviteEnabled": false}, "revision": 3}).to_string(),
    )
    .unwrap();
    assert_eq!(mode_of(&s).await, "custom");
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveChatEnabled": false}),
        )
        .await;
    assert_eq!(v["mode"], json!("off"));
}

// ------------------------------------------------------------------ page, languages, proxy

#[tokio::test]
async fn page_config_resolves_models_and_carries_csrf() {
    let s = TestServer::start_with(
        &[companiond_config::FAMILY],
        TestOptions {
            prepare: Some(Box::new(|data, bundle| {
                std::fs::create_dir_all(data.join("user_vrm")).unwrap();
                std::fs::write(data.join("user_vrm/my model.vrm"), b"vrm").unwrap();
                std::fs::create_dir_all(data.join("user_mmd/m")).unwrap();
                std::fs::write(data.join("user_mmd/m/m.pmx"), b"pmx").unwrap();
                std::fs::create_dir_all(data.join("user_pngtuber/p")).unwrap();
                std::fs::write(data.join("user_pngtuber/p/idle.png"), b"png").unwrap();
                std::fs::create_dir_all(bundle.join("static/live2d/hiyori")).unwrap();
                std::fs::write(
                    bundle.join("static/live2d/hiyori/hiyori.model3.json"),
                    b"{}",
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let (_, h, v) = get_with_headers(&s, "/api/config/page_config").await;
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(v["success"], json!(true));
    assert_eq!(v["csrf_token"], json!(CSRF));
    assert_eq!(v["persona_name"], json!("Companion"));
    assert_eq!(v["model_type"], json!("live2d"));
    for (name, profile) in [
        (
            "Vee",
            json!({"name": "Vee", "model_type": "vrm", "vrm": "my model.vrm", "lighting": {"ambient": 0.5}}),
        ),
        (
            "Emm",
            json!({"name": "Emm", "avatar": {"model_type": "live3d", "mmd": {"model_path": "/user_mmd/m/m.pmx"}}}),
        ),
        (
            "Pee",
            json!({"name": "Pee", "model_type": "pngtuber", "pngtuber": {"idle_image": "p/idle.png", "talking_image": "p/missing.png", "sad_image": "../../etc/passwd.png"}}),
        ),
        ("Ell", json!({"name": "Ell", "live2d": "hiyori"})),
    ] {
        let (st, v) = s.post("/api/characters/profile", profile).await;
        assert_eq!(st, 200, "{name}: {v}");
    }
    let (_, v) = s.get("/api/config/page_config?persona_name=Vee").await;
    assert_eq!(v["model_type"], json!("live3d"));
    assert_eq!(v["live3d_sub_type"], json!("vrm"));
    assert_eq!(v["model_path"], json!("/user_vrm/my%20model.vrm"));
    assert_eq!(v["lighting"], json!({"ambient": 0.5}));
    let (_, v) = s.get("/api/config/page_config?lanlan_name=Emm").await;
    assert_eq!(v["live3d_sub_type"], json!("mmd"));
    assert_eq!(v["model_path"], json!("/user_mmd/m/m.pmx"));
    let (_, v) = s.get("/api/config/page_config?persona_name=Pee").await;
    assert_eq!(v["model_type"], json!("pngtuber"));
    assert_eq!(v["model_path"], json!("/user_pngtuber/p/idle.png"));
    assert_eq!(v["pngtuber"]["talking_image"], json!(""));
    assert_eq!(v["pngtuber"]["sad_image"], json!(""));
    assert!(v.get("live3d_sub_type").is_none());
    let (_, v) = s.get("/api/config/page_config?persona_name=Ell").await;
    assert_eq!(
        v["model_path"],
        json!("/static/live2d/hiyori/hiyori.model3.json")
    );
    assert_eq!(v["model_paths"]["vrm"], json!(""));
    let (st, v) = s.get("/api/config/page_config?persona_name=Nobody").await;
    assert_eq!(st, 200);
    assert_eq!(v["character_exists"], json!(false));
    assert_eq!(v["csrf_token"], json!(CSRF));
}

#[tokio::test]
async fn reserved_fields_and_languages() {
    let s = server().await;
    let (_, v) = s.get("/api/config/character_reserved_fields").await;
    assert_eq!(v["success"], json!(true));
    let all = v["all_reserved_fields"].as_array().unwrap();
    assert!(all.contains(&json!("system_prompt")) && all.contains(&json!("name")));
    assert_eq!(
        all.len(),
        v["system_reserved_fields"].as_array().unwrap().len()
            + v["workshop_reserved_fields"].as_array().unwrap().len()
    );
    let (_, v) = s.get("/api/config/platform_language").await;
    assert_eq!(v["success"], json!(true));
    assert!(v["i18n_language"].is_string());
    assert!(v.get("ip_country").is_none());
    let (_, v) = s.get("/api/config/user_language").await;
    assert_eq!(v["success"], json!(true));
    assert!(v["language"].as_str().is_some_and(|l| !l.is_empty()));
    let (st, _, _) = post_with(&s, CS, &[], json!({"userLanguage": "ja-JP"})).await;
    assert_eq!(st, 200);
    let (_, v) = s.get("/api/config/user_language").await;
    assert_eq!(v["language"], json!("ja"));
    assert_eq!(v["source"], json!("conversation_settings"));
}

#[tokio::test]
async fn proxy_mode_snapshots_and_restores() {
    // Loopback stays unproxied for the other tests of this binary while the
    // variables are set.
    let lower_no_proxy = std::env::var("no_proxy").ok();
    std::env::set_var("NO_PROXY", "127.0.0.1,localhost");
    std::env::set_var("HTTP_PROXY", "http://user:hunter2@proxy.invalid:3128");
    std::env::set_var("https_proxy", "http://proxy.invalid:3129");
    let s = server().await;
    let (st, v) = s
        .post("/api/config/set_proxy_mode", json!({"direct": true}))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["direct"], json!(true));
    assert_eq!(v["proxies_after"]["no"], json!("*"));
    assert!(v["proxies_after"].get("http").is_none());
    assert!(std::env::var("HTTP_PROXY").is_err());
    assert_eq!(std::env::var("no_proxy").unwrap(), "*");
    // A second direct:true keeps the first snapshot.
    let (_, v) = s
        .post("/api/config/set_proxy_mode", json!({"direct": true}))
        .await;
    assert_eq!(v["success"], json!(true));
    let (_, v) = s
        .post("/api/config/set_proxy_mode", json!({"direct": false}))
        .await;
    assert_eq!(v["direct"], json!(false));
    assert_eq!(
        v["proxies_after"]["http"],
        json!("http://proxy.invalid:3128/")
    );
    assert_eq!(
        v["proxies_after"]["https"],
        json!("http://proxy.invalid:3129/")
    );
    assert!(!v.to_string().contains("hunter2"));
    assert_eq!(
        std::env::var("HTTP_PROXY").unwrap(),
        "http://user:hunter2@proxy.invalid:3128"
    );
    assert_eq!(std::env::var("NO_PROXY").unwrap(), "127.0.0.1,localhost");
    assert_eq!(std::env::var("no_proxy").ok(), lower_no_proxy);
    std::env::remove_var("HTTP_PROXY");
    std::env::remove_var("https_proxy");
    let (st, _) = s.post("/api/config/set_proxy_mode", json!({})).await;
    assert_eq!(st, 400);
}

/// Timing figures for docs/config.md:
/// `cargo test -p companiond-config --test config -- --ignored --nocapture perf`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn perf_figures() {
    const MODES: [&str; 4] = ["off", "normal", "focus", "frequent"];
    let up = model_upstream().await;
    let s = server().await;
    let n = 200u32;
    let t = Instant::now();
    for i in 0..n {
        let (st, _, _) = post_with(&s, CS, &[], json!({"textGuardMaxLength": i})).await;
        assert_eq!(st, 200);
    }
    let write = t.elapsed() / n;
    let t = Instant::now();
    for _ in 0..n {
        let (st, _) = s.get(CS).await;
        assert_eq!(st, 200);
    }
    let read = t.elapsed() / n;
    let t = Instant::now();
    for _ in 0..n {
        let (_, v) = s
            .post(
                "/api/config/list_models",
                json!({"url": format!("{}/ok", up.base), "api_key": "k"}),
            )
            .await;
        assert_eq!(v["success"], json!(true));
    }
    let list = t.elapsed() / n;
    let t = Instant::now();
    for i in 0..n {
        let (st, _) = s
            .post(
                "/api/proactive/mode",
                json!({"mode": MODES[i as usize % 4]}),
            )
            .await;
        assert_eq!(st, 200);
    }
    let mode = t.elapsed() / n;
    drop(up);
    println!(
        "conversation-settings POST {write:?}/op, GET {read:?}/op; list_models (loopback) {list:?}/op; proactive/mode POST {mode:?}/op"
    );
}

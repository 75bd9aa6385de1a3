//! The route table: every route documented; wrong-typed bodies never answer 500.

use crate::common::*;

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

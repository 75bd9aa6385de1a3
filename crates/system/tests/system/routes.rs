//! The route table: every route documented, CSRF on every guarded route.

use crate::common::*;

#[tokio::test]
async fn openapi_lists_every_system_route() {
    let s = server().await;
    let (code, doc) = s.get("/openapi.json").await;
    assert_eq!(code, 200);
    let routes = [
        ("get", "/api/system/status"),
        ("get", "/api/token-usage"),
        ("get", "/api/pending-notices"),
        ("post", "/api/pending-notices/ack"),
        ("post", "/api/activity_signal"),
        ("get", "/api/changelog"),
        ("get", "/api/survey"),
        ("post", "/api/survey/submit"),
        ("post", "/api/emotion/analysis"),
        ("post", "/api/translate"),
        ("get", "/api/file-exists"),
        ("get", "/api/find-first-image"),
        ("get", "/api/meme/proxy-image"),
        ("get", "/api/platform/proxy-image"),
        ("get", "/api/get_window_title"),
        ("post", "/api/screenshot"),
        ("post", "/api/screenshot/interactive"),
        ("post", "/api/proactive_chat"),
        ("post", "/api/proactive/music_played_through"),
        ("post", "/api/mini_game/invite/respond"),
        ("get", "/api/seven-day-tutorial/state"),
        ("put", "/api/seven-day-tutorial/state"),
        ("get", "/api/autostart-prompt/state"),
        ("post", "/api/autostart-prompt/heartbeat"),
        ("post", "/api/autostart-prompt/shown"),
        ("post", "/api/autostart-prompt/decision"),
        ("post", "/api/platform/set-achievement-status/{name}"),
        ("post", "/api/platform/update-playtime"),
        ("get", "/api/platform/list-achievements"),
        ("post", "/api/guide/handoff/create"),
        ("post", "/api/guide/handoff/consume"),
    ];
    for (m, p) in routes {
        assert!(
            doc["paths"][p][m].is_object(),
            "{m} {p} missing from /openapi.json"
        );
    }
}

#[tokio::test]
async fn csrf_is_enforced_on_every_guarded_route() {
    let s = server().await;
    let guarded: &[(Method, &str, Value)] = &[
        (
            Method::POST,
            "/api/pending-notices/ack",
            json!({"cursor": 99}),
        ),
        (
            Method::POST,
            "/api/activity_signal",
            json!({"persona_name": "Companion", "idle_seconds": 1}),
        ),
        (
            Method::POST,
            "/api/survey/submit",
            json!({"action": "skip"}),
        ),
        (Method::POST, "/api/emotion/analysis", json!({"text": "hi"})),
        (
            Method::POST,
            "/api/translate",
            json!({"text": "hi", "skip_google": true}),
        ),
        (Method::POST, "/api/screenshot", json!({})),
        (Method::POST, "/api/proactive_chat", json!({})),
        (
            Method::POST,
            "/api/proactive/music_played_through",
            json!({}),
        ),
        (
            Method::POST,
            "/api/mini_game/invite/respond",
            json!({"choice": "accept"}),
        ),
        (
            Method::PUT,
            "/api/seven-day-tutorial/state",
            json!({"state": {}, "expectedRevision": 0}),
        ),
        (
            Method::POST,
            "/api/autostart-prompt/heartbeat",
            json!({"foreground_ms_delta": 1000}),
        ),
        (
            Method::POST,
            "/api/autostart-prompt/shown",
            json!({"prompt_token": "x"}),
        ),
        (
            Method::POST,
            "/api/autostart-prompt/decision",
            json!({"decision": "never", "prompt_token": "x"}),
        ),
        (
            Method::POST,
            "/api/platform/set-achievement-status/ACH",
            json!({}),
        ),
        (
            Method::POST,
            "/api/platform/update-playtime",
            json!({"seconds": 5}),
        ),
        (
            Method::POST,
            "/api/guide/handoff/create",
            json!({"target_page": "chat"}),
        ),
        (
            Method::POST,
            "/api/guide/handoff/consume",
            json!({"token": "t", "signature": "s", "expected_page": "p"}),
        ),
    ];
    let origin = format!("http://127.0.0.1:{}", s.addr.port());
    for (m, p, body) in guarded {
        let attempts = [
            s.http.request(m.clone(), s.url(p)).json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", "wrong")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", CSRF)
                .header("Origin", "https://evil.example")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", CSRF)
                .header("Referer", "http://evil.example/page")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", CSRF)
                .header("Origin", "null")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("Origin", origin.clone())
                .json(&json!({"_csrf_token": "nope"})),
        ];
        for (i, a) in attempts.into_iter().enumerate() {
            let r = a.send().await.unwrap();
            let no_store = r.headers().get("cache-control").is_some();
            let (code, v) = split(r).await;
            assert_eq!(code, 403, "{m} {p} attempt {i}: {v}");
            assert_eq!(v["success"], false, "{m} {p}");
            assert_eq!(v["error_code"], "csrf_validation_failed", "{m} {p}");
            if p.contains("handoff") || p.contains("screenshot") {
                assert!(no_store, "{p} 403 must be no-store");
            }
        }
    }
    // Nothing was written by the refused requests.
    for doc in [
        "state/seven_day_tutorial_state.json",
        "state/autostart_prompt_state.json",
        "state/platform_achievements.json",
        "state/survey.json",
    ] {
        assert!(!s.data.join(doc).exists(), "{doc} was written");
    }
    // The token in the JSON body is accepted where the body is JSON.
    let r = s
        .http
        .put(s.url("/api/seven-day-tutorial/state"))
        .json(&json!({"_csrf_token": CSRF, "state": {}, "expectedRevision": 0}))
        .send()
        .await
        .unwrap();
    let (code, v) = split(r).await;
    assert_eq!((code, v["revision"].as_i64()), (200, Some(1)), "{v}");
}

//! `/api/autostart-prompt/...`.

use crate::common::*;

#[tokio::test]
async fn autostart_prompt_flow() {
    let s = server().await;
    let (code, v) = s.get("/api/autostart-prompt/state").await;
    assert_eq!(code, 200);
    assert_eq!(v["state"]["status"], "observing");
    assert!(
        v["state"].get("active_prompt_token").is_none(),
        "GET is the public view"
    );

    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/heartbeat",
            json!({"foreground_ms_delta": 60_000}),
        )
        .await;
    assert_eq!(
        (v["should_prompt"].as_bool(), v["prompt_reason"].as_str()),
        (Some(false), Some("foreground_insufficient"))
    );
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/heartbeat",
            json!({"foreground_ms_delta": 99_999_999}),
        )
        .await;
    assert_eq!(
        v["state"]["foreground_ms"],
        60_000 + 30 * 60_000,
        "delta is capped"
    );
    assert_eq!(
        (v["should_prompt"].as_bool(), v["prompt_reason"].as_str()),
        (Some(true), Some("usage_timeout"))
    );
    let token = v["prompt_token"].as_str().unwrap().to_string();
    let (_, v) = s
        .post_csrf("/api/autostart-prompt/heartbeat", json!({}))
        .await;
    assert_eq!(v["prompt_token"], token.as_str(), "reused within 5 minutes");

    let (code, v) = s
        .post_csrf(
            "/api/autostart-prompt/shown",
            json!({"prompt_token": "bogus"}),
        )
        .await;
    assert_eq!(
        (code, v["error"].as_str()),
        (400, Some("invalid prompt_token"))
    );
    let (code, v) = s
        .post_csrf("/api/autostart-prompt/shown", json!({"token": token}))
        .await;
    assert_eq!(
        (code, v["already_acknowledged"].as_bool()),
        (200, Some(false))
    );
    assert_eq!(v["state"]["shown_count"], 1);
    assert_eq!(v["state"]["status"], "prompted");
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/shown",
            json!({"prompt_token": token}),
        )
        .await;
    assert_eq!(v["already_acknowledged"], true);

    let (code, _) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"decision": "perhaps", "prompt_token": token}),
        )
        .await;
    assert_eq!(code, 400);
    let (code, _) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"decision": "later"}),
        )
        .await;
    assert_eq!(code, 400);
    let (code, v) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"action": "later", "prompt_token": token}),
        )
        .await;
    assert_eq!(
        (code, v["state"]["status"].as_str()),
        (200, Some("deferred")),
        "{v}"
    );
    let deferred = v["state"]["deferred_until"].as_i64().unwrap();
    assert!(deferred > companiond_core::now_millis() + 23 * 3600 * 1000);
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"decision": "never", "prompt_token": token}),
        )
        .await;
    assert_eq!(
        v["state"]["status"], "deferred",
        "a repeated decision is a no-op"
    );
    assert_eq!(v["state"]["never_remind"], false);
    let (_, v) = s
        .post_csrf("/api/autostart-prompt/heartbeat", json!({}))
        .await;
    assert_eq!(
        (v["should_prompt"].as_bool(), v["prompt_reason"].as_str()),
        (Some(false), Some("prompt_pending"))
    );
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/heartbeat",
            json!({"autostart_enabled": true, "provider": "systemd"}),
        )
        .await;
    assert_eq!(v["prompt_reason"], "autostart_enabled");
    let (_, v) = s.get("/api/autostart-prompt/state").await;
    assert_eq!(
        (
            v["state"]["status"].as_str(),
            v["state"]["autostart_enabled"].as_bool()
        ),
        (Some("completed"), Some(true))
    );
    let doc: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/autostart_prompt_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(doc["funnel_counts"]["shown"], 1);
    assert_eq!(doc["enabled_provider"], "systemd");
}

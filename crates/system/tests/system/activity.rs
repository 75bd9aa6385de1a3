//! `POST /api/activity_signal`.

use crate::common::*;

#[tokio::test]
async fn activity_signal_validation_and_rate_limit() {
    let s = server().await;
    let post_raw = |body: &'static str| {
        s.csrf(Method::POST, "/api/activity_signal")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let (code, v) = split(post_raw("{nope").await.unwrap()).await;
    assert_eq!(
        (code, v["error"].as_str()),
        (400, Some("invalid JSON body"))
    );
    let (code, _) = split(post_raw("[1,2]").await.unwrap()).await;
    assert_eq!(code, 400);
    let bad = [
        json!({"idle_seconds": 3}),
        json!({"persona_name": "Companion"}),
        json!({"persona_name": "Companion", "window_title": "   "}),
        json!({"persona_name": "Companion", "cpu_avg_30s": 150}),
        json!({"persona_name": "Companion", "gpu_utilization": -1}),
        json!({"persona_name": "Companion", "idle_seconds": true}),
        json!({"persona_name": "Companion", "idle_seconds": "5"}),
        json!({"persona_name": "Companion", "process_name": 7}),
    ];
    for b in bad {
        let (code, v) = s.post_csrf("/api/activity_signal", b.clone()).await;
        assert_eq!(code, 400, "{b} → {v}");
        assert_eq!(v["success"], false);
    }
    let big = json!({"persona_name": "Companion", "window_title": "x".repeat(20_000)});
    let (code, _) = s.post_csrf("/api/activity_signal", big).await;
    assert_eq!(code, 413);
    let (code, v) = s
        .post_csrf(
            "/api/activity_signal",
            json!({"persona_name": "Ghost", "idle_seconds": 1}),
        )
        .await;
    assert_eq!(code, 404, "{v}");
    let r = s
        .csrf(Method::POST, "/api/activity_signal")
        .json(&json!({"lanlan_name": "Companion", "idle_seconds": 2.5, "window_title": "Editor"}))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (code, v) = split(r).await;
    assert_eq!((code, v), (200, json!({"success": true})));
    let r = s
        .csrf(Method::POST, "/api/activity_signal")
        .json(&json!({"persona_name": "Companion", "idle_seconds": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=6).contains(&retry));
    let (_, v) = split(r).await;
    assert!(v["retry_after_seconds"].as_f64().unwrap() <= 5.0);
}

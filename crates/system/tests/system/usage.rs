//! `GET /api/token-usage`.

use crate::common::*;

#[tokio::test]
async fn token_usage_aggregates_recorded_calls() {
    let s = server().await;
    let llm = MockLlm::start(r#"{"emotion":"happy","confidence":0.9}"#).await;
    s.configure_llm(&llm.base()).await;
    let (code, v) = s
        .post_csrf("/api/emotion/analysis", json!({"text": "a nice day"}))
        .await;
    assert_eq!(code, 200, "{v}");
    let now = companiond_core::now_millis() / 1000;
    let old = UsageRow {
        ts: now - 20 * 86_400,
        slot: "conversation".into(),
        model: "old-model".into(),
        character: "Companion".into(),
        prompt_tokens: 100,
        completion_tokens: 50,
        total_tokens: 150,
        estimated: false,
    };
    s.state.usage.record(&old).unwrap();

    let (code, v) = s.get("/api/token-usage").await;
    assert_eq!(code, 200, "{v}");
    let days = v["daily_stats"].as_object().unwrap();
    assert_eq!(days.len(), 1, "{v}");
    let today = days.values().next().unwrap();
    assert_eq!(today["call_count"], 1);
    assert_eq!(today["total_tokens"], 18);
    assert_eq!(today["by_call_type"]["emotion"]["call_count"], 1);
    assert_eq!(today["by_model"]["test-model"]["prompt_tokens"], 11);
    assert_eq!(v["recent_records"].as_array().unwrap().len(), 2);
    assert_eq!(v["recent_records"][1]["type"], "emotion");

    let (_, v) = s.get("/api/token-usage?days=30").await;
    assert_eq!(v["daily_stats"].as_object().unwrap().len(), 2);
    let (_, v) = s.get("/api/token-usage?days=100000").await;
    assert_eq!(v["days"], 90);
    let (_, v) = s.get("/api/token-usage?days=0").await;
    assert_eq!(v["daily_stats"], json!({}));
    assert_eq!(v["recent_records"].as_array().unwrap().len(), 2);
    let (code, v) = s.get("/api/token-usage?days=abc").await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (400, Some("invalid_days"))
    );
}

/// Timing figures for docs/system.md:
/// `cargo test -p companiond-system --test system -- --ignored --nocapture perf_`
#[tokio::test]
#[ignore]
async fn perf_token_usage_and_status() {
    let s = server().await;
    let now = companiond_core::now_millis() / 1000;
    let rows = 20_000;
    let started = std::time::Instant::now();
    for i in 0..rows {
        s.state
            .usage
            .record(&UsageRow {
                ts: now - (i % (60 * 86_400)),
                slot: ["conversation", "emotion", "summary"][(i % 3) as usize].into(),
                model: format!("model-{}", i % 4),
                character: "Companion".into(),
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                estimated: false,
            })
            .unwrap();
    }
    println!("recorded {rows} usage rows in {:?}", started.elapsed());
    let started = std::time::Instant::now();
    for _ in 0..20 {
        let (code, _) = s.get("/api/token-usage?days=90").await;
        assert_eq!(code, 200);
    }
    println!(
        "GET /api/token-usage?days=90 over {rows} rows: {:?} per call",
        started.elapsed() / 20
    );
    let started = std::time::Instant::now();
    for _ in 0..500 {
        let (code, _) = s.get("/api/system/status").await;
        assert_eq!(code, 200);
    }
    println!(
        "GET /api/system/status: {:?} per call",
        started.elapsed() / 500
    );
}

//! The automatic recent-memory review and its cancellation by a save.

use crate::common::*;

use companiond_memory::review::{self, ReviewOutcome};

/// A loopback model server whose answers wait for `gate` permits.
async fn gated_llm(gate: Arc<tokio::sync::Semaphore>, reply: String) -> Upstream {
    use axum::routing::post;
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let gate = gate.clone();
            let reply = reply.clone();
            async move {
                if let Ok(p) = gate.acquire().await {
                    p.forget();
                }
                axum::Json(json!({
                    "id": "x", "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                }))
            }
        }),
    );
    Upstream::start(router).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_applies_and_a_save_cancels_it() {
    let s = server().await;
    write_history(
        &s,
        "Companion",
        &json!([
            msg("human", "helo helo"),
            theater_msg("cap"),
            msg("ai", "fine")
        ]),
    );
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let llm = gated_llm(gate.clone(), "[\"hello\", \"fine\"]".into()).await;
    s.configure_llm(&format!("{}/v1", llm.base)).await;

    // Not cancelled: the corrected text is written, theater untouched.
    let h = review::start(&s.state, "Companion").unwrap();
    gate.add_permits(1);
    let out = tokio::time::timeout(Duration::from_secs(10), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, ReviewOutcome::Applied(1));
    let v = stored(&s, "Companion");
    assert_eq!(texts(&v), vec!["hello", "cap", "fine"]);
    assert_eq!(v[1], theater_msg("cap"));

    // In flight while the model thinks; a save cancels it and wins.
    let h = review::start(&s.state, "Companion").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while llm.requests_to("/chat/completions").len() < 2 {
        assert!(Instant::now() < deadline, "review never reached the model");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rt = s
        .state
        .provided::<companiond_memory::MemoryRuntime>()
        .unwrap();
    assert_eq!(rt.tasks.in_flight("Companion"), 1);
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, b) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
               "identity_token": r["identity_token"],
               "chat": [{"role": "human", "text": "user edit", "source_index": 0},
                        {"role": "ai", "text": "fine", "source_index": 2}]}),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let out = tokio::time::timeout(Duration::from_secs(5), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, ReviewOutcome::Cancelled);
    assert_eq!(rt.tasks.in_flight("Companion"), 0);
    gate.add_permits(10);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        texts(&stored(&s, "Companion")),
        vec!["user edit", "cap", "fine"]
    );

    // A history that changed under the review is not overwritten.
    let h = review::start(&s.state, "Companion").unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        ReviewOutcome::Applied(1),
        "reply [hello, fine] changes 'user edit'"
    );
    // Turning the toggle off cancels pending reviews.
    let gate2 = Arc::new(tokio::sync::Semaphore::new(0));
    let llm2 = gated_llm(gate2.clone(), "[\"a\", \"b\"]".into()).await;
    s.configure_llm(&format!("{}/v1", llm2.base)).await;
    let h = review::start(&s.state, "Companion").unwrap();
    while llm2.requests_to("/chat/completions").is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (st, _) = s
        .post("/api/memory/review_config", json!({"enabled": false}))
        .await;
    assert_eq!(st, 200);
    let out = tokio::time::timeout(Duration::from_secs(5), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, ReviewOutcome::Cancelled);
}

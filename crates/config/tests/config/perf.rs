//! Timing figures (ignored by default).

use crate::common::*;

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
    let t = Instant::now();
    for _ in 0..n {
        let (st, _) = s.get("/api/config/core_api").await;
        assert_eq!(st, 200);
    }
    let core_api = t.elapsed() / n;
    drop(up);
    println!(
        "conversation-settings POST {write:?}/op, GET {read:?}/op; list_models (loopback) {list:?}/op; proactive/mode POST {mode:?}/op; core_api GET {core_api:?}/op"
    );
}

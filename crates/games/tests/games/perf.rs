//! Throughput figures for docs/games.md (ignored; run with `--ignored --nocapture`).

use serde_json::json;

use crate::common::{play_badminton, server, start};

/// Throughput figures for docs/games.md (run with `--ignored --nocapture`).
#[tokio::test]
#[ignore]
async fn perf_figures() {
    let s = server().await;
    let t = std::time::Instant::now();
    for i in 0..1000 {
        let (_, b) = s
            .post_csrf(
                "/api/game/logs",
                json!({"session_id": "p", "message": format!("m{i}")}),
            )
            .await;
        assert_eq!(b["ok"], true);
    }
    let ingest = t.elapsed();
    start(&s, "soccer", "hb").await;
    let t = std::time::Instant::now();
    for _ in 0..1000 {
        let (_, b) = s
            .post(
                "/api/game/soccer/route/heartbeat",
                json!({"persona_name": "Companion", "session_id": "hb"}),
            )
            .await;
        assert_eq!(b["active"], true);
    }
    let beats = t.elapsed();
    let t = std::time::Instant::now();
    for i in 0..100 {
        let sid = format!("r{i}");
        play_badminton(&s, &sid, "duel", json!({"score": i})).await;
        let (_, b) = s
            .post(
                "/api/game/badminton/leaderboard",
                json!({"persona_name": "Companion", "session_id": sid, "mode": "duel", "score": i}),
            )
            .await;
        assert_eq!(b["ok"], true);
    }
    let rounds = t.elapsed();
    println!("1000 log ingests: {ingest:?}; 1000 heartbeats: {beats:?}; 100 badminton rounds (start+end+submit): {rounds:?}");
}

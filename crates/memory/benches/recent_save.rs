//! Read + save of a 10,000-entry / 2,000,000-character recent history over
//! real HTTP (`cargo bench -p companiond-memory --bench recent_save`).

use std::time::{Duration, Instant};

use companiond_core::testkit::TestServer;
use serde_json::{json, Value};

const ROUNDS: usize = 21;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(false));
    rt.block_on(run(true));
}

async fn run(with_theater: bool) {
    {
        let s = TestServer::start(&[companiond_memory::FAMILY]).await;
        let mut history: Vec<Value> = (0..10_000)
            .map(|i| {
                let t = if i % 2 == 0 { "human" } else { "ai" };
                json!({"type": t, "data": {"content": format!("{i:06}{}", "m".repeat(194))}})
            })
            .collect();
        if with_theater {
            history[5_000] = json!({"type": "system", "data": {"content": "m".repeat(200),
                "metadata": {"source": "theater_numeric_v2", "story_id": "s"}}});
        }
        let path = s.data.join("memory/Companion/recent.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&history).expect("json")).expect("write");
        let url = s.url("/api/memory/recent_file?filename=recent_Companion.json");
        let (mut reads, mut saves) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let t0 = Instant::now();
            let r: Value = s
                .http
                .get(&url)
                .send()
                .await
                .expect("read")
                .json()
                .await
                .expect("json");
            reads.push(t0.elapsed());
            let chat: Vec<Value> = (0..10_000)
                .map(|i| {
                    json!({"role": if i % 2 == 0 { "human" } else { "ai" },
                           "text": format!("{round:02}{i:04}{}", "e".repeat(194)), "source_index": i})
                })
                .collect();
            let body = serde_json::to_vec(&json!({
                "filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
                "identity_token": r["identity_token"], "chat": chat}))
            .expect("body");
            let t1 = Instant::now();
            let resp = s
                .http
                .post(s.url("/api/memory/recent_file/save"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("save");
            let status = resp.status();
            let _ = resp.bytes().await;
            saves.push(t1.elapsed());
            assert!(status.is_success(), "save failed: {status}");
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        println!(
            "recent history 10,000 entries / 2,000,000 chars ({size} bytes on disk), {ROUNDS} rounds{}:",
            if with_theater { ", one theater message (merge path)" } else { "" }
        );
        println!(
            "  read  p50 {:?}  p95 {:?}",
            pct(&mut reads, 0.5),
            pct(&mut reads, 0.95)
        );
        println!(
            "  save  p50 {:?}  p95 {:?}",
            pct(&mut saves, 0.5),
            pct(&mut saves, 0.95)
        );
    }
}

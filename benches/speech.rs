//! Speech latency and memory (docs/performance.md, "Speech").
//!
//! `cargo bench --bench speech`: an in-process server (release profile) with a
//! loopback model that streams a five-sentence reply over one second and a
//! loopback OpenAI-compatible speech server whose first byte comes 150 ms after
//! each request (then 1 s of 24 kHz PCM in ten pieces, 10 ms apart).
//!
//! * latency: the time from the first `assistant_delta` (it holds the first
//!   speakable chunk, "Hello there,") to the first binary audio frame on the
//!   socket, and from the turn's start to its `turn_end` (the whole reply), over
//!   `SPEECH_BENCH_RUNS` runs (default 20);
//! * memory: `SPEECH_BENCH_SESSIONS` sessions (default 16) speak a long reply at
//!   once while their clients read nothing for two seconds (so every queue
//!   fills to its bound); the growth of the process's peak RSS divided by the
//!   sessions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::routing::post;
use axum::Router;
use companiond_core::speech::SpeechLimits;
use companiond_core::testkit::{Message, TestServer, Upstream, Ws};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};

const FIRST_BYTE: Duration = Duration::from_millis(150);
const SENTENCES: [&str; 5] = [
    "Hello there, my friend. ",
    "It is a lovely day for a walk in the park. ",
    "The birds are singing and the sun is warm. ",
    "Shall we take some tea along with us? ",
    "I will pack the cups and a little cake.",
];

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn vm(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// A body fed by a task (ends when the body is dropped).
fn body_of<F, Fut>(f: F) -> Body
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(2);
    tokio::spawn(f(tx));
    Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
    }))
}

async fn model(gap: Duration, repeat: usize) -> Upstream {
    Upstream::start(Router::new().route(
        "/v1/chat/completions",
        post(move || async move {
            let body = body_of(move |tx| async move {
                for r in 0..repeat {
                    for s in SENTENCES {
                        let ev = json!({"choices": [{"index": 0, "delta": {"content": s}}]});
                        if tx
                            .send(Bytes::from(format!("data: {ev}\n\n")))
                            .await
                            .is_err()
                        {
                            return;
                        }
                        if r + 1 < repeat || s != SENTENCES[4] {
                            tokio::time::sleep(gap).await;
                        }
                    }
                }
                let _ = tx.send(Bytes::from("data: [DONE]\n\n")).await;
            });
            ([("content-type", "text/event-stream")], body)
        }),
    ))
    .await
}

async fn speech_server() -> Upstream {
    Upstream::start(Router::new().route(
        "/v1/audio/speech",
        post(|| async {
            let body = body_of(|tx| async move {
                tokio::time::sleep(FIRST_BYTE).await;
                for i in 0..10 {
                    let piece: Vec<u8> = (0..2400)
                        .flat_map(|n| {
                            ((((n + i * 2400) as f32 * 0.06).sin() * 9000.0) as i16).to_le_bytes()
                        })
                        .collect();
                    if tx.send(Bytes::from(piece)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            ([("content-type", "audio/pcm")], body)
        }),
    ))
    .await
}

async fn configure(s: &TestServer, llm: &Upstream, tts: &Upstream) {
    s.configure_llm(&format!("{}/v1", llm.base)).await;
    let mut cfg: Value = s
        .state
        .store
        .read(companiond_core::layout::CORE_CONFIG)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| json!({}));
    cfg["ttsModelProvider"] = json!("custom");
    cfg["ttsModelUrl"] = json!(format!("{}/v1", tts.base));
    let _ = s
        .state
        .store
        .write(companiond_core::layout::CORE_CONFIG, cfg)
        .await;
}

async fn voice_socket(s: &TestServer, name: &str) -> Ws {
    let (mut ws, _) = s.chat(name).await;
    ws.send(Message::Text(
        json!({"type": "voice", "enabled": true}).to_string(),
    ))
    .await
    .expect("send");
    loop {
        if let Some(Ok(Message::Text(t))) = ws.next().await {
            if t.contains("voice_state") {
                return ws;
            }
        }
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn latency(runs: usize) {
    let llm = model(Duration::from_millis(250), 1).await;
    let tts = speech_server().await;
    let s = TestServer::start(&[]).await;
    configure(&s, &llm, &tts).await;
    let mut ws = voice_socket(&s, "Companion").await;
    let (mut first_audio, mut whole) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t0 = Instant::now();
        ws.send(Message::Text(
            json!({"type": "user_text", "text": "hi"}).to_string(),
        ))
        .await
        .expect("send");
        let (mut delta, mut audio, mut end, mut speech_end) = (None, None, None, false);
        while !(speech_end && end.is_some()) {
            let m = tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .expect("a frame in time")
                .expect("open")
                .expect("frame");
            match m {
                Message::Binary(_) if audio.is_none() => audio = Some(Instant::now()),
                Message::Text(t) => {
                    let f: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    match f["type"].as_str() {
                        Some("assistant_delta") if delta.is_none() => delta = Some(Instant::now()),
                        Some("turn_end") => end = Some(Instant::now()),
                        Some("speech_end") => speech_end = true,
                        Some("error") => panic!("{f}"),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        let (delta, audio, end) = (
            delta.expect("delta"),
            audio.expect("audio"),
            end.expect("end"),
        );
        first_audio.push(audio.duration_since(delta).as_secs_f64() * 1000.0);
        whole.push(end.duration_since(t0).as_secs_f64() * 1000.0);
    }
    println!(
        "first audio frame after the first speakable chunk: median {:.0} ms, p90 {:.0} ms, max {:.0} ms ({runs} runs; provider first byte {} ms)",
        pct(&mut first_audio, 0.5),
        pct(&mut first_audio, 0.9),
        pct(&mut first_audio, 1.0),
        FIRST_BYTE.as_millis()
    );
    println!(
        "whole reply (turn_end): median {:.0} ms",
        pct(&mut whole, 0.5)
    );
}

async fn memory(sessions: usize) {
    let llm = model(Duration::from_millis(5), 6).await;
    let tts = speech_server().await;
    let s = TestServer::start(&[]).await;
    s.state.provide(Arc::new(SpeechLimits::default()));
    configure(&s, &llm, &tts).await;
    let mut sockets = Vec::new();
    for i in 0..sessions {
        let name = format!("Bench{i}");
        if let Err(e) = s.state.characters.create(&name, Default::default()).await {
            eprintln!("cannot make {name}: {e:?}");
        }
        sockets.push(voice_socket(&s, &name).await);
    }
    // Warm up once (the HTTP clients, the resampler plans), then measure.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let base_rss = vm("VmRSS:");
    let base_hwm = vm("VmHWM:");
    for ws in sockets.iter_mut() {
        ws.send(Message::Text(
            json!({"type": "user_text", "text": "talk"}).to_string(),
        ))
        .await
        .expect("send");
    }
    // Nobody reads for two seconds: every queue fills to its bound.
    let mut peak = 0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak = peak.max(vm("VmRSS:"));
    }
    let grown = peak.saturating_sub(base_rss) as f64 / 1024.0;
    println!(
        "memory: {sessions} sessions speaking, clients not reading: RSS {:.1} → {:.1} MiB (+{grown:.1} MiB, {:.2} MiB per session; high-water mark before {:.1} MiB)",
        base_rss as f64 / 1024.0,
        peak as f64 / 1024.0,
        grown / sessions as f64,
        base_hwm as f64 / 1024.0,
    );
    drop(sockets);
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        latency(env_usize("SPEECH_BENCH_RUNS", 20)).await;
        memory(env_usize("SPEECH_BENCH_SESSIONS", 16)).await;
    });
}

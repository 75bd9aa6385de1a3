//! Hearing latency and cost (docs/performance.md, "Hearing").
//!
//! `cargo bench --bench hearing` (release profile):
//!
//! * cost: one 48 kHz microphone stream (10 ms frames, as the original page
//!   sends them) through noise reduction (RNNoise), the step to 16 kHz and the
//!   voice-activity endpointer, `HEAR_BENCH_SECONDS` (default 120) seconds of
//!   audio — half speech-like signal, half silence — timed on one thread; the
//!   figure is the share of one core that real time would take;
//! * latency: a microphone session fed in real time (10 ms frames paced by a
//!   timer) with 1.5 s of speech-like signal then silence, the recogniser a
//!   loopback OpenAI-compatible server; the time from the last speech frame
//!   pushed to the end of the utterance being decided and to the transcription
//!   request arriving, over `HEAR_BENCH_RUNS` (default 8) utterances. The
//!   target is the end-of-speech silence + 30 ms.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use companiond_core::hearing::ear::{synthetic_voice, Ear, Endpointing, VadEvent};
use companiond_core::hearing::echo::EchoLog;
use companiond_core::hearing::frame::MicFrame;
use companiond_core::hearing::listener::{CancellationToken, Listener};
use companiond_core::hearing::recognizer::OpenAiRecognizer;
use companiond_core::hearing::HearingLimits;
use companiond_core::testkit::Upstream;

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn cost() {
    let secs = env_usize("HEAR_BENCH_SECONDS", 120) as u64;
    let mut audio = Vec::new();
    while audio.len() < (secs * 48_000) as usize {
        audio.extend(synthetic_voice(48_000, 2_000));
        audio.extend(vec![0i16; 96_000]);
    }
    audio.truncate((secs * 48_000) as usize);
    let frames: Vec<MicFrame> = audio
        .chunks(480)
        .map(|c| MicFrame {
            rate: 48_000,
            samples: c.to_vec(),
        })
        .collect();
    for nr in [true, false] {
        let mut ear = Ear::new(Endpointing::default(), nr);
        let mut out = Vec::new();
        let t = Instant::now();
        for f in &frames {
            ear.push(f, &mut out);
        }
        let took = t.elapsed();
        let utterances = out
            .iter()
            .filter(|e| matches!(e, VadEvent::Utterance(_)))
            .count();
        println!(
            "cost, noise reduction {}: {secs} s of 48 kHz audio in {:.0} ms = {:.2} % of one core ({utterances} utterances)",
            if nr { "on" } else { "off" },
            took.as_secs_f64() * 1000.0,
            took.as_secs_f64() / secs as f64 * 100.0
        );
    }
}

async fn latency() {
    let runs = env_usize("HEAR_BENCH_RUNS", 8);
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let a = arrivals.clone();
    let up = Upstream::start(Router::new().route(
        "/v1/audio/transcriptions",
        post(move || {
            let a = a.clone();
            async move {
                a.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Instant::now());
                axum::Json(serde_json::json!({"text": "hello"}))
            }
        }),
    ))
    .await;
    let limits = HearingLimits::default();
    let silence = limits.endpointing.end_silence;
    let rec = Arc::new(OpenAiRecognizer {
        http: reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap_or_default(),
        url: format!("{}/v1/audio/transcriptions", up.base)
            .parse()
            .expect("url"),
        model: "bench".into(),
        api_key: String::new(),
        timeout: Duration::from_secs(5),
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let mut l = Listener::open(
        rec,
        limits.clone(),
        tx,
        Arc::new(EchoLog::default()),
        true,
        CancellationToken::new(),
    );
    let speech = synthetic_voice(48_000, 1_500);
    let mut lat = Vec::new();
    let mut decided = Vec::new();
    for _ in 0..runs {
        let before = arrivals.lock().unwrap_or_else(|e| e.into_inner()).len();
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        let mut end_of_speech = Instant::now();
        for c in speech.chunks(480) {
            tick.tick().await;
            l.push(
                &MicFrame {
                    rate: 48_000,
                    samples: c.to_vec(),
                },
                Instant::now(),
            );
            end_of_speech = Instant::now();
        }
        let zero = vec![0i16; 480];
        let give_up = Instant::now() + Duration::from_secs(3);
        while arrivals.lock().unwrap_or_else(|e| e.into_inner()).len() == before
            && Instant::now() < give_up
        {
            tick.tick().await;
            let step = l.push(
                &MicFrame {
                    rate: 48_000,
                    samples: zero.clone(),
                },
                Instant::now(),
            );
            if step.queued.is_some() {
                decided.push(end_of_speech.elapsed());
            }
        }
        let got = arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(before)
            .copied();
        if let Some(at) = got {
            lat.push(at.duration_since(end_of_speech));
        }
        for _ in 0..50 {
            tick.tick().await;
            l.push(
                &MicFrame {
                    rate: 48_000,
                    samples: zero.clone(),
                },
                Instant::now(),
            );
        }
    }
    lat.sort();
    decided.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    if let (Some(mid), Some(max)) = (decided.get(decided.len() / 2), decided.last()) {
        println!(
            "end of speech -> end of utterance decided: median {:.0} ms, max {:.0} ms",
            ms(*mid),
            ms(*max)
        );
    }
    if lat.is_empty() {
        println!("latency: no request arrived");
        return;
    }
    println!(
        "end of speech -> transcription request: median {:.0} ms, max {:.0} ms over {} utterances (end-of-speech silence {} ms, target <= {} ms)",
        ms(lat[lat.len() / 2]),
        ms(lat[lat.len() - 1]),
        lat.len(),
        silence.as_millis(),
        silence.as_millis() + 30
    );
}

fn main() {
    cost();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(latency());
}

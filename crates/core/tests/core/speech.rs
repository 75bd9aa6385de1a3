//! Speech on the chat socket (docs/voice.md) against a loopback
//! OpenAI-compatible speech server that can be made slow, wrong or broken:
//! both protocols' frames, order under parallel synthesis, barge-in, failures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use companiond_core::speech::SpeechLimits;
use companiond_core::testkit::{Message, MockLlm, TestServer, Upstream, Ws, FRAME_WAIT};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};

/// How the fake speech server answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// 24 kHz PCM: 6,000 samples of a level set by the chunk's first letter
    /// (A = 2000, B = 4000, ...); the first chunk answers after 400 ms, the
    /// others at once, in 10 pieces.
    Pcm,
    /// The same audio as a WAV at 22,050 Hz.
    Wav,
    /// 3 s of audio in 60 pieces, 50 ms apart.
    Slow,
    /// HTTP 500.
    Fail,
    /// A WAV header naming 0 channels.
    LyingWav,
    /// Headers, then nothing.
    Hang,
}

#[derive(Clone)]
struct Fake {
    mode: Arc<Mutex<Mode>>,
    active: Arc<AtomicUsize>,
    max_active: Arc<AtomicUsize>,
    /// Bodies dropped before their end (the client went away).
    aborted: Arc<AtomicUsize>,
    inputs: Arc<Mutex<Vec<String>>>,
}

struct Active(Fake, bool);
impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        if !self.1 {
            self.0.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn level(text: &str) -> i16 {
    let c = text.chars().next().unwrap_or('A').to_ascii_uppercase();
    ((c as u8).saturating_sub(b'A') as i16 + 1) * 2000
}

fn wav_header(rate: u32, channels: u16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"RIFF\xff\xff\xff\xffWAVEfmt ");
    b.extend_from_slice(&16u32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&channels.to_le_bytes());
    b.extend_from_slice(&rate.to_le_bytes());
    b.extend_from_slice(&(rate * 2).to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&16u16.to_le_bytes());
    b.extend_from_slice(b"data\xff\xff\xff\xff");
    b
}

async fn speech(State(f): State<Fake>, axum::Json(req): axum::Json<Value>) -> Response {
    let input = req["input"].as_str().unwrap_or("").to_string();
    f.inputs.lock().unwrap().push(input.clone());
    let mode = *f.mode.lock().unwrap();
    if mode == Mode::Fail {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "engine exploded",
        )
            .into_response();
    }
    let now = f.active.fetch_add(1, Ordering::SeqCst) + 1;
    f.max_active.fetch_max(now, Ordering::SeqCst);
    let lv = level(&input);
    let first = lv == 2000;
    let (rate, pieces, gap, header) = match mode {
        Mode::Wav => (22050u32, 10usize, 0u64, Some(wav_header(22050, 1))),
        Mode::Slow => (24000, 60, 50, None),
        Mode::LyingWav => (24000, 1, 0, Some(wav_header(24000, 0))),
        _ => (24000, 10, 0, None),
    };
    let per_piece = match mode {
        Mode::Slow => 1200,
        Mode::Wav => 551, // 5,510 samples = 0.25 s at 22,050 Hz
        _ => 600,
    };
    let kind = if header.is_some() {
        "audio/wav"
    } else {
        "audio/pcm"
    };
    let guard = Active(f.clone(), false);
    let stream = async_stream(move |tx| async move {
        let mut guard = guard;
        if mode == Mode::Hang {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        if first && mode == Mode::Pcm {
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        if let Some(h) = header {
            if tx.send(Bytes::from(h)).await.is_err() {
                return;
            }
        }
        for _ in 0..pieces {
            let mut b = Vec::new();
            for _ in 0..per_piece {
                b.extend_from_slice(&lv.to_le_bytes());
            }
            if tx.send(Bytes::from(b)).await.is_err() {
                return;
            }
            if gap > 0 {
                tokio::time::sleep(Duration::from_millis(gap)).await;
            }
        }
        guard.1 = true;
        let _ = rate;
    });
    ([("content-type", kind)], Body::from_stream(stream)).into_response()
}

/// A byte stream fed by a task; the task ends when the body is dropped.
fn async_stream<F, Fut>(f: F) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
    let task = tokio::spawn(f(tx));
    let abort = AbortOnDrop(task.abort_handle());
    futures::stream::unfold((rx, abort), |(mut rx, abort)| async move {
        rx.recv().await.map(|b| (Ok(b), (rx, abort)))
    })
}

struct AbortOnDrop(tokio::task::AbortHandle);
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn fake(mode: Mode) -> (Upstream, Fake) {
    let f = Fake {
        mode: Arc::new(Mutex::new(mode)),
        active: Arc::default(),
        max_active: Arc::default(),
        aborted: Arc::default(),
        inputs: Arc::default(),
    };
    let up = Upstream::start(
        Router::new()
            .route("/v1/audio/speech", post(speech))
            .with_state(f.clone()),
    )
    .await;
    (up, f)
}

const REPLY: &str = "Alpha is here. Bravo is here. Charlie is here. Delta is here. Echo is here.";

/// A server whose model answers `reply` and whose speech goes to `tts_base`.
async fn server(reply: &str, tts_base: &str) -> (TestServer, MockLlm) {
    let llm = MockLlm::start(reply).await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    s.state.provide(Arc::new(SpeechLimits {
        first_byte: Duration::from_millis(1500),
        idle: Duration::from_millis(1500),
        ..SpeechLimits::default()
    }));
    s.merge_core_config(json!({
        "ttsModelProvider": "custom",
        "ttsModelUrl": format!("{tts_base}/v1"),
        "ttsModelId": "kokoro",
        "ttsVoiceId": "af_test",
    }))
    .await;
    (s, llm)
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string())).await.unwrap();
}

/// Every frame until `done` holds for a text frame (that frame included).
async fn until(ws: &mut Ws, done: impl Fn(&Value) -> bool) -> Vec<Message> {
    let mut out = Vec::new();
    loop {
        let m = tokio::time::timeout(FRAME_WAIT, ws.next())
            .await
            .unwrap_or_else(|_| {
                let seen: Vec<String> = out
                    .iter()
                    .map(|m: &Message| match m {
                        Message::Text(t) => t.chars().take(120).collect(),
                        other => format!("binary {}", other.len()),
                    })
                    .collect();
                panic!("no frame in time after {seen:#?}")
            })
            .expect("socket open")
            .expect("frame");
        let stop = match &m {
            Message::Text(t) => done(&serde_json::from_str(t).unwrap()),
            _ => false,
        };
        out.push(m);
        if stop {
            return out;
        }
    }
}

/// Every frame until both the turn and its speech ended.
async fn until_both(ws: &mut Ws) -> Vec<Message> {
    let mut out = until(ws, |f| f["type"] == "turn_end" || f["type"] == "speech_end").await;
    let first = texts(&out).last().map(|f| f["type"].clone());
    let other = if first == Some(json!("turn_end")) {
        "speech_end"
    } else {
        "turn_end"
    };
    out.extend(until(ws, |f| f["type"] == other).await);
    out
}

fn texts(ms: &[Message]) -> Vec<Value> {
    ms.iter()
        .filter_map(|m| match m {
            Message::Text(t) => serde_json::from_str(t).ok(),
            _ => None,
        })
        .collect()
}

fn samples(pcm: &[u8]) -> Vec<i16> {
    pcm.chunks_exact(2)
        .map(|p| i16::from_le_bytes([p[0], p[1]]))
        .collect()
}

fn median(mut v: Vec<i16>) -> i16 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Open a companiond-protocol socket with speech on.
async fn native_voice(s: &TestServer) -> Ws {
    native_voice_with(s, Some("openai_compatible")).await
}

async fn native_voice_with(s: &TestServer, provider: Option<&str>) -> Ws {
    let (mut ws, _) = s.chat("Companion").await;
    send(&mut ws, json!({"type": "voice", "enabled": true})).await;
    let state = until(&mut ws, |f| f["type"] == "voice_state").await;
    let f = texts(&state).pop().unwrap();
    assert_eq!(f["enabled"], true);
    assert_eq!(f["provider"].as_str(), provider);
    ws
}

#[tokio::test]
async fn native_speech_is_ordered_under_parallel_synthesis() {
    let (up, f) = fake(Mode::Pcm).await;
    let (s, _llm) = server(REPLY, &up.base).await;
    let mut ws = native_voice(&s).await;
    send(&mut ws, json!({"type": "user_text", "text": "speak"})).await;
    let ms = until_both(&mut ws).await;
    let frames = texts(&ms);
    let start = frames.iter().find(|f| f["type"] == "speech_start").unwrap();
    assert_eq!(start["sample_rate"], 48000);
    assert_eq!(start["encoding"], "pcm_s16le");
    let id = start["speech_id"].as_str().unwrap();
    assert_eq!(start["turn_id"], id);
    let stream = start["stream"].as_u64().unwrap() as u32;
    let deltas: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "assistant_delta")
        .collect();
    assert!(!deltas.is_empty() && deltas.iter().all(|d| d["turn_id"] == id));
    let end = frames.iter().find(|f| f["type"] == "speech_end").unwrap();
    assert_eq!(end["speech_id"], id);
    assert_eq!(end["reason"], "done");
    // Binary frames: SPK1 + stream + PCM; the chunks' levels in reply order.
    let mut all = Vec::new();
    let mut levels = Vec::new();
    for m in &ms {
        if let Message::Binary(b) = m {
            assert_eq!(&b[..4], b"SPK1");
            assert_eq!(u32::from_le_bytes([b[4], b[5], b[6], b[7]]), stream);
            let s = samples(&b[8..]);
            levels.push((median(s.clone()) as f32 / 2000.0).round() as i16);
            all.extend(s);
        }
    }
    assert_eq!(all.len(), 5 * 12_000, "5 chunks of 0.25 s at 48 kHz");
    let mut sorted = levels.clone();
    sorted.sort();
    assert_eq!(levels, sorted, "audio out of chunk order");
    assert_eq!(levels.first(), Some(&1));
    assert_eq!(levels.last(), Some(&5));
    let max = f.max_active.load(Ordering::SeqCst);
    assert!((2..=3).contains(&max), "chunks in flight: {max}");
    assert_eq!(
        f.inputs.lock().unwrap().len(),
        5,
        "{:?}",
        f.inputs.lock().unwrap()
    );
    assert_eq!(
        up.requests_to("/audio/speech")[0].json()["response_format"],
        "pcm"
    );
    assert!(up.requests_to("/audio/speech")[0]
        .headers
        .get("authorization")
        .is_none());
}

#[tokio::test]
async fn original_protocol_gets_audio_chunk_pairs_and_audio_done() {
    let (up, _f) = fake(Mode::Wav).await;
    let (s, _llm) = server("Alpha one. Bravo two.", &up.base).await;
    let mut ws = s.ws("Companion").await;
    send(
        &mut ws,
        json!({"action": "stream_data", "input_type": "text", "data": "hi", "request_id": "R1"}),
    )
    .await;
    let ms = until(&mut ws, |f| f["type"] == "audio_done").await;
    let mut speech_id = None;
    let mut expect_binary = false;
    let mut total = 0;
    for m in &ms {
        match m {
            Message::Text(t) => {
                assert!(!expect_binary, "a header without its audio");
                let f: Value = serde_json::from_str(t).unwrap();
                match f["type"].as_str().unwrap() {
                    "gemini_response" => {
                        speech_id = Some(f["turn_id"].as_str().unwrap().to_string())
                    }
                    "audio_chunk" => {
                        assert_eq!(f["speech_id"].as_str(), speech_id.as_deref());
                        expect_binary = true;
                    }
                    "audio_done" => assert_eq!(f["speech_id"].as_str(), speech_id.as_deref()),
                    "system" | "speech_start" => {}
                    other => panic!("unexpected {other}: {f}"),
                }
            }
            Message::Binary(b) => {
                assert!(expect_binary, "audio without its header");
                expect_binary = false;
                total += b.len() / 2;
            }
            _ => {}
        }
    }
    // 2 chunks of 5,510 samples at 22,050 Hz = 2 × 11,995 at 48 kHz.
    assert_eq!(total, 2 * 11_995);
}

#[tokio::test]
async fn text_only_clients_see_nothing_new() {
    let (up, _f) = fake(Mode::Pcm).await;
    let (s, _llm) = server(REPLY, &up.base).await;
    let (mut ws, _) = s.chat("Companion").await;
    send(&mut ws, json!({"type": "user_text", "text": "hi"})).await;
    let ms = until(&mut ws, |f| f["type"] == "turn_end").await;
    assert!(ms.iter().all(|m| matches!(m, Message::Text(_))));
    for f in texts(&ms) {
        assert!(f.get("turn_id").is_none(), "{f}");
        assert!(
            ["assistant_delta", "turn_end"].contains(&f["type"].as_str().unwrap()),
            "{f}"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(up.requests_to("/audio/speech").is_empty());
}

/// A failing provider: an error frame naming the cause, `speech_end {error}`,
/// the text turn complete, the socket open.
async fn failure_case(mode: Mode, tts_base: Option<&str>, code: &str) {
    let (up, _f) = fake(mode).await;
    let base = tts_base.map(str::to_string).unwrap_or(up.base.clone());
    let (s, _llm) = server(REPLY, &base).await;
    let mut ws = native_voice(&s).await;
    send(&mut ws, json!({"type": "user_text", "text": "hi"})).await;
    let ms = until_both(&mut ws).await;
    let frames = texts(&ms);
    let err = frames
        .iter()
        .find(|f| f["type"] == "error")
        .unwrap_or_else(|| panic!("no error frame: {frames:?}"));
    assert_eq!(err["code"], code, "{err}");
    assert!(err["speech_id"].is_string());
    let end = frames.iter().find(|f| f["type"] == "speech_end").unwrap();
    assert_eq!(end["reason"], "error");
    let text: String = frames
        .iter()
        .filter(|f| f["type"] == "assistant_delta")
        .map(|f| f["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, REPLY);
    send(&mut ws, json!({"type": "ping"})).await;
    until(&mut ws, |f| f["type"] == "pong").await;
}

#[tokio::test]
async fn provider_errors_become_error_frames() {
    failure_case(Mode::Fail, None, "tts_upstream_error").await;
}

#[tokio::test]
async fn provider_down_is_tts_unavailable() {
    // Port 1 (tcpmux) is closed: a freed ephemeral port could be taken by a
    // parallel test's server.
    failure_case(Mode::Pcm, Some("http://127.0.0.1:1"), "tts_unavailable").await;
}

#[tokio::test]
async fn a_provider_that_never_finishes_is_tts_timeout() {
    failure_case(Mode::Hang, None, "tts_timeout").await;
}

#[tokio::test]
async fn a_lying_wav_header_is_tts_bad_audio() {
    failure_case(Mode::LyingWav, None, "tts_bad_audio").await;
}

#[tokio::test]
async fn an_unusable_url_is_reported_and_the_turn_completes() {
    let (s, _llm) = server(REPLY, "file:///etc").await;
    let mut ws = native_voice_with(&s, None).await;
    send(&mut ws, json!({"type": "user_text", "text": "hi"})).await;
    let ms = until(&mut ws, |f| f["type"] == "turn_end").await;
    let frames = texts(&ms);
    assert!(
        frames.iter().any(|f| f["code"] == "tts_config_invalid"),
        "{frames:?}"
    );
}

#[tokio::test]
async fn barge_in_stops_the_speech_at_once() {
    let (up, f) = fake(Mode::Slow).await;
    let (s, llm) = server("Alpha speaks for a long time.", &up.base).await;
    let mut ws = native_voice(&s).await;
    send(&mut ws, json!({"type": "user_text", "text": "talk"})).await;
    // Wait for the first audio.
    let ms = until_binary(&mut ws).await;
    let old = texts(&ms)
        .into_iter()
        .find(|f| f["type"] == "speech_start")
        .unwrap();
    let old_stream = old["stream"].as_u64().unwrap() as u32;
    llm.push(companiond_core::testkit::MockReply::Text("Bravo.".into()));
    send(&mut ws, json!({"type": "user_text", "text": "stop"})).await;
    // From here no audio of the old stream: its end says interrupted.
    let ms = until(&mut ws, |fr| {
        fr["type"] == "speech_end" && fr["speech_id"] == old["speech_id"]
    })
    .await;
    assert_eq!(texts(&ms).last().unwrap()["reason"], "interrupted");
    let later = until(&mut ws, |fr| fr["type"] == "speech_end").await;
    for m in &later {
        if let Message::Binary(b) = m {
            let stream = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            // Frames already on the wire before the interrupt may arrive first;
            // nothing of the old stream after its end frame.
            assert_ne!(stream, old_stream, "a late chunk of the interrupted speech");
        }
    }
    assert_eq!(texts(&later).last().unwrap()["reason"], "done");
    // The history keeps both replies in text; the cut-off one is marked.
    let mut replies = Vec::new();
    for _ in 0..100 {
        replies = s
            .state
            .history
            .tail("Companion", 10)
            .await
            .iter()
            .filter(|e| e.speaker == companiond_core::history::Speaker::Ai)
            .map(|e| (e.text().to_string(), e.interrupted))
            .collect();
        if replies.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        replies,
        vec![
            ("Alpha speaks for a long time.".to_string(), true),
            ("Bravo.".to_string(), false)
        ]
    );
    // The upstream request of the old speech was dropped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(f.aborted.load(Ordering::SeqCst) >= 1);
    assert_eq!(f.active.load(Ordering::SeqCst), 0);
}

/// Frames up to and including the first binary one.
async fn until_binary(ws: &mut Ws) -> Vec<Message> {
    let mut out = Vec::new();
    loop {
        let m = tokio::time::timeout(FRAME_WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("socket open")
            .expect("frame");
        let bin = matches!(m, Message::Binary(_));
        out.push(m);
        if bin {
            return out;
        }
    }
}

#[tokio::test]
async fn closing_the_socket_stops_the_synthesis() {
    let (up, f) = fake(Mode::Slow).await;
    let (s, _llm) = server("Alpha speaks for a long time.", &up.base).await;
    let mut ws = native_voice(&s).await;
    send(&mut ws, json!({"type": "user_text", "text": "talk"})).await;
    until_binary(&mut ws).await;
    drop(ws);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while f.active.load(Ordering::SeqCst) > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "synthesis still running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(f.aborted.load(Ordering::SeqCst) >= 1);
}

/// A Wyoming server: answers `synthesize` with two 0.1 s chunks at 22,050 Hz
/// (width 2, mono) and records what it was asked.
async fn wyoming() -> (String, Arc<Mutex<Vec<Value>>>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let asked: Arc<Mutex<Vec<Value>>> = Arc::default();
    let rec = asked.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let rec = rec.clone();
            tokio::spawn(async move {
                let mut r = BufReader::new(s);
                let mut line = String::new();
                if r.read_line(&mut line).await.is_err() {
                    return;
                }
                let ev: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                rec.lock().unwrap().push(ev);
                let mut out = Vec::new();
                let fmt = json!({"rate": 22050, "width": 2, "channels": 1});
                out.extend(
                    format!("{}\n", json!({"type": "audio-start", "data": fmt})).into_bytes(),
                );
                for _ in 0..2 {
                    out.extend(
                        format!(
                            "{}\n",
                            json!({"type": "audio-chunk", "data": fmt, "payload_length": 4410})
                        )
                        .into_bytes(),
                    );
                    out.extend((0..2205).flat_map(|_| 5000i16.to_le_bytes()));
                }
                out.extend(format!("{}\n", json!({"type": "audio-stop"})).into_bytes());
                let _ = r.get_mut().write_all(&out).await;
            });
        }
    });
    (format!("tcp://{addr}"), asked)
}

#[tokio::test]
async fn wyoming_provider_speaks() {
    let (url, asked) = wyoming().await;
    let (s, _llm) = server("Alpha one. Bravo two.", "http://unused").await;
    let mut cfg: Value = s
        .state
        .store
        .read(companiond_core::layout::CORE_CONFIG)
        .await
        .unwrap()
        .unwrap();
    cfg["ttsModelUrl"] = json!(url);
    s.state
        .store
        .write(companiond_core::layout::CORE_CONFIG, cfg)
        .await
        .unwrap();
    let mut ws = native_voice_with(&s, Some("wyoming")).await;
    send(&mut ws, json!({"type": "user_text", "text": "hi"})).await;
    let ms = until_both(&mut ws).await;
    let frames = texts(&ms);
    let end = frames.iter().find(|f| f["type"] == "speech_end").unwrap();
    assert_eq!(end["reason"], "done", "{frames:?}");
    let total: usize = ms
        .iter()
        .map(|m| match m {
            Message::Binary(b) => (b.len() - 8) / 2,
            _ => 0,
        })
        .sum();
    // 2 chunks × 4,410 samples at 22,050 Hz = 2 × 9,600 at 48 kHz.
    assert_eq!(total, 2 * 9_600);
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert!(asked
        .iter()
        .all(|e| e["type"] == "synthesize" && e["data"]["voice"]["name"] == "af_test"));
    let mut texts: Vec<&str> = asked
        .iter()
        .map(|e| e["data"]["text"].as_str().unwrap())
        .collect();
    texts.sort();
    assert_eq!(texts, vec!["Alpha one.", "Bravo two."]);
}

/// What the fake voice server saw on its sockets: text frames, and whether a
/// socket closed without `end`.
#[derive(Clone, Default)]
struct VoiceServer {
    frames: Arc<Mutex<Vec<Value>>>,
    closed_without_end: Arc<AtomicUsize>,
    /// Delay of every WAV frame after the first.
    slow: bool,
}

fn wav_frame(rate: u32, samples: usize, level: i16) -> Vec<u8> {
    let mut b = wav_header(rate, 1);
    for _ in 0..samples {
        b.extend_from_slice(&level.to_le_bytes());
    }
    b
}

async fn voice_server_socket(vs: VoiceServer, mut ws: axum::extract::ws::WebSocket) {
    use axum::extract::ws::Message as M;
    let mut sent = 0;
    let mut ended = false;
    while let Some(Ok(m)) = ws.recv().await {
        let M::Text(t) = m else { continue };
        let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
        vs.frames.lock().unwrap().push(v.clone());
        let reply = match v["cmd"].as_str() {
            Some("init") => vec![M::Text(json!({"type": "ready"}).to_string().into())],
            Some("append") => {
                if vs.slow && sent > 0 {
                    // Within the test's idle limit (1.5 s).
                    tokio::time::sleep(Duration::from_millis(1000)).await;
                }
                sent += 1;
                vec![
                    M::Text(
                        json!({"type": "sentence", "text": v["data"]})
                            .to_string()
                            .into(),
                    ),
                    M::Binary(wav_frame(32000, 3200, 4000).into()),
                ]
            }
            Some("end") => {
                ended = true;
                vec![M::Text(json!({"type": "done"}).to_string().into())]
            }
            _ => vec![],
        };
        for r in reply {
            if ws.send(r).await.is_err() {
                break;
            }
        }
        if ended {
            return;
        }
    }
    if !ended {
        vs.closed_without_end.fetch_add(1, Ordering::SeqCst);
    }
}

async fn voice_server(slow: bool) -> (Upstream, VoiceServer) {
    let vs = VoiceServer {
        slow,
        ..VoiceServer::default()
    };
    let state = vs.clone();
    let up = Upstream::start(Router::new().route(
        "/api/v3/tts/stream-input",
        axum::routing::get(move |ws: axum::extract::ws::WebSocketUpgrade| {
            let vs = state.clone();
            async move { ws.on_upgrade(move |s| voice_server_socket(vs, s)) }
        }),
    ))
    .await;
    (up, vs)
}

async fn use_voice_server(s: &TestServer, base: &str) {
    let mut cfg: Value = s
        .state
        .store
        .read(companiond_core::layout::CORE_CONFIG)
        .await
        .unwrap()
        .unwrap();
    cfg["gptsovitsEnabled"] = json!(true);
    cfg["ttsModelUrl"] = json!(base);
    cfg["ttsVoiceId"] = json!("gsv:mika|{\"speed\":1.1}");
    s.state
        .store
        .write(companiond_core::layout::CORE_CONFIG, cfg)
        .await
        .unwrap();
}

#[tokio::test]
async fn voice_server_speaks_a_reply_on_one_socket() {
    let (up, vs) = voice_server(false).await;
    let (s, _llm) = server("Alpha one. Bravo two. Charlie three.", "http://unused").await;
    use_voice_server(&s, &up.base).await;
    let mut ws = native_voice_with(&s, Some("gptsovits")).await;
    send(&mut ws, json!({"type": "user_text", "text": "hi"})).await;
    let ms = until_both(&mut ws).await;
    let end = texts(&ms)
        .into_iter()
        .find(|f| f["type"] == "speech_end")
        .unwrap();
    assert_eq!(end["reason"], "done");
    let total: usize = ms
        .iter()
        .map(|m| match m {
            Message::Binary(b) => (b.len() - 8) / 2,
            _ => 0,
        })
        .sum();
    // 3 WAV frames of 3,200 samples at 32 kHz = 3 × 4,800 at 48 kHz.
    assert_eq!(total, 3 * 4_800);
    let frames = vs.frames.lock().unwrap().clone();
    assert_eq!(
        frames,
        vec![
            json!({"speed": 1.1, "cmd": "init", "voice_id": "mika"}),
            json!({"cmd": "append", "data": "Alpha one."}),
            json!({"cmd": "append", "data": "Bravo two."}),
            json!({"cmd": "append", "data": "Charlie three."}),
            json!({"cmd": "end"}),
        ]
    );
}

#[tokio::test]
async fn an_interrupted_voice_server_speech_closes_without_end() {
    let (up, vs) = voice_server(true).await;
    let (s, _llm) = server("unused", "http://unused").await;
    // A model that pauses 3 s mid-reply: the speech is cut off before its text ends.
    let slow_llm = Upstream::start(Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            let stream = async_stream(|tx| async move {
                let event = |t: &str| {
                    Bytes::from(format!(
                        "data: {}\n\n",
                        json!({"choices": [{"index": 0, "delta": {"content": t}}]})
                    ))
                };
                let _ = tx.send(event("Alpha one. Bravo two. ")).await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                let _ = tx.send(event("Charlie three.")).await;
                let _ = tx.send(Bytes::from("data: [DONE]\n\n")).await;
            });
            (
                [("content-type", "text/event-stream")],
                Body::from_stream(stream),
            )
        }),
    ))
    .await;
    s.configure_llm(&format!("{}/v1", slow_llm.base)).await;
    use_voice_server(&s, &up.base).await;
    let mut ws = native_voice_with(&s, Some("gptsovits")).await;
    send(&mut ws, json!({"type": "user_text", "text": "hi"})).await;
    let ms = until_binary(&mut ws).await;
    let start = texts(&ms)
        .into_iter()
        .find(|f| f["type"] == "speech_start")
        .unwrap();
    send(&mut ws, json!({"type": "interrupt"})).await;
    let ms = until(&mut ws, |f| f["type"] == "speech_end").await;
    let end = texts(&ms).pop().unwrap();
    assert_eq!(end["speech_id"], start["speech_id"]);
    assert_eq!(end["reason"], "interrupted");
    // Nothing of it afterwards.
    assert!(tokio::time::timeout(Duration::from_millis(2500), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Binary(_))) => return,
                Some(Ok(Message::Text(t))) if t.contains("speech") => return,
                None => return,
                _ => {}
            }
        }
    })
    .await
    .is_err());
    assert_eq!(vs.closed_without_end.load(Ordering::SeqCst), 1);
    assert!(!vs.frames.lock().unwrap().iter().any(|f| f["cmd"] == "end"));
}

#[tokio::test]
async fn the_pages_playback_reports_are_read() {
    let s = TestServer::start(&[]).await;
    let mut ws = s.ws("Companion").await;
    let mgr = s.state.sessions.ensure("Companion");
    send(
        &mut ws,
        json!({"action": "voice_play_start", "turnId": "t1", "source": "audio_playback"}),
    )
    .await;
    send(&mut ws, json!({"action": "ping"})).await;
    until(&mut ws, |f| f["type"] == "pong").await;
    assert!(mgr.is_audio_playing());
    send(
        &mut ws,
        json!({"action": "voice_play_end", "turnId": "t1", "source": "audio_playback"}),
    )
    .await;
    send(&mut ws, json!({"action": "ping"})).await;
    until(&mut ws, |f| f["type"] == "pong").await;
    assert!(!mgr.is_audio_playing());
    // A page that closes while playing stops counting.
    send(&mut ws, json!({"action": "voice_play_start"})).await;
    send(&mut ws, json!({"action": "ping"})).await;
    until(&mut ws, |f| f["type"] == "pong").await;
    assert!(mgr.is_audio_playing());
    drop(ws);
    for _ in 0..100 {
        if !mgr.is_audio_playing() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("a closed page still counts as playing");
}

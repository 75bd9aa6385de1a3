//! The microphone on the chat socket (docs/voice.md, "Hearing"): frames,
//! sessions, a loopback OpenAI-compatible recogniser, the voice turn. A real
//! recogniser is exercised by tests/hear/run.

use axum::routing::post;
use axum::Router;
use companiond_core::hearing::ear::synthetic_voice;
use companiond_core::hearing::frame::encode;
use companiond_core::testkit::{next_frame, Message, MockLlm, TestServer, Upstream, Ws};
use futures::SinkExt;
use serde_json::{json, Value};

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string())).await.expect("send");
}

async fn until(ws: &mut Ws, kind: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let f = next_frame(ws).await;
        let done = f["type"] == kind;
        seen.push(f);
        if done {
            return seen;
        }
    }
}

async fn recogniser(text: &'static str) -> Upstream {
    Upstream::start(Router::new().route(
        "/v1/audio/transcriptions",
        post(move || async move { axum::Json(json!({ "text": text })) }),
    ))
    .await
}

#[tokio::test]
async fn without_a_recogniser_the_mic_fails_and_bad_frames_are_answered() {
    let s = TestServer::start(&[]).await;
    let (mut ws, _) = s.chat("Companion").await;
    send(&mut ws, json!({"type": "mic", "state": "start"})).await;
    let f = until(&mut ws, "error").await;
    assert_eq!(f.last().unwrap()["code"], "asr_not_configured");
    for bad in [
        encode(44_100, &[1, 2]),
        encode(48_000, &[]),
        encode(16_000, &vec![0; 1_921]),
        b"NEKO\x80\xbb\0\0\x01".to_vec(),
    ] {
        ws.send(Message::Binary(bad)).await.expect("send");
        let f = until(&mut ws, "error").await;
        let e = f.last().unwrap();
        assert_eq!(e["code"], "VOICE_BINARY_FRAME_INVALID", "{e}");
        assert!(e["error"]
            .as_str()
            .unwrap()
            .starts_with("VOICE_BINARY_FRAME_INVALID: "));
    }
    // A valid frame without a session is reported once.
    ws.send(Message::Binary(encode(48_000, &[0; 480])))
        .await
        .expect("send");
    assert_eq!(
        until(&mut ws, "error").await.last().unwrap()["code"],
        "VOICE_SESSION_NOT_STARTED"
    );
    send(&mut ws, json!({"type": "ping"})).await;
    until(&mut ws, "pong").await;
}

#[tokio::test]
async fn speech_becomes_a_voice_turn() {
    let llm = MockLlm::start("Nice to hear you.").await;
    let asr = recogniser("hello there").await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    s.merge_core_config(json!({"asrModelUrl": format!("{}/v1", asr.base), "asrModelId": "w"}))
        .await;
    let (mut ws, _) = s.chat("Companion").await;
    send(&mut ws, json!({"type": "mic", "state": "start"})).await;
    let f = until(&mut ws, "mic_state").await;
    let state = f.last().unwrap();
    assert_eq!(
        (&state["state"], &state["recognizer"]),
        (&json!("listening"), &json!("openai_compatible"))
    );
    assert_eq!(state["noise_reduction"], true);
    // Saving the setting reaches the live microphone.
    let mut off = serde_json::Map::new();
    off.insert("noiseReductionEnabled".into(), json!(false));
    s.state.sessions.ensure("Companion").apply_settings(off);
    let f = until(&mut ws, "mic_state").await;
    let state = f.last().unwrap();
    assert_eq!(
        (&state["state"], &state["noise_reduction"]),
        (&json!("listening"), &json!(false))
    );
    let mut audio = vec![0i16; 9_600];
    audio.extend(synthetic_voice(48_000, 1_500));
    audio.extend(vec![0i16; 48_000]);
    for c in audio.chunks(480) {
        ws.send(Message::Binary(encode(48_000, c)))
            .await
            .expect("send");
    }
    let seen = until(&mut ws, "transcript").await;
    assert!(seen
        .iter()
        .any(|f| f["type"] == "vad" && f["state"] == "speech"));
    let t = seen.last().unwrap();
    assert_eq!(
        (&t["text"], &t["final"]),
        (&json!("hello there"), &json!(true))
    );
    let turn = until(&mut ws, "turn_end").await;
    assert!(turn.iter().any(|f| f["type"] == "assistant_delta"));
    // One request: a 16 kHz mono WAV in a multipart body with the model.
    let reqs = asr.requests();
    assert_eq!(reqs.len(), 1);
    let body = String::from_utf8_lossy(&reqs[0].body).to_string();
    assert!(
        body.contains("name=\"model\"") && body.contains("RIFF"),
        "{body:.200}"
    );
    // The model was asked with the transcript; the history has the voice line.
    let last = s.state.history.tail("Companion", 2).await;
    assert_eq!(last[0].text(), "hello there");
    // Silence alone starts nothing more.
    for c in vec![0i16; 48_000 * 2].chunks(480) {
        ws.send(Message::Binary(encode(48_000, c)))
            .await
            .expect("send");
    }
    assert!(companiond_core::testkit::quiet(&mut ws, 500).await);
    assert_eq!(asr.requests().len(), 1);
}

//! `POST /api/game/{game_type}/speak` and `/api/icebreaker/speak` through the
//! speech pipeline: the line's audio reaches the chat page that plays speech.

use axum::routing::post;
use axum::Router;
use companiond_core::testkit::{Message, TestServer, Upstream, Ws, FRAME_WAIT};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};

use crate::common::*;

/// A speech server answering 0.1 s of 24 kHz PCM per request.
async fn tts() -> Upstream {
    Upstream::start(Router::new().route(
        "/v1/audio/speech",
        post(|| async {
            let pcm: Vec<u8> = (0..2400).flat_map(|_| 3000i16.to_le_bytes()).collect();
            ([("content-type", "audio/pcm")], pcm)
        }),
    ))
    .await
}

async fn with_voice(s: &TestServer, tts: &Upstream) {
    s.state
        .store
        .write(
            companiond_core::layout::CORE_CONFIG,
            json!({"ttsModelProvider": "custom", "ttsModelUrl": format!("{}/v1", tts.base)}),
        )
        .await
        .unwrap();
}

/// Frames up to the `speech_end` of `speech_id`; the binary frames' byte count.
async fn spoken(ws: &mut Ws, speech_id: &str) -> (Vec<Value>, usize) {
    let (mut texts, mut bytes) = (Vec::new(), 0);
    loop {
        let m = tokio::time::timeout(FRAME_WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("open")
            .expect("frame");
        match m {
            Message::Binary(b) => bytes += b.len() - 8,
            Message::Text(t) => {
                let f: Value = serde_json::from_str(&t).unwrap();
                let end = f["type"] == "speech_end" && f["speech_id"] == speech_id;
                texts.push(f);
                if end {
                    return (texts, bytes);
                }
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn game_and_onboarding_lines_are_spoken() {
    let up = tts().await;
    let s = server().await;
    with_voice(&s, &up).await;
    // Without a page that plays speech the line is refused with the reason.
    start(&s, "soccer", "s1").await;
    let sp = "/api/game/soccer/speak";
    let body =
        json!({"persona_name": "Companion", "session_id": "s1", "line": "Goal! What a shot."});
    let (_, b) = s.post(sp, body.clone()).await;
    assert_eq!(b["reason"], "no_voice_provider", "{b}");
    assert_eq!(b["tts_pipeline"]["before"]["tts_available"], false);

    let mut ws = ws_open(&s, "Companion").await;
    ws.send(Message::Text(
        json!({"type": "voice", "enabled": true}).to_string(),
    ))
    .await
    .unwrap();
    frame_of(&mut ws, "voice_state").await;
    let (st, b) = s.post(sp, body).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["ok"], true);
    assert_eq!(b["audio_sent"], true);
    assert_eq!(b["audio_queued"], true);
    assert_eq!(
        b["voice_source"],
        json!({"provider": "openai_compatible", "method": "project_tts"})
    );
    assert_eq!(b["tts_pipeline"]["before"]["tts_available"], true);
    assert_eq!(
        b["tts_pipeline"]["after"]["current_speech_id"],
        b["speech_id"]
    );
    let id = b["speech_id"].as_str().unwrap().to_string();
    let (frames, bytes) = spoken(&mut ws, &id).await;
    assert!(frames
        .iter()
        .any(|f| f["type"] == "speech_start" && f["speech_id"] == id.as_str()));
    assert!(frames
        .iter()
        .any(|f| f["type"] == "assistant_mirror" && f["text"] == "Goal! What a shot."));
    assert_eq!(frames.last().unwrap()["reason"], "done");
    // "Goal!" and "What a shot." = 2 chunks × 0.1 s at 48 kHz.
    assert_eq!(bytes, 2 * 4800 * 2);

    // The onboarding line, on the same page.
    let (st, b) = s
        .post_csrf(
            "/api/icebreaker/route/start",
            json!({"persona_name": "Companion", "session_id": "i1"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    let (st, b) = s
        .post_csrf(
            "/api/icebreaker/speak",
            json!({"persona_name": "Companion", "session_id": "i1", "line": "Welcome home.", "interrupt_audio": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        (b["audio_sent"].clone(), b["audio_queued"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(b["voice_source"]["provider"], "openai_compatible");
    let id = b["speech_id"].as_str().unwrap().to_string();
    let (_, bytes) = spoken(&mut ws, &id).await;
    assert_eq!(bytes, 4800 * 2);
}

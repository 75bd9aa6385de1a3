//! The original chat protocol over the WebSocket, and companiond clients beside it.

use crate::common::*;

#[tokio::test]
async fn the_original_chat_protocol_streams_a_text_exchange() {
    let llm = MockLlm::start("Hello there, friend!").await;
    let s = start_front(Some(&llm)).await;
    let mut ws = connect(&s, "Companion").await;
    // Open-time status frames: accepted silently, and no greeting is sent.
    send(
        &mut ws,
        json!({"action": "voice_input_control", "event": "lease_sync", "engaged": false}),
    )
    .await;
    send(
        &mut ws,
        json!({"action": "capture_bridge_status", "available": false, "capabilities": {}}),
    )
    .await;
    send(
        &mut ws,
        json!({"action": "language_update", "language": "en"}),
    )
    .await;
    send(
        &mut ws,
        json!({"action": "greeting_check", "is_switch": false}),
    )
    .await;
    assert!(quiet(&mut ws, 600).await, "the server must stay silent");
    send(&mut ws, json!({"action": "ping"})).await;
    assert_eq!(next_frame(&mut ws).await, json!({"type": "pong"}));

    send(&mut ws, json!({"action": "start_session", "input_type": "text", "new_session": false, "request_id": "R1"})).await;
    assert_eq!(
        next_frame(&mut ws).await,
        json!({"type": "session_started", "input_mode": "text", "request_id": "R1"})
    );
    send(&mut ws, json!({"action": "stream_data", "input_type": "text", "data": "Hi!", "request_id": "req-1-a"})).await;
    let mut reply = String::new();
    let mut first = true;
    let end = loop {
        let f = next_frame(&mut ws).await;
        match f["type"].as_str() {
            Some("gemini_response") => {
                assert_eq!(f["isNewMessage"], first, "{f}");
                assert_eq!(f["request_id"], "req-1-a");
                assert!(f["turn_id"].is_string());
                first = false;
                reply.push_str(f["text"].as_str().unwrap());
            }
            Some("system") => break f,
            other => panic!("unexpected frame {other:?}: {f}"),
        }
    };
    assert_eq!(reply, "Hello there, friend!");
    assert_eq!(
        end,
        json!({"type": "system", "data": "turn end", "request_id": "req-1-a"})
    );

    // A voice start is refused so the page stays on text; unknown actions are named.
    send(
        &mut ws,
        json!({"action": "start_session", "input_type": "audio", "request_id": "R2"}),
    )
    .await;
    // The microphone session is prepared, then fails: no recogniser is set (docs/voice.md).
    assert_eq!(next_frame(&mut ws).await["type"], "session_preparing");
    let st = next_frame(&mut ws).await;
    assert_eq!(st["type"], "status");
    let msg: Value = serde_json::from_str(st["message"].as_str().unwrap()).unwrap();
    assert_eq!(msg["code"], "SESSION_START_FAILED");
    assert_eq!(next_frame(&mut ws).await["type"], "session_failed");
    send(&mut ws, json!({"action": "fly"})).await;
    let st = next_frame(&mut ws).await;
    assert!(st["message"].as_str().unwrap().contains("UNKNOWN_ACTION"));

    // The exchange landed in the history like a companiond-protocol turn.
    let hist = std::fs::read_to_string(s.data.join("memory/Companion/recent.json")).unwrap();
    assert!(
        hist.contains("Hi!") && hist.contains("Hello there, friend!"),
        "{hist}"
    );

    // A switch reaches the open socket in the original's shape.
    send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika"}),
    )
    .await;
    send_json(
        &s,
        Method::POST,
        "/api/characters/current_catgirl",
        json!({"catgirl_name": "Mika"}),
    )
    .await;
    assert_eq!(
        next_frame(&mut ws).await,
        json!({"type": "catgirl_switched", "new_catgirl": "Mika", "old_catgirl": "Companion"})
    );
}

#[tokio::test]
async fn a_model_failure_settles_the_original_page() {
    let s = start_front(None).await; // no provider configured
    let mut ws = connect(&s, "Companion").await;
    send(
        &mut ws,
        json!({"action": "stream_data", "input_type": "text", "data": "Hi", "request_id": "R9"}),
    )
    .await;
    let st = next_frame(&mut ws).await;
    assert_eq!(st["type"], "status", "{st}");
    assert!(st["message"]
        .as_str()
        .unwrap()
        .contains("API_UNKNOWN_ERROR"));
    assert_eq!(
        next_frame(&mut ws).await,
        json!({"type": "system", "data": "turn end", "request_id": "R9"})
    );
}

#[tokio::test]
async fn companiond_clients_keep_their_protocol() {
    let llm = MockLlm::start("native reply").await;
    let s = start_front(Some(&llm)).await;
    let mut ws = connect(&s, "Companion").await;
    let hello = next_frame(&mut ws).await;
    assert_eq!(hello["type"], "session_started");
    assert_eq!(hello["persona_name"], "Companion");
    send(&mut ws, json!({"type": "user_text", "text": "yo"})).await;
    let mut text = String::new();
    loop {
        let f = next_frame(&mut ws).await;
        match f["type"].as_str() {
            Some("assistant_delta") => text.push_str(f["text"].as_str().unwrap()),
            Some("turn_end") => break,
            _ => {}
        }
    }
    assert_eq!(text, "native reply");
    // A client that speaks first still gets the greeting first.
    let mut ws2 = connect(&s, "Companion").await;
    send(&mut ws2, json!({"type": "ping"})).await;
    assert_eq!(next_frame(&mut ws2).await["type"], "session_started");
    assert_eq!(next_frame(&mut ws2).await["type"], "pong");
    let _ = CSRF;
}

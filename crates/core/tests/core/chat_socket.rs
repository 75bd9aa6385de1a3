//! The chat WebSocket `/ws/{name}`: error frames, a turn with a tool call,
//! model errors, and a session continuing from the stored history.

use std::time::Duration;

use axum::routing::post;
use axum::Router;
use companiond_core::testkit::Message;
use companiond_core::testkit::{MockLlm, MockReply, TestOptions, TestServer, Upstream};
use companiond_core::tools::RegisteredTool;
use futures::SinkExt;
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn chat_without_provider_answers_an_error_frame_and_stays_open() {
    let s = TestServer::start(&[]).await;
    let (mut ws, _) = s.chat("Companion").await;
    assert!(s.state.sessions.is_active("Companion"));
    ws.send(Message::Text(
        json!({"type": "user_text", "text": "hi"}).to_string(),
    ))
    .await
    .unwrap();
    let f = next_frame(&mut ws).await;
    assert_eq!(f["type"], "error");
    assert_eq!(f["code"], "no_provider");
    assert_eq!(next_frame(&mut ws).await["type"], "turn_end");
    ws.send(Message::Text(json!({"type": "ping"}).to_string()))
        .await
        .unwrap();
    assert_eq!(next_frame(&mut ws).await["type"], "pong");
    // Unknown character: no upgrade.
    assert!(tokio_tungstenite::connect_async(s.ws_url("/ws/Nobody"))
        .await
        .is_err());
    // terminate() closes the connection and the session becomes inactive.
    let mgr = s.state.sessions.get("Companion").unwrap();
    assert!(mgr.terminate(Duration::from_secs(5)).await);
    assert!(!s.state.sessions.is_active("Companion"));
}

#[tokio::test]
async fn chat_turn_with_a_tool_call_round_trip() {
    let llm = MockLlm::start("fallback").await;
    let plugin = Upstream::start(Router::new().route(
        "/tool",
        post(|body: axum::Json<Value>| async move {
            let n = body["arguments"]["n"].as_i64().unwrap_or(0);
            axum::Json(json!({"output": {"doubled": n * 2}, "is_error": false}))
        }),
    ))
    .await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    s.state
        .sessions
        .ensure("Companion")
        .register_tool(RegisteredTool {
            name: "double".into(),
            description: "doubles n".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            callback_url: format!("{}/tool", plugin.base),
            source: "plugin:test".into(),
            timeout: Duration::from_secs(5),
        });
    llm.push(MockReply::ToolCalls(vec![(
        "call_7".into(),
        "double".into(),
        "{\"n\": 21}".into(),
    )]));
    llm.push(MockReply::Text("The answer is 42.".into()));

    let (mut ws, _) = s.chat("Companion").await;
    ws.send(Message::Text(
        json!({"type": "user_text", "text": "double 21"}).to_string(),
    ))
    .await
    .unwrap();
    let mut text = String::new();
    let mut kinds = Vec::new();
    loop {
        let f = next_frame(&mut ws).await;
        let kind = f["type"].as_str().unwrap().to_string();
        if kind == "assistant_delta" {
            text.push_str(f["text"].as_str().unwrap());
        }
        if kind == "tool_result" {
            assert_eq!(f["is_error"], false);
        }
        kinds.push(kind.clone());
        if kind == "turn_end" {
            break;
        }
    }
    assert_eq!(text, "The answer is 42.");
    assert!(kinds.contains(&"tool_call".to_string()) && kinds.contains(&"tool_result".to_string()));

    let cb = plugin.requests_to("/tool");
    assert_eq!(cb.len(), 1);
    assert_eq!(
        cb[0].json(),
        json!({"name": "double", "arguments": {"n": 21}, "call_id": "call_7", "raw_arguments": "{\"n\": 21}"})
    );
    let reqs = llm.chat_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["tools"][0]["function"]["name"], "double");
    assert_eq!(reqs[0]["stream"], true);
    let msgs = reqs[1]["messages"].as_array().unwrap();
    let tool_msg = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_msg["tool_call_id"], "call_7");
    assert_eq!(tool_msg["content"], "{\"doubled\":42}");
    let asst = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(asst["tool_calls"][0]["function"]["name"], "double");
    let recorded = llm.upstream.requests_to("/chat/completions");
    assert_eq!(recorded[0].headers["authorization"], "Bearer sk-test-key");

    // The exchange was appended to the character's recent history.
    let recent: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("memory/Companion/recent.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        recent,
        json!([
            {"type": "human", "data": {"content": "double 21"}},
            {"type": "ai", "data": {"content": "The answer is 42."}}
        ])
    );
    // Token usage was recorded for both model calls.
    assert_eq!(s.state.usage.rows_since(0).unwrap().len(), 2);
}

#[tokio::test]
async fn model_errors_reach_the_socket() {
    let llm = MockLlm::start("x").await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Status(401, "{\"error\":\"bad key\"}".into()));
    let (mut ws, _) = s.chat("Companion").await;
    ws.send(Message::Text(
        json!({"type": "user_text", "text": "hi"}).to_string(),
    ))
    .await
    .unwrap();
    let f = next_frame(&mut ws).await;
    assert_eq!(
        (f["type"].as_str(), f["code"].as_str()),
        (Some("error"), Some("auth_failed"))
    );
    assert_eq!(next_frame(&mut ws).await["type"], "turn_end");
    // Garbage frames get an error frame, not a disconnect.
    ws.send(Message::Text("not json".into())).await.unwrap();
    assert_eq!(next_frame(&mut ws).await["code"], "invalid_frame");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_continues_from_the_stored_history() {
    let llm = MockLlm::start("noted").await;
    // History written before this process started (a restart), in both accepted shapes.
    let s = TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("memory/Companion")).unwrap();
                std::fs::write(
                    data.join("memory/Companion/recent.json"),
                    json!([
                        {"type": "human", "data": {"content": "My cat is called Miso."}},
                        {"type": "ai", "data": {"content": "Miso is a lovely name!"}},
                        {"role": "user", "content": "Remember that."}
                    ])
                    .to_string(),
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    s.configure_llm(&llm.base()).await;

    assert_eq!(one_turn(&s, "What is my cat called?").await, "noted");
    let first = conversation(&llm.chat_requests()[0]);
    assert_eq!(
        first,
        vec![
            ("user".into(), "My cat is called Miso.".into()),
            ("assistant".into(), "Miso is a lovely name!".into()),
            ("user".into(), "Remember that.".into()),
            ("user".into(), "What is my cat called?".into()),
        ]
    );

    // A reconnect continues; an edit made elsewhere (the memory browser) is seen.
    let path = s.data.join("memory/Companion/recent.json");
    let mut stored: Vec<Value> = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(stored.len(), 5, "the exchange was appended");
    stored[0] = json!({"type": "human", "data": {"content": "My cat is called Tofu."}});
    std::fs::write(&path, serde_json::to_vec(&stored).unwrap()).unwrap();
    one_turn(&s, "And again?").await;
    let second = conversation(&llm.chat_requests()[1]);
    assert_eq!(second[0].1, "My cat is called Tofu.");
    assert_eq!(
        &second[second.len() - 3..],
        &[
            ("user".to_string(), "What is my cat called?".to_string()),
            ("assistant".to_string(), "noted".to_string()),
            ("user".to_string(), "And again?".to_string()),
        ]
    );
}

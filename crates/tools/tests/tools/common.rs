//! Fixtures shared by the tools tests: servers (with a loopback model), the
//! plugin callback server, chat turns over the WebSocket, registration helpers.

use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
pub use companiond_core::testkit::Ws;
use companiond_core::testkit::{Message, MockLlm, TestServer, Upstream};
use futures::SinkExt;
use serde_json::{json, Value};

pub async fn server() -> TestServer {
    TestServer::start(&[companiond_tools::FAMILY]).await
}

pub async fn server_with_llm() -> (TestServer, MockLlm) {
    let s = server().await;
    let llm = MockLlm::start("default reply").await;
    s.configure_llm(&llm.base()).await;
    (s, llm)
}

/// The plugin: a real loopback callback server with one route per outcome.
pub async fn plugin() -> Upstream {
    let router = Router::new()
        .route(
            "/weather",
            post(|Json(b): Json<Value>| async move {
                let city = b["arguments"]["city"].as_str().unwrap_or("?").to_string();
                Json(json!({"output": {"city": city, "temp_c": 21}, "is_error": false}))
            }),
        )
        .route(
            "/is_error",
            post(|| async {
                Json(json!({"output": null, "is_error": true, "error": "city not found"}))
            }),
        )
        .route(
            "/http500",
            post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom from plugin") }),
        )
        .route(
            "/text",
            post(|| async { ([("content-type", "text/plain")], "plain words, not JSON") }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Json(json!({"output": "too late"}))
            }),
        )
        .route(
            "/echo",
            post(|Json(b): Json<Value>| async move { Json(json!({"output": b})) }),
        );
    Upstream::start(router).await
}

/// A loopback port with nothing listening on it.
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    port
}

pub use companiond_core::testkit::next_frame;

pub async fn connect(s: &TestServer, role: &str) -> Ws {
    s.chat(role).await.0
}

/// One chat turn: every frame up to and including `turn_end`.
pub async fn turn(ws: &mut Ws, text: &str) -> Vec<Value> {
    ws.send(Message::Text(
        json!({"type": "user_text", "text": text}).to_string(),
    ))
    .await
    .expect("send");
    let mut frames = Vec::new();
    loop {
        let f = next_frame(ws).await;
        let end = f["type"] == "turn_end";
        frames.push(f);
        if end {
            return frames;
        }
    }
}

pub fn of_type<'a>(frames: &'a [Value], t: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == t).collect()
}

pub fn spoken(frames: &[Value]) -> String {
    of_type(frames, "assistant_delta")
        .iter()
        .filter_map(|f| f["text"].as_str())
        .collect()
}

/// Names of the function tools offered in a model request.
pub fn offered(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The tool messages of a model request.
pub fn tool_messages(req: &Value) -> Vec<Value> {
    req["messages"]
        .as_array()
        .map(|a| a.iter().filter(|m| m["role"] == "tool").cloned().collect())
        .unwrap_or_default()
}

pub async fn register(s: &TestServer, body: Value) -> (u16, Value) {
    s.post("/api/tools/register", body).await
}

pub async fn listed(s: &TestServer, role: &str) -> Vec<String> {
    let (st, b) = s.get(&format!("/api/tools?role={role}")).await;
    assert_eq!(st, 200, "{b}");
    b["tools_by_role"][role]
        .as_array()
        .expect("role listed")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

pub async fn create_character(s: &TestServer, name: &str) {
    let (st, b) = s
        .post("/api/characters/profile", json!({"name": name}))
        .await;
    assert_eq!(st, 200, "{b}");
}

pub fn sorted(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

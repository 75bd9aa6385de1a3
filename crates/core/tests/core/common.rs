//! Fixtures shared by every resource: a probe family exercising the guards and
//! extractors, and helpers to read chat frames and run one chat turn.

use axum::http::Method;
use axum::response::Response;
use companiond_core::envelope::{ok_json, JsonBody, OkEnvelope};
use companiond_core::guards::{Csrf, LoopbackPeer};
use companiond_core::testkit::TestServer;
use companiond_core::{Api, AppState};
use futures::SinkExt;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

#[derive(Deserialize)]
pub struct Typed {
    #[allow(dead_code)]
    pub n: u32,
}

pub async fn typed(JsonBody(_b, ..): JsonBody<Typed, OkEnvelope>) -> Response {
    ok_json(json!({"ok": true}))
}

pub async fn local_only(_p: LoopbackPeer) -> Response {
    ok_json(json!({"success": true}))
}

pub async fn guarded(JsonBody(b, ..): JsonBody<Value>) -> Response {
    ok_json(json!({"success": true, "echo": b}))
}

/// A probe family exercising the guards and extractors.
pub fn probe(state: &AppState) -> Api {
    Api::new(state, "probe")
        .post("/api/probe/typed", "422 probe", typed)
        .post("/api/probe/local", "loopback probe", local_only)
        .guarded(
            Method::POST,
            "/api/probe/csrf",
            "csrf probe",
            Csrf::Success,
            guarded,
        )
        .guarded(
            Method::POST,
            "/api/probe/csrf-ok",
            "csrf probe (ok envelope)",
            Csrf::Ok,
            guarded,
        )
}

pub use companiond_core::testkit::next_frame;

/// One chat turn on a fresh socket; returns the streamed reply.
pub async fn one_turn(s: &TestServer, text: &str) -> String {
    let (mut ws, _) = s.chat("Companion").await;
    ws.send(Message::Text(
        json!({"type": "user_text", "text": text}).to_string(),
    ))
    .await
    .unwrap();
    let mut reply = String::new();
    loop {
        let f = next_frame(&mut ws).await;
        match f["type"].as_str() {
            Some("assistant_delta") => reply.push_str(f["text"].as_str().unwrap_or("")),
            Some("turn_end") => break,
            other => panic!("unexpected frame {other:?}: {f}"),
        }
    }
    let _ = ws.close(None).await;
    reply
}

/// The (role, content) pairs of one recorded model request, system prompt dropped.
pub fn conversation(req: &Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

//! Fixtures shared by the configuration tests: servers (optionally with a provider
//! catalog), requests with headers, loopback upstreams (OpenAI-compatible `/models`,
//! a realtime WebSocket server, a voice server over HTTP and WebSocket).

pub use std::net::SocketAddr;
pub use std::sync::{Arc, Mutex};
pub use std::time::{Duration, Instant};

pub use axum::http::{HeaderMap, StatusCode};
pub use axum::response::IntoResponse;
pub use axum::routing::{get, post};
pub use axum::{Json, Router};
pub use companiond_core::providers::Slot;
pub use companiond_core::testkit::{split, TestOptions, TestServer, Upstream, CSRF};
pub use futures::{SinkExt, StreamExt};
pub use serde_json::{json, Value};
pub use tokio::net::TcpListener;
pub use tokio_tungstenite::tungstenite::Message;

pub const MASKED: &str = companiond_config::MASKED;

pub async fn server() -> TestServer {
    TestServer::start(&[companiond_config::FAMILY]).await
}

pub async fn server_with_catalog(catalog: Value) -> TestServer {
    TestServer::start_with(
        &[companiond_config::FAMILY],
        TestOptions {
            prepare: Some(Box::new(move |_data, bundle| {
                std::fs::write(bundle.join("providers.json"), catalog.to_string()).unwrap();
            })),
            ..Default::default()
        },
    )
    .await
}

pub fn core_config(s: &TestServer) -> Value {
    let p = s.data.join("config/core_config.json");
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b).unwrap(),
        Err(_) => Value::Null,
    }
}

pub async fn post_with(
    s: &TestServer,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, HeaderMap, Value) {
    let mut b = s.http.post(s.url(path)).json(&body);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let r = b.send().await.unwrap();
    let h = r.headers().clone();
    let (st, v) = split(r).await;
    (st, h, v)
}

pub async fn get_with_headers(s: &TestServer, path: &str) -> (u16, HeaderMap, Value) {
    let r = s.http.get(s.url(path)).send().await.unwrap();
    let h = r.headers().clone();
    let (st, v) = split(r).await;
    (st, h, v)
}

pub async fn post_raw(s: &TestServer, path: &str, body: &'static str) -> (u16, Value) {
    let r = s
        .http
        .post(s.url(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    split(r).await
}

pub async fn wait_active(s: &TestServer, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s.state.sessions.is_active(name) {
        assert!(Instant::now() < deadline, "session never became active");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub use companiond_core::testkit::next_of_type;

pub async fn model_upstream() -> Upstream {
    let router = Router::new()
        .route(
            "/ok/models",
            get(|| async {
                Json(json!({"object": "list", "data": [
                    {"id": "zeta-model", "object": "model"},
                    {"id": "models/alpha", "name": "Alpha Display"},
                    {"id": "Beta", "display_name": "Beta"},
                    {"id": " gamma "},
                    {"id": "zeta-model"},
                    {"id": ""}
                ]}))
            }),
        )
        .route(
            "/ok/chat/completions",
            post(|| async { Json(json!({"choices": [{"message": {"content": "hi"}}]})) }),
        )
        .route(
            "/auth/models",
            get(|| async { (StatusCode::UNAUTHORIZED, "bad key") }),
        )
        .route(
            "/auth/chat/completions",
            post(|| async { (StatusCode::FORBIDDEN, "bad key") }),
        )
        .route(
            "/rl/models",
            get(|| async { (StatusCode::TOO_MANY_REQUESTS, "slow down") }),
        )
        .route(
            "/rl/chat/completions",
            post(|| async { (StatusCode::TOO_MANY_REQUESTS, "slow down") }),
        )
        .route(
            "/hang/models",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route(
            "/hang/chat/completions",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route("/empty/models", get(|| async { Json(json!({"data": []})) }))
        .route(
            "/broken/models",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        );
    Upstream::start(router).await
}

pub async fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a
}

/// A realtime-style WebSocket server: answers the first text frame with `reply`
/// (or nothing when `None`).
pub async fn realtime_server(reply: Option<Value>) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let reply = reply.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let cb = |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                          resp| {
                    let auth = req
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    seen.lock().unwrap().push(format!("{} {auth}", req.uri()));
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, cb).await else {
                    return;
                };
                while let Some(Ok(m)) = ws.next().await {
                    if m.is_text() {
                        if let Some(r) = &reply {
                            let _ = ws.send(Message::Text(r.to_string())).await;
                        }
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[derive(Clone, Copy, Debug)]
pub enum Voice {
    /// ready, then two audio chunks, a sentence event and done.
    Good,
    /// answers init with an error.
    InitFails,
    /// never answers init.
    Silent,
    /// ready, then an error event for the synthesis.
    SynthesisError,
}

pub async fn voice_server(mode: Voice) -> (SocketAddr, Arc<Mutex<Vec<Value>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let seen = seen2.clone();
            tokio::spawn(async move {
                let path = Arc::new(Mutex::new(String::new()));
                let p2 = path.clone();
                let cb = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                               resp| {
                    *p2.lock().unwrap() = req.uri().path().to_string();
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, cb).await else {
                    return;
                };
                seen.lock()
                    .unwrap()
                    .push(json!({"path": path.lock().unwrap().clone()}));
                while let Some(Ok(m)) = ws.next().await {
                    let Message::Text(t) = m else { continue };
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    seen.lock().unwrap().push(v.clone());
                    match (mode, v["cmd"].as_str()) {
                        (Voice::InitFails, Some("init")) => {
                            let _ = ws
                                .send(Message::Text(
                                    json!({"type": "error", "message": "unknown voice"})
                                        .to_string(),
                                ))
                                .await;
                        }
                        (Voice::Silent, _) => {}
                        (_, Some("init")) => {
                            let _ = ws
                                .send(Message::Text(json!({"type": "ready"}).to_string()))
                                .await;
                        }
                        (Voice::SynthesisError, Some("end")) => {
                            let _ = ws
                                .send(Message::Text(
                                    json!({"type": "error", "message": "model crashed"})
                                        .to_string(),
                                ))
                                .await;
                        }
                        (Voice::Good, Some("end")) => {
                            let _ = ws
                                .send(Message::Text(
                                    json!({"type": "sentence", "text": "x"}).to_string(),
                                ))
                                .await;
                            let _ = ws.send(Message::Binary(vec![1u8; 320])).await;
                            let _ = ws.send(Message::Binary(vec![2u8; 160])).await;
                            let _ = ws
                                .send(Message::Text(json!({"type": "done"}).to_string()))
                                .await;
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    (addr, seen)
}

pub const CS: &str = "/api/config/conversation-settings";

pub fn preset(mode: &str) -> Value {
    let on = |b: bool| json!(b);
    let (flags, iv): ([bool; 9], Option<(i64, i64)>) = match mode {
        "off" => ([false; 9], None),
        "normal" => ([true; 9], Some((15, 10))),
        "focus" => (
            [true, false, false, false, true, false, false, false, false],
            Some((60, 60)),
        ),
        "frequent" => ([true; 9], Some((5, 5))),
        _ => unreachable!(),
    };
    let names = [
        "proactiveChatEnabled",
        "proactiveVisionChatEnabled",
        "proactiveNewsChatEnabled",
        "proactiveVideoChatEnabled",
        "proactivePersonalChatEnabled",
        "proactiveCommunityChatEnabled",
        "proactiveMusicEnabled",
        "proactiveMemeEnabled",
        "proactiveMiniGameInviteEnabled",
    ];
    let mut m = serde_json::Map::new();
    for (n, f) in names.iter().zip(flags) {
        m.insert(n.to_string(), on(f));
    }
    if let Some((a, b)) = iv {
        m.insert("proactiveChatInterval".into(), json!(a));
        m.insert("proactiveVisionInterval".into(), json!(b));
    }
    Value::Object(m)
}

pub async fn mode_of(s: &TestServer) -> String {
    let (_, v) = s.get("/api/proactive/mode").await;
    v["mode"].as_str().unwrap().to_string()
}

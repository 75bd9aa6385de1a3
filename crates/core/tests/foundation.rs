//! Foundation over real HTTP and WebSocket: CSRF, loopback guard, characters,
//! static containment, the JSON body extractor and a chat turn with a tool call.

use std::time::Duration;

use axum::http::Method;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use companiond_core::envelope::{ok_json, JsonBody, OkEnvelope};
use companiond_core::guards::{Csrf, LoopbackPeer};
use companiond_core::testkit::{MockLlm, MockReply, TestOptions, TestServer, Upstream, CSRF};
use companiond_core::tools::RegisteredTool;
use companiond_core::{Api, AppState};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

#[derive(Deserialize)]
struct Typed {
    #[allow(dead_code)]
    n: u32,
}

async fn typed(JsonBody(_b, ..): JsonBody<Typed, OkEnvelope>) -> Response {
    ok_json(json!({"ok": true}))
}

async fn local_only(_p: LoopbackPeer) -> Response {
    ok_json(json!({"success": true}))
}

async fn guarded(JsonBody(b, ..): JsonBody<Value>) -> Response {
    ok_json(json!({"success": true, "echo": b}))
}

/// A probe family exercising the guards and extractors.
fn probe(state: &AppState) -> Api {
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

#[tokio::test]
async fn csrf_guard() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    let origin = format!("http://127.0.0.1:{}", s.addr.port());
    let send = |token: Option<&str>, origin: Option<&str>, referer: Option<&str>| {
        let mut b = s.http.post(s.url("/api/probe/csrf")).json(&json!({"x": 1}));
        if let Some(t) = token {
            b = b.header("X-CSRF-Token", t);
        }
        if let Some(o) = origin {
            b = b.header("Origin", o);
        }
        if let Some(r) = referer {
            b = b.header("Referer", r);
        }
        async move { companiond_core::testkit::split(b.send().await.unwrap()).await }
    };
    let (st, body) = send(None, Some(&origin), None).await;
    assert_eq!(st, 403);
    assert_eq!(body["error_code"], "csrf_validation_failed");
    assert_eq!(body["success"], false);
    assert_eq!(send(Some("wrong"), Some(&origin), None).await.0, 403);
    assert_eq!(
        send(Some(CSRF), Some("https://evil.example"), None).await.0,
        403
    );
    assert_eq!(send(Some(CSRF), Some("null"), None).await.0, 403);
    assert_eq!(
        send(Some(CSRF), None, Some("https://evil.example/x"))
            .await
            .0,
        403
    );
    assert_eq!(send(Some(CSRF), Some(&origin), None).await.0, 200);
    assert_eq!(
        send(Some(CSRF), Some("http://localhost:1"), None).await.0,
        200
    );
    assert_eq!(send(Some(CSRF), Some("http://[::1]:2"), None).await.0, 200);
    assert_eq!(send(Some(CSRF), None, None).await.0, 200);
    // Body token when the header is absent; the handler still sees the body.
    let (st, body) = s
        .post("/api/probe/csrf", json!({"_csrf_token": CSRF, "k": "v"}))
        .await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["echo"]["k"], "v");
    assert_eq!(
        s.post("/api/probe/csrf", json!({"_csrf_token": "nope"}))
            .await
            .0,
        403
    );
    // Game/onboarding envelope.
    let (st, body) = s.post("/api/probe/csrf-ok", json!({})).await;
    assert_eq!(st, 403);
    assert_eq!(
        body,
        json!({"ok": false, "reason": "csrf_validation_failed", "error": "CSRF validation failed"})
    );
}

#[tokio::test]
async fn json_body_errors_are_422_in_the_family_envelope() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    for bad in ["{", "[]", "{\"n\": \"x\"}", "{\"n\": -1}", "null"] {
        let r = s
            .http
            .post(s.url("/api/probe/typed"))
            .header("content-type", "application/json")
            .body(bad)
            .send()
            .await
            .unwrap();
        let (st, body) = companiond_core::testkit::split(r).await;
        assert_eq!(st, 422, "{bad}");
        assert_eq!(body["ok"], false);
        assert_eq!(body["reason"], "invalid_body");
    }
    assert_eq!(s.post("/api/probe/typed", json!({"n": 3})).await.0, 200);
}

#[tokio::test]
async fn loopback_guard_judges_the_tcp_peer() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    assert_eq!(s.post("/api/probe/local", json!({})).await.0, 200);
    for peer in [
        "192.0.2.7:5555",
        "[2001:db8::1]:80",
        "[::ffff:10.1.2.3]:9",
        "0.0.0.0:1",
    ] {
        let remote = TestServer::start_with(
            &[companiond_core::server::Family::routes(probe)],
            TestOptions {
                fake_peer: Some(peer.parse().unwrap()),
                ..Default::default()
            },
        )
        .await;
        let r = remote
            .http
            .post(remote.url("/api/probe/local"))
            .header("X-Forwarded-For", "127.0.0.1")
            .header("Forwarded", "for=127.0.0.1")
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{peer}");
    }
    let mapped = TestServer::start_with(
        &[companiond_core::server::Family::routes(probe)],
        TestOptions {
            fake_peer: Some("[::ffff:127.0.0.1]:9".parse().unwrap()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(mapped.post("/api/probe/local", json!({})).await.0, 200);
}

#[tokio::test]
async fn characters_crud_and_name_rules() {
    let s = TestServer::start(&[]).await;
    let (st, body) = s.get("/api/characters").await;
    assert_eq!(st, 200);
    assert_eq!(body["current"], "Companion");
    assert_eq!(body["characters"][0]["name"], "Companion");

    let (st, body) = s
        .post(
            "/api/characters/profile",
            json!({"name": "  Mika ", "voice": "soft"}),
        )
        .await;
    assert_eq!((st, body["name"].as_str()), (200, Some("Mika")));
    assert_eq!(
        s.post("/api/characters/profile", json!({"name": "Mika"}))
            .await
            .0,
        409
    );
    let (_, body) = s.get("/api/characters").await;
    assert_eq!(
        body["characters"][1],
        json!({"voice": "soft", "name": "Mika"})
    );
    assert!(
        s.state.sessions.get("Mika").is_some(),
        "a session manager exists from creation on"
    );

    for bad in [
        "a/b",
        "a\\b",
        "..",
        "x.",
        ".",
        "a.b",
        "CON",
        "nul",
        "COM1",
        "lpt3",
        "api",
        "static",
        "ws",
        "jukebox",
        "",
        "  ",
        "a<b",
        "a>b",
        "a:b",
        "a?b",
        "a*b",
        "a|b",
        "a\"b",
        "tab\tname",
        "zero\u{200b}width",
        "new\nline",
    ] {
        let (st, body) = s
            .post("/api/characters/profile", json!({"name": bad}))
            .await;
        assert_eq!(st, 400, "{bad:?} {body}");
        assert_eq!(body["success"], false);
        assert!(body["error_code"].is_string());
    }
    let long = "x".repeat(61);
    assert_eq!(
        s.post("/api/characters/profile", json!({"name": long}))
            .await
            .0,
        400
    );
    assert_eq!(
        s.post("/api/characters/profile", json!({"name": 5}))
            .await
            .0,
        400
    );
    assert_eq!(s.post("/api/characters/profile", json!({})).await.0, 400);

    let (st, body) = s
        .post("/api/characters/current", json!({"name": "Mika"}))
        .await;
    assert_eq!((st, body["current"].as_str()), (200, Some("Mika")));
    assert_eq!(
        s.post("/api/characters/current", json!({"name": "Nobody"}))
            .await
            .0,
        404
    );
    assert_eq!(
        s.send(Method::DELETE, "/api/characters/profile/Nobody", None)
            .await
            .0,
        404
    );
    assert_eq!(
        s.send(Method::DELETE, "/api/characters/profile/Mika", None)
            .await
            .0,
        200
    );
    let (_, body) = s.get("/api/characters").await;
    assert_eq!(
        body["current"], "Companion",
        "deleting the current character selects another"
    );
    let (st, body) = s
        .send(Method::DELETE, "/api/characters/profile/Companion", None)
        .await;
    assert_eq!(st, 409, "the last character is kept: {body}");

    // Persisted atomically in the characters file.
    let file: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("config/characters.json")).unwrap())
            .unwrap();
    assert_eq!(file["current"], "Companion");
    assert!(file["characters"].get("Mika").is_none());
}

#[tokio::test]
async fn corrupt_characters_file_is_kept_aside_with_a_notice() {
    let s = TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("config")).unwrap();
                std::fs::write(data.join("config/characters.json"), b"{\"current\": ").unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let (st, body) = s.get("/api/characters").await;
    assert_eq!(st, 200);
    assert_eq!(body["current"], "Companion");
    let kept: Vec<_> = std::fs::read_dir(s.data.join("config"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("characters.json.corrupt-")
        })
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(std::fs::read(kept[0].path()).unwrap(), b"{\"current\": ");
    assert_eq!(s.state.notices.peek().0.len(), 1);
}

#[tokio::test]
async fn static_files_are_contained() {
    let s = TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(|data, bundle| {
                std::fs::create_dir_all(bundle.join("static/css")).unwrap();
                std::fs::write(bundle.join("static/css/app.css"), b"body{}").unwrap();
                std::fs::write(bundle.join("secret.txt"), b"TOPSECRET").unwrap();
                std::fs::create_dir_all(data.join("user_mmd/m")).unwrap();
                std::fs::write(data.join("user_mmd/m/a.json"), b"{}").unwrap();
                std::fs::create_dir_all(data.join("user_pngtuber/p")).unwrap();
                std::fs::write(data.join("user_pngtuber/p/model.json"), b"{\"x\":1}").unwrap();
                std::fs::write(data.join("config.secret"), b"TOPSECRET").unwrap();
                #[cfg(unix)]
                std::os::unix::fs::symlink(
                    bundle.join("secret.txt"),
                    bundle.join("static/link.txt"),
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let r = s
        .http
        .get(s.url("/static/css/app.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/css");
    assert_eq!(
        s.http
            .get(s.url("/user_mmd/m/a.json"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = s
        .http
        .get(s.url("/user_pngtuber/p/model.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/json");
    for probe in [
        "/static/../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/..%2fsecret.txt",
        "/static/%2e%2e%2fsecret.txt",
        "/static/..%5csecret.txt",
        "/static/link.txt",
        "/static/css",
        "/user_mmd/..%2f..%2fconfig.secret",
        "/user_pngtuber/%2e%2e/config.secret",
        "/static/%00",
        "/static/C:%5csecret.txt",
    ] {
        let r = s.http.get(s.url(probe)).send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert!(!text.contains("TOPSECRET"), "{probe}");
        assert_eq!(status, 404, "{probe}");
    }
}

#[tokio::test]
async fn openapi_lists_registered_routes() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["paths"]["/api/characters"]["get"].is_object());
    assert!(
        doc["paths"]["/api/characters/profile/{name}"]["delete"]["parameters"][0]["name"] == "name"
    );
    assert!(doc["paths"]["/api/probe/csrf"]["post"].is_object());
}

async fn next_frame<S>(ws: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("frame in time")
            .unwrap()
            .unwrap();
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).unwrap();
        }
    }
}

#[tokio::test]
async fn chat_without_provider_answers_an_error_frame_and_stays_open() {
    let s = TestServer::start(&[]).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url("/ws/Companion"))
        .await
        .unwrap();
    assert_eq!(next_frame(&mut ws).await["type"], "session_started");
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

    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url("/ws/Companion"))
        .await
        .unwrap();
    next_frame(&mut ws).await;
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
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url("/ws/Companion"))
        .await
        .unwrap();
    next_frame(&mut ws).await;
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

#[tokio::test]
async fn workshop_files_are_served_when_configured() {
    let s = TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("../workshop/123/model")).unwrap();
                std::fs::write(data.join("../workshop/123/model/m.json"), b"{}").unwrap();
                std::fs::write(data.join("../outside.txt"), b"TOPSECRET").unwrap();
            })),
            edit: Some(Box::new(|o| {
                o.workshop_dir = Some(o.data_dir.join("../workshop"))
            })),
            ..Default::default()
        },
    )
    .await;
    let r = s
        .http
        .get(s.url("/workshop/123/model/m.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for probe in [
        "/workshop/..%2foutside.txt",
        "/workshop/%2e%2e/outside.txt",
        "/workshop/123/missing",
    ] {
        assert_eq!(
            s.http.get(s.url(probe)).send().await.unwrap().status(),
            404,
            "{probe}"
        );
    }
    let plain = TestServer::start(&[]).await;
    assert_eq!(
        plain
            .http
            .get(plain.url("/workshop/123/model/m.json"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test]
async fn unread_request_bodies_are_discarded_and_the_connection_kept() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    // The loopback probe never reads its body. After its answer the rest of the
    // body has been discarded, so the same keep-alive connection serves the next
    // request (without that, hyper closes it and a client still sending sees a reset).
    let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let body = vec![b'x'; 512 * 1024];
    for _ in 0..3 {
        let head = format!(
            "POST /api/probe/local HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&body).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(
            !text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    }
}

/// One chat turn on a fresh socket; returns the streamed reply.
async fn one_turn(s: &TestServer, text: &str) -> String {
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url("/ws/Companion"))
        .await
        .unwrap();
    assert_eq!(next_frame(&mut ws).await["type"], "session_started");
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
fn conversation(req: &Value) -> Vec<(String, String)> {
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

//! End-to-end tests of `/api/tools` and of tool calls by the model, over real
//! HTTP and the chat WebSocket, with a loopback OpenAI-compatible model server
//! (`MockLlm`) and a real loopback plugin callback server.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use companiond_core::testkit::{MockLlm, MockReply, TestOptions, TestServer, Upstream};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

// ------------------------------------------------------------------ helpers

async fn server() -> TestServer {
    TestServer::start(&[companiond_tools::FAMILY]).await
}

async fn server_with_llm() -> (TestServer, MockLlm) {
    let s = server().await;
    let llm = MockLlm::start("default reply").await;
    s.configure_llm(&llm.base()).await;
    (s, llm)
}

/// The plugin: a real loopback callback server with one route per outcome.
async fn plugin() -> Upstream {
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
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    port
}

async fn connect(s: &TestServer, role: &str) -> Ws {
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url(&format!("/ws/{role}")))
        .await
        .expect("ws connect");
    assert_eq!(next_frame(&mut ws).await["type"], "session_started");
    ws
}

async fn next_frame(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(15), ws.next())
            .await
            .expect("frame in time")
            .expect("socket open")
            .expect("frame");
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).expect("JSON frame");
        }
    }
}

/// One chat turn: every frame up to and including `turn_end`.
async fn turn(ws: &mut Ws, text: &str) -> Vec<Value> {
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

fn of_type<'a>(frames: &'a [Value], t: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == t).collect()
}

fn spoken(frames: &[Value]) -> String {
    of_type(frames, "assistant_delta")
        .iter()
        .filter_map(|f| f["text"].as_str())
        .collect()
}

/// Names of the function tools offered in a model request.
fn offered(req: &Value) -> Vec<String> {
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
fn tool_messages(req: &Value) -> Vec<Value> {
    req["messages"]
        .as_array()
        .map(|a| a.iter().filter(|m| m["role"] == "tool").cloned().collect())
        .unwrap_or_default()
}

async fn register(s: &TestServer, body: Value) -> (u16, Value) {
    s.post("/api/tools/register", body).await
}

async fn listed(s: &TestServer, role: &str) -> Vec<String> {
    let (st, b) = s.get(&format!("/api/tools?role={role}")).await;
    assert_eq!(st, 200, "{b}");
    b["tools_by_role"][role]
        .as_array()
        .expect("role listed")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

async fn create_character(s: &TestServer, name: &str) {
    let (st, b) = s
        .post("/api/characters/profile", json!({"name": name}))
        .await;
    assert_eq!(st, 200, "{b}");
}

fn sorted(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

// ------------------------------------------------------------------ full turn

#[tokio::test]
async fn model_calls_a_registered_tool_and_answers_with_its_output() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let params =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let (st, b) = register(
        &s,
        json!({
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": params,
            "callback_url": format!("{}/weather", plug.base),
            "source": "plugin:weather",
        }),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["ok"], true);
    assert_eq!(b["registered"], "get_weather");
    assert_eq!(b["affected_roles"], json!(["Companion"]));
    assert_eq!(b["failed_roles"], json!([]));

    let raw_args = r#"{"city": "Paris"}"#;
    llm.push(MockReply::ToolCalls(vec![(
        "call_1".into(),
        "get_weather".into(),
        raw_args.into(),
    )]));
    llm.push(MockReply::Text("It is 21 degrees in Paris.".into()));

    let mut ws = connect(&s, "Companion").await;
    let frames = turn(&mut ws, "What's the weather in Paris?").await;

    let calls = of_type(&frames, "tool_call");
    assert_eq!(calls.len(), 1, "{frames:?}");
    assert_eq!(calls[0]["name"], "get_weather");
    assert_eq!(calls[0]["call_id"], "call_1");
    let results = of_type(&frames, "tool_result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["is_error"], false);
    assert_eq!(spoken(&frames), "It is 21 degrees in Paris.");
    assert!(of_type(&frames, "error").is_empty(), "{frames:?}");

    // The callback got exactly the documented body.
    let cb = plug.requests_to("/weather");
    assert_eq!(cb.len(), 1);
    let body = cb[0].json();
    assert_eq!(body["name"], "get_weather");
    assert_eq!(body["arguments"], json!({"city": "Paris"}));
    assert_eq!(body["call_id"], "call_1");
    assert_eq!(body["raw_arguments"], raw_args);

    // The model was offered the tool with its definition, then got the output back.
    let reqs = llm.chat_requests();
    assert_eq!(reqs.len(), 2);
    let tools = reqs[0]["tools"].as_array().expect("tools offered");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["function"]["name"], "get_weather");
    assert_eq!(
        tools[0]["function"]["description"],
        "Current weather of a city"
    );
    assert_eq!(tools[0]["function"]["parameters"], params);
    let tm = tool_messages(&reqs[1]);
    assert_eq!(tm.len(), 1, "{}", reqs[1]);
    assert_eq!(tm[0]["tool_call_id"], "call_1");
    let content: Value =
        serde_json::from_str(tm[0]["content"].as_str().expect("string content")).expect("JSON");
    assert_eq!(content, json!({"city": "Paris", "temp_c": 21}));
    // The assistant message with the call precedes the tool message.
    let msgs = reqs[1]["messages"].as_array().expect("messages");
    let asst = msgs
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .expect("assistant tool-call message");
    assert_eq!(asst["tool_calls"][0]["id"], "call_1");
    assert_eq!(asst["tool_calls"][0]["function"]["arguments"], raw_args);
}

#[tokio::test]
async fn registrations_reach_an_already_open_session() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let mut ws = connect(&s, "Companion").await;

    turn(&mut ws, "hello").await;
    assert!(llm.chat_requests()[0].get("tools").is_none());

    let url = format!("{}/echo", plug.base);
    let (st, _) = register(
        &s,
        json!({"name": "echo", "description": "v1", "callback_url": url}),
    )
    .await;
    assert_eq!(st, 200);
    turn(&mut ws, "again").await;
    let r = &llm.chat_requests()[1];
    assert_eq!(offered(r), vec!["echo"]);
    assert_eq!(r["tools"][0]["function"]["description"], "v1");
    // The default parameters are the empty object schema.
    assert_eq!(
        r["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );

    // Same name replaces (one definition, new description).
    let (st, _) = register(
        &s,
        json!({"name": "echo", "description": "v2", "callback_url": url}),
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = register(&s, json!({"name": "other", "callback_url": url})).await;
    assert_eq!(st, 200);
    turn(&mut ws, "third").await;
    let r = &llm.chat_requests()[2];
    assert_eq!(offered(r), vec!["echo", "other"]);
    assert_eq!(r["tools"][0]["function"]["description"], "v2");

    let (st, b) = s
        .post("/api/tools/unregister", json!({"name": "echo"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], true);
    assert_eq!(b["ok"], true);
    assert_eq!(b["affected_roles"], json!(["Companion"]));
    turn(&mut ws, "fourth").await;
    assert_eq!(offered(&llm.chat_requests()[3]), vec!["other"]);

    let (st, b) = s
        .post("/api/tools/clear", json!({"source": "external"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], 1);
    turn(&mut ws, "fifth").await;
    assert!(llm.chat_requests()[4].get("tools").is_none());

    // A tool the model calls that is not registered (any more) is a tool error.
    llm.push(MockReply::ToolCalls(vec![(
        "c9".into(),
        "echo".into(),
        "{}".into(),
    )]));
    llm.push(MockReply::Text("ok".into()));
    let frames = turn(&mut ws, "sixth").await;
    assert_eq!(of_type(&frames, "tool_result")[0]["is_error"], true);
    assert!(plug.requests_to("/echo").is_empty());
}

// ------------------------------------------------------------------ dispatch outcomes

#[tokio::test]
async fn each_dispatch_outcome_reaches_the_model() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let dead = closed_port();
    let tools = [
        ("is_error", format!("{}/is_error", plug.base), 30.0),
        ("http500", format!("{}/http500", plug.base), 30.0),
        ("text", format!("{}/text", plug.base), 30.0),
        ("slow", format!("{}/slow", plug.base), 0.3),
        ("refused", format!("http://127.0.0.1:{dead}/cb"), 30.0),
        ("echo", format!("{}/echo", plug.base), 30.0),
    ];
    for (name, url, timeout) in &tools {
        let (st, b) = register(
            &s,
            json!({"name": name, "callback_url": url, "timeout_seconds": timeout}),
        )
        .await;
        assert_eq!(st, 200, "{b}");
    }
    let mut ws = connect(&s, "Companion").await;

    // (tool, arguments, expected is_error, check on the tool message content)
    type Check = fn(&str) -> bool;
    let cases: [(&str, &str, bool, Check); 6] = [
        ("is_error", "{}", true, |c| c.contains("city not found")),
        ("http500", "{}", true, |c| {
            c.contains("500") && c.contains("boom from plugin")
        }),
        ("text", "{}", false, |c| c == "plain words, not JSON"),
        ("slow", "{}", true, |c| c.contains("timed out")),
        ("refused", "{}", true, |c| c.contains("tool error")),
        // Non-object arguments are wrapped; the callback sees them as {value}.
        ("echo", "[1,2]", false, |c| {
            serde_json::from_str::<Value>(c).is_ok_and(|v| {
                v["arguments"] == json!({"value": [1, 2]}) && v["raw_arguments"] == "[1,2]"
            })
        }),
    ];
    for (i, (name, args, is_error, check)) in cases.iter().enumerate() {
        let call_id = format!("call_{i}");
        llm.push(MockReply::ToolCalls(vec![(
            call_id.clone(),
            name.to_string(),
            args.to_string(),
        )]));
        llm.push(MockReply::Text(format!("after {name}")));
        let started = Instant::now();
        let frames = turn(&mut ws, &format!("use {name}")).await;
        let r = of_type(&frames, "tool_result");
        assert_eq!(r.len(), 1, "{name}: {frames:?}");
        assert_eq!(r[0]["is_error"], *is_error, "{name}");
        assert_eq!(r[0]["call_id"], call_id.as_str());
        // The model continued the turn with the result.
        assert_eq!(spoken(&frames), format!("after {name}"), "{name}");
        let reqs = llm.chat_requests();
        let last = reqs.last().expect("request");
        let tm = tool_messages(last);
        let msg = tm
            .iter()
            .find(|m| m["tool_call_id"] == call_id.as_str())
            .expect("tool message for this call");
        let content = msg["content"].as_str().expect("content");
        assert!(
            check(content),
            "{name}: unexpected tool content {content:?}"
        );
        if *name == "slow" {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "the tool timeout was not applied"
            );
        }
    }
    // Nothing above is a plugin source: no tool was evicted.
    assert_eq!(listed(&s, "Companion").await.len(), 6);
}

// ------------------------------------------------------------------ eviction

/// Serve a tiny callback on a fixed loopback port until the returned sender fires.
async fn serve_on(
    port: u16,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("rebind port");
    let app = Router::new().route(
        "/cb",
        post(|| async {
            let mut r = Json(json!({"output": "fine"})).into_response();
            r.headers_mut()
                .insert("connection", HeaderValue::from_static("close"));
            r
        }),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await;
    });
    (tx, h)
}

/// One turn in which the model calls `tool` `n` times; the is_error flags.
async fn call_n(ws: &mut Ws, llm: &MockLlm, tool: &str, n: usize) -> Vec<bool> {
    let calls = (0..n)
        .map(|i| (format!("{tool}_{i}"), tool.to_string(), "{}".to_string()))
        .collect();
    llm.push(MockReply::ToolCalls(calls));
    llm.push(MockReply::Text("done".into()));
    let frames = turn(ws, "go").await;
    of_type(&frames, "tool_result")
        .iter()
        .map(|f| f["is_error"].as_bool().unwrap_or(false))
        .collect()
}

#[tokio::test]
async fn plugin_origin_is_evicted_after_exactly_three_connection_failures() {
    let (s, llm) = server_with_llm().await;
    create_character(&s, "Alice").await;
    let plug = plugin().await;
    let port = closed_port();
    let origin = format!("http://127.0.0.1:{port}");
    // Two tools of the plugin at the flaky origin (every role), one at a live origin.
    for name in ["flaky_a", "flaky_b"] {
        let (st, b) = register(
            &s,
            json!({"name": name, "callback_url": format!("{origin}/cb"), "source": "plugin:p1"}),
        )
        .await;
        assert_eq!(st, 200, "{b}");
        assert_eq!(sorted(&b["affected_roles"]), vec!["Alice", "Companion"]);
    }
    let (st, _) = register(
        &s,
        json!({"name": "steady", "callback_url": format!("{}/echo", plug.base), "source": "plugin:p1"}),
    )
    .await;
    assert_eq!(st, 200);
    let mut ws = connect(&s, "Companion").await;

    // Two failures, then a success on the same origin resets the count.
    assert_eq!(call_n(&mut ws, &llm, "flaky_a", 2).await, vec![true, true]);
    assert_eq!(s.state.tools.failure_count(&origin), 2);
    let (stop, handle) = serve_on(port).await;
    assert_eq!(call_n(&mut ws, &llm, "flaky_b", 1).await, vec![false]);
    assert_eq!(s.state.tools.failure_count(&origin), 0);
    let _ = stop.send(());
    let _ = handle.await;

    // Two more failures: still registered everywhere.
    assert_eq!(call_n(&mut ws, &llm, "flaky_a", 2).await, vec![true, true]);
    assert_eq!(s.state.tools.failure_count(&origin), 2);
    assert_eq!(
        listed(&s, "Companion").await,
        vec!["flaky_a", "flaky_b", "steady"]
    );
    assert_eq!(
        listed(&s, "Alice").await,
        vec!["flaky_a", "flaky_b", "steady"]
    );

    // The third consecutive failure evicts every tool of that origin from every role.
    assert_eq!(call_n(&mut ws, &llm, "flaky_b", 1).await, vec![true]);
    assert_eq!(listed(&s, "Companion").await, vec!["steady"]);
    assert_eq!(listed(&s, "Alice").await, vec!["steady"]);
    assert_eq!(s.state.tools.failure_count(&origin), 0);

    // The next model request no longer offers them.
    turn(&mut ws, "after eviction").await;
    let last = llm.chat_requests().last().cloned().expect("request");
    assert_eq!(offered(&last), vec!["steady"]);
}

#[tokio::test]
async fn timeouts_http_errors_and_is_error_replies_do_not_evict() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let dead = closed_port();
    for (name, path, timeout) in [
        ("slow", "/slow", 0.2),
        ("http500", "/http500", 30.0),
        ("is_error", "/is_error", 30.0),
    ] {
        let (st, _) = register(
            &s,
            json!({"name": name, "callback_url": format!("{}{path}", plug.base),
                   "source": "plugin:p2", "timeout_seconds": timeout}),
        )
        .await;
        assert_eq!(st, 200);
    }
    // A non-plugin source at a refused origin is never evicted either.
    let (st, _) = register(
        &s,
        json!({"name": "ext_dead", "callback_url": format!("http://127.0.0.1:{dead}/cb"), "source": "external"}),
    )
    .await;
    assert_eq!(st, 200);
    let mut ws = connect(&s, "Companion").await;
    for tool in ["slow", "http500", "is_error", "ext_dead"] {
        assert_eq!(
            call_n(&mut ws, &llm, tool, 4).await,
            vec![true; 4],
            "{tool}"
        );
    }
    assert_eq!(s.state.tools.failure_count(&plug.base), 0);
    assert_eq!(
        listed(&s, "Companion").await,
        vec!["slow", "http500", "is_error", "ext_dead"]
    );
    // All four slow calls happened, each cut at its own timeout.
    assert_eq!(plug.requests_to("/slow").len(), 4);
}

// ------------------------------------------------------------------ loopback guard

#[tokio::test]
async fn non_loopback_peers_get_403_on_every_route() {
    let s = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            fake_peer: Some("192.0.2.7:5555".parse::<SocketAddr>().expect("addr")),
            ..Default::default()
        },
    )
    .await;
    let good = json!({"name": "t", "callback_url": "http://127.0.0.1:9/cb"});
    for (path, body) in [
        ("/api/tools/register", good.clone()),
        ("/api/tools/register", json!({"name": ""})),
        ("/api/tools/unregister", json!({"name": "t"})),
        ("/api/tools/clear", json!({"source": "external"})),
    ] {
        let (st, b) = s.post(path, body).await;
        assert_eq!(st, 403, "{path}");
        assert!(b["detail"].is_string(), "{b}");
    }
    for path in ["/api/tools", "/api/tools?role=Companion"] {
        let (st, _) = s.get(path).await;
        assert_eq!(st, 403, "{path}");
    }
    // A header cannot make the peer local.
    let r = s
        .http
        .get(s.url("/api/tools"))
        .header("X-Forwarded-For", "127.0.0.1")
        .header("Host", "127.0.0.1")
        .send()
        .await
        .expect("request");
    assert_eq!(r.status().as_u16(), 403);
    let mgr = s.state.sessions.get("Companion").expect("manager");
    assert!(mgr.tools().is_empty());

    // An IPv4-mapped loopback peer is loopback.
    let mapped = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            fake_peer: Some(
                "[::ffff:127.0.0.1]:5555"
                    .parse::<SocketAddr>()
                    .expect("addr"),
            ),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = mapped.post("/api/tools/register", good).await;
    assert_eq!(st, 200, "{b}");
}

// ------------------------------------------------------------------ validation

#[tokio::test]
async fn schema_errors_are_422_and_change_nothing() {
    let s = server().await;
    let url = "http://127.0.0.1:9/cb";
    let long = "n".repeat(65);
    let bad_register = [
        json!({"callback_url": url}),
        json!({"name": "", "callback_url": url}),
        json!({"name": long, "callback_url": url}),
        json!({"name": 5, "callback_url": url}),
        json!({"name": null, "callback_url": url}),
        json!({"name": "t"}),
        json!({"name": "t", "callback_url": ""}),
        json!({"name": "t", "callback_url": 7}),
        json!({"name": "t", "callback_url": "http://10.0.0.1/"}),
        json!({"name": "t", "callback_url": "http://example.com/"}),
        json!({"name": "t", "callback_url": "ftp://127.0.0.1/"}),
        json!({"name": "t", "callback_url": "http://localhost.:8080/"}),
        json!({"name": "t", "callback_url": "http://[::ffff:10.0.0.1]/"}),
        json!({"name": "t", "callback_url": "http://127.0.0.1@example.com/"}),
        json!({"name": "t", "callback_url": "not a url"}),
        json!({"name": "t", "callback_url": url, "parameters": "x"}),
        json!({"name": "t", "callback_url": url, "parameters": [1]}),
        json!({"name": "t", "callback_url": url, "parameters": {"type": "string"}}),
        json!({"name": "t", "callback_url": url, "parameters": {"properties": []}}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": 0}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": -1}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": 300.5}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": "30"}),
        json!({"name": "t", "callback_url": url, "timeout_seconds": true}),
        json!({"name": "t", "callback_url": url, "role": 5}),
        json!({"name": "t", "callback_url": url, "role": ["Companion"]}),
        json!({"name": "t", "callback_url": url, "description": 1}),
        json!({"name": "t", "callback_url": url, "source": {}}),
        json!(["name", "t"]),
    ];
    for body in &bad_register {
        let (st, b) = register(&s, body.clone()).await;
        assert_eq!(st, 422, "{body} -> {b}");
        assert!(b["detail"].is_string(), "{b}");
    }
    // Malformed JSON and an empty body.
    for raw in ["{not json", ""] {
        let r = s
            .http
            .post(s.url("/api/tools/register"))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .expect("request");
        assert_eq!(r.status().as_u16(), 422, "{raw:?}");
    }
    // Schema errors win over an unknown role.
    let (st, _) = register(
        &s,
        json!({"name": "", "callback_url": url, "role": "Nobody"}),
    )
    .await;
    assert_eq!(st, 422);

    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": long}),
        json!({"name": "t", "role": 1}),
    ] {
        let (st, b) = s.post("/api/tools/unregister", body.clone()).await;
        assert_eq!(st, 422, "{body} -> {b}");
    }
    for body in [
        json!({}),
        json!({"source": ""}),
        json!({"source": 3}),
        json!({"source": "x", "role": false}),
    ] {
        let (st, b) = s.post("/api/tools/clear", body.clone()).await;
        assert_eq!(st, 422, "{body} -> {b}");
    }
    assert!(listed(&s, "Companion").await.is_empty());

    // The boundaries and the loopback forms are accepted.
    let ok = [
        json!({"name": "n".repeat(64), "callback_url": url}),
        json!({"name": "猫".repeat(64), "callback_url": url}),
        json!({"name": "mapped", "callback_url": "http://[::ffff:127.0.0.1]/"}),
        json!({"name": "v6", "callback_url": "http://[::1]:8/x"}),
        json!({"name": "net8", "callback_url": "http://127.45.6.7:1/"}),
        json!({"name": "host", "callback_url": "https://LOCALHOST/cb"}),
        json!({"name": "max_timeout", "callback_url": url, "timeout_seconds": 300}),
        json!({"name": "tiny_timeout", "callback_url": url, "timeout_seconds": 0.001}),
        json!({"name": "nulls", "callback_url": url, "description": null, "parameters": null, "role": null, "timeout_seconds": null}),
    ];
    for body in &ok {
        let (st, b) = register(&s, body.clone()).await;
        assert_eq!(st, 200, "{body} -> {b}");
        assert_eq!(b["ok"], true);
    }
    assert_eq!(listed(&s, "Companion").await.len(), ok.len());
}

// ------------------------------------------------------------------ roles

#[tokio::test]
async fn role_targeting_listing_and_clear() {
    let s = server().await;
    create_character(&s, "Alice").await;
    create_character(&s, "Bob").await;
    let url = "http://127.0.0.1:9/cb";

    // role null: every character that exists now.
    let (st, b) = register(
        &s,
        json!({"name": "global", "callback_url": url, "source": "plugin:x", "description": "d"}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b["ok"], true);
    assert_eq!(
        sorted(&b["affected_roles"]),
        vec!["Alice", "Bob", "Companion"]
    );
    assert_eq!(b["failed_roles"], json!([]));
    // Empty-string role counts as null.
    let (st, b) = register(
        &s,
        json!({"name": "global2", "callback_url": url, "source": "plugin:x", "role": ""}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(
        sorted(&b["affected_roles"]),
        vec!["Alice", "Bob", "Companion"]
    );
    // One role.
    let (st, b) = register(
        &s,
        json!({"name": "alice_only", "callback_url": url, "role": "Alice"}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b["affected_roles"], json!(["Alice"]));

    // Unknown role: 404 on every route, nothing changes.
    let (st, b) = register(
        &s,
        json!({"name": "nope", "callback_url": url, "role": "Nobody"}),
    )
    .await;
    assert_eq!(st, 404);
    assert_eq!(b["detail"], "unknown role: Nobody");
    let (st, _) = s
        .post(
            "/api/tools/unregister",
            json!({"name": "global", "role": "Nobody"}),
        )
        .await;
    assert_eq!(st, 404);
    let (st, _) = s
        .post(
            "/api/tools/clear",
            json!({"source": "plugin:x", "role": "Nobody"}),
        )
        .await;
    assert_eq!(st, 404);
    let (st, _) = s.get("/api/tools?role=Nobody").await;
    assert_eq!(st, 404);

    // Listing: all roles, and one role.
    let (st, b) = s.get("/api/tools").await;
    assert_eq!(st, 200);
    assert_eq!(b["ok"], true);
    let by_role = b["tools_by_role"].as_object().expect("object");
    // The body written straight to bytes is the document the registry lists,
    // roles in character order.
    let expected: serde_json::Map<String, Value> = companiond_tools::registry::list(&s.state, None)
        .unwrap()
        .into_iter()
        .map(|(r, t)| (r, json!(t)))
        .collect();
    assert_eq!(by_role, &expected);
    assert_eq!(
        by_role.keys().collect::<Vec<_>>(),
        s.state.characters.names().iter().collect::<Vec<_>>()
    );
    let mut roles: Vec<&String> = by_role.keys().collect();
    roles.sort();
    assert_eq!(roles, vec!["Alice", "Bob", "Companion"]);
    assert_eq!(by_role["Alice"].as_array().map(Vec::len), Some(3));
    assert_eq!(by_role["Bob"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        by_role["Bob"][0],
        json!({"name": "global", "description": "d", "source": "plugin:x", "callback_url": url, "is_remote": true})
    );
    let (_, b) = s.get("/api/tools?role=Alice").await;
    assert_eq!(b["tools_by_role"].as_object().map(|m| m.len()), Some(1));
    assert_eq!(
        listed(&s, "Alice").await,
        vec!["global", "global2", "alice_only"]
    );

    // A character created after a null registration does not get it.
    create_character(&s, "Carol").await;
    assert!(listed(&s, "Carol").await.is_empty());

    // Unregister a global tool from one role only.
    let (st, b) = s
        .post(
            "/api/tools/unregister",
            json!({"name": "global", "role": "Bob"}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        b,
        json!({"ok": true, "removed": true, "name": "global", "affected_roles": ["Bob"], "failed_roles": []})
    );
    assert_eq!(listed(&s, "Bob").await, vec!["global2"]);
    assert_eq!(
        listed(&s, "Alice").await,
        vec!["global", "global2", "alice_only"]
    );
    // Unregister something absent.
    let (st, b) = s
        .post("/api/tools/unregister", json!({"name": "ghost"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], false);
    assert_eq!(b["ok"], true);
    assert_eq!(b["affected_roles"], json!([]));

    // Clear by source in one role, then everywhere.
    let (st, b) = s
        .post(
            "/api/tools/clear",
            json!({"source": "plugin:x", "role": "Alice"}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], 2);
    assert_eq!(b["affected_roles"], json!(["Alice"]));
    assert_eq!(listed(&s, "Alice").await, vec!["alice_only"]);
    let (st, b) = s
        .post("/api/tools/clear", json!({"source": "plugin:x"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], 3); // Companion: global, global2; Bob: global2.
    assert_eq!(sorted(&b["affected_roles"]), vec!["Bob", "Companion"]);
    assert_eq!(b["source"], "plugin:x");
    assert_eq!(listed(&s, "Alice").await, vec!["alice_only"]);
    let (_, b) = s
        .post("/api/tools/clear", json!({"source": "plugin:x"}))
        .await;
    assert_eq!(b["removed"], 0);
    assert_eq!(b["ok"], true);

    // A deleted character is an unknown role.
    let (st, _) = s
        .send(
            axum::http::Method::DELETE,
            "/api/characters/profile/Alice",
            None,
        )
        .await;
    assert_eq!(st, 200);
    let (st, _) = s.get("/api/tools?role=Alice").await;
    assert_eq!(st, 404);
}

#[tokio::test]
async fn no_role_accepting_gives_ok_false() {
    // A data dir whose characters file holds no character at all.
    let s = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("config")).expect("mkdir");
                std::fs::write(
                    data.join("config/characters.json"),
                    br#"{"current": "", "characters": {}}"#,
                )
                .expect("write");
            })),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = register(
        &s,
        json!({"name": "t", "callback_url": "http://127.0.0.1:9/"}),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["ok"], false);
    assert_eq!(b["registered"], "t");
    assert_eq!(b["affected_roles"], json!([]));
    assert_eq!(b["failed_roles"], json!([]));
    assert!(b["error"].is_string());
    let (st, b) = s.get("/api/tools").await;
    assert_eq!(st, 200);
    assert_eq!(b, json!({"ok": true, "tools_by_role": {}}));
}

#[tokio::test]
async fn routes_are_listed_and_roles_are_url_decoded() {
    let s = server().await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    for (path, method) in [
        ("/api/tools/register", "post"),
        ("/api/tools/unregister", "post"),
        ("/api/tools/clear", "post"),
        ("/api/tools", "get"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{path} {method}");
    }
    create_character(&s, "猫娘").await;
    create_character(&s, "Anna Lee").await;
    let (st, _) = register(
        &s,
        json!({"name": "t", "callback_url": "http://127.0.0.1:9/", "role": "猫娘"}),
    )
    .await;
    assert_eq!(st, 200);
    let (st, b) = s.get("/api/tools?role=%E7%8C%AB%E5%A8%98").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["tools_by_role"]["猫娘"][0]["name"], "t");
    let (st, b) = s.get("/api/tools?role=Anna+Lee").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["tools_by_role"]["Anna Lee"], json!([]));
    // An empty role parameter lists every role.
    let (st, b) = s.get("/api/tools?role=").await;
    assert_eq!(st, 200);
    assert_eq!(b["tools_by_role"].as_object().map(|m| m.len()), Some(3));
}

// ------------------------------------------------------------------ runtime state only

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

fn any_file_contains(dir: &Path, needle: &[u8]) -> bool {
    std::fs::read_dir(dir).expect("read_dir").any(|e| {
        let p = e.expect("entry").path();
        if p.is_dir() {
            any_file_contains(&p, needle)
        } else {
            std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        }
    })
}

#[tokio::test]
async fn registrations_are_not_kept_across_a_restart() {
    let s = server().await;
    create_character(&s, "Alice").await;
    let (st, _) = register(
        &s,
        json!({"name": "ephemeral_tool_xyz", "callback_url": "http://127.0.0.1:9/cb"}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(listed(&s, "Alice").await, vec!["ephemeral_tool_xyz"]);
    assert!(!any_file_contains(&s.data, b"ephemeral_tool_xyz"));

    // "Restart": a new server over a copy of the same data directory.
    let data = s.data.clone();
    s.stop();
    let s2 = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            prepare: Some(Box::new(move |new_data, _| copy_dir(&data, new_data))),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = s2.get("/api/tools").await;
    assert_eq!(st, 200);
    let by_role = b["tools_by_role"].as_object().expect("object");
    assert!(by_role.contains_key("Alice"), "{b}");
    assert!(by_role.values().all(|v| v == &json!([])), "{b}");
}

// ------------------------------------------------------------------ measurement

/// Dispatch overhead against a local callback server. Run with
/// `cargo test -p companiond-tools --release --test tools -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_dispatch() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let url = format!("{}/echo", plug.base);
    let (st, _) = register(&s, json!({"name": "echo", "callback_url": url})).await;
    assert_eq!(st, 200);
    let tool = s
        .state
        .sessions
        .get("Companion")
        .and_then(|m| m.tool("echo"))
        .expect("tool");

    // 1. ToolHub::dispatch alone: callback request + reply handling.
    let n = 2000;
    for _ in 0..50 {
        s.state
            .tools
            .dispatch(&s.state.sessions, &tool, "w", "{}")
            .await;
    }
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        let r = s
            .state
            .tools
            .dispatch(&s.state.sessions, &tool, &format!("c{i}"), r#"{"x":1}"#)
            .await;
        assert!(!r.is_error);
        lat.push(t.elapsed());
    }
    let total = t0.elapsed();
    lat.sort();
    println!(
        "dispatch: n={n} mean={:?} p50={:?} p99={:?} ({:.0}/s)",
        total / n as u32,
        lat[n / 2],
        lat[n * 99 / 100],
        n as f64 / total.as_secs_f64()
    );

    // 2. Whole WebSocket turns with and without one tool call.
    let mut ws = connect(&s, "Companion").await;
    let turns = 200;
    let t0 = Instant::now();
    for _ in 0..turns {
        llm.push(MockReply::Text("plain".into()));
        turn(&mut ws, "hi").await;
    }
    let plain = t0.elapsed() / turns;
    let t0 = Instant::now();
    for _ in 0..turns {
        llm.push(MockReply::ToolCalls(vec![(
            "c".into(),
            "echo".into(),
            "{}".into(),
        )]));
        llm.push(MockReply::Text("plain".into()));
        turn(&mut ws, "hi").await;
    }
    let with_tool = t0.elapsed() / turns;
    println!("turn without tool: {plain:?}; turn with one tool call: {with_tool:?}");
}

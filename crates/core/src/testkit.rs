//! Test support (feature `testkit`): an in-process server on a random loopback
//! port with temporary data and bundle dirs, and real loopback upstream servers
//! (an OpenAI-compatible model server, any custom axum router).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::options::Options;
use crate::server::{build_app, prepare_data_dir, Family};
use crate::state::AppState;

/// The CSRF token of test servers.
pub const CSRF: &str = "test-csrf-token";

/// Edits the options of a test server.
pub type EditOptions = Box<dyn FnOnce(&mut Options) + Send>;
/// Fills the data and bundle dirs of a test server.
pub type PrepareDirs = Box<dyn FnOnce(&Path, &Path) + Send>;

/// Options of [`TestServer::start_with`].
#[derive(Default)]
pub struct TestOptions {
    /// Pretend every request comes from this TCP peer (tests of the loopback guard).
    /// Only this test harness can install it; production code has no such switch.
    pub fake_peer: Option<SocketAddr>,
    /// Edit the options (workshop dir, cloud target, legacy roots ...).
    pub edit: Option<EditOptions>,
    /// Fill the data and bundle dirs before the server starts.
    pub prepare: Option<PrepareDirs>,
}

/// A running in-process server.
pub struct TestServer {
    pub base: String,
    pub addr: SocketAddr,
    pub state: AppState,
    pub data: PathBuf,
    pub bundle: PathBuf,
    pub http: reqwest::Client,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start(families: &[Family]) -> TestServer {
        Self::start_with(families, TestOptions::default()).await
    }

    /// A server whose data folder (and cloud-save target, inside it) is
    /// `data`, a folder the test made (a mounted disk, damaged files).
    pub async fn start_in(families: &[Family], data: &Path) -> TestServer {
        let d = data.to_path_buf();
        Self::start_with(
            families,
            TestOptions {
                edit: Some(Box::new(move |o| {
                    o.cloud = d.join("cloud").to_string_lossy().into_owned();
                    o.data_dir = d;
                })),
                ..TestOptions::default()
            },
        )
        .await
    }

    pub async fn start_with(families: &[Family], mut o: TestOptions) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let bundle = dir.path().join("bundle");
        std::fs::create_dir_all(bundle.join("static")).expect("bundle dir");
        std::fs::create_dir_all(&data).expect("data dir");
        if let Some(p) = o.prepare.take() {
            p(&data, &bundle);
        }
        let mut opts = Options {
            listen: "127.0.0.1:0".into(),
            data_dir: data.clone(),
            bundle_dir: bundle.clone(),
            workshop_dir: None,
            cloud: data.join("cloud").to_string_lossy().into_owned(),
            legacy_memory_roots: Vec::new(),
            csrf_token: CSRF.into(),
            allow_remote: false,
            allowed_hosts: Vec::new(),
            frontend_dir: None,
            local_model: None,
        };
        if let Some(e) = o.edit.take() {
            e(&mut opts);
        }
        prepare_data_dir(&opts).expect("data dir");
        let state = AppState::new(opts).expect("state");
        let mut app = build_app(&state, families);
        if let Some(peer) = o.fake_peer {
            app = app.layer(axum::middleware::map_request(
                move |mut req: Request| async move {
                    req.extensions_mut().insert(ConnectInfo(peer));
                    req
                },
            ));
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        state.set_ready(true);
        tokio::spawn(crate::server::serve(
            listener,
            app,
            state.clone(),
            shutdown.clone(),
        ));
        TestServer {
            base: format!("http://{addr}"),
            addr,
            state,
            data,
            bundle,
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
            shutdown,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{}", self.addr, path)
    }

    /// A request builder with the CSRF token and a loopback Origin.
    pub fn csrf(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .header("X-CSRF-Token", CSRF)
            .header("Origin", format!("http://127.0.0.1:{}", self.addr.port()))
    }

    /// GET and parse JSON (Null when the body is not JSON).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.url(path)).send().await.expect("request");
        split(r).await
    }
    /// POST a JSON body without CSRF headers.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .expect("request");
        split(r).await
    }
    /// POST a JSON body with CSRF token and loopback Origin.
    pub async fn post_csrf(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .csrf(Method::POST, path)
            .json(&body)
            .send()
            .await
            .expect("request");
        split(r).await
    }
    /// Any method with a JSON body (or none).
    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut b = self.http.request(method, self.url(path));
        if let Some(v) = body {
            b = b.json(&v);
        }
        split(b.send().await.expect("request")).await
    }

    /// Point every model slot at `base` (an OpenAI-compatible `/v1` base URL).
    pub async fn configure_llm(&self, base: &str) {
        let mut cfg = json!({"enableCustomApi": true});
        for slot in crate::providers::Slot::ALL {
            let s = slot.as_str();
            cfg[format!("{s}ModelUrl")] = json!(base);
            cfg[format!("{s}ModelId")] = json!("test-model");
            cfg[format!("{s}ModelApiKey")] = json!("sk-test-key");
        }
        self.state
            .store
            .write(crate::layout::CORE_CONFIG, cfg)
            .await
            .expect("write core config");
    }

    /// Set the given fields of the core configuration (others are kept), as a
    /// saved setting would.
    pub async fn merge_core_config(&self, fields: Value) {
        let mut cfg: Value = self
            .state
            .store
            .read(crate::layout::CORE_CONFIG)
            .await
            .expect("read core config")
            .unwrap_or_else(|| json!({}));
        if let Some(f) = fields.as_object() {
            for (k, v) in f {
                cfg[k] = v.clone();
            }
        }
        self.state
            .store
            .write(crate::layout::CORE_CONFIG, cfg)
            .await
            .expect("write core config");
    }

    pub fn stop(&self) {
        self.shutdown.cancel();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Status and JSON body of a response.
pub async fn split(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let bytes = r.bytes().await.unwrap_or_default();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

// ------------------------------------------------------------------ chat socket

/// A client of the chat WebSocket (`/ws/{name}`).
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket frame as the client reads it.
pub use tokio_tungstenite::tungstenite::Message;

/// How long a test waits for an expected frame before it fails (a liveness
/// bound for a loaded machine, not a performance figure).
pub const FRAME_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

impl TestServer {
    /// Open the chat socket of `name`; nothing is read yet.
    pub async fn ws(&self, name: &str) -> Ws {
        let (ws, _) = tokio_tungstenite::connect_async(self.ws_url(&format!("/ws/{name}")))
            .await
            .expect("chat socket opens");
        ws
    }

    /// Open the chat socket of `name` and read its `session_started` frame.
    pub async fn chat(&self, name: &str) -> (Ws, Value) {
        let mut ws = self.ws(name).await;
        let first = next_frame(&mut ws).await;
        assert_eq!(first["type"], "session_started", "{first}");
        (ws, first)
    }
}

/// The next text frame as JSON (other frames are skipped); fails the test
/// when none arrives within [`FRAME_WAIT`] or the socket closes.
pub async fn next_frame<S>(ws: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    use futures::StreamExt as _;
    loop {
        let m = tokio::time::timeout(FRAME_WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("socket open")
            .expect("frame");
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).expect("JSON frame");
        }
    }
}

/// Every text frame of a turn, up to and including its `turn_end`.
pub async fn turn_frames<S>(ws: &mut S) -> Vec<Value>
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
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

/// The next text frame whose `type` is `kind` (other frames are skipped);
/// fails the test when none arrives within [`FRAME_WAIT`].
pub async fn next_of_type<S>(ws: &mut S, kind: &str) -> Value
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    tokio::time::timeout(FRAME_WAIT, async {
        loop {
            let f = next_frame(ws).await;
            if f["type"] == kind {
                return f;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind} frame in time"))
}

/// Whether nothing arrives on the socket within `ms` milliseconds.
pub async fn quiet<S>(ws: &mut S, ms: u64) -> bool
where
    S: futures::Stream + Unpin,
{
    use futures::StreamExt as _;
    tokio::time::timeout(std::time::Duration::from_millis(ms), ws.next())
        .await
        .is_err()
}

// ------------------------------------------------------------------ upstreams

/// A recorded upstream request.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// A real HTTP server on loopback running any axum router, recording requests.
pub struct Upstream {
    pub base: String,
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    shutdown: CancellationToken,
}

impl Upstream {
    pub async fn start(router: Router) -> Upstream {
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let rec = requests.clone();
        let app = router.layer(axum::middleware::from_fn(
            move |req: Request, next: axum::middleware::Next| {
                let rec = rec.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let bytes = axum::body::to_bytes(body, 64 * 1024 * 1024)
                        .await
                        .unwrap_or_default();
                    rec.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(Recorded {
                            method: parts.method.to_string(),
                            path: parts.uri.path().to_string(),
                            query: parts.uri.query().unwrap_or("").to_string(),
                            headers: parts.headers.clone(),
                            body: bytes.clone(),
                        });
                    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                        .await
                }
            },
        ));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind upstream");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let s = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { s.cancelled().await })
                .await;
        });
        Upstream {
            base: format!("http://{addr}"),
            addr,
            requests,
            shutdown,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    pub fn requests_to(&self, path_suffix: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.ends_with(path_suffix))
            .collect()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// One scripted model reply.
#[derive(Clone, Debug)]
pub enum MockReply {
    /// Assistant text.
    Text(String),
    /// Tool calls: (call id, function name, JSON arguments text).
    ToolCalls(Vec<(String, String, String)>),
    /// An HTTP error status with a body.
    Status(u16, String),
}

/// A loopback OpenAI-compatible model server (`/v1/chat/completions`,
/// `/v1/models`) answering scripted replies in order; when the script is
/// exhausted it answers `default_text`. Streams SSE when the request asks to.
/// Replies queued with [`MockLlm::push_matching`] answer only requests whose
/// body contains their needle (checked first, oldest first), so background
/// callers (memory extraction) and the chat can share one server.
pub struct MockLlm {
    pub upstream: Upstream,
    script: Arc<Mutex<VecDeque<MockReply>>>,
    matching: Arc<Mutex<Vec<(String, MockReply)>>>,
}

#[derive(Clone)]
struct MockState {
    script: Arc<Mutex<VecDeque<MockReply>>>,
    matching: Arc<Mutex<Vec<(String, MockReply)>>>,
    default_text: String,
}

impl MockLlm {
    pub async fn start(default_text: &str) -> MockLlm {
        let models = Router::new().route(
            "/v1/models",
            any(|| async {
                axum::Json(
                    json!({"object": "list", "data": [{"id": "test-model", "object": "model"}]}),
                )
            }),
        );
        MockLlm::start_with(default_text, models).await
    }

    /// A mock that also serves `extra`'s routes (an Ollama `{base}/api/show`, a
    /// `/v1/models` of its own: [`MockLlm::start`] adds only that one).
    pub async fn start_with(default_text: &str, extra: Router) -> MockLlm {
        let script: Arc<Mutex<VecDeque<MockReply>>> = Arc::default();
        let matching: Arc<Mutex<Vec<(String, MockReply)>>> = Arc::default();
        let st = MockState {
            script: script.clone(),
            matching: matching.clone(),
            default_text: default_text.to_string(),
        };
        let router = Router::new()
            .route("/v1/chat/completions", any(mock_chat))
            .with_state(st)
            .merge(extra);
        MockLlm {
            upstream: Upstream::start(router).await,
            script,
            matching,
        }
    }

    /// The `/v1` base URL to configure.
    pub fn base(&self) -> String {
        format!("{}/v1", self.upstream.base)
    }

    pub fn push(&self, r: MockReply) {
        self.script
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(r);
    }

    /// Queue a reply for the next request whose raw body contains `needle`.
    pub fn push_matching(&self, needle: &str, r: MockReply) {
        self.matching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((needle.to_string(), r));
    }

    /// Bodies of the chat requests received so far.
    pub fn chat_requests(&self) -> Vec<Value> {
        self.upstream
            .requests_to("/chat/completions")
            .iter()
            .map(Recorded::json)
            .collect()
    }
}

async fn mock_chat(State(st): State<MockState>, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let matched = {
        let raw = String::from_utf8_lossy(&body);
        let mut m = st.matching.lock().unwrap_or_else(|e| e.into_inner());
        m.iter()
            .position(|(needle, _)| raw.contains(needle.as_str()))
            .map(|i| m.remove(i).1)
    };
    let reply = matched.unwrap_or_else(|| {
        st.script
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
            .unwrap_or_else(|| MockReply::Text(st.default_text.clone()))
    });
    let (text, calls) = match reply {
        MockReply::Status(code, body) => {
            return (
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                body,
            )
                .into_response()
        }
        MockReply::Text(t) => (t, Vec::new()),
        MockReply::ToolCalls(c) => (String::new(), c),
    };
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    if !stream {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
        let mut msg = json!({"role": "assistant", "content": text});
        if !tool_calls.is_empty() {
            msg["tool_calls"] = Value::Array(tool_calls);
        }
        return axum::Json(json!({
            "id": "cmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        }))
        .into_response();
    }
    let mut events = Vec::new();
    if !text.is_empty() {
        let mid = text
            .char_indices()
            .nth(text.chars().count() / 2)
            .map(|(i, _)| i)
            .unwrap_or(0);
        for part in [&text[..mid], &text[mid..]] {
            events.push(json!({"choices": [{"index": 0, "delta": {"content": part}, "finish_reason": null}]}));
        }
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let half = args.len() / 2;
        let (a, b) = if args.is_char_boundary(half) {
            args.split_at(half)
        } else {
            (args.as_str(), "")
        };
        events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": a}}]}}]}));
        events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": b}}]}}]}));
    }
    events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}));
    events.push(json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}));
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("data: {e}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], out).into_response()
}

/// Every file under `root` (relative path → bytes), the lock files, the
/// snapshots and crash leftovers aside.
pub fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read the folder").flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("read the folder")
                .to_string_lossy()
                .replace('\\', "/");
            if rel == "snapshots" || rel.starts_with("companiond.") {
                continue;
            }
            if e.file_type().expect("read the folder").is_dir() {
                stack.push(p);
            } else if !rel.ends_with(".tmp") && !rel.contains(".db-") {
                out.insert(rel, std::fs::read(&p).expect("read the folder"));
            }
        }
    }
    out
}

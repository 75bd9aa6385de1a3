//! The MCP client side: one supervisor task per configured server. It starts
//! the server (a child process over stdio, a Streamable HTTP session, or the
//! legacy HTTP+SSE transport of `crate::sse`),
//! lists its tools, publishes them into every character's tool registry with
//! `source` `mcp:<server>`, re-lists them on `notifications/tools/list_changed`,
//! and when the connection ends withdraws them and starts the server again
//! after a growing pause (1 s, 2 s, 4 s ... 60 s).
//!
//! The model's calls reach [`crate::Mcp`]'s `ToolBackend` implementation
//! (`companiond_core::tools::ToolBackend`), which sends `tools/call` with the
//! server's timeout and renders the result within its size cap.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use companiond_core::tools::RegisteredTool;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest, PingRequest, Tool,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::config::{ServerConfig, Transport};
use crate::sse::{EndSlot, SseTransport};

/// First pause before a restart; doubled after each failure up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest pause before a restart.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that lasted this long resets the pause to [`FIRST_BACKOFF`].
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// How often an HTTP server is pinged (a stdio server's end is seen at once).
const PING_EVERY: Duration = Duration::from_secs(5);
/// A ping not answered within this ends the connection (then the restart rules apply).
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of the child's standard error kept for the listing.
const STDERR_TAIL: usize = 2048;
/// Characters of an error message kept.
const ERROR_CHARS: usize = 500;

/// Variables of companiond's environment a child gets (nothing secret); the
/// rest of its environment is the server's `env`.
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "SYSTEMROOT",
    "WINDIR",
    "APPDATA",
    "LOCALAPPDATA",
    "USERPROFILE",
    "PATHEXT",
    "COMSPEC",
];

/// Where a server is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// `enabled: false`: not started.
    Disabled,
    /// Starting, initializing or listing its tools.
    Starting,
    /// Connected; its tools are offered.
    Running,
    /// Ended or failed; started again after `retry_in_ms`.
    Restarting,
    /// Removed or companiond is stopping.
    Stopped,
}

/// What the listing shows of a server's life.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Status {
    pub state: State,
    /// The last failure (start, protocol, call timeout ...), kept after a recovery.
    pub last_error: Option<String>,
    /// Restarts since the server was configured or enabled.
    pub restarts: u32,
    /// Pause before the next start while `restarting`.
    pub retry_in_ms: Option<u64>,
    /// Process id of a running stdio server.
    pub pid: Option<u32>,
    /// Tools not offered because another source holds the name (`name (held by source)`).
    pub clashes: Vec<String>,
    /// Tools the server lists that the allowlist hides.
    pub hidden_tools: Vec<String>,
    /// The end of the child's standard error (at most 2 KiB).
    pub stderr_tail: String,
}

impl Status {
    fn new(state: State) -> Status {
        Status {
            state,
            last_error: None,
            restarts: 0,
            retry_in_ms: None,
            pid: None,
            clashes: Vec::new(),
            hidden_tools: Vec::new(),
            stderr_tail: String::new(),
        }
    }
}

/// One configured server and its supervisor.
pub struct Server {
    pub name: String,
    pub config: ServerConfig,
    pub(crate) status: Mutex<Status>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// The end of a stdio child's standard error.
    stderr: Arc<Mutex<std::collections::VecDeque<u8>>>,
    /// The process group of a just started stdio child, handed to its supervisor.
    group: Mutex<Option<Group>>,
    /// The tools offered to the model (after the allowlist).
    pub(crate) offered: Mutex<Vec<RegisteredTool>>,
    /// Why the SSE stream of the current connection ended (the SSE transports).
    sse_end: EndSlot,
    /// The last connection of a `url` server fell back to the legacy HTTP+SSE transport.
    via_sse: AtomicBool,
    stop: CancellationToken,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Server {
    pub fn new(name: &str, config: ServerConfig) -> Arc<Server> {
        let state = if config.is_enabled() {
            State::Starting
        } else {
            State::Disabled
        };
        Arc::new(Server {
            name: name.to_string(),
            config,
            status: Mutex::new(Status::new(state)),
            peer: RwLock::default(),
            stderr: Arc::default(),
            group: Mutex::default(),
            offered: Mutex::default(),
            sse_end: EndSlot::default(),
            via_sse: AtomicBool::new(false),
            stop: CancellationToken::new(),
            task: Mutex::default(),
        })
    }

    /// The transport it speaks, as the listing shows it: `stdio`, `http`
    /// (Streamable HTTP) or `sse` (the legacy HTTP+SSE transport, configured or
    /// found by the probe).
    pub fn transport_name(&self) -> &'static str {
        match self.config.transport() {
            Transport::Stdio => "stdio",
            Transport::Sse => "sse",
            Transport::Http if self.via_sse.load(Ordering::Relaxed) => "sse",
            Transport::Http => "http",
        }
    }

    /// Why the SSE stream ended, if it did (taken: said once).
    fn take_sse_end(&self) -> Option<String> {
        self.sse_end
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// `mcp:<name>`, the registry source of its tools.
    pub fn source(&self) -> String {
        format!("mcp:{}", self.name)
    }

    pub fn status(&self) -> Status {
        let mut s = self
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = tail.as_slices();
        s.stderr_tail = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        s
    }

    fn with_status(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn note_error(&self, e: &str) {
        let e: String = e.chars().take(ERROR_CHARS).collect();
        tracing::warn!("MCP server {}: {e}", self.name);
        self.with_status(|s| s.last_error = Some(e));
    }

    fn set_state(&self, state: State) {
        self.with_status(|s| {
            s.state = state;
            if state != State::Restarting {
                s.retry_in_ms = None;
            }
            if state != State::Running {
                s.pid = None;
            }
        });
    }

    /// Kill the process group of the last stdio child, if any.
    fn end_group(&self) {
        self.group.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    pub(crate) fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_peer(&self, p: Option<Peer<RoleClient>>) {
        *self.peer.write().unwrap_or_else(|e| e.into_inner()) = p;
    }

    pub(crate) fn offered_names(&self) -> Vec<String> {
        self.offered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Start the supervisor (an enabled server only).
    pub(crate) fn spawn(self: &Arc<Self>, hub: Arc<dyn Publish>) {
        if !self.config.is_enabled() {
            return;
        }
        let me = self.clone();
        let handle = tokio::spawn(async move { supervise(&me, hub.as_ref()).await });
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }

    /// Stop the supervisor and the server; waits (up to 5 s) until it ended.
    pub(crate) async fn shutdown(&self) {
        self.stop.cancel();
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut t) = task {
            if tokio::time::timeout(Duration::from_secs(5), &mut t)
                .await
                .is_err()
            {
                t.abort();
            }
        }
        self.set_peer(None);
        self.set_state(State::Stopped);
    }

    /// Send `tools/call` and render the result for the model. Never fails.
    pub(crate) async fn call(&self, tool: &str, raw_arguments: &str) -> (String, bool) {
        let Some(peer) = self.peer() else {
            let state = self.status().state;
            return (
                format!(
                    "tool error: the MCP server {} is not running ({})",
                    self.name,
                    serde_json::to_value(state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
                true,
            );
        };
        let arguments = match parse_arguments(raw_arguments) {
            Ok(a) => a,
            Err(e) => return (format!("tool error: {e}"), true),
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let timeout = self.config.timeout();
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => {
                let e = format!(
                    "{tool} timed out after {} s",
                    trim_float(timeout.as_secs_f64())
                );
                self.note_error(&e);
                (
                    format!("tool error: {tool} on the MCP server {} {e}", self.name),
                    true,
                )
            }
            Ok(Err(e)) => {
                let e = format!("{tool} failed: {}", chain(&e));
                self.note_error(&e);
                (format!("tool error: MCP server {}: {e}", self.name), true)
            }
            Ok(Ok(r)) => render(&r, self.config.max_result_chars()),
        }
    }
}

/// What the supervisor needs of the family: publish / withdraw a server's tools.
pub(crate) trait Publish: Send + Sync {
    /// The server's `offered` tools changed: put them in the registries.
    fn publish(&self, server: &Server);
    /// Remove the server's tools from every registry.
    fn withdraw(&self, server: &Server);
}

pub(crate) fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The model's arguments as the JSON object `tools/call` wants.
fn parse_arguments(raw: &str) -> Result<serde_json::Map<String, Value>, String> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(serde_json::Map::new()),
        Ok(_) => Err("the arguments must be a JSON object".into()),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

/// A `tools/call` result as the model's tool message: the text parts, other
/// parts described, the structured content when there is no text; cut at `cap`
/// characters.
pub fn render(r: &CallToolResult, cap: usize) -> (String, bool) {
    let v = serde_json::to_value(r).unwrap_or(Value::Null);
    let mut parts: Vec<String> = Vec::new();
    for c in v["content"].as_array().into_iter().flatten() {
        let kind = c["type"].as_str().unwrap_or("");
        let part = match kind {
            "text" => c["text"].as_str().unwrap_or("").to_string(),
            "image" | "audio" => format!(
                "[{kind}: {}]",
                c["mimeType"].as_str().unwrap_or("unknown type")
            ),
            "resource" => match c["resource"]["text"].as_str() {
                Some(t) => t.to_string(),
                None => format!(
                    "[resource: {}]",
                    c["resource"]["uri"].as_str().unwrap_or("")
                ),
            },
            "resource_link" => format!("[resource link: {}]", c["uri"].as_str().unwrap_or("")),
            _ => c.to_string(),
        };
        parts.push(part);
    }
    if parts.is_empty() {
        if let Some(s) = v.get("structuredContent") {
            parts.push(s.to_string());
        }
    }
    let is_error = r.is_error == Some(true);
    let text = cap_chars(&parts.join("\n"), cap);
    if is_error {
        (format!("tool error: {text}"), true)
    } else {
        (text, false)
    }
}

/// `text` within `cap` characters; a cut text ends with a note of what was cut.
pub fn cap_chars(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!(
                "{}\n[result cut: {rest} more characters over the {cap}-character limit]",
                &text[..at]
            )
        }
    }
}

/// The client side's handler: tells the supervisor about `tools/list_changed`.
#[derive(Clone)]
struct Handler {
    changed: mpsc::UnboundedSender<()>,
    info: ClientConfig,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.changed.send(());
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}

fn client_info() -> ClientConfig {
    // Built from its wire form: the 2025-11-25 protocol (initialize, unscoped
    // list_changed notifications) that every current server speaks.
    serde_json::from_value(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "companiond", "version": env!("CARGO_PKG_VERSION")},
    }))
    .unwrap_or_default()
}

type Running = RunningService<RoleClient, Handler>;

/// Start the server and initialize the session, by `deadline`.
async fn connect(
    server: &Server,
    handler: Handler,
    deadline: tokio::time::Instant,
) -> Result<(Running, Option<u32>), String> {
    let cfg = &server.config;
    match cfg.transport() {
        Transport::Stdio => {
            let program = cfg.command.clone().unwrap_or_default();
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(&cfg.args).env_clear().kill_on_drop(true);
            // Its own process group, ended whole with the connection (see `Group`).
            #[cfg(unix)]
            cmd.process_group(0);
            for k in PASSED_ENV {
                if let Some(v) = std::env::var_os(k) {
                    cmd.env(k, v);
                }
            }
            cmd.envs(&cfg.env);
            if let Some(cwd) = &cfg.cwd {
                cmd.current_dir(cwd);
            }
            let (proc, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start {program}: {e}"))?;
            let pid = proc.id();
            *server.group.lock().unwrap_or_else(|e| e.into_inner()) = pid.map(Group);
            if let Some(mut err) = stderr {
                let stop = server.stop.clone();
                let tail = server.stderr.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let n = tokio::select! {
                            r = err.read(&mut buf) => match r { Ok(0) | Err(_) => break, Ok(n) => n },
                            _ = stop.cancelled() => break,
                        };
                        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                        t.extend(&buf[..n]);
                        let over = t.len().saturating_sub(STDERR_TAIL);
                        t.drain(..over);
                    }
                });
            }
            let running = handler
                .serve(proc)
                .await
                .map_err(|e| format!("initialize failed: {}", chain(&e)))?;
            Ok((running, pid))
        }
        Transport::Http => {
            let url = cfg.url.clone().unwrap_or_default();
            let mut headers = HashMap::new();
            for (k, v) in &cfg.headers {
                let name = axum::http::HeaderName::try_from(k.as_str())
                    .map_err(|e| format!("header {k}: {e}"))?;
                let value = axum::http::HeaderValue::try_from(v.as_str())
                    .map_err(|e| format!("header {k}: {e}"))?;
                headers.insert(name, value);
            }
            let client = http_client(&url, false)?;
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let first = match handler.clone().serve(transport).await {
                Ok(running) => {
                    server.via_sse.store(false, Ordering::Relaxed);
                    return Ok((running, None));
                }
                Err(e) => format!("initialize failed: {}", chain(&e)),
            };
            // The spec's backwards compatibility: an `initialize` POST answered
            // with a 4xx means a server of the legacy HTTP+SSE transport. rmcp's
            // error does not carry the status, so a POST of our own reads it (only
            // when rmcp failed: a working Streamable HTTP server costs nothing).
            let (parsed, sse_headers) = sse_target(cfg)?;
            let client = http_client(&url, true)?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let Some(status) = crate::sse::legacy_sign(&client, &parsed, &sse_headers, left).await
            else {
                return Err(first);
            };
            server.via_sse.store(true, Ordering::Relaxed);
            let running = serve_sse(server, handler, client, &parsed, sse_headers, deadline)
                .await
                .map_err(|e| {
                    format!(
                        "not a Streamable HTTP server (initialize answered HTTP {status}), \
                         and the legacy HTTP+SSE transport failed: {e}"
                    )
                })?;
            Ok((running, None))
        }
        Transport::Sse => {
            let url = cfg.url.clone().unwrap_or_default();
            let (parsed, headers) = sse_target(cfg)?;
            let client = http_client(&url, true)?;
            let running = serve_sse(server, handler, client, &parsed, headers, deadline).await?;
            Ok((running, None))
        }
    }
}

/// The URL and headers of an SSE server, checked.
fn sse_target(cfg: &ServerConfig) -> Result<(url::Url, reqwest013::header::HeaderMap), String> {
    let url =
        url::Url::parse(cfg.url.as_deref().unwrap_or_default()).map_err(|e| format!("url: {e}"))?;
    let mut headers = reqwest013::header::HeaderMap::new();
    for (k, v) in &cfg.headers {
        let name = reqwest013::header::HeaderName::try_from(k.as_str())
            .map_err(|e| format!("header {k}: {e}"))?;
        let value = reqwest013::header::HeaderValue::try_from(v.as_str())
            .map_err(|e| format!("header {k}: {e}"))?;
        headers.insert(name, value);
    }
    Ok((url, headers))
}

/// Open the SSE stream, then `initialize` over it.
async fn serve_sse(
    server: &Server,
    handler: Handler,
    client: reqwest013::Client,
    url: &url::Url,
    headers: reqwest013::header::HeaderMap,
    deadline: tokio::time::Instant,
) -> Result<Running, String> {
    // A little before the supervisor's own limit, so that the error says what was missing.
    let wait = deadline
        .saturating_duration_since(tokio::time::Instant::now())
        .saturating_sub(Duration::from_millis(200));
    let transport = SseTransport::connect(
        client,
        url,
        headers,
        wait,
        server.config.timeout(),
        server.sse_end.clone(),
    )
    .await?;
    handler.serve(transport).await.map_err(|e| {
        let mut m = format!("initialize failed: {}", chain(&e));
        if let Some(why) = server.take_sse_end() {
            m.push_str(": ");
            m.push_str(&why);
        }
        m
    })
}

/// The HTTP client of a `url` server: rustls, no proxy for a loopback URL.
/// `same_origin_redirects` (the SSE transport) follows redirects only within
/// the URL's origin (a stream moved elsewhere, with the configured headers, is refused).
fn http_client(url: &str, same_origin_redirects: bool) -> Result<reqwest013::Client, String> {
    let loopback = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(is_loopback_host))
        .unwrap_or(false);
    let mut builder = reqwest013::Client::builder().tls_backend_preconfigured(tls_config()?);
    if loopback {
        builder = builder.no_proxy();
    }
    if same_origin_redirects {
        builder = builder.redirect(reqwest013::redirect::Policy::custom(|attempt| {
            let same = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if same && attempt.previous().len() < 5 {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }));
    }
    builder
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// An error with its causes (`a: b: c`), each said once.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = c.source();
    }
    out
}

/// TLS for `https` servers: rustls with the ring provider and the Mozilla roots.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn is_loopback_host(h: &str) -> bool {
    let h = h.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The tools a server listed, as registrations (allowlist applied; names the
/// registry cannot hold are reported as hidden).
fn offered(server: &Server, tools: Vec<Tool>) -> (Vec<RegisteredTool>, Vec<String>) {
    let mut out = Vec::new();
    let mut hidden = Vec::new();
    let mut seen = BTreeSet::new();
    for t in tools {
        let name = t.name.to_string();
        let n = name.chars().count();
        if !server.config.allows(&name) || n == 0 || n > 64 || !seen.insert(name.clone()) {
            hidden.push(name);
            continue;
        }
        out.push(RegisteredTool {
            description: t
                .description
                .as_deref()
                .unwrap_or("")
                .chars()
                .take(2000)
                .collect(),
            parameters: Value::Object((*t.input_schema).clone()),
            callback_url: format!("mcp://{}/{}", server.name, name),
            source: server.source(),
            timeout: server.config.timeout(),
            name,
        });
    }
    (out, hidden)
}

async fn list_tools(server: &Server, running: &Running) -> Result<(), String> {
    let tools = tokio::time::timeout(
        server.config.startup_timeout(),
        running.peer().list_all_tools(),
    )
    .await
    .map_err(|_| "tools/list timed out".to_string())?
    .map_err(|e| format!("tools/list failed: {e}"))?;
    let (tools, hidden) = offered(server, tools);
    *server.offered.lock().unwrap_or_else(|e| e.into_inner()) = tools;
    server.with_status(|s| s.hidden_tools = hidden);
    Ok(())
}

/// The supervisor loop of one server (see the module doc).
async fn supervise(server: &Server, hub: &dyn Publish) {
    let mut backoff = FIRST_BACKOFF;
    let mut first = true;
    loop {
        if server.stop.is_cancelled() {
            break;
        }
        if !first {
            server.with_status(|s| s.restarts += 1);
        }
        first = false;
        server.set_state(State::Starting);
        let (tx, mut changed) = mpsc::unbounded_channel();
        let handler = Handler {
            changed: tx,
            info: client_info(),
        };
        let started = Instant::now();
        server.take_sse_end();
        let deadline = tokio::time::Instant::now() + server.config.startup_timeout();
        let attempt = tokio::time::timeout_at(deadline, async {
            let (running, pid) = connect(server, handler, deadline).await?;
            list_tools(server, &running).await?;
            Ok::<_, String>((running, pid))
        });
        let outcome = tokio::select! {
            r = attempt => r,
            _ = server.stop.cancelled() => break,
        };
        // The child's process group lives as long as this connection: dropped at
        // the end of this turn of the loop, or with this future when companiond stops.
        let group = server
            .group
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match outcome {
            Err(_) => server.note_error(&format!(
                "did not start within {} s",
                trim_float(server.config.startup_timeout().as_secs_f64())
            )),
            Ok(Err(e)) => server.note_error(&e),
            Ok(Ok((running, pid))) => {
                server.set_peer(Some(running.peer().clone()));
                server.with_status(|s| s.pid = pid);
                hub.publish(server);
                server.set_state(State::Running);
                server.with_status(|s| s.pid = pid);
                let mut ct = Some(running.cancellation_token());
                let mut done = tokio::spawn(running.waiting());
                let peer = server.peer();
                // An HTTP server that went away (or hangs) is noticed by a ping.
                let http = server.config.transport() != Transport::Stdio;
                let mut ping = tokio::time::interval(PING_EVERY);
                ping.tick().await;
                let ended = loop {
                    tokio::select! {
                        _ = server.stop.cancelled() => {
                            if let Some(ct) = ct.take() {
                                ct.cancel();
                            }
                            let _ = tokio::time::timeout(Duration::from_secs(5), &mut done).await;
                            break false;
                        }
                        r = &mut done => {
                            let why = match (server.take_sse_end(), r) {
                                (Some(sse), _) => format!("the connection ended: {sse}"),
                                (None, Ok(reason)) => format!("the connection ended ({reason:?})"),
                                (None, Err(e)) => format!("the connection ended: {e}"),
                            };
                            server.note_error(&why);
                            break true;
                        }
                        Some(()) = changed.recv() => {
                            // A burst of notifications is one re-list.
                            while changed.try_recv().is_ok() {}
                            if let Some(p) = &peer {
                                match relist(server, p).await {
                                    Ok(()) => hub.publish(server),
                                    Err(e) => server.note_error(&e),
                                }
                            }
                        }
                        _ = ping.tick(), if http => {
                            let Some(p) = &peer else { continue };
                            let answered = tokio::time::timeout(
                                PING_TIMEOUT,
                                p.send_request(ClientRequest::PingRequest(PingRequest::default())),
                            )
                            .await;
                            if !matches!(answered, Ok(Ok(_))) {
                                match server.take_sse_end() {
                                    Some(sse) => server.note_error(&format!("the connection ended: {sse}")),
                                    None => server.note_error("the server did not answer a ping"),
                                }
                                if let Some(ct) = ct.take() {
                                    ct.cancel();
                                }
                                let _ = tokio::time::timeout(Duration::from_secs(5), &mut done).await;
                                break true;
                            }
                        }
                    }
                };
                if !ended {
                    break;
                }
            }
        }
        server.set_peer(None);
        drop(group);
        hub.withdraw(server);
        if started.elapsed() >= STABLE_AFTER {
            backoff = FIRST_BACKOFF;
        }
        server.set_state(State::Restarting);
        server.with_status(|s| s.retry_in_ms = Some(backoff.as_millis() as u64));
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = server.stop.cancelled() => break,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    server.set_peer(None);
    server.end_group();
    hub.withdraw(server);
    server.set_state(State::Stopped);
}

/// The process group of a stdio child: every process in it is killed when this
/// is dropped (the connection ended, the server was replaced, removed or
/// companiond stops — the runtime drops every task and their state with it), so
/// grandchildren (`npx` → `node`, a shell's children) do not outlive it.
pub(crate) struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Ok(pgid) = i32::try_from(self.0) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

async fn relist(server: &Server, peer: &Peer<RoleClient>) -> Result<(), String> {
    let tools = tokio::time::timeout(server.config.startup_timeout(), peer.list_all_tools())
        .await
        .map_err(|_| "tools/list timed out".to_string())?
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let (tools, hidden) = offered(server, tools);
    *server.offered.lock().unwrap_or_else(|e| e.into_inner()) = tools;
    server.with_status(|s| s.hidden_tools = hidden);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(v: Value) -> CallToolResult {
        serde_json::from_value(v).expect("a CallToolResult")
    }

    #[test]
    fn cap_cuts_at_characters_and_says_how_much() {
        assert_eq!(cap_chars("héllo", 5), "héllo");
        let cut = cap_chars("ééééé", 2);
        assert!(cut.starts_with("éé\n[result cut: 3 more characters over the 2-character limit]"));
    }

    #[test]
    fn results_render_for_the_model() {
        let r = result(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}}
        ]}));
        assert_eq!(
            render(&r, 100),
            ("one\n[image: image/png]\ninside".into(), false)
        );
        let r = result(json!({"content": [], "structuredContent": {"t": 21}}));
        assert_eq!(render(&r, 100), ("{\"t\":21}".into(), false));
        let r = result(json!({"content": [{"type": "text", "text": "bad"}], "isError": true}));
        assert_eq!(render(&r, 100), ("tool error: bad".into(), true));
        let r = result(json!({"content": [{"type": "text", "text": "abcdef"}]}));
        assert!(render(&r, 3).0.starts_with("abc\n[result cut: 3 more"));
    }

    #[test]
    fn arguments_must_be_an_object() {
        assert!(parse_arguments("").is_ok_and(|m| m.is_empty()));
        assert!(parse_arguments("{\"a\":1}").is_ok_and(|m| m.len() == 1));
        assert!(parse_arguments("[1]").is_err());
        assert!(parse_arguments("{oops").is_err());
    }
}

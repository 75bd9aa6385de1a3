//! The OpenAI-compatible client: `/chat/completions` with streamed SSE deltas and
//! function-tool calls, configured from the core configuration.

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::layout as docs;
use crate::local_model::{self, LocalBackend, LocalEvent, LocalRequest};
use crate::metrics::{Outcome, TokenKind};
use crate::providers::{self, Endpoint, Slot};
use crate::store::Store;
use crate::usage::{TokenUsage, UsageRow};

/// One chat message in the OpenAI wire format.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: Some(content.into()),
            ..Default::default()
        }
    }
    pub fn system(c: impl Into<String>) -> Self {
        Self::new("system", c)
    }
    pub fn user(c: impl Into<String>) -> Self {
        Self::new("user", c)
    }
    pub fn assistant(c: impl Into<String>) -> Self {
        Self::new("assistant", c)
    }
    pub fn tool(call_id: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: "tool".into(),
            content: Some(content.into()),
            tool_call_id: Some(call_id.into()),
            ..Default::default()
        }
    }
}

/// A function call requested by the model.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".into()
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

/// A function tool offered to the model.
#[derive(Clone, Debug, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// One model call: where it goes, which slot it is for (usage bookkeeping),
/// the conversation, the tools offered and the call's options.
#[derive(Clone, Copy)]
pub struct ModelCall<'a> {
    pub ep: &'a Endpoint,
    pub slot: Slot,
    pub messages: &'a [ChatMessage],
    pub tools: &'a [ToolSpec],
    pub options: &'a CallOptions,
}

/// What a completion produced.
#[derive(Clone, Debug, Default)]
pub struct Completion {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<(i64, i64, i64)>,
}

/// Model-call failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmError {
    /// No provider is configured for the slot.
    NotConfigured,
    Timeout,
    Connect(String),
    Status(u16, String),
    Protocol(String),
    /// The model answered with neither text nor tool calls (an empty stream:
    /// what some servers send when the prompt does not fit).
    EmptyReply,
}

impl LlmError {
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::NotConfigured => "no_provider",
            LlmError::Timeout => "timeout",
            LlmError::Connect(_) => "connection_failed",
            LlmError::Status(401 | 403, _) => "auth_failed",
            LlmError::Status(429, _) => "rate_limited",
            LlmError::Status(..) => "upstream_error",
            LlmError::Protocol(_) => "protocol_error",
            LlmError::EmptyReply => "empty_reply",
        }
    }

    /// The upstream HTTP status, when the server answered one.
    pub fn upstream_status(&self) -> Option<u16> {
        match self {
            LlmError::Status(s, _) => Some(*s),
            _ => None,
        }
    }

    /// Did the server refuse the call because the prompt does not fit its
    /// context (OpenAI's `context_length_exceeded`, llama.cpp's "exceed context
    /// window", Ollama's and vLLM's wordings)?
    pub fn is_context_overflow(&self) -> bool {
        let text = match self {
            LlmError::Status(400 | 413 | 422 | 500, b) | LlmError::Protocol(b) => b.to_lowercase(),
            _ => return false,
        };
        text.contains("context_length_exceeded")
            || (text.contains("context")
                && [
                    "exceed",
                    "too long",
                    "maximum",
                    "overflow",
                    "larger than",
                    "too many",
                ]
                .iter()
                .any(|w| text.contains(w)))
            || text.contains("prompt is too long")
            || text.contains("too many tokens")
    }

    /// Would a server that refuses a request shape (`response_format`, tools)
    /// answer this? A 4xx other than auth/rate limits, or a 500 (llama.cpp's
    /// Python server answers an unknown form with a 500).
    pub fn is_refusal(&self) -> bool {
        matches!(self, LlmError::Status(s, _) if (*s >= 400 && *s < 500 && !matches!(*s, 401 | 403 | 408 | 429)) || *s == 500 || *s == 501)
    }
}

impl std::fmt::Display for LlmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LlmError::NotConfigured => {
                f.write_str("no language model provider is configured (POST /api/config/core_api)")
            }
            LlmError::Timeout => f.write_str("the language model did not answer in time"),
            LlmError::Connect(e) => write!(f, "cannot reach the language model: {e}"),
            LlmError::Status(s, b) => write!(f, "the language model answered HTTP {s}: {b}"),
            LlmError::Protocol(e) => write!(f, "unexpected answer from the language model: {e}"),
            LlmError::EmptyReply => f.write_str(
                "the language model answered nothing (an empty reply; the prompt may not fit its context)",
            ),
        }
    }
}

impl std::error::Error for LlmError {}

/// Options of one call.
#[derive(Clone, Debug)]
pub struct CallOptions {
    /// Whole-call timeout (non-streaming) or the longest silence between chunks (streaming).
    pub timeout: Duration,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Who the call is for (token-usage bookkeeping).
    pub character: String,
    /// `response_format` of the request (a JSON schema), if any.
    pub response_format: Option<Value>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: Duration::from_secs(60),
            temperature: None,
            max_tokens: None,
            character: String::new(),
            response_format: None,
        }
    }
}

/// The client; reads the provider settings on every call so a saved change
/// applies to the next request of every open session.
#[derive(Clone)]
pub struct LlmClient {
    http: crate::net::LazyClient,
    local_http: crate::net::LazyClient,
    store: Store,
    bundle: PathBuf,
    usage: TokenUsage,
    /// Context windows reported by servers, by base URL and model.
    windows: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Option<usize>>>>,
    /// The `response_format` form each server accepted ([`JSON_FORMS`]), by base URL and model.
    json_forms: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    chat: std::sync::Arc<ChatActivity>,
    /// The built-in local model, once its family installed it.
    local: std::sync::Arc<std::sync::OnceLock<std::sync::Arc<dyn LocalBackend>>>,
}

/// Chat turns running now and when the last one ended (chat first: background
/// model work waits for a quiet chat when it shares the chat's server).
#[derive(Default)]
pub struct ChatActivity {
    running: std::sync::atomic::AtomicUsize,
    last_end_ms: std::sync::atomic::AtomicU64,
}

/// Marks a chat turn as running until dropped.
pub struct ChatTurnGuard(std::sync::Arc<ChatActivity>);

impl Drop for ChatTurnGuard {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0
            .last_end_ms
            .store(crate::now_millis().max(0) as u64, Ordering::SeqCst);
    }
}

/// How long the chat must have been quiet before background work on its
/// server starts.
pub const CHAT_QUIET: Duration = Duration::from_secs(3);
/// The longest background work waits for a quiet chat.
pub const CHAT_WAIT_MAX: Duration = Duration::from_secs(300);

/// The `response_format` forms tried for a JSON answer, in order: OpenAI's
/// `json_schema`, llama.cpp's `json_object` with a `schema`, then none.
pub const JSON_FORMS: [&str; 3] = ["json_schema", "json_object", "none"];

/// A `response_format` of a chat completion request.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormat<'a> {
    /// OpenAI's strict structured output.
    JsonSchema { json_schema: NamedSchema<'a> },
    /// llama.cpp's grammar from a schema.
    JsonObject { schema: &'a Value },
}

#[derive(Serialize)]
struct NamedSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

/// A tool of a chat completion request: `{type: "function", function}`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OfferedTool<'a> {
    Function { function: &'a ToolSpec },
}

fn json_form(i: usize, name: &str, schema: &Value) -> Option<Value> {
    let form = match i {
        0 => ResponseFormat::JsonSchema {
            json_schema: NamedSchema {
                name,
                schema,
                strict: true,
            },
        },
        1 => ResponseFormat::JsonObject { schema },
        _ => return None,
    };
    serde_json::to_value(form).ok()
}

impl LlmClient {
    /// `local_http` (no proxy) is used for loopback endpoints, `http` for the rest.
    pub fn new(
        http: crate::net::LazyClient,
        local_http: crate::net::LazyClient,
        store: Store,
        bundle: PathBuf,
        usage: TokenUsage,
    ) -> Self {
        LlmClient {
            http,
            local_http,
            store,
            bundle,
            usage,
            windows: Default::default(),
            json_forms: Default::default(),
            chat: Default::default(),
            local: Default::default(),
        }
    }

    /// Install the built-in local model (the `local` family's `start()`).
    pub fn set_local(&self, backend: std::sync::Arc<dyn LocalBackend>) {
        let _ = self.local.set(backend);
    }

    /// The built-in local model, when installed.
    pub fn local(&self) -> Option<std::sync::Arc<dyn LocalBackend>> {
        self.local.get().cloned()
    }

    /// Mark a chat turn as running (until the guard is dropped).
    pub fn chat_turn(&self) -> ChatTurnGuard {
        self.chat
            .running
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ChatTurnGuard(self.chat.clone())
    }

    /// Chat first: when `slot` goes to the same server as the conversation,
    /// wait until no chat turn runs and the last ended `quiet` ago (at most
    /// [`CHAT_WAIT_MAX`]). Returns how long it waited.
    pub async fn wait_for_quiet_chat(&self, slot: Slot, quiet: Duration) -> Duration {
        use std::sync::atomic::Ordering;
        let t = std::time::Instant::now();
        if slot != Slot::Conversation {
            let (a, b) = (
                self.endpoint(slot).await,
                self.endpoint(Slot::Conversation).await,
            );
            if a.is_none() || b.is_none() || a.map(|e| e.base_url) != b.map(|e| e.base_url) {
                return Duration::ZERO;
            }
        }
        let quiet_ms = quiet.as_millis() as i64;
        while t.elapsed() < CHAT_WAIT_MAX {
            let running = self.chat.running.load(Ordering::SeqCst);
            let since = crate::now_millis() - self.chat.last_end_ms.load(Ordering::SeqCst) as i64;
            if running == 0 && since >= quiet_ms {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        t.elapsed()
    }

    /// A non-streaming completion for `slot` asking for JSON matching `schema`
    /// (named `name`): the `response_format` forms of [`JSON_FORMS`] in turn
    /// while the server refuses one (a 4xx, or llama.cpp's 500); the form that
    /// worked is remembered for the server.
    pub async fn complete_json(
        &self,
        slot: Slot,
        messages: &[ChatMessage],
        o: &CallOptions,
        name: &str,
        schema: &Value,
    ) -> Result<Completion, LlmError> {
        let ep = self.endpoint(slot).await.ok_or(LlmError::NotConfigured)?;
        let key = format!("{}\n{}", ep.base_url, ep.model);
        let start = self
            .json_forms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied()
            .unwrap_or(0);
        let mut last = LlmError::EmptyReply;
        for (i, form) in JSON_FORMS.iter().enumerate().skip(start) {
            let opts = CallOptions {
                response_format: json_form(i, name, schema),
                ..o.clone()
            };
            let r = self
                .complete_call(&ModelCall {
                    ep: &ep,
                    slot,
                    messages,
                    tools: &[],
                    options: &opts,
                })
                .await;
            match r {
                Err(e)
                    if e.is_refusal() && !e.is_context_overflow() && i + 1 < JSON_FORMS.len() =>
                {
                    tracing::debug!("{} refused response_format {form}: {e}", ep.base_url);
                    last = e;
                }
                r => {
                    if r.is_ok() {
                        self.json_forms
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key, i);
                    }
                    return r;
                }
            }
        }
        Err(last)
    }

    /// The context window of `slot`'s model at `ep` (docs/models.md): the
    /// `<slot>ContextWindow`/`contextWindow` setting, else what the server
    /// reports (llama.cpp's `/props`, `/v1/models` metadata; asked once per
    /// server and model), else [`crate::context::DEFAULT_CONTEXT_WINDOW`].
    pub async fn context_window(&self, slot: Slot, ep: &Endpoint) -> usize {
        let cfg = self.core_config().await;
        if let Some(n) = crate::context::configured_window(&cfg, slot) {
            return n;
        }
        if local_model::is_local(&ep.base_url) {
            let n = match self.local() {
                Some(l) => l.context_window().await,
                None => None,
            };
            return n.unwrap_or(crate::context::DEFAULT_CONTEXT_WINDOW);
        }
        let key = format!("{}\n{}", ep.base_url, ep.model);
        let cached = self
            .windows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        let reported = match cached {
            Some(n) => n,
            None => {
                let n = self.probe_window(ep).await;
                self.windows
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, n);
                n
            }
        };
        reported.unwrap_or(crate::context::DEFAULT_CONTEXT_WINDOW)
    }

    /// Ask the server at `ep` for its context window: llama.cpp's `/props`,
    /// Ollama's `{base}/api/show`, then `/v1/models`, in that order of trust. The three
    /// go out together, 2 s each at most; an answer that is not JSON, an error
    /// status or a timeout is no answer, and the next source is read.
    async fn probe_window(&self, ep: &Endpoint) -> Option<usize> {
        let ask = |url: String, body: Option<Value>| async move {
            let client = self.client_for(&url);
            let mut req = match &body {
                Some(b) => client.post(&url).json(b),
                None => client.get(&url),
            };
            if !ep.api_key.is_empty() {
                req = req.bearer_auth(&ep.api_key);
            }
            let work = async {
                let r = req.send().await.ok()?;
                if !r.status().is_success() {
                    return None;
                }
                r.json::<Value>().await.ok()
            };
            tokio::time::timeout(Duration::from_secs(2), work)
                .await
                .ok()
                .flatten()
        };
        let root = ep.base_url.trim_end_matches('/').trim_end_matches("/v1");
        let (props, show, models) = tokio::join!(
            ask(format!("{root}/props"), None),
            ask(
                format!("{root}/api/show"),
                Some(json!({ "model": ep.model }))
            ),
            ask(
                format!("{}/models", ep.base_url.trim_end_matches('/')),
                None
            ),
        );
        crate::context::reported_window(props.as_ref(), None, &ep.model)
            .or_else(|| show.as_ref().and_then(crate::context::ollama_window))
            .or_else(|| crate::context::reported_window(None, models.as_ref(), &ep.model))
    }

    /// The client for `url`: loopback hosts bypass any proxy.
    pub fn client_for(&self, url: &str) -> &reqwest::Client {
        match url::Url::parse(url) {
            Ok(u) if crate::net::proxy_for(&u).is_none() => &self.local_http,
            _ => &self.http,
        }
    }

    /// The stored core configuration (`{}` when missing or unreadable).
    pub async fn core_config(&self) -> Map<String, Value> {
        match self.store.read::<Value>(docs::CORE_CONFIG).await {
            Ok(Some(Value::Object(m))) => m,
            _ => Map::new(),
        }
    }

    /// Where `slot` goes, or `None` when nothing is configured. The built-in
    /// local model (docs/local-model.md) when it is chosen, or when no other
    /// provider is configured and a local model is available.
    pub async fn endpoint(&self, slot: Slot) -> Option<Endpoint> {
        let cfg = self.core_config().await;
        let catalog = providers::load_catalog(&self.bundle);
        match providers::resolve(&cfg, &catalog, slot) {
            Some(ep) if !local_model::is_local(&ep.base_url) => Some(ep),
            _ => self.local_endpoint().await,
        }
    }

    /// The built-in provider's endpoint, when a local model is available.
    pub async fn local_endpoint(&self) -> Option<Endpoint> {
        let local = self.local()?;
        if !local.available().await {
            return None;
        }
        Some(Endpoint {
            base_url: local_model::BASE_URL.into(),
            model: local_model::PROVIDER.into(),
            api_key: String::new(),
        })
    }

    /// A call to the built-in model: deltas to `on_delta`, the whole answer back.
    async fn local_call(
        &self,
        call: &ModelCall<'_>,
        on_delta: Option<&(dyn Fn(&str) + Send + Sync)>,
    ) -> Result<Completion, LlmError> {
        let Some(local) = self.local() else {
            return Err(LlmError::NotConfigured);
        };
        let o = call.options;
        let mut messages = call.messages.to_vec();
        if !call.tools.is_empty() {
            // The built-in engine does not call tools: the turn goes on without them.
            tracing::debug!(
                "the built-in model ignores {} offered tools",
                call.tools.len()
            );
        }
        for m in &mut messages {
            if m.role == "tool" {
                m.role = "user".into();
            }
            m.tool_calls.clear();
            m.tool_call_id = None;
        }
        let req = LocalRequest {
            messages,
            max_tokens: o.max_tokens,
            temperature: o.temperature,
            json: o.response_format.is_some(),
            schema: o.response_format.as_ref().and_then(|f| {
                f.pointer("/json_schema/schema")
                    .or_else(|| f.get("schema"))
                    .cloned()
            }),
            background: call.slot != Slot::Conversation,
        };
        let mut rx = local.generate(req);
        let work = async {
            loop {
                match rx.recv().await {
                    Some(LocalEvent::Delta(d)) => {
                        if let Some(f) = on_delta {
                            f(&d);
                        }
                    }
                    Some(LocalEvent::Done(c)) => return Ok(c),
                    Some(LocalEvent::Failed(e)) => return Err(e),
                    None => {
                        return Err(LlmError::Connect(
                            "the built-in model stopped before the reply was complete".into(),
                        ))
                    }
                }
            }
        };
        // The timeout bounds the whole call: a CPU model is slow but steady.
        let limit = o.timeout.max(Duration::from_secs(30)) * 4;
        let c = tokio::time::timeout(limit, work)
            .await
            .map_err(|_| LlmError::Timeout)??;
        if c.content.is_empty() {
            return Err(LlmError::EmptyReply);
        }
        self.record(call, &c).await;
        Ok(c)
    }

    fn body(&self, call: &ModelCall<'_>, stream: bool) -> Value {
        let ModelCall {
            ep,
            messages,
            tools,
            options: o,
            ..
        } = *call;
        let mut body = json!({"model": ep.model, "messages": messages, "stream": stream});
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(
                tools
                    .iter()
                    .filter_map(|function| {
                        serde_json::to_value(OfferedTool::Function { function }).ok()
                    })
                    .collect(),
            );
            // llama.cpp uses the tools only when asked to choose.
            body["tool_choice"] = json!("auto");
        }
        if let Some(f) = &o.response_format {
            body["response_format"] = f.clone();
        }
        if let Some(t) = o.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(m) = o.max_tokens {
            body["max_tokens"] = json!(m);
        }
        body
    }

    /// `POST {base_url}/chat/completions` with `body`.
    async fn send(
        &self,
        ep: &Endpoint,
        body: &Value,
        timeout: Duration,
    ) -> Result<reqwest::Response, LlmError> {
        self.post(ep, "chat/completions", body, timeout).await
    }

    /// `POST {base_url}/{path}` with `body` and the endpoint's key; a reply
    /// other than 2xx becomes [`LlmError::Status`] with the start of its text.
    async fn post(
        &self,
        ep: &Endpoint,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<reqwest::Response, LlmError> {
        let url = format!("{}/{path}", ep.base_url);
        let mut req = self.client_for(&url).post(&url).json(body);
        if !ep.api_key.is_empty() {
            req = req.bearer_auth(&ep.api_key);
        }
        let resp = tokio::time::timeout(timeout, req.send())
            .await
            .map_err(|_| LlmError::Timeout)?
            .map_err(|e| {
                if e.is_timeout() {
                    LlmError::Timeout
                } else {
                    LlmError::Connect(e.to_string())
                }
            })?;
        if !resp.status().is_success() {
            let status = resp.status().as_u16();
            let text = tokio::time::timeout(Duration::from_secs(5), resp.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(LlmError::Status(status, text.chars().take(300).collect()));
        }
        Ok(resp)
    }

    /// A non-streaming completion for `slot`.
    pub async fn complete(
        &self,
        slot: Slot,
        messages: &[ChatMessage],
        o: &CallOptions,
    ) -> Result<Completion, LlmError> {
        let ep = self.endpoint(slot).await.ok_or(LlmError::NotConfigured)?;
        self.complete_call(&ModelCall {
            ep: &ep,
            slot,
            messages,
            tools: &[],
            options: o,
        })
        .await
    }

    /// A non-streaming completion against a known endpoint: [`Self::complete_call`]
    /// with its fields as arguments.
    pub async fn complete_at(
        &self,
        ep: &Endpoint,
        slot: Slot,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        options: &CallOptions,
    ) -> Result<Completion, LlmError> {
        self.complete_call(&ModelCall {
            ep,
            slot,
            messages,
            tools,
            options,
        })
        .await
    }

    /// A non-streaming completion of `call`.
    pub async fn complete_call(&self, call: &ModelCall<'_>) -> Result<Completion, LlmError> {
        let t = std::time::Instant::now();
        let r = self.complete_once(call).await;
        observe(call, &r, t);
        r
    }

    async fn complete_once(&self, call: &ModelCall<'_>) -> Result<Completion, LlmError> {
        let (ep, o) = (call.ep, call.options);
        if local_model::is_local(&ep.base_url) {
            return self.local_call(call, None).await;
        }
        let body = self.body(call, false);
        let work = async {
            let resp = self.send(ep, &body, o.timeout).await?;
            let v: Value = resp
                .json()
                .await
                .map_err(|e| LlmError::Protocol(e.to_string()))?;
            parse_completion(&v)
        };
        let c = tokio::time::timeout(o.timeout, work)
            .await
            .map_err(|_| LlmError::Timeout)??;
        self.record(call, &c).await;
        Ok(c)
    }

    /// A streamed completion of `call`: `on_delta` gets each text delta as it
    /// arrives; the result carries the whole text and any tool calls.
    pub async fn stream_call(
        &self,
        call: &ModelCall<'_>,
        on_delta: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Completion, LlmError> {
        let t = std::time::Instant::now();
        let r = self.stream_once(call, on_delta).await;
        observe(call, &r, t);
        r
    }

    async fn stream_once(
        &self,
        call: &ModelCall<'_>,
        on_delta: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Completion, LlmError> {
        let (ep, o) = (call.ep, call.options);
        if local_model::is_local(&ep.base_url) {
            return self.local_call(call, Some(on_delta)).await;
        }
        let body = self.body(call, true);
        let resp = self.send(ep, &body, o.timeout).await?;
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("event-stream"));
        if !is_sse {
            // Some servers ignore `stream`; accept a whole JSON completion too.
            let v: Value = tokio::time::timeout(o.timeout, resp.json())
                .await
                .map_err(|_| LlmError::Timeout)?
                .map_err(|e| LlmError::Protocol(e.to_string()))?;
            let c = parse_completion(&v)?;
            if !c.content.is_empty() {
                on_delta(&c.content);
            }
            self.record(call, &c).await;
            return Ok(c);
        }
        let mut acc = StreamAccumulator::default();
        let mut stream = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        'outer: loop {
            let chunk = match tokio::time::timeout(o.timeout, stream.next()).await {
                Err(_) => return Err(LlmError::Timeout),
                Ok(None) => {
                    // The body ended: without `[DONE]` or a finish reason after
                    // some of a reply, the server went away mid-reply (killed,
                    // crashed). An empty body is an empty reply.
                    if acc.finish.is_none() && (!acc.content.is_empty() || !acc.calls.is_empty()) {
                        return Err(LlmError::Connect(
                            "the stream ended before the reply was complete".into(),
                        ));
                    }
                    break;
                }
                Ok(Some(Err(e))) => return Err(LlmError::Connect(e.to_string())),
                Ok(Some(Ok(b))) => b,
            };
            buf.extend_from_slice(&chunk);
            while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim();
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let data = data.trim();
                if data == "[DONE]" {
                    break 'outer;
                }
                if data.is_empty() {
                    continue;
                }
                let v: Value =
                    serde_json::from_str(data).map_err(|e| LlmError::Protocol(e.to_string()))?;
                if let Some(err) = v.get("error") {
                    return Err(LlmError::Protocol(err.to_string()));
                }
                if let Some(text) = acc.push(&v) {
                    on_delta(&text);
                }
            }
        }
        let c = acc.finish();
        self.record(call, &c).await;
        Ok(c)
    }

    /// Where embedding requests go (`embeddingModel*` fields), or `None`.
    pub async fn embedding_endpoint(&self) -> Option<Endpoint> {
        let cfg = self.core_config().await;
        let catalog = providers::load_catalog(&self.bundle);
        match providers::resolve_embedding(&cfg, &catalog) {
            Some(ep) if !local_model::is_local(&ep.base_url) => Some(ep),
            // `embeddingModelId: "local"` (or a summary slot on the built-in
            // model): the built-in engine's embeddings.
            Some(_) => self.local_endpoint().await,
            None if cfg.get("embeddingModelId").and_then(Value::as_str)
                == Some(local_model::PROVIDER) =>
            {
                self.local_endpoint().await
            }
            None => None,
        }
    }

    /// Embed `texts` at `ep` (OpenAI-compatible `POST <base>/embeddings` with
    /// `{model, input: [...]}`): one vector per text, in order, all of one
    /// dimension. `timeout` bounds the whole call.
    pub async fn embed_at(
        &self,
        ep: &Endpoint,
        texts: &[String],
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if local_model::is_local(&ep.base_url) {
            let local = self.local().ok_or(LlmError::NotConfigured)?;
            return tokio::time::timeout(
                timeout.max(Duration::from_secs(30)) * 4,
                local.embed(texts.to_vec()),
            )
            .await
            .map_err(|_| LlmError::Timeout)?;
        }
        let body = json!({"model": ep.model, "input": texts});
        let work = async {
            let resp = self.post(ep, "embeddings", &body, timeout).await?;
            let v: Value = resp
                .json()
                .await
                .map_err(|e| LlmError::Protocol(e.to_string()))?;
            parse_embeddings(&v, texts.len())
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| LlmError::Timeout)?
    }

    async fn record(&self, call: &ModelCall<'_>, c: &Completion) {
        let ModelCall {
            ep,
            slot,
            messages,
            options: o,
            ..
        } = *call;
        if let Some((p, cpl, _)) = c.usage {
            let m = crate::metrics::metrics();
            m.model_tokens(TokenKind::Prompt, u64::try_from(p).unwrap_or(0));
            m.model_tokens(TokenKind::Completion, u64::try_from(cpl).unwrap_or(0));
        }
        let (prompt, completion, total, estimated) = match c.usage {
            Some((p, cpl, t)) => (p, cpl, t, false),
            None => {
                let p: usize = messages
                    .iter()
                    .map(|m| m.content.as_deref().map_or(0, str::len))
                    .sum();
                let p = (p / 4) as i64;
                let cpl = (c.content.len() / 4) as i64;
                (p, cpl, p + cpl, true)
            }
        };
        self.usage
            .record_async(UsageRow {
                ts: crate::now_millis() / 1000,
                slot: slot.as_str().into(),
                model: ep.model.clone(),
                character: o.character.clone(),
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: total,
                estimated,
            })
            .await;
    }
}

fn usage_of(v: &Value) -> Option<(i64, i64, i64)> {
    let u = v.get("usage")?.as_object()?;
    let g = |k: &str| u.get(k).and_then(Value::as_i64).unwrap_or(0);
    Some((
        g("prompt_tokens"),
        g("completion_tokens"),
        g("total_tokens"),
    ))
}

/// Largest embedding dimension accepted.
pub const MAX_EMBEDDING_DIM: usize = 16_384;

/// Parse an OpenAI `/embeddings` answer (`{data: [{index, embedding: [..]}]}`)
/// for `n` inputs: the vectors in input order, all of one dimension.
pub fn parse_embeddings(v: &Value, n: usize) -> Result<Vec<Vec<f32>>, LlmError> {
    let bad = |m: &str| LlmError::Protocol(format!("embeddings: {m}"));
    let data = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no data array"))?;
    if data.len() != n {
        return Err(bad(&format!("{} vectors for {n} inputs", data.len())));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, item) in data.iter().enumerate() {
        let idx = match item.get("index") {
            None | Some(Value::Null) => pos,
            Some(i) => i
                .as_u64()
                .map(|i| i as usize)
                .ok_or_else(|| bad("index is not a number"))?,
        };
        let slot = out.get_mut(idx).ok_or_else(|| bad("index out of range"))?;
        let arr = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("an embedding is not an array of numbers"))?;
        if arr.is_empty() || arr.len() > MAX_EMBEDDING_DIM {
            return Err(bad("an embedding has an unusable dimension"));
        }
        let vec = arr
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32).filter(|f| f.is_finite()))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| bad("an embedding holds a value that is not a finite number"))?;
        if slot.replace(vec).is_some() {
            return Err(bad("an index is repeated"));
        }
    }
    let out: Vec<Vec<f32>> = out
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| bad("an input has no vector"))?;
    if out.iter().any(|v| v.len() != out[0].len()) {
        return Err(bad("the vectors differ in dimension"));
    }
    Ok(out)
}

/// Parse JSON as models write it: strict first, then without trailing commas
/// before `}` or `]` (outside strings).
pub fn lenient_json(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Some(v);
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_str, mut escaped) = (false, false);
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if c == '"' {
            in_str = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}' | ']')) {
                continue;
            }
        }
        out.push(c);
    }
    serde_json::from_str::<Value>(&out).ok()
}

/// Parse a non-streamed `chat.completion` body.
pub fn parse_completion(v: &Value) -> Result<Completion, LlmError> {
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| LlmError::Protocol("no choices in the completion".into()))?;
    let msg = choice.get("message").cloned().unwrap_or(Value::Null);
    let content = match msg.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    let tool_calls: Vec<ToolCall> = msg
        .get("tool_calls")
        .cloned()
        .and_then(|t| serde_json::from_value(t).ok())
        .unwrap_or_default();
    Ok(Completion {
        content,
        tool_calls,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: usage_of(v),
    })
}

/// Accumulates streamed chunks (text deltas and tool-call fragments by index).
#[derive(Default)]
pub struct StreamAccumulator {
    content: String,
    calls: Vec<ToolCall>,
    finish: Option<String>,
    usage: Option<(i64, i64, i64)>,
}

impl StreamAccumulator {
    /// Take one chunk; returns its text delta, if any.
    pub fn push(&mut self, v: &Value) -> Option<String> {
        if let Some(u) = usage_of(v) {
            self.usage = Some(u);
        }
        let choice = v.get("choices")?.get(0)?;
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        let delta = choice.get("delta")?;
        if let Some(tcs) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, tc) in tcs.iter().enumerate() {
                let idx = tc
                    .get("index")
                    .and_then(Value::as_u64)
                    .map(|i| i as usize)
                    .unwrap_or(pos);
                while self.calls.len() <= idx {
                    self.calls.push(ToolCall {
                        kind: "function".into(),
                        ..Default::default()
                    });
                }
                let call = &mut self.calls[idx];
                if let Some(id) = tc.get("id").and_then(Value::as_str) {
                    call.id = id.to_string();
                }
                if let Some(f) = tc.get("function") {
                    if let Some(n) = f.get("name").and_then(Value::as_str) {
                        call.function.name.push_str(n);
                    }
                    if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                        call.function.arguments.push_str(a);
                    }
                }
            }
        }
        let text = delta.get("content").and_then(Value::as_str)?;
        if text.is_empty() {
            return None;
        }
        self.content.push_str(text);
        Some(text.to_string())
    }

    pub fn finish(self) -> Completion {
        let calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.function.name.is_empty())
            .map(|(i, mut c)| {
                if c.id.is_empty() {
                    c.id = format!("call_{i}");
                }
                c
            })
            .collect();
        Completion {
            content: self.content,
            tool_calls: calls,
            finish_reason: self.finish,
            usage: self.usage,
        }
    }
}

/// Count a model call in the process's metrics.
fn observe(call: &ModelCall<'_>, r: &Result<Completion, LlmError>, t: std::time::Instant) {
    let outcome = if r.is_ok() {
        Outcome::Ok
    } else {
        Outcome::Error
    };
    crate::metrics::metrics().model_call(call.slot.as_str(), outcome, t.elapsed());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_parsed_in_input_order() {
        let v = json!({"data": [
            {"index": 1, "embedding": [0.5, 1.0]},
            {"index": 0, "embedding": [1, 0]},
        ]});
        assert_eq!(
            parse_embeddings(&v, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.5, 1.0]]
        );
        for bad in [
            json!({}),
            json!({"data": [{"embedding": [1.0]}]}),
            json!({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]}),
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}),
            json!({"data": [{"index": 5, "embedding": [1.0]}, {"embedding": [2.0]}]}),
            json!({"data": [{"embedding": []}, {"embedding": []}]}),
            json!({"data": [{"embedding": ["x"]}, {"embedding": [1.0]}]}),
        ] {
            assert!(parse_embeddings(&bad, 2).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_with_trailing_commas_parses() {
        assert_eq!(
            lenient_json("{\"a\": [1, 2,], \"b\": \"x,]\",\n}"),
            Some(json!({"a": [1, 2], "b": "x,]"}))
        );
        assert_eq!(lenient_json("{\"a\": 1"), None);
    }

    #[test]
    fn accumulates_text_and_tool_fragments() {
        let mut a = StreamAccumulator::default();
        a.push(&json!({"choices":[{"delta":{"role":"assistant","content":"Hel"}}]}));
        a.push(&json!({"choices":[{"delta":{"content":"lo"}}]}));
        a.push(&json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"get_","arguments":"{\"a\""}}]}}]}));
        a.push(&json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"time","arguments":":1}"}}]}}]}));
        a.push(&json!({"choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}));
        let c = a.finish();
        assert_eq!(c.content, "Hello");
        assert_eq!(c.tool_calls.len(), 1);
        assert_eq!(c.tool_calls[0].function.name, "get_time");
        assert_eq!(c.tool_calls[0].function.arguments, "{\"a\":1}");
        assert_eq!(c.usage, Some((3, 4, 7)));
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
    }
}

//! Per-character session managers and the chat WebSocket `GET /ws/{persona_name}`.
//!
//! A session is *active* while at least one chat connection to it is open.
//! Client frames: `{"type":"user_text","text":...}` (also `voice_transcript`).
//! Server frames: `assistant_delta {text}`, `turn_end`, `tool_call {name, call_id}`,
//! `tool_result {name, call_id, is_error}`, `game_input {...}` when a game route
//! took the input, `error {code, error}`, plus notifications other families send
//! with [`SessionManager::notify`] (e.g. `settings_changed`, `provider_changed`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use indexmap::IndexMap;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::envelope::SuccessError;
use crate::history::{Entry, Speaker};
use crate::llm::{CallOptions, ChatMessage, LlmError};
use crate::providers::Slot;
use crate::state::{AppState, InputSource};
use crate::tools::RegisteredTool;

/// Something to send to one open connection.
#[derive(Debug)]
pub enum Outbound {
    Frame(Value),
    Close,
}

/// Most model rounds (tool call → result → model) in one turn.
pub const MAX_TOOL_ROUNDS: usize = 8;
/// Messages of history sent with each request.
pub const CONTEXT_MESSAGES: usize = 40;

/// One character's session manager.
pub struct SessionManager {
    name: RwLock<String>,
    conns: Mutex<HashMap<u64, mpsc::UnboundedSender<Outbound>>>,
    next_conn: AtomicU64,
    tools: RwLock<IndexMap<String, RegisteredTool>>,
    history: tokio::sync::Mutex<Vec<ChatMessage>>,
    turn: tokio::sync::Mutex<()>,
    settings: RwLock<serde_json::Map<String, Value>>,
}

impl SessionManager {
    fn new(name: &str) -> Self {
        SessionManager {
            name: RwLock::new(name.to_string()),
            conns: Mutex::default(),
            next_conn: AtomicU64::new(1),
            tools: RwLock::default(),
            history: tokio::sync::Mutex::default(),
            turn: tokio::sync::Mutex::default(),
            settings: RwLock::default(),
        }
    }

    pub fn name(&self) -> String {
        self.name.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Is the model answering a chat turn of this character right now?
    pub fn is_turn_running(&self) -> bool {
        self.turn.try_lock().is_err()
    }

    /// Is a chat connection open?
    pub fn is_active(&self) -> bool {
        !self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    pub fn connection_count(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Send a frame to every open connection of this character.
    pub fn notify(&self, frame: Value) -> usize {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns
            .values()
            .filter(|tx| tx.send(Outbound::Frame(frame.clone())).is_ok())
            .count()
    }

    /// Close every connection and wait (up to `timeout`) until none is open.
    /// Returns whether the session is inactive afterwards.
    pub async fn terminate(&self, timeout: Duration) -> bool {
        {
            let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            for tx in conns.values() {
                let _ = tx.send(Outbound::Close);
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        while self.is_active() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Drop the conversation context with the session.
        self.history.lock().await.clear();
        true
    }

    fn attach(
        &self,
    ) -> (
        u64,
        mpsc::UnboundedReceiver<Outbound>,
        mpsc::UnboundedSender<Outbound>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx.clone());
        (id, rx, tx)
    }

    fn detach(&self, id: u64) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    // ---------------------------------------------------------------- tools

    /// Register (or replace) a tool; visible to the next model request.
    pub fn register_tool(&self, tool: RegisteredTool) {
        self.tools
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tool.name.clone(), tool);
    }
    /// Remove a tool by name; whether it existed.
    pub fn unregister_tool(&self, name: &str) -> bool {
        self.tools
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .shift_remove(name)
            .is_some()
    }
    /// Remove every tool of `source` (all when `None`); how many were removed.
    pub fn clear_tools(&self, source: Option<&str>) -> usize {
        let mut t = self.tools.write().unwrap_or_else(|e| e.into_inner());
        let before = t.len();
        t.retain(|_, tool| source.is_some_and(|s| tool.source != s));
        before - t.len()
    }
    /// Remove every tool whose callback origin is `origin`.
    pub fn remove_origin(&self, origin: &str) -> usize {
        let mut t = self.tools.write().unwrap_or_else(|e| e.into_inner());
        let before = t.len();
        t.retain(|_, tool| tool.origin() != origin);
        before - t.len()
    }
    pub fn tools(&self) -> Vec<RegisteredTool> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
    /// Run `f` over the registered tools (in registration order) without copying them.
    pub fn with_tools<R>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = &RegisteredTool>) -> R,
    ) -> R {
        let t = self.tools.read().unwrap_or_else(|e| e.into_inner());
        f(&mut t.values())
    }
    pub fn tool(&self, name: &str) -> Option<RegisteredTool> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    // ---------------------------------------------------------------- settings

    /// Apply session settings (e.g. `noiseReductionEnabled`) to this session and
    /// tell open connections; returns how many connections were told.
    pub fn apply_settings(&self, changes: serde_json::Map<String, Value>) -> usize {
        {
            let mut s = self.settings.write().unwrap_or_else(|e| e.into_inner());
            for (k, v) in &changes {
                s.insert(k.clone(), v.clone());
            }
        }
        self.notify(json!({"type": "settings_changed", "settings": changes}))
    }
    pub fn settings(&self) -> serde_json::Map<String, Value> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The conversation context kept by this session (user/assistant/tool messages).
    pub async fn history(&self) -> Vec<ChatMessage> {
        self.history.lock().await.clone()
    }
    /// Append a message to the context (e.g. a game line mirrored into the session).
    pub async fn push_history(&self, m: ChatMessage) {
        let mut h = self.history.lock().await;
        h.push(m);
        let excess = h.len().saturating_sub(CONTEXT_MESSAGES * 4);
        if excess > 0 {
            h.drain(..excess);
        }
    }
}

/// Every character's session manager.
#[derive(Default)]
pub struct Sessions {
    map: RwLock<HashMap<String, Arc<SessionManager>>>,
}

impl Sessions {
    /// The manager of `name`, created when missing.
    pub fn ensure(&self, name: &str) -> Arc<SessionManager> {
        if let Some(m) = self.get(name) {
            return m;
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.entry(name.to_string())
            .or_insert_with(|| Arc::new(SessionManager::new(name)))
            .clone()
    }
    pub fn get(&self, name: &str) -> Option<Arc<SessionManager>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
    pub fn remove(&self, name: &str) -> Option<Arc<SessionManager>> {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name)
    }
    /// Move a manager to a new name (after a rename); its tools move with it.
    pub fn rename(&self, old: &str, new: &str) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = map.remove(old) {
            *m.name.write().unwrap_or_else(|e| e.into_inner()) = new.to_string();
            map.insert(new.to_string(), m);
        } else {
            map.entry(new.to_string())
                .or_insert_with(|| Arc::new(SessionManager::new(new)));
        }
    }
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }
    pub fn all(&self) -> Vec<Arc<SessionManager>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
    /// Is `name`'s session active?
    pub fn is_active(&self, name: &str) -> bool {
        self.get(name).is_some_and(|m| m.is_active())
    }
    /// Remove every tool of a callback origin from every role.
    pub fn evict_origin(&self, origin: &str) -> usize {
        self.all().iter().map(|m| m.remove_origin(origin)).sum()
    }
    /// Tell every open connection of every character.
    pub fn notify_all(&self, frame: Value) -> usize {
        self.all().iter().map(|m| m.notify(frame.clone())).sum()
    }
}

// -------------------------------------------------------------------- WebSocket

/// `GET /ws/{persona_name}`.
pub async fn ws_handler(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    ws: WebSocketUpgrade,
) -> Response {
    if !st.characters.exists(&name) {
        return SuccessError::new(format!("character {name:?} does not exist"))
            .code("character_not_found")
            .status(StatusCode::NOT_FOUND);
    }
    let mgr = st.sessions.ensure(&name);
    ws.max_message_size(1024 * 1024)
        .on_upgrade(move |socket| run_connection(st, mgr, socket))
        .into_response()
}

async fn run_connection(st: AppState, mgr: Arc<SessionManager>, mut socket: WebSocket) {
    use crate::chat_dialect::{self, Dialect, Inbound};
    let (id, mut rx, tx) = mgr.attach();
    let _ = tx.send(Outbound::Frame(
        json!({"type": "session_started", "persona_name": mgr.name(), "input_mode": "text"}),
    ));
    // The dialect is known from the first client frame; until then (at most
    // chat_dialect::GRACE) server frames are held (crate::chat_dialect).
    let mut dialect: Option<Dialect> = None;
    let mut held: Vec<Value> = Vec::new();
    let mut original = chat_dialect::Original::default();
    let grace = tokio::time::sleep(chat_dialect::GRACE);
    tokio::pin!(grace);
    loop {
        let frames: Vec<Value> = tokio::select! {
            _ = &mut grace, if dialect.is_none() => {
                dialect = Some(Dialect::Native);
                std::mem::take(&mut held)
            }
            out = rx.recv() => match out {
                Some(Outbound::Frame(v)) => match dialect {
                    None => { held.push(v); Vec::new() }
                    Some(Dialect::Native) => vec![v],
                    Some(Dialect::Original) => original.outbound(&v),
                },
                Some(Outbound::Close) | None => {
                    let _ = socket.send(Message::Close(None)).await;
                    break;
                }
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(t))) => {
                    let mut out = Vec::new();
                    if dialect.is_none() {
                        let d = chat_dialect::detect(t.as_str());
                        dialect = Some(d);
                        for v in std::mem::take(&mut held) {
                            match d {
                                Dialect::Native => out.push(v),
                                Dialect::Original => out.extend(original.outbound(&v)),
                            }
                        }
                    }
                    if dialect == Some(Dialect::Original) {
                        match original.inbound(t.as_str()) {
                            Inbound::Reply(f) => out.extend(f),
                            Inbound::Turn(text) => start_turn(&st, &mgr, &tx, text, InputSource::Text),
                            Inbound::Ignore => {}
                        }
                    } else {
                        handle_client_frame(&st, &mgr, &tx, t.as_str());
                    }
                    out
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => Vec::new(),
            },
        };
        let mut closed = false;
        for v in frames {
            if socket
                .send(Message::Text(v.to_string().into()))
                .await
                .is_err()
            {
                closed = true;
                break;
            }
        }
        if closed {
            break;
        }
    }
    mgr.detach(id);
}

fn handle_client_frame(
    st: &AppState,
    mgr: &Arc<SessionManager>,
    tx: &mpsc::UnboundedSender<Outbound>,
    text: &str,
) {
    let send_err = |code: &str, msg: &str| {
        let _ = tx.send(Outbound::Frame(
            json!({"type": "error", "code": code, "error": msg}),
        ));
    };
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return send_err("invalid_frame", "frames must be JSON objects");
    };
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let source = match kind {
        "user_text" => InputSource::Text,
        "voice_transcript" => InputSource::Voice,
        "ping" => {
            let _ = tx.send(Outbound::Frame(json!({"type": "pong"})));
            return;
        }
        _ => return send_err("unknown_type", "unknown frame type"),
    };
    let Some(user_text) = v.get("text").and_then(Value::as_str).map(str::to_string) else {
        return send_err("missing_text", "text is required");
    };
    start_turn(st, mgr, tx, user_text, source);
}

/// Run one chat turn in the background, then send `turn_end`.
fn start_turn(
    st: &AppState,
    mgr: &Arc<SessionManager>,
    tx: &mpsc::UnboundedSender<Outbound>,
    user_text: String,
    source: InputSource,
) {
    let (st, mgr, tx) = (st.clone(), mgr.clone(), tx.clone());
    tokio::spawn(async move {
        let _turn = mgr.turn.lock().await;
        run_turn(&st, &mgr, &tx, user_text, source).await;
        let _ = tx.send(Outbound::Frame(json!({"type": "turn_end"})));
    });
}

fn system_prompt(st: &AppState, name: &str) -> String {
    let profile = st.characters.profile(name).unwrap_or(Value::Null);
    let custom = profile
        .get("system_prompt")
        .or_else(|| {
            profile
                .get("_reserved")
                .and_then(|r| r.get("system_prompt"))
        })
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty());
    match custom {
        Some(p) => p.replace("{name}", name),
        None => format!("You are {name}, a warm and playful desktop companion character. Keep answers short and natural."),
    }
}

/// One chat turn: game routing, then model rounds with tool calls.
async fn run_turn(
    st: &AppState,
    mgr: &SessionManager,
    tx: &mpsc::UnboundedSender<Outbound>,
    text: String,
    source: InputSource,
) {
    let name = mgr.name();
    let send = |v: Value| {
        let _ = tx.send(Outbound::Frame(v));
    };
    st.hooks.observe_input(&name, &text, source);
    if let Some(router) = st.hooks.input_router() {
        if let Some(result) = router.route(name.clone(), text.clone(), source).await {
            let mut frame = json!({"type": "game_input"});
            if let (Some(f), Value::Object(r)) = (frame.as_object_mut(), result) {
                f.extend(r);
            }
            return send(frame);
        }
    }
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        let e = LlmError::NotConfigured;
        return send(json!({"type": "error", "code": e.code(), "error": e.to_string()}));
    };
    // The context starts from the stored history, so a restart, a reconnect or a
    // second window continues the same conversation, and lines other features
    // wrote (onboarding, proactive chat, a memory-browser edit) are seen.
    let prior: Vec<ChatMessage> = st
        .history
        .tail(&name, CONTEXT_MESSAGES)
        .await
        .into_iter()
        .map(|e| match e.speaker {
            Speaker::Human => ChatMessage::user(e.text().to_string()),
            Speaker::Ai => ChatMessage::assistant(e.text().to_string()),
            Speaker::System => ChatMessage::system(e.text().to_string()),
        })
        .collect();
    // Long-term memory (persona, the facts most relevant to this message) joins
    // the system prompt; a slow or failing memory never holds the turn up.
    const MEMORY_CONTEXT_TIMEOUT: Duration = Duration::from_millis(500);
    let recall = st.hooks.memory_recall();
    let memory = match &recall {
        Some(r) => tokio::time::timeout(
            MEMORY_CONTEXT_TIMEOUT,
            r.context(name.clone(), text.clone()),
        )
        .await
        .ok()
        .flatten(),
        None => None,
    };
    let system = match memory {
        Some(m) => format!("{}\n\n{m}", system_prompt(st, &name)),
        None => system_prompt(st, &name),
    };
    // This turn's messages: the input, then model rounds and tool results.
    let mut turn = vec![ChatMessage::user(text.clone())];
    mgr.push_history(ChatMessage::user(text.clone())).await;
    let opts = CallOptions {
        character: name.clone(),
        ..Default::default()
    };
    let mut final_text = String::new();
    for _round in 0..MAX_TOOL_ROUNDS {
        let mut messages = vec![ChatMessage::system(system.clone())];
        messages.extend(prior.iter().cloned());
        messages.extend(turn.iter().cloned());
        let mut tools: Vec<_> = mgr.tools().iter().map(RegisteredTool::spec).collect();
        // Built-in memory tools (a registered tool of the same name wins).
        if let Some(r) = &recall {
            for t in r.tools(&name) {
                if !tools.iter().any(|x| x.name == t.name) {
                    tools.push(t);
                }
            }
        }
        let on_delta = |d: &str| send(json!({"type": "assistant_delta", "text": d}));
        let c = match st
            .llm
            .stream_at(&ep, Slot::Conversation, &messages, &tools, &opts, &on_delta)
            .await
        {
            Ok(c) => c,
            Err(e) => {
                return send(json!({"type": "error", "code": e.code(), "error": e.to_string()}))
            }
        };
        final_text.push_str(&c.content);
        if c.tool_calls.is_empty() {
            mgr.push_history(ChatMessage::assistant(c.content)).await;
            break;
        }
        let asked = ChatMessage {
            role: "assistant".into(),
            content: Some(c.content.clone()).filter(|s| !s.is_empty()),
            tool_calls: c.tool_calls.clone(),
            tool_call_id: None,
        };
        turn.push(asked.clone());
        mgr.push_history(asked).await;
        for call in &c.tool_calls {
            send(json!({"type": "tool_call", "name": call.function.name, "call_id": call.id}));
            let result = match mgr.tool(&call.function.name) {
                Some(tool) => {
                    st.tools
                        .dispatch(&st.sessions, &tool, &call.id, &call.function.arguments)
                        .await
                }
                None => {
                    let builtin = match &recall {
                        Some(r) => {
                            r.call(
                                name.clone(),
                                call.function.name.clone(),
                                call.function.arguments.clone(),
                            )
                            .await
                        }
                        None => None,
                    };
                    builtin.unwrap_or_else(|| crate::tools::ToolResult {
                        content: format!(
                            "tool error: no tool named {} is registered",
                            call.function.name
                        ),
                        is_error: true,
                    })
                }
            };
            send(
                json!({"type": "tool_result", "name": call.function.name, "call_id": call.id, "is_error": result.is_error}),
            );
            let answer = ChatMessage::tool(&call.id, result.content);
            turn.push(answer.clone());
            mgr.push_history(answer).await;
        }
    }
    // The character may have been renamed during the turn: write under its current name.
    persist_exchange(st, &mgr.name(), &text, &final_text).await;
    if let Some(r) = &recall {
        r.after_turn(&mgr.name());
    }
}

/// Append the exchange to the character's history. A corrupt history file is
/// left untouched.
async fn persist_exchange(st: &AppState, name: &str, user: &str, assistant: &str) {
    let entries = vec![Entry::human(user), Entry::ai(assistant)];
    if let Err(e) = st.history.append(name, entries).await {
        tracing::warn!("cannot append to the recent history of {name}: {e}");
    }
}

/// The chat WebSocket route (documented in the OpenAPI listing).
pub fn api(state: &AppState) -> crate::Api {
    crate::Api::new(state, "sessions").get(
        "/ws/{persona_name}",
        "chat WebSocket of a character",
        ws_handler,
    )
}

//! One chat turn of a character: game routing, the model rounds with tool calls,
//! and the append of the exchange to the stored history. The socket that starts
//! a turn is `http::chat_socket`; frames go back through the session's sender.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::frames::{Marks, ServerFrame};
use crate::history::{Entry, Speaker};
use crate::llm::{CallOptions, ChatMessage, LlmError, ModelCall};
use crate::providers::Slot;
use crate::sessions::{Outbound, SessionManager, CONTEXT_MESSAGES};
use crate::speech::pipeline::{Speech, Voice};
use crate::state::{AppState, InputSource};
use crate::tools::{RegisteredTool, ToolResult};

/// Most model rounds (tool call → result → model) in one turn.
pub const MAX_TOOL_ROUNDS: usize = 8;

/// `source` of a reply stored after its turn failed midway (docs/memory.md).
pub const PARTIAL_SOURCE: &str = "partial";

/// Run one chat turn in the background, then send `turn_end`.
pub fn start_turn(
    st: &AppState,
    mgr: &Arc<SessionManager>,
    tx: &mpsc::UnboundedSender<Outbound>,
    user_text: String,
    source: InputSource,
    voice: Option<Arc<Voice>>,
) {
    let (st, mgr, tx) = (st.clone(), mgr.clone(), tx.clone());
    tokio::spawn(async move {
        let _turn = mgr.turn.lock().await;
        let _chat = st.llm.chat_turn();
        run_turn(&st, &mgr, &tx, user_text, source, voice).await;
        crate::metrics::metrics().chat_turn();
        let _ = tx.send(Outbound::Frame(ServerFrame::turn_end()));
    });
}

/// Open a new conversation with the character's greeting (the card's
/// `first_mes` or the chosen alternate, `prompt::greeting`): when the stored
/// history is empty, the greeting goes to this connection as one assistant
/// message (`greeting: true`) and becomes the first line of the history.
pub fn start_greeting(
    st: &AppState,
    mgr: &Arc<SessionManager>,
    tx: &mpsc::UnboundedSender<Outbound>,
) {
    let (st, mgr, tx) = (st.clone(), mgr.clone(), tx.clone());
    // The turn lock is taken now, before any client frame is read, so a first
    // message sent at once waits for the greeting (it would otherwise race it
    // and the greeting would find the history no longer empty).
    let held = mgr.turn.clone().try_lock_owned().ok();
    tokio::spawn(async move {
        let _turn = match held {
            Some(g) => g,
            None => mgr.turn.clone().lock_owned().await,
        };
        let name = mgr.name();
        let Some(text) = crate::prompt::greeting(&st, &name).await else {
            return;
        };
        if !st.history.tail(&name, 1).await.is_empty() || !mgr.history().await.is_empty() {
            return;
        }
        if let Err(e) = st.history.append(&name, vec![Entry::ai(&text)]).await {
            tracing::warn!("cannot append the greeting of {name}: {e}");
            return;
        }
        let greeting = || Marks {
            greeting: true,
            ..Marks::default()
        };
        let _ = tx.send(Outbound::Frame(ServerFrame::AssistantDelta {
            text,
            marks: greeting(),
        }));
        let _ = tx.send(Outbound::Frame(ServerFrame::TurnEnd { marks: greeting() }));
    });
}

/// One chat turn: game routing, then model rounds with tool calls.
async fn run_turn(
    st: &AppState,
    mgr: &SessionManager,
    tx: &mpsc::UnboundedSender<Outbound>,
    text: String,
    source: InputSource,
    voice: Option<Arc<Voice>>,
) {
    let name = mgr.name();
    let send = |f: ServerFrame| {
        let _ = tx.send(Outbound::Frame(f));
    };
    st.hooks.observe_input(&name, &text, source);
    if let Some(router) = st.hooks.input_router() {
        if let Some(result) = router.route(name.clone(), text.clone(), source).await {
            let result = match result {
                Value::Object(r) => r,
                _ => serde_json::Map::new(),
            };
            return send(ServerFrame::GameInput { result });
        }
    }
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return send(error_frame(&LlmError::NotConfigured));
    };
    // The reply is spoken as it streams when the connection has a voice.
    let speech = match &voice {
        Some(v) => v.begin(&name).await,
        None => None,
    };
    let turn_id = speech.as_ref().map(|s| s.id().to_string());
    // The context starts from the stored history, so a restart, a reconnect or a
    // second window continues the same conversation, and lines other features
    // wrote (onboarding, proactive chat, a memory-browser edit) are seen. Empty
    // lines are skipped: a model shown empty answers learns to answer nothing.
    let prior: Vec<ChatMessage> = st
        .history
        .tail(&name, CONTEXT_MESSAGES)
        .await
        .into_iter()
        .filter(|e| !e.text().trim().is_empty())
        .map(|e| match e.speaker {
            Speaker::Human => ChatMessage::user(e.text().to_string()),
            Speaker::Ai => ChatMessage::assistant(e.text().to_string()),
            Speaker::System => ChatMessage::system(e.text().to_string()),
        })
        .collect();
    // The context budget (crate::context): the window of the model less the
    // room kept for the answer.
    let window = st.llm.context_window(Slot::Conversation, &ep).await;
    // `conversationTools: false`: a model without tool support gets none.
    let tools_on = st.llm.core_config().await.get("conversationTools") != Some(&Value::Bool(false));
    let reserve = crate::context::reply_reserve(window);
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
    // The character's prompt (crate::prompt): the lorebook scans the latest
    // messages, this input last.
    let scan: Vec<String> = prior
        .iter()
        .filter_map(|m| m.content.clone())
        .chain(std::iter::once(text.clone()))
        .collect();
    let prompt = crate::prompt::for_character(st, &name, &scan).await;
    let system = match memory {
        Some(m) => format!("{}\n\n{m}", prompt.system),
        None => prompt.system,
    };
    // This turn's messages: the input, then model rounds and tool results.
    let mut turn = vec![ChatMessage::user(text.clone())];
    mgr.push_history(ChatMessage::user(text.clone())).await;
    let opts = CallOptions {
        character: name.clone(),
        max_tokens: u32::try_from(reserve).ok(),
        ..Default::default()
    };
    let mut final_text = String::new();
    // History messages allowed in the prompt; halved once when the server
    // refuses the prompt as too long (or answers nothing).
    let mut history_cap = prior.len();
    let mut shrunk = false;
    let mut round = 0;
    let mut failure: Option<(LlmError, bool)> = None;
    let mut finished = false;
    // Set once a streamed round with tools failed and its whole retry worked:
    // the turn's later rounds with tools are asked whole at once.
    let mut whole_with_tools = false;
    while round < MAX_TOOL_ROUNDS {
        let mut tools: Vec<_> = mgr.tools().iter().map(RegisteredTool::spec).collect();
        // Built-in memory tools (a registered tool of the same name wins).
        // The last round offers no tools: the model has to answer in words.
        if !tools_on || round + 1 == MAX_TOOL_ROUNDS {
            tools.clear();
        } else if let Some(r) = &recall {
            for t in r.tools(&name) {
                if !tools.iter().any(|x| x.name == t.name) {
                    tools.push(t);
                }
            }
        }
        let head = ChatMessage::system(system.clone());
        let post = prompt.post_history.clone().map(ChatMessage::system);
        let fixed = crate::context::message_tokens(&head)
            + crate::context::messages_tokens(&turn)
            + post.as_ref().map_or(0, crate::context::message_tokens)
            + crate::context::tools_tokens(&tools);
        let budget = window.saturating_sub(reserve).saturating_sub(fixed);
        let keep = crate::context::fitting_tail(&prior, budget).min(history_cap);
        let mut messages = vec![head];
        messages.extend(prior[prior.len() - keep..].iter().cloned());
        messages.extend(turn.iter().cloned());
        messages.extend(post);
        // What this round streamed (kept, marked, when the stream breaks off).
        let streamed = std::sync::Mutex::new(String::new());
        let on_delta = |d: &str| {
            streamed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_str(d);
            if let Some(s) = &speech {
                s.push(d);
            }
            send(ServerFrame::delta(d, turn_id.clone()))
        };
        let partial = || streamed.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let call = ModelCall {
            ep: &ep,
            slot: Slot::Conversation,
            messages: &messages,
            tools: &tools,
            options: &opts,
        };
        let mut r = if whole_with_tools && !tools.is_empty() {
            Err(LlmError::EmptyReply)
        } else {
            st.llm.stream_call(&call, &on_delta).await
        };
        let mid_stream = !partial().trim().is_empty();
        // A server that cannot stream tool calls (llama.cpp's Python server
        // answers an empty stream, others an error) may answer them whole.
        let failed = match &r {
            Err(e) => *e == LlmError::EmptyReply || (e.is_refusal() && !e.is_context_overflow()),
            Ok(c) => c.content.trim().is_empty() && c.tool_calls.is_empty(),
        };
        if !tools.is_empty() && !mid_stream && failed {
            r = st.llm.complete_call(&call).await;
            if let Ok(c) = &r {
                if !c.content.trim().is_empty() || !c.tool_calls.is_empty() {
                    whole_with_tools = true;
                }
                if !c.content.is_empty() {
                    on_delta(&c.content);
                }
            }
        }
        let r = match r {
            Ok(c) if c.content.trim().is_empty() && c.tool_calls.is_empty() => {
                Err(LlmError::EmptyReply)
            }
            r => r,
        };
        let c = match r {
            Ok(c) => c,
            Err(e) => {
                let mid_stream = !partial().trim().is_empty();
                let too_long = e.is_context_overflow() || e == LlmError::EmptyReply;
                if too_long && !shrunk && !mid_stream && keep > 0 {
                    shrunk = true;
                    history_cap = keep / 2;
                    continue;
                }
                if mid_stream {
                    final_text.push_str(&partial());
                }
                failure = Some((e, mid_stream));
                break;
            }
        };
        round += 1;
        final_text.push_str(&c.content);
        if c.tool_calls.is_empty() {
            mgr.push_history(ChatMessage::assistant(c.content)).await;
            finished = true;
            break;
        }
        // `content: ""`, not null: llama.cpp rejects a null content.
        let asked = ChatMessage {
            role: "assistant".into(),
            content: Some(c.content.clone()),
            tool_calls: c.tool_calls.clone(),
            tool_call_id: None,
        };
        turn.push(asked.clone());
        mgr.push_history(asked).await;
        for call in &c.tool_calls {
            send(ServerFrame::ToolCall {
                name: call.function.name.clone(),
                call_id: call.id.clone(),
            });
            let result = match mgr.tool(&call.function.name) {
                Some(tool) => {
                    let outcome = st
                        .tools
                        .call(&tool, &call.id, &call.function.arguments)
                        .await;
                    if let Some(eviction) = &outcome.evict {
                        eviction.apply(&st.sessions);
                    }
                    outcome.result
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
                    builtin.unwrap_or_else(|| ToolResult {
                        content: format!(
                            "tool error: no tool named {} is registered",
                            call.function.name
                        ),
                        is_error: true,
                    })
                }
            };
            send(ServerFrame::ToolResult {
                name: call.function.name.clone(),
                call_id: call.id.clone(),
                is_error: result.is_error,
            });
            let answer = ChatMessage::tool(&call.id, result.content);
            turn.push(answer.clone());
            mgr.push_history(answer).await;
        }
    }
    let interrupted = speech.as_ref().is_some_and(Speech::interrupted);
    if let Some(s) = speech {
        s.finish();
    }
    if !finished {
        // A failed model call, or the model still asking for tools after the last round.
        let (code, message, status) = match &failure {
            Some((e, true)) => (
                e.code(),
                format!("the reply broke off midway: {e}"),
                e.upstream_status(),
            ),
            Some((e, false)) => (e.code(), e.to_string(), e.upstream_status()),
            None => (
                "tool_round_limit",
                format!("the model still asked for tools after {MAX_TOOL_ROUNDS} rounds"),
                None,
            ),
        };
        tracing::warn!(
            character = %name,
            code,
            upstream_status = ?status,
            "chat turn failed: {message}"
        );
        send(ServerFrame::Error {
            code: code.to_string(),
            error: message,
            speech_id: None,
            partial: Some(!final_text.trim().is_empty()),
        });
        // The user's line stays; a partial reply is kept, marked.
        let mut entries = vec![Entry::human(&text)];
        if !final_text.trim().is_empty() {
            entries.push(Entry::ai(&final_text).from_source(PARTIAL_SOURCE));
        }
        if let Err(e) = st.history.append(&mgr.name(), entries).await {
            tracing::warn!("cannot append to the recent history of {name}: {e}");
            send(history_not_saved(&e));
        }
        return;
    }
    // The character may have been renamed during the turn: write under its current name.
    if let Err(e) = persist_exchange(st, &mgr.name(), &text, &final_text, interrupted).await {
        send(history_not_saved(&e));
    }
    if let Some(r) = &recall {
        r.after_turn(&mgr.name());
    }
}

/// A turn's error frame.
fn error_frame(e: &LlmError) -> ServerFrame {
    ServerFrame::error(e.code(), e.to_string())
}

/// The error frame of a turn whose exchange could not be stored: the reply was
/// on the socket already; the code says why it is not in the history
/// (`storage_full`, `storage_read_only`, else `history_not_saved`).
fn history_not_saved(e: &crate::store::StoreError) -> ServerFrame {
    let (code, why) = match crate::disk::current() {
        Some(f) => (f.code(), f.message().to_string()),
        None => ("history_not_saved", e.to_string()),
    };
    ServerFrame::error(
        code,
        format!("this exchange was not saved to the history: {why}"),
    )
}

/// Append the exchange to the character's history (a reply whose speech was
/// cut off is marked `interrupted`). A corrupt history file is left untouched.
async fn persist_exchange(
    st: &AppState,
    name: &str,
    user: &str,
    assistant: &str,
    interrupted: bool,
) -> Result<(), crate::store::StoreError> {
    let mut reply = Entry::ai(assistant);
    if interrupted {
        reply = reply.interrupted();
    }
    let entries = vec![Entry::human(user), reply];
    let r = st.history.append(name, entries).await;
    if let Err(e) = &r {
        tracing::warn!("cannot append to the recent history of {name}: {e}");
    }
    r
}

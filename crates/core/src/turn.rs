//! One chat turn of a character: game routing, the model rounds with tool calls,
//! and the append of the exchange to the stored history. The socket that starts
//! a turn is `http::chat_socket`; frames go back through the session's sender.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::frames::ServerFrame;
use crate::history::{Entry, Speaker};
use crate::llm::{CallOptions, ChatMessage, LlmError, ModelCall};
use crate::providers::Slot;
use crate::sessions::{Outbound, SessionManager, CONTEXT_MESSAGES};
use crate::speech::pipeline::{Speech, Voice};
use crate::state::{AppState, InputSource};
use crate::tools::{RegisteredTool, ToolResult};

/// Most model rounds (tool call → result → model) in one turn.
pub const MAX_TOOL_ROUNDS: usize = 8;

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
        run_turn(&st, &mgr, &tx, user_text, source, voice).await;
        crate::metrics::metrics().chat_turn();
        let _ = tx.send(Outbound::Frame(ServerFrame::TurnEnd.to_value()));
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
    tokio::spawn(async move {
        let name = mgr.name();
        let Some(text) = crate::prompt::greeting(&st, &name).await else {
            return;
        };
        let _turn = mgr.turn.lock().await;
        if !st.history.tail(&name, 1).await.is_empty() || !mgr.history().await.is_empty() {
            return;
        }
        if let Err(e) = st.history.append(&name, vec![Entry::ai(&text)]).await {
            tracing::warn!("cannot append the greeting of {name}: {e}");
            return;
        }
        let _ = tx.send(Outbound::Frame(
            json!({"type": "assistant_delta", "text": text, "greeting": true}),
        ));
        let _ = tx.send(Outbound::Frame(
            json!({"type": "turn_end", "greeting": true}),
        ));
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
        ..Default::default()
    };
    let mut final_text = String::new();
    for _round in 0..MAX_TOOL_ROUNDS {
        let mut messages = vec![ChatMessage::system(system.clone())];
        messages.extend(prior.iter().cloned());
        messages.extend(turn.iter().cloned());
        if let Some(p) = &prompt.post_history {
            messages.push(ChatMessage::system(p.clone()));
        }
        let mut tools: Vec<_> = mgr.tools().iter().map(RegisteredTool::spec).collect();
        // Built-in memory tools (a registered tool of the same name wins).
        if let Some(r) = &recall {
            for t in r.tools(&name) {
                if !tools.iter().any(|x| x.name == t.name) {
                    tools.push(t);
                }
            }
        }
        let on_delta = |d: &str| {
            if let Some(s) = &speech {
                s.push(d);
            }
            send(
                ServerFrame::AssistantDelta {
                    text: d.to_string(),
                    turn_id: turn_id.clone(),
                }
                .to_value(),
            )
        };
        let c = match st
            .llm
            .stream_call(
                &ModelCall {
                    ep: &ep,
                    slot: Slot::Conversation,
                    messages: &messages,
                    tools: &tools,
                    options: &opts,
                },
                &on_delta,
            )
            .await
        {
            Ok(c) => c,
            Err(e) => return send(error_frame(&e)),
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
            send(
                json!({"type": "tool_result", "name": call.function.name, "call_id": call.id, "is_error": result.is_error}),
            );
            let answer = ChatMessage::tool(&call.id, result.content);
            turn.push(answer.clone());
            mgr.push_history(answer).await;
        }
    }
    let interrupted = speech.as_ref().is_some_and(Speech::interrupted);
    if let Some(s) = speech {
        s.finish();
    }
    // The character may have been renamed during the turn: write under its current name.
    persist_exchange(st, &mgr.name(), &text, &final_text, interrupted).await;
    if let Some(r) = &recall {
        r.after_turn(&mgr.name());
    }
}

/// A turn's error frame.
fn error_frame(e: &LlmError) -> Value {
    ServerFrame::Error {
        code: e.code().to_string(),
        error: e.to_string(),
        speech_id: None,
    }
    .to_value()
}

/// Append the exchange to the character's history (a reply whose speech was
/// cut off is marked `interrupted`). A corrupt history file is left untouched.
async fn persist_exchange(
    st: &AppState,
    name: &str,
    user: &str,
    assistant: &str,
    interrupted: bool,
) {
    let mut reply = Entry::ai(assistant);
    if interrupted {
        reply = reply.interrupted();
    }
    let entries = vec![Entry::human(user), reply];
    if let Err(e) = st.history.append(name, entries).await {
        tracing::warn!("cannot append to the recent history of {name}: {e}");
    }
}

//! The chat WebSocket `GET /ws/{persona_name}`: the connection loop and
//! companiond's own frame protocol (the original application's is translated by
//! [`super::chat_dialect`]).
//!
//! Client frames: `{"type":"user_text","text":...}` (also `voice_transcript`, `ping`).
//! Server frames: `session_started`, `assistant_delta {text}`, `turn_end`,
//! `tool_call {name, call_id}`, `tool_result {name, call_id, is_error}`,
//! `game_input {...}` when a game route took the input, `error {code, error}`,
//! `pong`, plus the notifications other families send through the session.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::{Api, ErrorDoc};
use super::chat_dialect::{self, Dialect, Inbound};
use super::envelope::SuccessError;
use crate::sessions::{Outbound, SessionManager};
use crate::state::{AppState, InputSource};
use crate::turn::start_turn;

/// `GET /ws/{persona_name}`.
pub async fn ws_handler(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    ws: WebSocketUpgrade,
) -> Response {
    if !st.characters.exists(&name) {
        return unknown_character(&name);
    }
    let mgr = st.sessions.ensure(&name);
    ws.max_message_size(1024 * 1024)
        .on_upgrade(move |socket| run_connection(st, mgr, socket))
        .into_response()
}

async fn run_connection(st: AppState, mgr: Arc<SessionManager>, mut socket: WebSocket) {
    let (id, mut rx, tx) = mgr.attach();
    let _open = crate::metrics::metrics().chat_socket_open();
    let _ = tx.send(Outbound::Frame(
        json!({"type": "session_started", "persona_name": mgr.name(), "input_mode": "text"}),
    ));
    // The dialect is known from the first client frame; until then (at most
    // chat_dialect::GRACE) server frames are held (super::chat_dialect).
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

/// The chat WebSocket route (listed in the OpenAPI document; its frames are
/// described in docs/chat-protocol.md).
pub fn api(state: &AppState) -> Api {
    Api::new(state, "sessions")
        .about("The chat WebSocket: upgrade `GET /ws/{persona_name}`; its frames are described in docs/chat-protocol.md.")
        .get(
            "/ws/{persona_name}",
            "chat WebSocket of a character",
            ws_handler,
        )
        .id("chat_socket")
        .fails_with(ErrorDoc::observed(
            "no character of that name (no upgrade)",
            unknown_character("Nobody"),
        ))
}

/// The answer to an upgrade for a character that does not exist.
fn unknown_character(name: &str) -> Response {
    SuccessError::new(format!("character {name:?} does not exist"))
        .code("character_not_found")
        .status(StatusCode::NOT_FOUND)
}

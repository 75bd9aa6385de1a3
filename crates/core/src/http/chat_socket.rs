//! The chat WebSocket `GET /ws/{persona_name}`: the connection loop and
//! companiond's own frame protocol (the original application's is translated by
//! [`super::chat_dialect`]).
//!
//! Client frames: `{"type":"user_text","text":...}` (also `voice_transcript`, `ping`,
//! `voice {enabled}` to have replies spoken, `interrupt` to stop the speech,
//! `mic {state: start|stop}` and binary `NEKO` microphone frames, super::chat_mic).
//! Server frames: `session_started`, `assistant_delta {text}`, `turn_end`,
//! `tool_call {name, call_id}`, `tool_result {name, call_id, is_error}`,
//! `game_input {...}` when a game route took the input, `error {code, error}`,
//! `pong`, `voice_state`, `speech_start`, binary speech frames, `speech_end`, plus
//! the notifications other families send through the session.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::{Api, ErrorDoc};
use super::chat_dialect::{self, Dialect, Inbound};
use super::chat_mic::{Mic, Outcome as MicOutcome};
use super::envelope::SuccessError;
use crate::frames::{speech_binary, EndReason, ServerFrame, PCM_S16LE};
use crate::sessions::{Outbound, SessionManager};
use crate::speech::pipeline::{SpeechEvent, SpeechOut, Voice};
use crate::state::{AppState, InputSource};
use crate::turn::{start_greeting, start_turn};

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
    let _ = tx.send(Outbound::Frame(ServerFrame::SessionStarted {
        persona_name: Some(mgr.name()),
        input_mode: "text".into(),
        request_id: None,
    }));
    start_greeting(&st, &mgr, &tx);
    // The dialect is known from the first client frame; until then (at most
    // chat_dialect::GRACE) server frames are held (super::chat_dialect).
    let mut dialect: Option<Dialect> = None;
    let mut held: Vec<ServerFrame> = Vec::new();
    let mut original = chat_dialect::Original::default();
    // Speech (crate::speech): the original's pages always play replies; a
    // companiond client opts in with {"type":"voice","enabled":true}.
    let voice = Voice::new(&st, &tx);
    let mut speaking = false;
    // The microphone (crate::hearing; super::chat_mic).
    let mut mic = Mic::new(&st, &tx, voice.echo());
    let grace = tokio::time::sleep(chat_dialect::GRACE);
    tokio::pin!(grace);
    loop {
        let mic_due = mic.deadline();
        let mut heard: Option<MicOutcome> = None;
        let frames: Vec<Message> = tokio::select! {
            _ = &mut grace, if dialect.is_none() => {
                dialect = Some(Dialect::Native);
                texts(std::mem::take(&mut held))
            }
            _ = tokio::time::sleep_until(mic_due.unwrap_or_else(Instant::now).into()), if mic_due.is_some() => {
                heard = Some(mic.tick(dialect.unwrap_or(Dialect::Native)));
                Vec::new()
            }
            out = rx.recv() => match out {
                Some(Outbound::Frame(v)) => {
                    let told = mic.observe(dialect, &v);
                    let mut m = match dialect {
                        None => { held.push(v); Vec::new() }
                        Some(Dialect::Native) => texts(vec![v]),
                        Some(Dialect::Original) => texts(original.outbound(&v)),
                    };
                    m.extend(told.map(|f| text_message(f.to_text())));
                    m
                }
                Some(Outbound::Speech(s)) => match dialect {
                    Some(d) if speaking => speech_messages(d, s),
                    _ => Vec::new(),
                },
                Some(Outbound::Heard(ev)) => {
                    heard = Some(mic.heard(dialect.unwrap_or(Dialect::Native), ev));
                    Vec::new()
                }
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
                        speaking = d == Dialect::Original;
                        if speaking {
                            mgr.set_voice(id, Some(voice.clone()));
                        }
                        for v in std::mem::take(&mut held) {
                            match d {
                                Dialect::Native => out.push(v),
                                Dialect::Original => out.extend(original.outbound(&v)),
                            }
                        }
                    }
                    let d = dialect.unwrap_or(Dialect::Native);
                    let action = if d == Dialect::Original {
                        match original.inbound(t.as_str()) {
                            Inbound::Reply(f) => {
                                out.extend(f);
                                Action::None
                            }
                            Inbound::Turn(text) => Action::Turn(text, InputSource::Text),
                            Inbound::Playback(on) => {
                                mgr.set_playing(id, on);
                                Action::None
                            }
                            Inbound::StartAudio { request_id } => Action::MicStart(request_id),
                            Inbound::Audio(f) => {
                                heard = Some(mic.frame(d, f));
                                Action::None
                            }
                            Inbound::StopAudio => Action::MicStop,
                            Inbound::VoiceControl(v) => {
                                out.extend(mic.control(&v));
                                Action::None
                            }
                            Inbound::Ignore => Action::None,
                        }
                    } else {
                        client_frame(t.as_str())
                    };
                    let mut msgs = texts(out);
                    match action {
                        Action::None => {}
                        Action::Reply(f) => msgs.push(text_message(f.to_text())),
                        Action::Turn(text, source) => {
                            if speaking {
                                msgs.extend(interrupt(&voice, d));
                            }
                            let speech = speaking.then(|| voice.clone());
                            start_turn(&st, &mgr, &tx, text, source, speech);
                        }
                        Action::Interrupt => {
                            msgs.extend(interrupt(&voice, d));
                            mark_after_turn(&mgr, &voice);
                        }
                        Action::Voice(on) => {
                            if !on {
                                msgs.extend(interrupt(&voice, d));
                            }
                            speaking = on;
                            mgr.set_voice(id, on.then(|| voice.clone()));
                            let provider = voice.provider(&mgr.name()).await.ok().flatten();
                            msgs.push(text_message(
                                ServerFrame::VoiceState {
                                    enabled: on,
                                    provider: provider.map(|p| p.name().to_string()),
                                }
                                .to_text(),
                            ));
                        }
                        Action::MicStart(request_id) => {
                            let f = mic.start(&mgr, d, request_id).await;
                            msgs.extend(f.iter().map(|f| text_message(f.to_text())));
                        }
                        Action::MicStop => heard = Some(mic.stop(d, "client")),
                    }
                    msgs
                }
                Some(Ok(Message::Binary(b))) => {
                    let d = *dialect.get_or_insert(Dialect::Native);
                    let mut msgs = texts(std::mem::take(&mut held));
                    let o = mic.frame(d, crate::hearing::frame::parse_binary(&b));
                    msgs.extend(mic_messages(&st, &mgr, &tx, &voice, &mut original, speaking, d, o));
                    msgs
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => Vec::new(),
            },
        };
        let mut frames = frames;
        if let Some(o) = heard {
            let d = dialect.unwrap_or(Dialect::Native);
            frames.extend(mic_messages(
                &st,
                &mgr,
                &tx,
                &voice,
                &mut original,
                speaking,
                d,
                o,
            ));
        }
        let mut closed = false;
        for m in frames {
            if socket.send(m).await.is_err() {
                closed = true;
                break;
            }
        }
        if closed {
            break;
        }
    }
    drop(mic);
    voice.close();
    mgr.detach(id);
}

/// Mark the cut-off reply once its turn has stored it.
fn mark_after_turn(mgr: &Arc<SessionManager>, voice: &Arc<Voice>) {
    let (mgr, voice) = (mgr.clone(), voice.clone());
    tokio::spawn(async move {
        let _turn = mgr.turn.lock().await;
        voice.mark_interrupted_reply(&mgr.name()).await;
    });
}

/// The socket messages of a microphone event; speech heard over the
/// character's cuts it off (barge-in) and a transcript starts a voice turn.
#[allow(clippy::too_many_arguments)]
fn mic_messages(
    st: &AppState,
    mgr: &Arc<SessionManager>,
    tx: &mpsc::UnboundedSender<Outbound>,
    voice: &Arc<Voice>,
    original: &mut chat_dialect::Original,
    speaking: bool,
    d: Dialect,
    o: MicOutcome,
) -> Vec<Message> {
    let mut msgs: Vec<Message> = o.frames.iter().map(|f| text_message(f.to_text())).collect();
    if o.barge_in && speaking && voice.is_speaking() {
        // Spoken over: only the part the user heard stays in the history.
        msgs.extend(cut_messages(voice.interrupt_heard(), d));
        mark_after_turn(mgr, voice);
    }
    if let Some(text) = o.turn {
        if speaking {
            msgs.extend(interrupt(voice, d));
        }
        if d == Dialect::Original {
            original.voice_turn();
        }
        let speech = speaking.then(|| voice.clone());
        start_turn(st, mgr, tx, text, InputSource::Voice, speech);
    }
    msgs
}

fn text_message(t: String) -> Message {
    Message::Text(t.into())
}

fn texts(frames: Vec<ServerFrame>) -> Vec<Message> {
    frames
        .into_iter()
        .map(|f| text_message(f.to_text()))
        .collect()
}

/// Barge-in: stop the current speech and tell the client.
fn interrupt(voice: &Voice, dialect: Dialect) -> Vec<Message> {
    cut_messages(voice.interrupt(), dialect)
}

/// The client's frame for a cut-off speech.
fn cut_messages(
    cut: Option<crate::speech::pipeline::Interrupted>,
    dialect: Dialect,
) -> Vec<Message> {
    let Some(cut) = cut else {
        return Vec::new();
    };
    let frame = match dialect {
        Dialect::Original => ServerFrame::UserActivity {
            interrupted_speech_id: cut.speech_id,
        },
        Dialect::Native if cut.was_complete => return Vec::new(),
        Dialect::Native => ServerFrame::SpeechEnd {
            speech_id: cut.speech_id,
            reason: EndReason::Interrupted,
        },
    };
    vec![text_message(frame.to_text())]
}

/// The socket messages of a speech event (none once the speech was interrupted).
fn speech_messages(dialect: Dialect, s: SpeechOut) -> Vec<Message> {
    if !s.is_live() {
        return Vec::new();
    }
    let speech_id = s.speech_id.to_string();
    let frame = |f: ServerFrame| text_message(f.to_text());
    match (dialect, s.event) {
        (Dialect::Native, SpeechEvent::Start { turn_id }) => {
            vec![frame(ServerFrame::SpeechStart {
                speech_id,
                turn_id,
                stream: s.stream,
                sample_rate: crate::speech::OUTPUT_RATE,
                channels: 1,
                encoding: PCM_S16LE,
            })]
        }
        (Dialect::Original, SpeechEvent::Start { .. }) => Vec::new(),
        (Dialect::Native, SpeechEvent::Audio { pcm, permit }) => {
            let m = Message::Binary(speech_binary(s.stream, &pcm).into());
            drop(permit);
            vec![m]
        }
        (Dialect::Original, SpeechEvent::Audio { pcm, permit }) => {
            let m = vec![
                frame(ServerFrame::AudioChunk { speech_id }),
                Message::Binary(pcm.clone()),
            ];
            drop(permit);
            m
        }
        (Dialect::Native, SpeechEvent::Failed { code, message }) => {
            vec![frame(ServerFrame::Error {
                code: code.to_string(),
                error: message,
                speech_id: Some(speech_id),
                partial: None,
            })]
        }
        (Dialect::Original, SpeechEvent::Failed { code, message }) => {
            vec![frame(chat_dialect::status(
                &code.to_ascii_uppercase(),
                json!({"msg": message, "speech_id": speech_id}),
            ))]
        }
        (Dialect::Native, SpeechEvent::End(reason)) => {
            vec![frame(ServerFrame::SpeechEnd { speech_id, reason })]
        }
        (Dialect::Original, SpeechEvent::End(EndReason::Interrupted)) => {
            vec![frame(ServerFrame::UserActivity {
                interrupted_speech_id: speech_id,
            })]
        }
        (Dialect::Original, SpeechEvent::End(_)) => {
            vec![frame(ServerFrame::AudioDone { speech_id })]
        }
    }
}

/// What a companiond client frame asks for.
enum Action {
    None,
    Reply(ServerFrame),
    Turn(String, InputSource),
    Interrupt,
    Voice(bool),
    /// Open the microphone (the original's `request_id`).
    MicStart(Option<String>),
    /// Close the microphone; the open utterance is still recognised.
    MicStop,
}

fn client_frame(text: &str) -> Action {
    let err = |code: &str, msg: &str| Action::Reply(ServerFrame::error(code, msg));
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return err("invalid_frame", "frames must be JSON objects");
    };
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let source = match kind {
        "user_text" => InputSource::Text,
        "voice_transcript" => InputSource::Voice,
        "ping" => return Action::Reply(ServerFrame::Pong),
        "interrupt" => return Action::Interrupt,
        "voice" => {
            return match v.get("enabled") {
                Some(Value::Bool(on)) => Action::Voice(*on),
                _ => err("invalid_frame", "voice.enabled must be true or false"),
            }
        }
        "mic" => {
            return match v.get("state").and_then(Value::as_str) {
                Some("start") => Action::MicStart(None),
                Some("stop") => Action::MicStop,
                _ => err("invalid_frame", "mic.state must be \"start\" or \"stop\""),
            }
        }
        _ => return err("unknown_type", "unknown frame type"),
    };
    let Some(user_text) = v.get("text").and_then(Value::as_str).map(str::to_string) else {
        return err("missing_text", "text is required");
    };
    Action::Turn(user_text, source)
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

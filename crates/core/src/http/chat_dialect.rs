//! The original application's chat protocol on `/ws/{name}` (text mode), as pure
//! translation functions; `sessions::run_connection` applies them.
//!
//! The two protocols share the path and are told apart by the first client frame:
//! `{"action": ...}` is the original's, anything else companiond's own
//! (`{"type": ...}`). Until that frame arrives (or [`GRACE`] passes) the server's
//! frames are held, so an original client never sees companiond's greeting.
//!
//! Original client → internal:
//! * `start_session{input_type:"text"|"avatar_drop_image"|"user_image", request_id}` →
//!   `session_started{input_mode:"text", request_id}`; `audio` opens the
//!   microphone (`super::chat_socket`: `session_preparing`, then
//!   `session_started{input_mode:"audio"}` or `status` + `session_failed`); a
//!   capture start (`screen`, `camera`) → `status{SESSION_START_FAILED}` +
//!   `session_failed{input_mode}`, so the page falls back to text; any other
//!   type → `status{INVALID_INPUT_TYPE}`.
//! * `stream_data{input_type:"audio", data:[int16…]}` and binary `NEKO` frames
//!   are microphone audio (crate::hearing); `pause_session` / `end_session`
//!   stop the microphone and keep the socket; `voice_input_control` sets who
//!   owns the microphone (crate::hearing::lease).
//! * `stream_data{input_type:"text", data, request_id}` → one chat turn with `data`
//!   (no session needed first). Images are dropped.
//! * `ping` → `pong`; `avatar_interaction` → `avatar_interaction_ack{accepted:false}`;
//!   the status and housekeeping actions (`goodbye_state`, `language_update`, `greeting_check`, `cat_greeting_check`,
//!   `capture_bridge_status`, `capture_bridge_response`, `screenshot_response`,
//!   `telemetry`, `music_playback_state`) are accepted
//!   silently; `voice_play_start` / `voice_play_end` set whether the page is
//!   playing speech (`SessionManager::is_audio_playing`); anything else →
//!   `status{UNKNOWN_ACTION, details:{action}}`.
//!
//! Internal → original client:
//! * `assistant_delta{text, turn_id?}` → `gemini_response{text, isNewMessage, turn_id,
//!   request_id}` (`isNewMessage` true on a turn's first chunk; `turn_id` is the
//!   speech id of a spoken reply, else `turn-N`);
//! * speech events (`crate::speech`) → `audio_chunk{speech_id}` + one binary PCM
//!   frame, `audio_done{speech_id}`, `user_activity{interrupted_speech_id}` on
//!   barge-in (rendered by `super::chat_socket`);
//! * `turn_end` → `system{data:"turn end", request_id}`;
//! * `error{code, error}` → `status{message: "{\"code\":..,\"details\":{..}}"}`;
//! * `pong` and `catgirl_switched` pass; companiond's own greeting
//!   (`session_started` without a request), tool and notification frames are dropped.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{json, Value};

use crate::frames::ServerFrame;

/// How long the server's frames wait for the first client frame before the
/// connection is taken to speak companiond's own protocol.
pub const GRACE: Duration = Duration::from_millis(250);

/// Which protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// companiond's own `{type: ...}` frames.
    Native,
    /// The original application's `{action: ...}` frames.
    Original,
}

/// The dialect of a client's first text frame.
pub fn detect(first_frame: &str) -> Dialect {
    match serde_json::from_str::<Value>(first_frame) {
        Ok(v) if v.get("action").is_some_and(Value::is_string) && v.get("type").is_none() => {
            Dialect::Original
        }
        _ => Dialect::Native,
    }
}

/// What to do with an original client frame.
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// Send these (already original-shaped) frames back.
    Reply(Vec<ServerFrame>),
    /// Run one chat turn with this text.
    Turn(String),
    /// The page started (`true`) or stopped playing speech
    /// (`voice_play_start` / `voice_play_end`).
    Playback(bool),
    /// Open a microphone session (`start_session` with `input_type: "audio"`).
    StartAudio { request_id: Option<String> },
    /// Microphone audio (`stream_data` with `input_type: "audio"` and an int16
    /// array), or why it is not audio.
    Audio(Result<crate::hearing::frame::MicFrame, crate::hearing::frame::FrameError>),
    /// `pause_session` / `end_session`: the microphone session stops, the socket stays.
    StopAudio,
    /// A `voice_input_control` message (microphone ownership, crate::hearing::lease).
    VoiceControl(Value),
    /// Nothing to do.
    Ignore,
}

/// Per-connection state of an original-protocol connection.
#[derive(Debug, Default)]
pub struct Original {
    /// `request_id` of each turn started and not yet ended, oldest first.
    pending: VecDeque<Option<String>>,
    /// Whether the oldest pending turn has streamed a chunk yet.
    streamed: bool,
    turns: u64,
    turn_id: String,
}

const SILENT: &[&str] = &[
    "goodbye_state",
    "language_update",
    "greeting_check",
    "cat_greeting_check",
    "capture_bridge_status",
    "capture_bridge_response",
    "screenshot_response",
    "telemetry",
    "music_playback_state",
];

/// A `status` frame: `message` is a JSON *string* `{"code", "details"}`.
pub fn status(code: &str, details: Value) -> ServerFrame {
    ServerFrame::status(code, details)
}

fn request_id(v: &Value) -> Option<String> {
    v.get("request_id")
        .and_then(Value::as_str)
        .map(|s| s.chars().take(128).collect())
}

impl Original {
    /// Translate one client text frame.
    pub fn inbound(&mut self, text: &str) -> Inbound {
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return Inbound::Reply(vec![status(
                "INVALID_MESSAGE",
                json!({"msg": "frames must be JSON objects"}),
            )]);
        };
        let action = v.get("action").and_then(Value::as_str).unwrap_or("");
        match action {
            "ping" => Inbound::Reply(vec![ServerFrame::Pong]),
            "start_session" => {
                let input = v
                    .get("input_type")
                    .and_then(Value::as_str)
                    .unwrap_or("text");
                let rid = request_id(&v);
                match input {
                    "text" | "avatar_drop_image" | "user_image" => {
                        Inbound::Reply(vec![ServerFrame::SessionStarted {
                            persona_name: None,
                            input_mode: "text".into(),
                            request_id: rid,
                        }])
                    }
                    "audio" => Inbound::StartAudio { request_id: rid },
                    "screen" | "camera" => {
                        let msg = "screen and camera input are not available; use text";
                        Inbound::Reply(vec![
                            status("SESSION_START_FAILED", json!({"error": msg, "count": 1})),
                            ServerFrame::SessionFailed {
                                input_mode: input.to_string(),
                                message: msg.to_string(),
                                reason: None,
                            },
                        ])
                    }
                    other => Inbound::Reply(vec![status(
                        "INVALID_INPUT_TYPE",
                        json!({"input_type": other}),
                    )]),
                }
            }
            "stream_data" => {
                let input = v
                    .get("input_type")
                    .and_then(Value::as_str)
                    .unwrap_or("text");
                if input == "audio" {
                    return Inbound::Audio(crate::hearing::frame::parse_json(&v));
                }
                let data = v.get("data").and_then(Value::as_str).unwrap_or("");
                if input != "text" || data.trim().is_empty() {
                    return Inbound::Ignore;
                }
                self.pending.push_back(request_id(&v));
                Inbound::Turn(data.to_string())
            }
            "avatar_interaction" => Inbound::Reply(vec![ServerFrame::AvatarInteractionAck {
                interaction_id: v.get("interaction_id").cloned().unwrap_or(Value::Null),
                accepted: false,
                reason: "not_supported",
                turn_id: None,
            }]),
            "pause_session" | "end_session" => Inbound::StopAudio,
            "voice_input_control" => Inbound::VoiceControl(v),
            "voice_play_start" => Inbound::Playback(true),
            "voice_play_end" => Inbound::Playback(false),
            a if SILENT.contains(&a) => Inbound::Ignore,
            a => Inbound::Reply(vec![status("UNKNOWN_ACTION", json!({"action": a}))]),
        }
    }

    /// A turn started by voice (a transcript): its frames carry no request id.
    pub fn voice_turn(&mut self) {
        self.pending.push_back(None);
    }

    /// Translate one internal server frame (zero or more original frames).
    pub fn outbound(&mut self, frame: &ServerFrame) -> Vec<ServerFrame> {
        let rid = self.pending.front().cloned().flatten();
        match frame {
            ServerFrame::AssistantDelta { marks, .. } | ServerFrame::TurnEnd { marks }
                if marks.greeting =>
            {
                greeting(frame)
            }
            ServerFrame::AssistantDelta { text, marks } => {
                let first = !self.streamed;
                if first {
                    self.turns += 1;
                    // A spoken reply's turn id is its speech id (the page pairs them).
                    self.turn_id = match &marks.turn_id {
                        Some(t) => t.clone(),
                        None => format!("turn-{}", self.turns),
                    };
                    self.streamed = true;
                }
                vec![ServerFrame::GeminiResponse {
                    text: text.clone(),
                    is_new_message: first,
                    turn_id: self.turn_id.clone(),
                    request_id: rid,
                }]
            }
            ServerFrame::TurnEnd { .. } => {
                self.pending.pop_front();
                self.streamed = false;
                vec![ServerFrame::System {
                    data: TURN_END,
                    request_id: rid,
                }]
            }
            ServerFrame::Error { code, error, .. } => {
                let code = match code.as_str() {
                    "auth_failed" => "API_KEY_REJECTED",
                    "rate_limited" => "API_RATE_LIMIT",
                    _ => "API_UNKNOWN_ERROR",
                };
                vec![status(code, json!({"msg": error}))]
            }
            ServerFrame::Pong | ServerFrame::CatgirlSwitched { .. } => vec![frame.clone()],
            _ => Vec::new(),
        }
    }
}

/// The original's `system` frame that ends a turn.
const TURN_END: &str = "turn end";

/// A character card's greeting (`greeting: true`, crate::turn::start_greeting):
/// shown as a message of its own, outside the client's request/turn bookkeeping.
fn greeting(frame: &ServerFrame) -> Vec<ServerFrame> {
    match frame {
        ServerFrame::AssistantDelta { text, .. } => vec![ServerFrame::GeminiResponse {
            text: text.clone(),
            is_new_message: true,
            turn_id: "greeting".into(),
            request_id: None,
        }],
        ServerFrame::TurnEnd { .. } => vec![ServerFrame::System {
            data: TURN_END,
            request_id: None,
        }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_dialect() {
        assert_eq!(
            detect(r#"{"action":"capture_bridge_status"}"#),
            Dialect::Original
        );
        assert_eq!(
            detect(r#"{"type":"user_text","text":"hi"}"#),
            Dialect::Native
        );
        assert_eq!(detect("not json"), Dialect::Native);
    }

    #[test]
    fn one_text_exchange() {
        let mut o = Original::default();
        let r = o.inbound(r#"{"action":"start_session","input_type":"text","request_id":"R1"}"#);
        assert_eq!(
            r,
            Inbound::Reply(vec![ServerFrame::SessionStarted {
                persona_name: None,
                input_mode: "text".into(),
                request_id: Some("R1".into())
            }])
        );
        assert_eq!(
            o.inbound(
                r#"{"action":"stream_data","input_type":"text","data":"hi","request_id":"R2"}"#
            ),
            Inbound::Turn("hi".into())
        );
        let out = |o: &mut Original, f: ServerFrame| -> Vec<Value> {
            o.outbound(&f).iter().map(ServerFrame::to_value).collect()
        };
        let a = out(&mut o, ServerFrame::delta("Hel", None));
        assert_eq!(a[0]["isNewMessage"], true);
        assert_eq!(a[0]["request_id"], "R2");
        let b = out(&mut o, ServerFrame::delta("lo", None));
        assert_eq!(b[0]["isNewMessage"], false);
        assert_eq!(a[0]["turn_id"], b[0]["turn_id"]);
        assert_eq!(
            out(&mut o, ServerFrame::turn_end()),
            vec![json!({"type":"system","data":"turn end","request_id":"R2"})]
        );
        assert!(o
            .outbound(&ServerFrame::SessionStarted {
                persona_name: Some("x".into()),
                input_mode: "text".into(),
                request_id: None
            })
            .is_empty());
        assert_eq!(
            o.inbound(r#"{"action":"capture_bridge_status","available":false}"#),
            Inbound::Ignore
        );
        assert_eq!(
            o.inbound(r#"{"action":"ping"}"#),
            Inbound::Reply(vec![ServerFrame::Pong])
        );
        match o.inbound(r#"{"action":"dance"}"#) {
            Inbound::Reply(f) => {
                assert!(f[0].to_value()["message"]
                    .as_str()
                    .unwrap()
                    .contains("UNKNOWN_ACTION"))
            }
            other => panic!("{other:?}"),
        }
        match o.inbound(r#"{"action":"start_session","input_type":"screen"}"#) {
            Inbound::Reply(f) => assert_eq!(f[1].to_value()["type"], "session_failed"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            o.inbound(r#"{"action":"start_session","input_type":"audio","request_id":"A"}"#),
            Inbound::StartAudio {
                request_id: Some("A".into())
            }
        );
        assert!(matches!(
            o.inbound(r#"{"action":"stream_data","input_type":"audio","data":[1,2]}"#),
            Inbound::Audio(Ok(_))
        ));
        assert!(matches!(
            o.inbound(r#"{"action":"stream_data","input_type":"audio","data":"x"}"#),
            Inbound::Audio(Err(_))
        ));
        assert_eq!(o.inbound(r#"{"action":"end_session"}"#), Inbound::StopAudio);
        let e = out(&mut o, ServerFrame::error("no_provider", "none"));
        assert!(e[0]["message"]
            .as_str()
            .unwrap()
            .contains("API_UNKNOWN_ERROR"));
    }
}

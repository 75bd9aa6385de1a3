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
    Reply(Vec<Value>),
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
pub fn status(code: &str, details: Value) -> Value {
    crate::frames::ServerFrame::status(code, details).to_value()
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
            "ping" => Inbound::Reply(vec![json!({"type": "pong"})]),
            "start_session" => {
                let input = v
                    .get("input_type")
                    .and_then(Value::as_str)
                    .unwrap_or("text");
                let rid = request_id(&v);
                match input {
                    "text" | "avatar_drop_image" | "user_image" => {
                        let mut f = json!({"type": "session_started", "input_mode": "text"});
                        if let Some(r) = rid {
                            f["request_id"] = json!(r);
                        }
                        Inbound::Reply(vec![f])
                    }
                    "audio" => Inbound::StartAudio { request_id: rid },
                    "screen" | "camera" => {
                        let msg = "screen and camera input are not available; use text";
                        Inbound::Reply(vec![
                            status("SESSION_START_FAILED", json!({"error": msg, "count": 1})),
                            json!({"type": "session_failed", "input_mode": input, "message": msg}),
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
            "avatar_interaction" => Inbound::Reply(vec![json!({
                "type": "avatar_interaction_ack",
                "interaction_id": v.get("interaction_id").cloned().unwrap_or(Value::Null),
                "accepted": false, "reason": "not_supported", "turn_id": null,
            })]),
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
    pub fn outbound(&mut self, frame: &Value) -> Vec<Value> {
        let kind = frame.get("type").and_then(Value::as_str).unwrap_or("");
        if frame.get("greeting").and_then(Value::as_bool) == Some(true) {
            return greeting(kind, frame);
        }
        let rid = self.pending.front().cloned().flatten();
        match kind {
            "assistant_delta" => {
                let text = frame.get("text").and_then(Value::as_str).unwrap_or("");
                let first = !self.streamed;
                if first {
                    self.turns += 1;
                    // A spoken reply's turn id is its speech id (the page pairs them).
                    self.turn_id = match frame.get("turn_id").and_then(Value::as_str) {
                        Some(t) => t.to_string(),
                        None => format!("turn-{}", self.turns),
                    };
                    self.streamed = true;
                }
                let mut f = json!({"type": "gemini_response", "text": text,
                                   "isNewMessage": first, "turn_id": self.turn_id});
                if let Some(r) = rid {
                    f["request_id"] = json!(r);
                }
                vec![f]
            }
            "turn_end" => {
                self.pending.pop_front();
                self.streamed = false;
                let mut f = json!({"type": "system", "data": "turn end"});
                if let Some(r) = rid {
                    f["request_id"] = json!(r);
                }
                vec![f]
            }
            "error" => {
                let code = frame.get("code").and_then(Value::as_str).unwrap_or("");
                let msg = frame.get("error").and_then(Value::as_str).unwrap_or("");
                let code = match code {
                    "auth_failed" => "API_KEY_REJECTED",
                    "rate_limited" => "API_RATE_LIMIT",
                    _ => "API_UNKNOWN_ERROR",
                };
                vec![status(code, json!({"msg": msg}))]
            }
            "pong" | "catgirl_switched" => vec![frame.clone()],
            _ => Vec::new(),
        }
    }
}

/// A character card's greeting (`greeting: true`, crate::turn::start_greeting):
/// shown as a message of its own, outside the client's request/turn bookkeeping.
fn greeting(kind: &str, frame: &Value) -> Vec<Value> {
    match kind {
        "assistant_delta" => {
            let text = frame.get("text").and_then(Value::as_str).unwrap_or("");
            vec![
                json!({"type": "gemini_response", "text": text, "isNewMessage": true,
                        "turn_id": "greeting"}),
            ]
        }
        "turn_end" => vec![json!({"type": "system", "data": "turn end"})],
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
            Inbound::Reply(vec![
                json!({"type":"session_started","input_mode":"text","request_id":"R1"})
            ])
        );
        assert_eq!(
            o.inbound(
                r#"{"action":"stream_data","input_type":"text","data":"hi","request_id":"R2"}"#
            ),
            Inbound::Turn("hi".into())
        );
        let a = o.outbound(&json!({"type":"assistant_delta","text":"Hel"}));
        assert_eq!(a[0]["isNewMessage"], true);
        assert_eq!(a[0]["request_id"], "R2");
        let b = o.outbound(&json!({"type":"assistant_delta","text":"lo"}));
        assert_eq!(b[0]["isNewMessage"], false);
        assert_eq!(a[0]["turn_id"], b[0]["turn_id"]);
        assert_eq!(
            o.outbound(&json!({"type":"turn_end"})),
            vec![json!({"type":"system","data":"turn end","request_id":"R2"})]
        );
        assert!(o
            .outbound(&json!({"type":"session_started","persona_name":"x"}))
            .is_empty());
        assert_eq!(
            o.inbound(r#"{"action":"capture_bridge_status","available":false}"#),
            Inbound::Ignore
        );
        assert_eq!(
            o.inbound(r#"{"action":"ping"}"#),
            Inbound::Reply(vec![json!({"type":"pong"})])
        );
        match o.inbound(r#"{"action":"dance"}"#) {
            Inbound::Reply(f) => {
                assert!(f[0]["message"].as_str().unwrap().contains("UNKNOWN_ACTION"))
            }
            other => panic!("{other:?}"),
        }
        match o.inbound(r#"{"action":"start_session","input_type":"screen"}"#) {
            Inbound::Reply(f) => assert_eq!(f[1]["type"], "session_failed"),
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
        let e = o.outbound(&json!({"type":"error","code":"no_provider","error":"none"}));
        assert!(e[0]["message"]
            .as_str()
            .unwrap()
            .contains("API_UNKNOWN_ERROR"));
    }
}

//! Typed server frames of the chat socket (`/ws/{name}`; docs/chat-protocol.md).
//!
//! One `type`-tagged enum for every frame the server sends, in both protocols:
//! the chat turn, the voice pipeline and every family that notifies a session
//! (`SessionManager::notify`) build a [`ServerFrame`], and the original
//! protocol's translator (`http::chat_dialect`) matches it by variant.

use serde::Serialize;
use serde_json::{Map, Value};

/// Why a speech ended (`speech_end.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Every chunk was spoken.
    Done,
    /// A new message or an `interrupt` frame cut it off.
    Interrupted,
    /// The provider failed (an `error` frame named the cause before).
    Error,
}

/// The encoding of speech audio: mono PCM16 little-endian.
pub const PCM_S16LE: &str = "pcm_s16le";

fn is_false(b: &bool) -> bool {
    !*b
}

/// Where a line that no chat turn produced comes from: a game's page or the
/// icebreaker (`source`), with the game and its session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Origin {
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub game_type: Option<String>,
    pub session_id: Option<String>,
}

/// What a reply chunk or a turn end belongs to besides an ordinary chat turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Marks {
    /// A character card's greeting (crate::turn::start_greeting).
    #[serde(skip_serializing_if = "is_false")]
    pub greeting: bool,
    /// A message the character started on its own (the system family's proactive chat).
    #[serde(skip_serializing_if = "is_false")]
    pub proactive: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// What a proactive message was made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_mode: Option<String>,
    /// A game's or the icebreaker's line.
    #[serde(flatten)]
    pub origin: Option<Origin>,
}

/// A frame the server sends on the chat socket.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// A chunk of the reply; `turn_id` (= the speech id) when the reply is spoken.
    AssistantDelta {
        text: String,
        #[serde(flatten)]
        marks: Marks,
    },
    /// The turn is over.
    TurnEnd {
        #[serde(flatten)]
        marks: Marks,
    },
    /// Answer to `ping`.
    Pong,
    /// A failure; `speech_id` when it is a speech's, `partial` for a chat turn
    /// that failed (whether part of a reply was kept).
    Error {
        code: String,
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        speech_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        partial: Option<bool>,
    },
    /// The model called a tool.
    ToolCall { name: String, call_id: String },
    /// A tool answered.
    ToolResult {
        name: String,
        call_id: String,
        is_error: bool,
    },
    /// A game took the user's message (the games family's input router); the
    /// fields are the game's answer.
    GameInput {
        #[serde(flatten)]
        result: Map<String, Value>,
    },
    /// Session settings changed (`noiseReductionEnabled` saved through
    /// `/api/config/conversation-settings`).
    SettingsChanged { settings: Map<String, Value> },
    /// Provider settings changed; the next model request uses them.
    ProviderChanged { message: &'static str },
    /// The current character changed.
    CatgirlSwitched {
        new_catgirl: String,
        old_catgirl: String,
    },
    /// The character was renamed.
    CharacterRenamed { old_name: String, new_name: String },
    /// The page should reload (a cloud-save download replaced the character).
    ReloadPage {
        code: &'static str,
        character_name: String,
    },
    /// The emotion of a text (`POST /api/emotion/analysis`).
    Emotion { emotion: String, confidence: f64 },
    /// The character invites the user to a mini game.
    MiniGameInvite {
        session_id: String,
        game_type: String,
        text: String,
        turn_id: String,
        persona_name: String,
    },
    /// The user answered an invitation.
    MiniGameInviteResolved {
        session_id: String,
        action: &'static str,
    },
    /// A game's window opened or closed.
    GameWindowStateChange {
        action: &'static str,
        persona_name: String,
        game_type: String,
        session_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Stop the speech that is playing (a game's line takes over).
    InterruptAudio {
        #[serde(flatten)]
        origin: Origin,
    },
    /// A line a game or the icebreaker says, shown as the character's.
    AssistantMirror {
        text: String,
        #[serde(flatten)]
        origin: Origin,
    },
    /// Original protocol: a chunk of the reply.
    GeminiResponse {
        text: String,
        #[serde(rename = "isNewMessage")]
        is_new_message: bool,
        turn_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// Original protocol: `data` `"turn end"`.
    System {
        data: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// Original protocol: the answer to `avatar_interaction`.
    AvatarInteractionAck {
        interaction_id: Value,
        accepted: bool,
        reason: &'static str,
        turn_id: Option<String>,
    },
    /// Answer to `{"type":"voice"}`: whether replies are spoken on this connection.
    VoiceState {
        enabled: bool,
        /// The provider that would speak (`null` when none is configured).
        provider: Option<String>,
    },
    /// A speech begins; its binary frames carry `stream`.
    SpeechStart {
        speech_id: String,
        turn_id: String,
        stream: u32,
        sample_rate: u32,
        channels: u8,
        encoding: &'static str,
    },
    /// A speech ended.
    SpeechEnd {
        speech_id: String,
        reason: EndReason,
    },
    /// Original protocol: the next binary frame is audio of this speech.
    AudioChunk { speech_id: String },
    /// Original protocol: the last chunk of this speech was sent.
    AudioDone { speech_id: String },
    /// Original protocol: the user spoke over this speech; stop playing it.
    UserActivity { interrupted_speech_id: String },
    /// Original protocol: `message` is a JSON string `{"code", "details"}`.
    Status { message: String },
    /// Original protocol: a session of this input mode is being opened.
    SessionPreparing { input_mode: String },
    /// A session started (the original's answer to `start_session`).
    SessionStarted {
        #[serde(skip_serializing_if = "Option::is_none")]
        persona_name: Option<String>,
        input_mode: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    /// Original protocol: the session could not start (`status` before says why).
    SessionFailed {
        input_mode: String,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Original protocol: the final text of an utterance.
    UserTranscript { text: String },
    /// Original protocol: the microphone was closed after a long silence.
    AutoCloseMic {
        reason_code: String,
        api_type: String,
        message: String,
    },
    /// companiond protocol: the microphone session's state (`listening`,
    /// `closed`); `reason` says why it closed (`client`, `idle`).
    MicState {
        state: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        recognizer: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        noise_reduction: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'static str>,
    },
    /// companiond protocol: voice activity (`speech` when speech began).
    Vad { state: &'static str },
    /// companiond protocol: the text of an utterance (`final`: a turn follows).
    Transcript {
        text: String,
        #[serde(rename = "final")]
        is_final: bool,
        utterance: u64,
    },
    /// An utterance gave no turn: `reason` `empty` or `echo`.
    TranscriptDropped {
        reason: &'static str,
        text: String,
        utterance: u64,
    },
}

impl ServerFrame {
    /// A chunk of an ordinary chat turn's reply.
    pub fn delta(text: impl Into<String>, turn_id: Option<String>) -> ServerFrame {
        ServerFrame::AssistantDelta {
            text: text.into(),
            marks: Marks {
                turn_id,
                ..Marks::default()
            },
        }
    }

    /// The end of an ordinary chat turn.
    pub fn turn_end() -> ServerFrame {
        ServerFrame::TurnEnd {
            marks: Marks::default(),
        }
    }

    /// A failure with its code.
    pub fn error(code: impl Into<String>, error: impl Into<String>) -> ServerFrame {
        ServerFrame::Error {
            code: code.into(),
            error: error.into(),
            speech_id: None,
            partial: None,
        }
    }

    /// The frame as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// An original-protocol `status` frame with `code` and `details`.
    pub fn status(code: &str, details: Value) -> ServerFrame {
        ServerFrame::Status {
            message: serde_json::json!({"code": code, "details": details}).to_string(),
        }
    }

    /// The frame as socket text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The 4-byte tag that starts every binary speech frame of companiond's protocol:
/// `SPK1`, then the speech's `stream` (u32 LE), then PCM16 LE samples.
pub const SPEECH_MAGIC: &[u8; 4] = b"SPK1";

/// A binary speech frame of companiond's protocol.
pub fn speech_binary(stream: u32, pcm: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + pcm.len());
    b.extend_from_slice(SPEECH_MAGIC);
    b.extend_from_slice(&stream.to_le_bytes());
    b.extend_from_slice(pcm);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes() {
        assert_eq!(
            ServerFrame::delta("hi", None).to_value(),
            json!({"type": "assistant_delta", "text": "hi"})
        );
        assert_eq!(
            ServerFrame::TurnEnd {
                marks: Marks {
                    origin: Some(Origin {
                        source: "game",
                        game_type: Some("soccer".into()),
                        session_id: None
                    }),
                    ..Marks::default()
                }
            }
            .to_value(),
            json!({"type": "turn_end", "source": "game", "game_type": "soccer", "session_id": null})
        );
        assert_eq!(
            ServerFrame::GameInput {
                result: json!({"handled": true})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            }
            .to_value(),
            json!({"type": "game_input", "handled": true})
        );
        assert_eq!(
            ServerFrame::SpeechEnd {
                speech_id: "s".into(),
                reason: EndReason::Interrupted
            }
            .to_value(),
            json!({"type": "speech_end", "speech_id": "s", "reason": "interrupted"})
        );
        assert_eq!(
            ServerFrame::UserActivity {
                interrupted_speech_id: "s".into()
            }
            .to_value(),
            json!({"type": "user_activity", "interrupted_speech_id": "s"})
        );
        assert_eq!(&speech_binary(7, &[1, 2])[..], b"SPK1\x07\0\0\0\x01\x02");
        assert_eq!(
            ServerFrame::Transcript {
                text: "hi".into(),
                is_final: true,
                utterance: 1
            }
            .to_value(),
            json!({"type": "transcript", "text": "hi", "final": true, "utterance": 1})
        );
        assert_eq!(
            ServerFrame::status("X", json!({"a": 1})).to_value(),
            json!({"type": "status", "message": "{\"code\":\"X\",\"details\":{\"a\":1}}"})
        );
    }
}

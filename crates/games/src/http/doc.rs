//! What the requests of these families carry, for the OpenAPI document.
//!
//! The handlers read their JSON object bodies and query strings leniently
//! ([`super::input`]): an empty body is `{}`, a blank string counts as absent,
//! aliases are accepted (`personaName`, `lanlan_name`, `sessionId`, camelCase
//! page signals), integers may come as strings, and a missing or mistyped
//! field is the family's `{ok:false, reason}` answer rather than a 422. These
//! types name the fields each handler reads, under their main spelling, so the
//! description lists them; the aliases are in docs/games.md. They are never
//! deserialized (the lenient readers are the contract), hence `dead_code`.
#![allow(dead_code)]

use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

/// `{game_type}`: the game (`soccer`, `badminton`, ...), compared lower-cased.
/// Any text is taken: one that is not 1 to 64 characters of `[A-Za-z0-9_-]` is
/// answered `{ok:false, reason:"invalid_game_type"}` with 200, as the original did.
#[derive(Deserialize, IntoParams)]
#[into_params(names("game_type"))]
pub struct GameTypePath(#[param(example = "soccer")] String);

/// `POST /api/game/logs`: one entry of an enabled log. Fields beside the named
/// ones become the entry's `details` when `details` is absent.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"session_id": "s1", "game_type": "soccer",
    "level": "info", "event": "goal", "message": "scored"}))]
pub struct LogEntryBody {
    session_id: String,
    /// Default `game`.
    game_type: Option<String>,
    persona_name: Option<String>,
    /// Default `info`.
    level: Option<String>,
    /// Default `frontend`.
    category: Option<String>,
    /// Default `client_event` (alias `type`).
    event: Option<String>,
    /// Default `frontend`.
    source: Option<String>,
    /// Text, or any JSON (kept as its text).
    message: Option<Value>,
    sensitive_possible: Option<bool>,
    #[schema(value_type = Option<Object>)]
    details: Option<Value>,
    /// Any other field: part of `details` when `details` is absent.
    #[serde(flatten)]
    other: std::collections::HashMap<String, Value>,
}

/// `POST /api/game/logs/enable`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"session_id": "s1", "game_type": "soccer", "reason": "manual"}))]
pub struct LogEnableBody {
    session_id: String,
    /// Default `game`.
    game_type: Option<String>,
    persona_name: Option<String>,
    /// Why (default `manual`, at most 64 characters kept).
    reason: Option<String>,
}

/// The page's signals every route call may carry (camelCase or snake_case).
#[derive(Deserialize, ToSchema)]
pub struct PageSignals {
    /// `visible` or `hidden`.
    #[serde(rename = "visibilityState")]
    visibility_state: Option<String>,
    #[serde(rename = "pageVisible")]
    page_visible: Option<bool>,
    #[serde(rename = "gameStarted")]
    game_started: Option<bool>,
    /// 0 to 30 days in milliseconds (else ignored).
    #[serde(rename = "gameStartedElapsedMs")]
    game_started_elapsed_ms: Option<f64>,
    /// The page's own state (kept as sent).
    #[serde(rename = "currentState")]
    #[schema(value_type = Option<Object>)]
    current_state: Option<Value>,
    /// The page's final score (kept as sent).
    #[serde(rename = "finalScore")]
    #[schema(value_type = Option<Object>)]
    final_score: Option<Value>,
}

/// `POST /api/game/{game_type}/route/start`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "pageVisible": true}))]
pub struct RouteStartBody {
    /// The character (required).
    persona_name: String,
    /// Default `default`.
    session_id: Option<String>,
    /// The game's mode (badminton).
    mode: Option<String>,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/route/heartbeat`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "visibilityState": "visible"}))]
pub struct HeartbeatBody {
    persona_name: String,
    session_id: Option<String>,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/route/drain`.
#[derive(Deserialize, ToSchema)]
pub struct DrainBody {
    persona_name: String,
    session_id: Option<String>,
    /// How many outputs to take (clamped to 1..=50).
    #[schema(minimum = 1, maximum = 50, default = 50)]
    limit: Option<i64>,
}

/// `POST /api/game/{game_type}/route/voice-transcript`.
#[derive(Deserialize, ToSchema)]
pub struct VoiceTranscriptBody {
    /// What was said (alias `text`; at most 2000 characters kept).
    transcript: String,
    persona_name: String,
    session_id: Option<String>,
    /// A repeated id is answered `handled:false`, `duplicate_request`.
    request_id: Option<String>,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/route/end` and `/api/game/{game_type}/end`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "finalScore": {"score": 3}}))]
pub struct EndBody {
    /// Default: the current character.
    persona_name: Option<String>,
    session_id: Option<String>,
    /// Default `route_end` (`game_end` for `/end`).
    reason: Option<String>,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/chat`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1",
    "event": {"kind": "goal", "score": [1, 0]}}))]
pub struct ChatBody {
    persona_name: String,
    session_id: Option<String>,
    /// The game event (kept as sent; `kind` names it).
    #[schema(value_type = Object)]
    event: Value,
}

/// `POST /api/game/{game_type}/mirror-assistant`.
#[derive(Deserialize, ToSchema)]
pub struct MirrorBody {
    /// The line (alias `text`; at most 240 characters kept).
    line: String,
    persona_name: String,
    session_id: Option<String>,
    /// `kind` names the event the line answers.
    #[schema(value_type = Option<Object>)]
    event: Option<Value>,
}

/// `POST /api/game/{game_type}/speak` and `/api/icebreaker/speak`.
#[derive(Deserialize, ToSchema)]
pub struct SpeakBody {
    /// At most 240 characters kept.
    line: String,
    /// Required for games; the icebreaker defaults to the current character.
    persona_name: Option<String>,
    session_id: Option<String>,
    #[schema(default = true)]
    mirror_text: Option<bool>,
    #[schema(default = true)]
    emit_turn_end: Option<bool>,
    #[schema(default = false)]
    interrupt_audio: Option<bool>,
}

/// `POST /api/game/{game_type}/realtime-context`.
#[derive(Deserialize, ToSchema)]
pub struct RealtimeContextBody {
    persona_name: String,
    #[schema(value_type = Option<Object>)]
    state: Option<Value>,
    #[serde(rename = "pendingItems")]
    pending_items: Option<Vec<Value>>,
}

/// `POST /api/game/{game_type}/quick-lines`.
#[derive(Deserialize, ToSchema)]
pub struct QuickLinesBody {
    persona_name: String,
    /// The lines' language (aliases `i18n_language`, `lang`).
    language: Option<String>,
    /// Badminton's mode.
    mode: Option<String>,
}

/// `POST /api/game/{game_type}/passive-guard` (soccer). The page's state is
/// passed to the classifier as sent.
#[derive(Deserialize, ToSchema)]
pub struct PassiveGuardBody {
    persona_name: String,
    session_id: Option<String>,
    stage: Option<Value>,
    /// `rest` or `surrender` (default).
    #[serde(rename = "promptType")]
    prompt_type: Option<String>,
    #[serde(rename = "preGameContext")]
    pre_game_context: Option<Value>,
    #[serde(rename = "currentState")]
    current_state: Option<Value>,
    #[serde(rename = "passiveGuardState")]
    passive_guard_state: Option<Value>,
    trigger: Option<Value>,
    /// At most 240 characters kept.
    #[serde(rename = "userSpeech")]
    user_speech: Option<String>,
}

/// `POST /api/game/{game_type}/leaderboard` (badminton): the round's totals,
/// top-level or inside `finalScore`, must match the server's record.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "mode": "classic",
    "finalScore": {"score": 12, "streak": 4, "max_distance_px": 310.5}}))]
pub struct LeaderboardSubmitBody {
    persona_name: String,
    session_id: String,
    mode: Option<String>,
    score: Option<f64>,
    streak: Option<f64>,
    max_distance_px: Option<f64>,
    #[serde(rename = "finalScore")]
    #[schema(value_type = Option<Object>)]
    final_score: Option<Value>,
    line_in_count: Option<f64>,
    net_touch_count: Option<f64>,
    zone_in_count: Option<f64>,
}

/// `POST /api/icebreaker/route/start`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1"}))]
pub struct IceStartBody {
    /// Default: the current character.
    persona_name: Option<String>,
    session_id: String,
}

/// `POST /api/icebreaker/route/end`.
#[derive(Deserialize, ToSchema)]
pub struct IceEndBody {
    /// Default: the current character.
    persona_name: Option<String>,
    session_id: Option<String>,
    /// Default `icebreaker_end`.
    reason: Option<String>,
}

/// `POST /api/icebreaker/context`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1", "role": "assistant",
    "text": "Nice to meet you!"}))]
pub struct IceContextBody {
    /// `user` or `assistant`.
    role: String,
    text: String,
    persona_name: String,
    session_id: Option<String>,
    /// A repeated id is deduplicated (also read from `event.request_id`).
    request_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    event: Option<Value>,
}

/// `POST /api/icebreaker/free-text/interpret`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1", "user_text": "the cat one",
    "options": [{"choice": "a", "label": "Cats"}, {"choice": "b", "label": "Dogs"}]}))]
pub struct FreeTextBody {
    persona_name: String,
    user_text: String,
    session_id: String,
    /// The offered options: `{choice, label}` objects or strings.
    options: Vec<Value>,
    assistant_line: Option<String>,
    /// The last turns (at most 4 are used).
    recent_free_text_turns: Option<Vec<Value>>,
    free_text_derail_streak: Option<i64>,
    day: Option<Value>,
    node_id: Option<Value>,
}

/// `POST /api/icebreaker/choice`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1", "day": 1,
    "node_id": "n1", "choice": "a", "label": "Cats"}))]
pub struct ChoiceBody {
    persona_name: String,
    session_id: Option<String>,
    /// 0..=9999 (an integer or its text).
    #[schema(minimum = 0, maximum = 9999)]
    day: i64,
    node_id: String,
    choice: String,
    label: Option<String>,
    handoff: Option<bool>,
    completed: Option<bool>,
    seq: Option<i64>,
}

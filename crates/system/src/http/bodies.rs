//! The request shapes of the system routes, for the OpenAPI document
//! (docs/openapi.md, docs/system.md § OpenAPI).
//!
//! The handlers read their JSON object bodies field by field ([`super::body_object`]
//! and the domain modules), leniently as the original application did: a field of
//! the wrong type takes its default, unknown fields are ignored. These types name
//! the fields those readers look up, with their types, limits and defaults; they
//! are never deserialized, hence `dead_code` is allowed here.
#![allow(dead_code)]

use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `POST /api/pending-notices/ack`.
#[derive(ToSchema)]
#[schema(example = json!({"cursor": 3}))]
pub struct NoticesAckBody {
    /// Drain the notices at or before this cursor (an integer, or its decimal
    /// text; anything else drains nothing).
    #[schema(value_type = Option<u64>)]
    cursor: Option<Value>,
}

/// `POST /api/activity_signal`: at least one signal besides the name.
#[derive(ToSchema)]
#[schema(example = json!({"persona_name": "Companion", "idle_seconds": 12.5,
    "window_title": "Editor"}))]
pub struct ActivityBody {
    /// The character; must be registered.
    #[schema(min_length = 1)]
    persona_name: String,
    /// The older spelling of `persona_name` (read when that is absent).
    lanlan_name: Option<String>,
    #[schema(minimum = 0.0)]
    idle_seconds: Option<f64>,
    #[schema(minimum = 0.0, maximum = 100.0)]
    cpu_avg_30s: Option<f64>,
    #[schema(minimum = 0.0, maximum = 100.0)]
    gpu_utilization: Option<f64>,
    /// Trimmed and cut at 512 characters.
    window_title: Option<String>,
    /// Trimmed and cut at 512 characters.
    process_name: Option<String>,
}

/// `POST /api/survey/submit`.
#[derive(ToSchema)]
#[schema(example = json!({"action": "submit", "answers": {"q1": "yes"}, "lang": "en"}))]
pub struct SurveySubmitBody {
    /// `skip`, else a submit.
    action: Option<String>,
    /// Answers by question id (ignored for a skip).
    answers: Option<Map<String, Value>>,
    lang: Option<String>,
}

/// `POST /api/emotion/analysis`.
#[derive(ToSchema)]
#[schema(example = json!({"text": "I am so happy today!", "persona_name": "Companion"}))]
pub struct EmotionBody {
    /// The text to analyse (cut at 4000 characters); `null` counts as empty.
    text: Option<String>,
    /// The character whose open chat is told the result (`lanlan_name` is the
    /// older spelling).
    persona_name: Option<String>,
    lanlan_name: Option<String>,
    /// A model key for this call only.
    api_key: Option<String>,
    /// A model name for this call only.
    model: Option<String>,
}

/// `POST /api/translate`.
#[derive(ToSchema)]
#[schema(example = json!({"text": "Hello", "target_lang": "ja", "skip_google": false}))]
pub struct TranslateBody {
    /// At most 50000 characters.
    text: String,
    /// `zh`, `en`, `ja`, `ko` or `ru` (other values mean `zh`).
    #[schema(default = "zh")]
    target_lang: Option<String>,
    /// Detected when absent.
    source_lang: Option<String>,
    /// Go straight to the model.
    #[schema(default = false)]
    skip_google: Option<bool>,
}

/// `POST /api/proactive_chat`: one round's context.
#[derive(ToSchema)]
#[schema(example = json!({"persona_name": "Companion", "enabled_modes": ["music", "window", "chat"],
    "is_playing_music": false}))]
pub struct ProactiveBody {
    /// The character (else the current one; `lanlan_name` is the older spelling).
    persona_name: Option<String>,
    lanlan_name: Option<String>,
    /// Sources to draw from (default all three: `music`, `window`, `chat`).
    enabled_modes: Option<Vec<String>>,
    #[schema(default = false)]
    is_playing_music: Option<bool>,
    /// At most 200 characters.
    current_track: Option<String>,
    /// At most 200 characters (else the activity tracker's).
    window_title: Option<String>,
    /// Whether a round may invite to a mini-game.
    #[schema(default = true)]
    mini_game_invite_enabled: Option<bool>,
    /// The reply language (`lang` and `i18n_language` are accepted too).
    language: Option<String>,
}

/// A body naming a character (`POST /api/proactive/music_played_through`).
#[derive(ToSchema)]
#[schema(example = json!({"persona_name": "Companion"}))]
pub struct MusicPlayedBody {
    /// Else the current character (`lanlan_name` is the older spelling).
    persona_name: Option<String>,
    lanlan_name: Option<String>,
}

/// `POST /api/mini_game/invite/respond`.
#[derive(ToSchema)]
#[schema(example = json!({"persona_name": "Companion", "session_id": "abc", "choice": "accept"}))]
pub struct InviteRespondBody {
    /// Else the current character (`lanlan_name` is the older spelling).
    persona_name: Option<String>,
    lanlan_name: Option<String>,
    /// The pending invitation (at most 128 characters).
    session_id: Option<String>,
    /// `accept`, `decline` or `later`.
    choice: String,
}

/// `PUT /api/seven-day-tutorial/state`.
#[derive(ToSchema)]
#[schema(example = json!({"expectedRevision": 0, "state": {"completedRounds": [1]}}))]
pub struct TutorialPutBody {
    /// The client's tutorial state; the server normalises it (the stored
    /// `state` of the answer shows the result).
    state: Map<String, Value>,
    /// The revision the client read (a stale one answers 409 with the stored document).
    #[serde(rename = "expectedRevision")]
    #[schema(minimum = 0)]
    expected_revision: i64,
}

/// `POST /api/autostart-prompt/heartbeat`: usage since the last heartbeat.
#[derive(ToSchema)]
#[schema(example = json!({"foreground_ms_delta": 60000, "home_interactions_delta": 2,
    "autostart_supported": true}))]
pub struct AutostartHeartbeatBody {
    /// Clamped to 0..=1800000 (30 minutes).
    foreground_ms_delta: Option<i64>,
    /// Clamped to 0..=20 (so are the two below).
    home_interactions_delta: Option<i64>,
    chat_turns_delta: Option<i64>,
    voice_sessions_delta: Option<i64>,
    autostart_enabled: Option<bool>,
    #[schema(default = true)]
    autostart_supported: Option<bool>,
    /// `autostart_enabled` is the system's own answer.
    #[schema(default = false)]
    autostart_status_authoritative: Option<bool>,
    /// At most 64 characters (`provider` is accepted too).
    autostart_provider: Option<String>,
}

/// `POST /api/autostart-prompt/shown`.
#[derive(ToSchema)]
#[schema(example = json!({"prompt_token": "pt_1"}))]
pub struct AutostartShownBody {
    /// The token of the prompt shown (`token` is accepted too).
    prompt_token: Option<String>,
}

/// `POST /api/autostart-prompt/decision`.
#[derive(ToSchema)]
#[schema(example = json!({"prompt_token": "pt_1", "decision": "accept", "result": "enabled"}))]
pub struct AutostartDecisionBody {
    /// The token of the prompt answered (`token` is accepted too).
    prompt_token: String,
    /// `accept`, `later` or `never` (`action` is accepted too).
    decision: String,
    /// For `accept`: `enabled`, `accepted`, or a failure.
    result: Option<String>,
    /// For a failed `accept`: what went wrong (at most 200 characters).
    error: Option<String>,
    /// At most 64 characters (`provider` is accepted too).
    autostart_provider: Option<String>,
}

/// `POST /api/platform/update-playtime`.
#[derive(ToSchema)]
#[schema(example = json!({"seconds": 60}))]
pub struct PlaytimeBody {
    /// Seconds played since the last report (an integer, its decimal text, or a
    /// number truncated); counted up to 3600 per report.
    #[schema(minimum = 0, default = 10)]
    seconds: Option<i64>,
}

/// `POST /api/guide/handoff/create`.
#[derive(ToSchema)]
#[schema(example = json!({"target_page": "chat", "source_page": "home",
    "resume_scene": "intro"}))]
pub struct HandoffCreateBody {
    /// The page that will consume the token (at most 80 characters).
    #[schema(min_length = 1)]
    target_page: String,
    /// At most 80 characters.
    #[schema(default = "home_yui_guide_v1")]
    flow_id: Option<String>,
    /// At most 80 characters.
    #[schema(default = "home")]
    source_page: Option<String>,
    /// At most 240 characters.
    source_path: Option<String>,
    /// At most 240 characters.
    target_path: Option<String>,
    /// At most 120 characters.
    resume_scene: Option<String>,
}

/// `POST /api/guide/handoff/consume`.
#[derive(ToSchema)]
#[schema(example = json!({"token": "…", "signature": "…", "expected_page": "chat"}))]
pub struct HandoffConsumeBody {
    #[schema(min_length = 1, max_length = 128)]
    token: String,
    #[schema(min_length = 1, max_length = 128)]
    signature: String,
    /// The consuming page; must be the token's target.
    #[schema(min_length = 1, max_length = 80)]
    expected_page: String,
    #[schema(max_length = 120)]
    consumer_id: Option<String>,
}

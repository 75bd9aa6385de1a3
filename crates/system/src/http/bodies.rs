//! The request bodies of the system routes: each is the parser of its route's
//! body (`companiond_core::envelope::BodyOf`) and its schema in the OpenAPI
//! document (docs/openapi.md, docs/system.md § OpenAPI).
//!
//! The bodies are read leniently, as the original application did: a field of
//! the wrong type takes its default (`loose::or_none`), unknown fields are
//! ignored. A body that is not a JSON object is a 400 (`SystemError::body`).
//!
//! Two bodies read as the original read them, field by field after the parse:
//! the activity signal (`crate::activity::ActivityBody`: its own 16 KiB limit
//! and an empty body answered `invalid_json`, the name checked before the
//! signals and each bad signal answered `invalid_signal`) and the proactive
//! round (`crate::proactive::ProactiveBody`: a field of another type counts as
//! absent).

use companiond_core::envelope::{loose, BodyFault, BodyRejection};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::MAX_BODY;
pub use crate::activity::ActivityBody;
pub use crate::autostart::{AutostartDecisionBody, AutostartHeartbeatBody, AutostartShownBody};
use crate::error::SystemError;
pub use crate::handoff::{HandoffConsumeBody, HandoffCreateBody};
use crate::persona::PersonaName;
pub use crate::platform::PlaytimeBody;
pub use crate::proactive::{InviteRespondBody, ProactiveBody};
pub use crate::survey::SurveySubmitBody;

companiond_core::body_rejected!(SystemError, limit = MAX_BODY, SystemError::body =>
    NoticesAckBody, TutorialPutBody, SurveySubmitBody, HandoffCreateBody, HandoffConsumeBody,
    AutostartHeartbeatBody, AutostartShownBody, AutostartDecisionBody, EmotionBody,
    MusicPlayedBody, InviteRespondBody, TranslateBody, ProactiveBody);

/// A `seconds` that does not read keeps its code; any other fault is the
/// family's body refusal.
impl BodyRejection for PlaytimeBody {
    type Error = SystemError;
    const LIMIT: usize = MAX_BODY;
    fn rejected(fault: BodyFault) -> SystemError {
        match fault {
            BodyFault::Invalid { field, why } if field == "seconds" => {
                SystemError::InvalidSeconds(why)
            }
            f => SystemError::body(f),
        }
    }
}

/// `POST /api/pending-notices/ack`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"cursor": 3}))]
pub struct NoticesAckBody {
    /// Drain the notices at or before this cursor (an integer, or its decimal
    /// text; anything else drains nothing).
    #[serde(default, deserialize_with = "cursor")]
    #[schema(value_type = Value)]
    pub cursor: u64,
}

/// A cursor: a non-negative integer or its decimal text; anything else is 0.
fn cursor<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::String(s) => s.trim().parse::<u64>().unwrap_or(0),
        _ => 0,
    })
}

/// `POST /api/emotion/analysis`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"text": "I am so happy today!", "persona_name": "Companion"}))]
pub struct EmotionBody {
    /// The text to analyse (cut at 4000 characters); absent or `null` is `missing_text`.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true)]
    pub text: Option<String>,
    /// The character whose open chat is told the result.
    #[serde(flatten)]
    pub persona: PersonaName,
    /// A model key for this call only.
    #[serde(default, deserialize_with = "loose::or_none")]
    pub api_key: Option<String>,
    /// A model name for this call only.
    #[serde(default, deserialize_with = "loose::or_none")]
    pub model: Option<String>,
}

/// `POST /api/translate`. A null field counts as absent.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"text": "Hello", "target_lang": "ja", "skip_google": false}))]
pub struct TranslateBody {
    /// Not blank, at most 50000 characters.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, max_length = 50000, pattern = "\\S")]
    pub text: Option<String>,
    /// `zh`, `en`, `ja`, `ko` or `ru` (other values mean `zh`).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(default = "zh")]
    pub target_lang: Option<String>,
    /// Detected when absent.
    #[serde(default, deserialize_with = "loose::or_none")]
    pub source_lang: Option<String>,
    /// Go straight to the model.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(default = false)]
    pub skip_google: Option<bool>,
}

/// A body naming a character (`POST /api/proactive/music_played_through`).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Companion"}))]
pub struct MusicPlayedBody {
    /// Else the current character.
    #[serde(flatten)]
    pub persona: PersonaName,
}

/// `PUT /api/seven-day-tutorial/state`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"expectedRevision": 0, "state": {"completedRounds": [1]}}))]
pub struct TutorialPutBody {
    /// The client's tutorial state; the server normalises it (the stored
    /// `state` of the answer shows the result). Not an object: `invalid_state`.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = Object, required = true)]
    pub state: Option<Map<String, Value>>,
    /// The revision the client read (a stale one answers 409 with the stored
    /// document). Not a non-negative integer: `invalid_expected_revision`.
    #[serde(rename = "expectedRevision")]
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = i64, required = true, minimum = 0)]
    pub expected_revision: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use companiond_core::envelope::parse_body;

    #[test]
    fn playtime_seconds_keep_their_code() {
        let r = |s: &str| {
            parse_body::<PlaytimeBody>(s.as_bytes())
                .map(|b| b.seconds)
                .map_err(|f| PlaytimeBody::rejected(f).code())
        };
        assert_eq!(r("{}"), Ok(10));
        assert_eq!(r(r#"{"seconds": null}"#), Ok(10));
        assert_eq!(r(r#"{"seconds": " 12 "}"#), Ok(12));
        assert_eq!(r(r#"{"seconds": "soon"}"#), Err("invalid_seconds"));
        assert_eq!(r(r#"{"seconds": -1}"#), Err("invalid_seconds"));
        assert_eq!(r("[1]"), Err("invalid_body"));
        assert_eq!(r("{x"), Err("invalid_json"));
    }
}

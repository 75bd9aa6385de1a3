//! The stale-session answer: a call for a route that belongs to another
//! session is a success with `handled:false` and that route's state (games and
//! the icebreaker alike), and the voice source speech answers name.

use serde::Serialize;
use utoipa::ToSchema;

use crate::games::game_routes::RouteState;
use crate::icebreaker::IceState;

/// The answer to a call for a route of another session, with the fields of
/// the call it answers.
#[derive(Serialize, ToSchema)]
pub struct StaleSession {
    ok: bool,
    /// `stale_session`.
    skipped: &'static str,
    /// `session_id_mismatch`.
    reason: &'static str,
    handled: bool,
    persona_name: String,
    method: &'static str,
    /// The other session's route.
    state: StaleState,
    /// mirror-assistant: false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrored: Option<bool>,
    /// speak: false.
    #[serde(skip_serializing_if = "Option::is_none")]
    audio_sent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audio_committed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    voice_source: Option<VoiceSource>,
}

impl StaleSession {
    pub fn new(persona: &str, method: &'static str, state: StaleState) -> StaleSession {
        StaleSession {
            ok: true,
            skipped: "stale_session",
            reason: "session_id_mismatch",
            handled: false,
            persona_name: persona.to_string(),
            method,
            state,
            mirrored: None,
            audio_sent: None,
            audio_committed: None,
            voice_source: None,
        }
    }

    /// The answer of a speak call: no audio, the voice source skipped.
    pub fn unspoken(self) -> StaleSession {
        StaleSession {
            audio_sent: Some(false),
            audio_committed: Some(false),
            voice_source: Some(VoiceSource::skipped("stale_session")),
            ..self
        }
    }
}

/// A game route's state, or the onboarding route's.
#[derive(Serialize)]
#[serde(untagged)]
pub enum StaleState {
    Game(RouteState),
    Onboarding(IceState),
}
any_of_schema!(StaleState as "StaleState": RouteState, IceState);

/// Where speech would come from: `{provider, method, skipped}` (games) or
/// `{provider:"none", method, reason}` (the icebreaker).
#[derive(Serialize, ToSchema)]
pub struct VoiceSource {
    pub provider: &'static str,
    pub method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl VoiceSource {
    /// The line is spoken by `provider` through the project's speech pipeline.
    pub fn spoken(provider: &'static str) -> VoiceSource {
        VoiceSource {
            provider,
            method: "project_tts",
            skipped: None,
            reason: None,
        }
    }
    /// The game speech source, skipped for `why`.
    pub fn skipped(why: &'static str) -> VoiceSource {
        VoiceSource {
            provider: "project_tts",
            method: "project_tts",
            skipped: Some(why),
            reason: None,
        }
    }
}

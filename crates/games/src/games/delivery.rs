//! Delivering a game line to the character's chat: `mirror-assistant` records
//! it in the round and the chat session and shows it on the chat connections;
//! `speak` would voice it, but this service has no speech synthesis, so it
//! always ends with the reason it could not.

use companiond_core::frames::{Origin, ServerFrame};
use companiond_core::llm::ChatMessage;
use companiond_core::AppState;
use serde_json::{json, Map};

use super::game_routes::{Miss, RouteState};
use super::Games;

/// Why a line was not mirrored.
pub enum MirrorRefused {
    /// The character's active route is of another game type.
    OtherGame(String),
    /// The route belongs to another session: its state.
    StaleSession(RouteState),
    /// The character has no chat session.
    NoSessionManager,
}

/// Why a line was not spoken.
pub enum SpeakRefused {
    RouteNotActive,
    /// The route belongs to another session: its state.
    StaleSession(RouteState),
    NoSessionManager,
    /// Everything else was in order: there is no voice provider.
    NoVoiceProvider,
}

impl Games {
    /// Mirror a game line (`kind` `opening-line` is recorded as an opening line):
    /// the number of chat connections that were shown it.
    pub async fn mirror_line(
        &self,
        st: &AppState,
        persona: &str,
        game_type: &str,
        session_id: Option<&str>,
        line: &str,
        kind: Option<&str>,
    ) -> Result<usize, MirrorRefused> {
        if let Some((other, _)) = self
            .game_routes
            .active_of(persona)
            .filter(|(t, _)| t != game_type)
        {
            return Err(MirrorRefused::OtherGame(other));
        }
        // A matching route records the line; a route of another session makes it stale.
        if let Err(Miss::Mismatch(state)) =
            self.game_routes
                .with_active(persona, game_type, session_id, |_, _| ())
        {
            return Err(MirrorRefused::StaleSession(state));
        }
        let Some(mgr) = st.sessions.get(persona) else {
            return Err(MirrorRefused::NoSessionManager);
        };
        let _ = self
            .game_routes
            .with_active(persona, game_type, session_id, |r, _| {
                let mut d = Map::new();
                let item = if kind == Some("opening-line") {
                    "opening_line"
                } else {
                    "assistant"
                };
                d.insert("type".into(), json!(item));
                d.insert("text".into(), json!(line));
                r.push_dialog(d);
            });
        mgr.push_history(ChatMessage::assistant(line.to_string()))
            .await;
        Ok(mgr.notify(ServerFrame::AssistantMirror {
            text: line.to_string(),
            origin: Origin {
                source: "game",
                game_type: Some(game_type.to_string()),
                session_id: session_id.map(str::to_string),
            },
        }))
    }

    /// Check a line to speak in the order the client learns about problems.
    pub fn speak_line(
        &self,
        st: &AppState,
        persona: &str,
        game_type: &str,
        session_id: Option<&str>,
    ) -> SpeakRefused {
        match self
            .game_routes
            .with_active(persona, game_type, session_id, |_, _| ())
        {
            Err(Miss::Inactive) => SpeakRefused::RouteNotActive,
            Err(Miss::Mismatch(state)) => SpeakRefused::StaleSession(state),
            Ok(()) if st.sessions.get(persona).is_none() => SpeakRefused::NoSessionManager,
            Ok(()) => SpeakRefused::NoVoiceProvider,
        }
    }
}

//! The life of a game route as the game page drives it: start (superseding the
//! character's other routes), heartbeat, voice transcript, end with its cleanup
//! result. The per-game rules are [`GameKind`]'s. Nothing here knows HTTP: the
//! handlers turn these results into the wire answers.

use companiond_core::frames::ServerFrame;
use std::time::Duration;

use companiond_core::llm::ChatMessage;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::{json, Value};

use super::game_routes::{Archive, EndOutcome, Finalized, Miss, RouteState, Signals};
use super::kind::GameKind;
use super::leaderboard::normalize_mode;
use super::Games;
use crate::text::truncate_chars;

/// Chat lines of the character given to a starting game as its context.
const PRE_GAME_LINES: usize = 6;
/// Longest pre-game context line.
const PRE_GAME_LINE_CHARS: usize = 240;

/// A route start.
pub struct StartRoute {
    pub persona: String,
    pub game_type: String,
    pub session_id: String,
    /// The requested mode (trimmed), see [`GameKind::route_mode`].
    pub mode: Option<String>,
    pub signals: Signals,
}

/// A route named by its game type and session.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RouteRef {
    pub game_type: String,
    pub session_id: String,
}

/// A started route: its public state and the character's routes it superseded.
pub struct Started {
    pub state: RouteState,
    pub superseded: Vec<RouteRef>,
}

/// A heartbeat of the game page for the character's route of a game type.
pub struct PageBeat {
    pub persona: String,
    pub game_type: String,
    /// Absent: the active route's session.
    pub session_id: Option<String>,
    pub signals: Signals,
}

/// A heartbeat's result.
pub struct Heartbeat {
    /// The route is active (and of this session).
    pub active: bool,
    /// An active route of another session exists (`state` is its state).
    pub session_mismatch: bool,
    pub state: RouteState,
    /// The heartbeat timeout in force for the page's visibility.
    pub timeout: Duration,
}

/// A voice transcript for the character's route of a game type.
pub struct VoiceTranscript {
    pub persona: String,
    pub game_type: String,
    /// Absent: the active route's session.
    pub session_id: Option<String>,
    pub text: String,
    /// A request id already taken is not taken again.
    pub request_id: Option<String>,
    pub signals: Signals,
}

/// A route end.
pub struct EndRoute {
    pub persona: String,
    pub game_type: String,
    /// Absent: the session of the active route of that game type, else `default`.
    pub session_id: Option<String>,
    pub reason: String,
    pub signals: Signals,
}

/// What an end did.
pub enum EndResult {
    /// A live route was finalized now.
    Finalized {
        /// A dialogue model session was dropped.
        closed: bool,
        route: Finalized,
        /// Badminton: whether the final score became a score session.
        score_session_recorded: Option<bool>,
    },
    /// The route had ended before: its archive and state.
    AlreadyEnded {
        closed: bool,
        session_id: String,
        archive: Option<Archive>,
        state: RouteState,
    },
    /// No route of that game type and session (the model session, if any, is dropped).
    NoRoute { closed: bool, session_id: String },
}

/// One recent chat line of the pre-game context.
#[derive(Serialize)]
struct ContextLine {
    role: String,
    text: String,
}

/// Recent chat lines of the character, given to the game as its pre-game context.
async fn pre_game_context(st: &AppState, persona: &str) -> Value {
    let Some(m) = st.sessions.get(persona) else {
        return json!({"source": "none", "recent_dialogue": []});
    };
    let hist = m.history().await;
    let talk: Vec<&ChatMessage> = hist
        .iter()
        .filter(|m| m.role == "user" || m.role == "assistant")
        .collect();
    let recent: Vec<ContextLine> = talk[talk.len().saturating_sub(PRE_GAME_LINES)..]
        .iter()
        .map(|m| ContextLine {
            role: m.role.clone(),
            text: truncate_chars(m.content.as_deref().unwrap_or(""), PRE_GAME_LINE_CHARS),
        })
        .collect();
    json!({"source": "session_history", "recent_dialogue": recent})
}

impl Games {
    /// Start a route: the character's other routes end (`superseded_by_route_start`),
    /// a soccer round's log starts, the chat connections hear `game_window_state_change` opened.
    pub async fn start_route(&self, st: &AppState, req: StartRoute) -> Started {
        let kind = GameKind::of(&req.game_type);
        let mode = kind.route_mode(req.mode.as_deref());
        let ctx = pre_game_context(st, &req.persona).await;
        let (state, finalized) = self.game_routes.start(
            &req.persona,
            &req.game_type,
            &req.session_id,
            mode,
            ctx,
            &req.signals,
        );
        let mut superseded = Vec::new();
        for f in &finalized {
            self.after_finalize(st, f);
            if f.persona_name == req.persona {
                superseded.push(RouteRef {
                    game_type: f.game_type.clone(),
                    session_id: f.session_id.clone(),
                });
            }
        }
        if kind.logs_from_start() {
            self.logs
                .enable(&req.game_type, &req.session_id, &req.persona, "route_start");
        }
        self.log_event(
            &req.game_type,
            &req.session_id,
            "route_started",
            json!({"persona_name": req.persona}),
        );
        if let Some(m) = st.sessions.get(&req.persona) {
            m.notify(ServerFrame::GameWindowStateChange {
                action: "opened",
                persona_name: req.persona.clone(),
                game_type: req.game_type.clone(),
                session_id: req.session_id.clone(),
                reason: None,
            });
        }
        Started { state, superseded }
    }

    /// A heartbeat of the page: keeps the route alive and applies its signals.
    pub fn heartbeat(&self, beat: &PageBeat) -> Heartbeat {
        let (active, session_mismatch, state) = match self.game_routes.heartbeat(
            &beat.persona,
            &beat.game_type,
            beat.session_id.as_deref(),
            &beat.signals,
        ) {
            Ok(state) => (true, false, state),
            Err(Miss::Inactive) => (false, false, RouteState::none()),
            Err(Miss::Mismatch(state)) => (false, true, state),
        };
        let hidden = matches!(&state, RouteState::Route(r) if !r.page_visible);
        let timeout = if hidden {
            self.cfg.hidden_heartbeat_timeout
        } else {
            self.cfg.heartbeat_timeout
        };
        Heartbeat {
            active,
            session_mismatch,
            state,
            timeout,
        }
    }

    /// A voice transcript for the game (noted in the round's log):
    /// `Ok((handled, state))`, handled false for a repeated request id.
    pub fn voice_transcript(&self, t: &VoiceTranscript) -> Result<(bool, RouteState), Miss> {
        let (handled, state) = self.game_routes.transcript(
            &t.persona,
            &t.game_type,
            t.session_id.as_deref(),
            &t.text,
            t.request_id.as_deref(),
            &t.signals,
        )?;
        if let Some(sid) = state.session_id() {
            self.log_event(
                &t.game_type,
                sid,
                "voice_transcript",
                json!({"handled": handled, "chars": t.text.chars().count()}),
            );
        }
        Ok((handled, state))
    }

    /// End a route (`route/end` and `/end`); a badminton round's final score
    /// becomes a score session for the leaderboard.
    pub fn end_route(&self, st: &AppState, req: EndRoute) -> EndResult {
        let EndRoute {
            persona,
            game_type,
            session_id,
            reason,
            signals,
        } = req;
        let session = match session_id {
            Some(s) => s,
            None => self
                .game_routes
                .with_active(&persona, &game_type, None, |r, _| r.session_id.clone())
                .unwrap_or_else(|_| "default".into()),
        };
        match self
            .game_routes
            .end(&persona, &game_type, &session, &reason, &signals)
        {
            EndOutcome::Finalized(route) => {
                let closed = self.after_finalize(st, &route);
                let score_session_recorded =
                    GameKind::of(&game_type).records_score_session().then(|| {
                        let final_score = route.archive.final_score.clone();
                        let mode = route.mode.clone().unwrap_or_else(|| normalize_mode(None));
                        self.board.record(
                            &route.persona_name,
                            &route.session_id,
                            &mode,
                            &final_score,
                        )
                    });
                EndResult::Finalized {
                    closed,
                    route,
                    score_session_recorded,
                }
            }
            EndOutcome::AlreadyEnded { archive, state } => EndResult::AlreadyEnded {
                closed: self.close_llm_session(&persona, &game_type, &session),
                session_id: session,
                archive,
                state,
            },
            EndOutcome::NoRoute => EndResult::NoRoute {
                closed: self.close_llm_session(&persona, &game_type, &session),
                session_id: session,
            },
        }
    }
}

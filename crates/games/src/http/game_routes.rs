//! `/api/game/{game_type}/route/*`, `/api/game/{game_type}/end` and
//! `/api/game/route/active`: the life of a game route (see
//! [`crate::games::lifecycle`]).

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::no_store;
use companiond_core::{AppState, Ext};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::body::{
    first_text, BodyCharacter, BodyCharacterOptional, BodySession, Field, PageSignals, MAX_SAFE_INT,
};
use super::extract::{Body, EndReason, GameType, PlayableGameType, RouteCall};
use super::input::query_persona;
use super::queries::*;
use crate::error::{Failure, Reason};
use crate::games::game_routes::{Archive, EndedRoute, Miss, RouteState};
use crate::games::lifecycle::{
    EndResult, EndRoute, PageBeat, RouteRef, StartRoute, VoiceTranscript,
};
use crate::games::Games;
use crate::text::truncate_chars;
use companiond_core::envelope::QueryOf;

/// Longest voice transcript taken into a game.
const MAX_TRANSCRIPT_CHARS: usize = 2000;
/// Default and largest `limit` of a drain.
const MAX_DRAIN: i64 = 50;

/// `POST /api/game/{game_type}/route/start` (session default `default`).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "pageVisible": true}))]
pub struct RouteStartBody {
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    /// The game's mode (badminton: `spectator` or `duel`).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    mode: Field,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/route/heartbeat`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "visibilityState": "visible"}))]
pub struct HeartbeatBody {
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/route/drain`.
#[derive(Deserialize, ToSchema)]
pub struct DrainBody {
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    /// How many outputs to take: an integer (or its text) within ±2^53,
    /// clamped to 1..=50.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 50, default = 50)]
    #[serde(default)]
    limit: Field,
}

routed!(RouteStartBody, HeartbeatBody, DrainBody);

/// `POST /api/game/{game_type}/route/voice-transcript`.
#[derive(Deserialize, ToSchema)]
pub struct VoiceTranscriptBody {
    /// What was said (also `text`; at most 2000 characters kept).
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    transcript: Field,
    /// Another spelling of `transcript`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    text: Field,
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    /// A repeated id is answered `handled:false`, `duplicate_request` (also `requestId`).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    request_id: Field,
    /// Another spelling of `request_id`.
    #[serde(default, rename = "requestId")]
    #[schema(value_type = Option<String>)]
    request_id_camel: Field,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/route/end` and `/api/game/{game_type}/end`
/// (the character defaults to the current one).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "finalScore": {"score": 3}}))]
pub struct EndBody {
    #[serde(flatten)]
    character: BodyCharacterOptional,
    #[serde(flatten)]
    session: BodySession,
    /// Default `route_end` (`game_end` for `/end`); at most 64 characters kept.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    reason: Field,
    #[serde(flatten)]
    signals: PageSignals,
}

/// `POST /api/game/{game_type}/route/start`: the route's fields at the top
/// level and again as `state`, and the character's routes it ended.
#[derive(Serialize, ToSchema)]
pub struct RouteStarted {
    ok: bool,
    #[serde(flatten)]
    route: RouteState,
    state: RouteState,
    superseded: Vec<RouteRef>,
}

/// `{ok, state}`: a route's public state.
#[derive(Serialize, ToSchema)]
pub struct StateAnswer {
    ok: bool,
    state: RouteState,
}

/// `GET /api/game/route/active`: the active route, else the last ended one.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "active": true, "game_type": "soccer",
    "session_id": "s1", "persona_name": "Mika"}))]
pub struct ActiveRoute {
    ok: bool,
    active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    game_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    persona_name: Option<String>,
    /// Without an active route: the character's last ended one, if kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_route: Option<EndedRoute>,
}

/// `POST /api/game/{game_type}/route/drain`.
#[derive(Serialize, ToSchema)]
pub struct Drained {
    ok: bool,
    /// The queued outputs (routed main-chat input), oldest first.
    #[schema(value_type = Vec<Object>)]
    outputs: Vec<Value>,
    state: RouteState,
}

/// `POST /api/game/{game_type}/route/voice-transcript`.
#[derive(Serialize, ToSchema)]
pub struct TranscriptTaken {
    ok: bool,
    /// False for a repeated `request_id`.
    handled: bool,
    state: RouteState,
    /// `duplicate_request` when not handled.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

/// `POST /api/game/{game_type}/route/heartbeat`: whether the route lives, and
/// the timings the page must keep (seconds).
#[derive(Serialize, ToSchema)]
pub struct HeartbeatAnswer {
    ok: bool,
    active: bool,
    heartbeat_interval_seconds: f64,
    heartbeat_timeout_seconds: f64,
    foreground_heartbeat_timeout_seconds: f64,
    hidden_heartbeat_timeout_seconds: f64,
    state: RouteState,
    /// `session_id_mismatch` when another session's route is active.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

/// `{ok, status, reason}` of a skipped after-game step.
#[derive(Serialize, ToSchema)]
pub struct Skipped {
    ok: bool,
    status: &'static str,
    reason: &'static str,
}

/// `{ok, action, reason}` of the post-game step (always skipped).
#[derive(Serialize, ToSchema)]
pub struct Postgame {
    ok: bool,
    action: &'static str,
    reason: &'static str,
}

/// The cleanup result of an end: a route finalized now (`route_closed:true`),
/// one that had ended before (`already_ended`), or none (`archive:null`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "closed": false, "session_id": "s1",
    "route_closed": false, "archive": null}))]
pub struct Ended {
    ok: bool,
    /// A dialogue model session was dropped.
    closed: bool,
    session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    game_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    persona_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    route_closed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    already_ended: Option<bool>,
    /// Null when there was no route.
    archive: Option<Archive>,
    #[serde(skip_serializing_if = "Option::is_none")]
    archive_memory: Option<Skipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    postgame: Option<Postgame>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<RouteState>,
    /// Badminton: whether the final score became a score session.
    #[serde(skip_serializing_if = "Option::is_none")]
    score_session_recorded: Option<bool>,
}

impl Ended {
    /// No route was closed now: `{ok, closed, session_id, route_closed:false, archive:null}`.
    fn closed(closed: bool, session_id: String) -> Ended {
        Ended {
            ok: true,
            closed,
            session_id,
            game_type: None,
            persona_name: None,
            reason: None,
            route_closed: false,
            already_ended: None,
            archive: None,
            archive_memory: None,
            postgame: None,
            state: None,
            score_session_recorded: None,
        }
    }
}

/// `POST /api/game/{game_type}/route/start`.
pub async fn start(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    _: PlayableGameType,
    call: RouteCall<RouteStartBody>,
) -> Result<Json<RouteStarted>, Failure> {
    let mode = call.body.mode.text("mode")?;
    let req = StartRoute {
        signals: call.body.signals.signals(),
        persona: call.persona,
        game_type: call.game_type,
        session_id: call.session.unwrap_or_else(|| "default".into()),
        mode,
    };
    let started = games.start_route(&st, req).await;
    Ok(Json(RouteStarted {
        ok: true,
        route: started.state.clone(),
        state: started.state,
        superseded: started.superseded,
    }))
}

/// `GET /api/game/{game_type}/route/state`.
pub async fn state(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    game_type: Result<GameType, Failure>,
    QueryOf(q): QueryOf<PersonaQuery>,
) -> Response {
    let answer = || -> Result<Json<StateAnswer>, Failure> {
        let GameType(game_type) = game_type?;
        let persona = query_persona(&st, &q)?;
        let state = games.game_routes.state(&persona, &game_type);
        Ok(Json(StateAnswer { ok: true, state }))
    };
    no_store(answer())
}

/// `GET /api/game/route/active`: the character's active route, any game type.
pub async fn active(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    QueryOf(q): QueryOf<PersonaQuery>,
) -> Response {
    let answer = || -> Result<Json<ActiveRoute>, Failure> {
        let persona = query_persona(&st, &q)?;
        Ok(Json(match games.game_routes.active_of(&persona) {
            Some((game_type, session_id)) => ActiveRoute {
                ok: true,
                active: true,
                game_type: Some(game_type),
                session_id: Some(session_id),
                persona_name: Some(persona),
                ended_route: None,
            },
            None => ActiveRoute {
                ok: true,
                active: false,
                game_type: None,
                session_id: None,
                persona_name: None,
                ended_route: games.game_routes.last_ended_of(&persona),
            },
        }))
    };
    no_store(answer())
}

/// `POST /api/game/{game_type}/route/drain`: take the queued outputs.
pub async fn drain(
    Ext(games): Ext<Games>,
    call: RouteCall<DrainBody>,
) -> Result<Json<Drained>, Failure> {
    // An integer is clamped to 1..=50; a value that is no integer at all
    // (or beyond ±2^53) is invalid_body.
    let limit = call
        .body
        .limit
        .int("limit", -MAX_SAFE_INT, MAX_SAFE_INT)?
        .unwrap_or(MAX_DRAIN)
        .clamp(1, MAX_DRAIN);
    let limit = usize::try_from(limit).unwrap_or(50);
    let (outputs, state) = games.game_routes.drain(
        &call.persona,
        &call.game_type,
        call.session.as_deref(),
        limit,
    );
    Ok(Json(Drained {
        ok: true,
        outputs,
        state,
    }))
}

/// `POST /api/game/{game_type}/route/voice-transcript`.
pub async fn voice_transcript(
    Ext(games): Ext<Games>,
    GameType(game_type): GameType,
    Body(b): Body<VoiceTranscriptBody>,
) -> Result<Json<TranscriptTaken>, Failure> {
    let transcript = first_text(&[(&b.transcript, "transcript"), (&b.text, "text")])?
        .ok_or_else(|| Failure::new(Reason::MissingTranscript))?;
    let persona = b.character.name()?;
    let session = b.session.id()?;
    let request_id = first_text(&[
        (&b.request_id, "request_id"),
        (&b.request_id_camel, "requestId"),
    ])?;
    let refused = |reason: Reason, state: RouteState| {
        Failure::new(reason)
            .with("handled", false)
            .with("persona_name", &persona)
            .with("state", state)
    };
    match games.voice_transcript(&VoiceTranscript {
        persona: persona.clone(),
        game_type,
        session_id: session,
        text: truncate_chars(&transcript, MAX_TRANSCRIPT_CHARS),
        request_id,
        signals: b.signals.signals(),
    }) {
        Ok((handled, state)) => Ok(Json(TranscriptTaken {
            ok: true,
            handled,
            state,
            reason: (!handled).then_some("duplicate_request"),
        })),
        Err(Miss::Inactive) => Err(refused(Reason::RouteNotActive, RouteState::none())),
        Err(Miss::Mismatch(state)) => Err(refused(Reason::SessionIdMismatch, state)),
    }
}

/// `POST /api/game/{game_type}/route/heartbeat`.
pub async fn heartbeat(
    Ext(games): Ext<Games>,
    call: RouteCall<HeartbeatBody>,
) -> Result<Json<HeartbeatAnswer>, Failure> {
    let beat = games.heartbeat(&PageBeat {
        signals: call.body.signals.signals(),
        persona: call.persona,
        game_type: call.game_type,
        session_id: call.session,
    });
    let cfg = &games.cfg;
    Ok(Json(HeartbeatAnswer {
        ok: true,
        active: beat.active,
        heartbeat_interval_seconds: cfg.heartbeat_interval.as_secs_f64(),
        heartbeat_timeout_seconds: beat.timeout.as_secs_f64(),
        foreground_heartbeat_timeout_seconds: cfg.heartbeat_timeout.as_secs_f64(),
        hidden_heartbeat_timeout_seconds: cfg.hidden_heartbeat_timeout.as_secs_f64(),
        state: beat.state,
        reason: beat.session_mismatch.then_some("session_id_mismatch"),
    }))
}

/// `POST /api/game/{game_type}/route/end` and `POST /api/game/{game_type}/end`:
/// end a route; the cleanup result.
pub async fn end(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    PlayableGameType(game_type): PlayableGameType,
    EndReason(default_reason): EndReason,
    Body(b): Body<EndBody>,
) -> Result<Json<Ended>, Failure> {
    // The body's character, else the current one; with neither there is no
    // round to end (the no-route answer).
    let persona = match b.character.given()? {
        Some(p) => p,
        None => st.characters.resolve(None).unwrap_or_default(),
    };
    let reason = b
        .reason
        .text("reason")?
        .map(|r| truncate_chars(&r, 64))
        .unwrap_or_else(|| default_reason.to_string());
    let session_id = b.session.id()?;
    let ended = games.end_route(
        &st,
        EndRoute {
            persona,
            game_type,
            session_id,
            reason,
            signals: b.signals.signals(),
        },
    );
    Ok(Json(match ended {
        EndResult::Finalized {
            closed,
            route: f,
            score_session_recorded,
        } => {
            let started = f.archive.game_started;
            Ended {
                ok: true,
                closed,
                session_id: f.session_id,
                game_type: Some(f.game_type),
                persona_name: Some(f.persona_name),
                reason: Some(f.reason),
                route_closed: true,
                already_ended: None,
                archive: Some(f.archive),
                archive_memory: Some(Skipped {
                    ok: true,
                    status: "skipped",
                    reason: if started {
                        "game_memory_archive_disabled"
                    } else {
                        "game_not_started"
                    },
                }),
                postgame: Some(Postgame {
                    ok: true,
                    action: "skip",
                    reason: "disabled",
                }),
                state: Some(f.state),
                score_session_recorded,
            }
        }
        EndResult::AlreadyEnded {
            closed,
            session_id,
            archive,
            state,
        } => Ended {
            already_ended: Some(true),
            archive,
            state: Some(state),
            ..Ended::closed(closed, session_id)
        },
        EndResult::NoRoute { closed, session_id } => Ended::closed(closed, session_id),
    }))
}

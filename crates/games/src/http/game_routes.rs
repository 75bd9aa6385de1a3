//! `/api/game/{game_type}/route/*`, `/api/game/{game_type}/end` and
//! `/api/game/route/active`: the life of a game route (see
//! [`crate::games::lifecycle`]).

use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::no_store;
use companiond_core::{AppState, Ext};
use serde_json::{json, Map, Value};

use super::extract::{EndReason, GameType, JsonObject, PlayableGameType, RouteCall};
use super::input::{
    opt_int, opt_str, parse_query, persona_of, query_persona, require_persona, session_of,
    MAX_SAFE_INT,
};
use crate::error::{Answer, Failure, Reason};
use crate::games::game_routes::{Miss, RouteState, Signals};
use crate::games::lifecycle::{EndResult, EndRoute, PageBeat, StartRoute, VoiceTranscript};
use crate::games::Games;
use crate::text::truncate_chars;

/// Longest voice transcript taken into a game.
const MAX_TRANSCRIPT_CHARS: usize = 2000;
/// Default and largest `limit` of a drain.
const MAX_DRAIN: i64 = 50;

/// `POST /api/game/{game_type}/route/start`.
pub async fn start(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    _: PlayableGameType,
    call: RouteCall,
) -> Answer {
    let mode = opt_str(&call.body, &["mode"])?;
    let req = StartRoute {
        signals: Signals::from_body(&call.body),
        persona: call.persona,
        game_type: call.game_type,
        session_id: call.session.unwrap_or_else(|| "default".into()),
        mode,
    };
    let started = games.start_route(&st, req).await;
    let mut out = Map::new();
    out.insert("ok".into(), json!(true));
    // The route's fields stand at the top level too (the start answer's shape).
    let state = json!(started.state);
    if let Value::Object(s) = &state {
        out.extend(s.clone());
    }
    out.insert("state".into(), state);
    out.insert("superseded".into(), json!(started.superseded));
    Ok(Json(Value::Object(out)))
}

/// `GET /api/game/{game_type}/route/state`.
pub async fn state(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    game_type: Result<GameType, Failure>,
    RawQuery(raw): RawQuery,
) -> Response {
    let answer = || -> Answer {
        let GameType(game_type) = game_type?;
        let persona = query_persona(&st, &parse_query(raw.as_deref()))?;
        let state = games.game_routes.state(&persona, &game_type);
        Ok(Json(json!({"ok": true, "state": state})))
    };
    no_store(answer())
}

/// `GET /api/game/route/active`: the character's active route, any game type.
pub async fn active(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    RawQuery(raw): RawQuery,
) -> Response {
    let answer = || -> Answer {
        let persona = query_persona(&st, &parse_query(raw.as_deref()))?;
        Ok(Json(match games.game_routes.active_of(&persona) {
            Some((game_type, session_id)) => {
                json!({"ok": true, "active": true, "game_type": game_type,
                "session_id": session_id, "persona_name": persona})
            }
            None => {
                let mut v = json!({"ok": true, "active": false});
                if let Some(e) = games.game_routes.last_ended_of(&persona) {
                    v["ended_route"] = json!(e);
                }
                v
            }
        }))
    };
    no_store(answer())
}

/// `POST /api/game/{game_type}/route/drain`: take the queued outputs.
pub async fn drain(Ext(games): Ext<Games>, call: RouteCall) -> Answer {
    // An integer is clamped to 1..=50; a value that is no integer at all
    // (or beyond ±2^53) is invalid_body.
    let limit = opt_int(&call.body, &["limit"], -MAX_SAFE_INT, MAX_SAFE_INT)?
        .unwrap_or(MAX_DRAIN)
        .clamp(1, MAX_DRAIN);
    let limit = usize::try_from(limit).unwrap_or(50);
    let (outputs, state) = games.game_routes.drain(
        &call.persona,
        &call.game_type,
        call.session.as_deref(),
        limit,
    );
    Ok(Json(
        json!({"ok": true, "outputs": outputs, "state": state}),
    ))
}

/// `POST /api/game/{game_type}/route/voice-transcript`.
pub async fn voice_transcript(
    Ext(games): Ext<Games>,
    GameType(game_type): GameType,
    JsonObject(b): JsonObject,
) -> Answer {
    let transcript = opt_str(&b, &["transcript", "text"])?
        .ok_or_else(|| Failure::new(Reason::MissingTranscript))?;
    let persona = require_persona(&b)?;
    let session = session_of(&b)?;
    let request_id = opt_str(&b, &["request_id", "requestId"])?;
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
        signals: Signals::from_body(&b),
    }) {
        Ok((handled, state)) => {
            let mut v = json!({"ok": true, "handled": handled, "state": state});
            if !handled {
                v["reason"] = json!("duplicate_request");
            }
            Ok(Json(v))
        }
        Err(Miss::Inactive) => Err(refused(Reason::RouteNotActive, RouteState::none())),
        Err(Miss::Mismatch(state)) => Err(refused(Reason::SessionIdMismatch, state)),
    }
}

/// `POST /api/game/{game_type}/route/heartbeat`.
pub async fn heartbeat(Ext(games): Ext<Games>, call: RouteCall) -> Answer {
    let beat = games.heartbeat(&PageBeat {
        signals: Signals::from_body(&call.body),
        persona: call.persona,
        game_type: call.game_type,
        session_id: call.session,
    });
    let cfg = &games.cfg;
    let mut v = json!({
        "ok": true,
        "active": beat.active,
        "heartbeat_interval_seconds": cfg.heartbeat_interval.as_secs_f64(),
        "heartbeat_timeout_seconds": beat.timeout.as_secs_f64(),
        "foreground_heartbeat_timeout_seconds": cfg.heartbeat_timeout.as_secs_f64(),
        "hidden_heartbeat_timeout_seconds": cfg.hidden_heartbeat_timeout.as_secs_f64(),
        "state": beat.state,
    });
    if beat.session_mismatch {
        v["reason"] = json!("session_id_mismatch");
    }
    Ok(Json(v))
}

/// `POST /api/game/{game_type}/route/end` and `POST /api/game/{game_type}/end`:
/// end a route; the cleanup result.
pub async fn end(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    PlayableGameType(game_type): PlayableGameType,
    EndReason(default_reason): EndReason,
    JsonObject(b): JsonObject,
) -> Answer {
    // The body's character, else the current one; with neither there is no
    // round to end (the no-route answer).
    let persona = match persona_of(&b)? {
        Some(p) => p,
        None => st.characters.resolve(None).unwrap_or_default(),
    };
    let reason = opt_str(&b, &["reason"])?
        .map(|r| truncate_chars(&r, 64))
        .unwrap_or_else(|| default_reason.to_string());
    let session_id = session_of(&b)?;
    let ended = games.end_route(
        &st,
        EndRoute {
            persona,
            game_type,
            session_id,
            reason,
            signals: Signals::from_body(&b),
        },
    );
    Ok(Json(match ended {
        EndResult::Finalized {
            closed,
            route: f,
            score_session_recorded,
        } => {
            let started = f.archive.game_started;
            let mut out = json!({
                "ok": true,
                "closed": closed,
                "session_id": f.session_id,
                "game_type": f.game_type,
                "persona_name": f.persona_name,
                "reason": f.reason,
                "route_closed": true,
                "archive": f.archive,
                "archive_memory": {"ok": true, "status": "skipped",
                    "reason": if started { "game_memory_archive_disabled" } else { "game_not_started" }},
                "postgame": {"ok": true, "action": "skip", "reason": "disabled"},
                "state": f.state,
            });
            if let Some(recorded) = score_session_recorded {
                out["score_session_recorded"] = json!(recorded);
            }
            out
        }
        EndResult::AlreadyEnded {
            closed,
            session_id,
            archive,
            state,
        } => json!({"ok": true, "closed": closed, "session_id": session_id,
            "route_closed": false, "already_ended": true, "archive": archive, "state": state}),
        EndResult::NoRoute { closed, session_id } => {
            json!({"ok": true, "closed": closed, "session_id": session_id,
            "route_closed": false, "archive": null})
        }
    }))
}

//! `/api/game/{game_type}/chat`, `mirror-assistant`, `speak`, `realtime-context`,
//! `quick-lines`, `passive-guard` and `character`: what the game character says.
//! `chat`, `quick-lines` and `passive-guard` answer their own degraded
//! envelopes instead of the family's failure envelope.

use axum::extract::{RawQuery, State};
use axum::Json;
use companiond_core::{AppState, Ext};
use serde_json::{json, Value};

use super::extract::{FamilyCall, GameType, JsonObject, PlayableGameType, RouteCall};
use super::input::{opt_bool, opt_object, opt_str, parse_query, require_persona, session_of};
use super::with_ok;
use crate::error::{Answer, Failure, Reason};
use crate::games::chat::{self, ChatLine, ChatRequest, NoLine};
use crate::games::delivery::{MirrorRefused, SpeakRefused};
use crate::games::game_routes::Miss;
use crate::games::kind::GameKind;
use crate::games::passive_guard::{self, GuardRequest, NoVerdict};
use crate::games::quick_lines::{self, QuickLines, QuickLinesRequest};
use crate::games::{character, Games};
use crate::text::clean_line;

/// Longest game line for speak / mirror.
const MAX_SPOKEN_CHARS: usize = 240;

/// `POST /api/game/{game_type}/chat`: one game event to one line and control.
pub async fn chat(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    call: Result<RouteCall, Failure>,
) -> Json<Value> {
    let input = || {
        let call = call?;
        let event = match call.body.get("event") {
            None | Some(Value::Null) => return Err(Failure::new(Reason::MissingEvent)),
            Some(Value::Object(e)) => e.clone(),
            Some(_) => return Err(Failure::new(Reason::InvalidEvent)),
        };
        Ok(ChatRequest {
            game_type: call.game_type,
            persona: call.persona,
            session_id: call.session,
            event,
        })
    };
    let req = match input() {
        Ok(req) => req,
        Err(f) => {
            let code = f.reason.code();
            return Json(json!({"error": code, "reason": code, "line": "", "control": {}}));
        }
    };
    let persona = req.persona.clone();
    Json(match chat::chat(&st, &games, req).await {
        Ok(line) => chat_line(line),
        Err(no_line) => no_chat_line(&persona, no_line),
    })
}

/// The success answer of `chat`.
fn chat_line(l: ChatLine) -> Value {
    let mut out = json!({
        "ok": true,
        "line": l.line,
        "control": l.control,
        "persona_name": l.persona_name,
        "game_type": l.game_type,
        "session_id": l.session_id,
        "method": "game_chat",
        "metrics": {"llm_ms": l.llm_ms, "total_ms": l.total_ms},
    });
    if !l.recorded {
        out["skipped_memory"] = json!("route_inactive");
    }
    out
}

/// The empty line of `chat` with the reason there is none.
fn no_chat_line(persona: &str, no_line: NoLine) -> Value {
    let why = match no_line {
        NoLine::RouteInactive => json!({"ok": true, "skipped": "route_inactive",
            "reason": "route_not_active", "handled": false, "persona_name": persona,
            "method": "game_chat"}),
        NoLine::StaleSession(state) => json!({"ok": true, "skipped": "stale_session",
            "reason": "session_id_mismatch", "handled": false, "persona_name": persona,
            "method": "game_chat", "state": state}),
        NoLine::RateLimited { retry_after } => {
            json!({"error": "rate_limited", "reason": "rate_limited", "retry_after": retry_after})
        }
        NoLine::ProviderUnavailable { reason, message } => {
            json!({"error": "provider_unavailable", "reason": reason, "message": message})
        }
        NoLine::Timeout => json!({"error": "timeout", "reason": "timeout"}),
    };
    let mut v = json!({"line": "", "control": {}});
    if let (Some(m), Value::Object(e)) = (v.as_object_mut(), why) {
        m.extend(e);
    }
    v
}

/// `POST /api/game/{game_type}/mirror-assistant`: a game line into the chat (no speech).
pub async fn mirror_assistant(
    GameType(game_type): GameType,
    FamilyCall(st, games, b): FamilyCall<Games>,
) -> Answer {
    let raw_line = opt_str(&b, &["line", "text"])?.unwrap_or_default();
    let line = clean_line(&raw_line, MAX_SPOKEN_CHARS);
    if line.is_empty() {
        return Err(Failure::new(Reason::MissingLine));
    }
    let persona = require_persona(&b)?;
    let session = session_of(&b)?;
    let method = "project_text_mirror";
    let kind = b
        .get("event")
        .and_then(|e| e.get("kind"))
        .and_then(Value::as_str);
    match games
        .mirror_line(&st, &persona, &game_type, session.as_deref(), &line, kind)
        .await
    {
        Ok(delivered) => Ok(Json(
            json!({"ok": true, "persona_name": persona, "method": method,
            "mirrored": true, "delivered": delivered, "line": line, "game_type": game_type,
            "session_id": session, "speech": false}),
        )),
        Err(MirrorRefused::OtherGame(other)) => Err(Failure::new(Reason::RouteOwnedByOtherGame)
            .with("persona_name", &persona)
            .with("active_game_type", other)),
        Err(MirrorRefused::StaleSession(state)) => Ok(Json(json!({"ok": true,
            "skipped": "stale_session", "reason": "session_id_mismatch", "handled": false,
            "persona_name": persona, "method": method, "state": state, "mirrored": false}))),
        Err(MirrorRefused::NoSessionManager) => {
            Err(Failure::new(Reason::NoSessionManager).with("persona_name", &persona))
        }
    }
}

fn voice_source(skipped: &str) -> Value {
    json!({"provider": "project_tts", "method": "project_tts", "skipped": skipped})
}

/// The speech pipeline state: there is no speech synthesis in this service.
fn tts_pipeline() -> Value {
    let s = json!({"tts_available": false, "tts_thread_alive": false, "tts_ready": false,
        "tts_pending_chunks": 0, "current_speech_id": null});
    json!({"before": s, "after": s})
}

/// `POST /api/game/{game_type}/speak`: always refused with the reason (no voice provider).
pub async fn speak(
    PlayableGameType(game_type): PlayableGameType,
    FamilyCall(st, games, b): FamilyCall<Games>,
) -> Answer {
    let line = clean_line(
        &opt_str(&b, &["line"])?.unwrap_or_default(),
        MAX_SPOKEN_CHARS,
    );
    if line.is_empty() {
        return Err(Failure::new(Reason::MissingLine).with("audio_sent", false));
    }
    let persona = require_persona(&b)?;
    let session = session_of(&b)?;
    opt_bool(&b, &["mirror_text"], true)?;
    opt_bool(&b, &["emit_turn_end"], true)?;
    opt_bool(&b, &["interrupt_audio"], false)?;
    let refused = |reason: Reason| {
        Failure::new(reason)
            .with("audio_sent", false)
            .with("audio_committed", false)
            .with("persona_name", &persona)
            .with("method", "project_tts")
            .with("voice_source", voice_source(reason.code()))
    };
    match games.speak_line(&st, &persona, &game_type, session.as_deref()) {
        SpeakRefused::StaleSession(state) => Ok(Json(json!({"ok": true, "skipped": "stale_session",
            "reason": "session_id_mismatch", "handled": false, "persona_name": persona,
            "method": "project_tts", "state": state, "audio_sent": false,
            "audio_committed": false, "voice_source": voice_source("stale_session")}))),
        SpeakRefused::RouteNotActive => Err(refused(Reason::RouteNotActive)),
        SpeakRefused::NoSessionManager => Err(refused(Reason::NoSessionManager)),
        SpeakRefused::NoVoiceProvider => Err(refused(Reason::NoVoiceProvider)
            .with("error", "no text-to-speech voice provider is available in this service; use mirror-assistant to show the line")
            .with("line", line)
            .with("tts_pipeline", tts_pipeline())),
    }
}

/// `POST /api/game/{game_type}/realtime-context`: this service has no realtime
/// voice sessions, so a valid call always answers `no_active_realtime_session`.
pub async fn realtime_context(
    State(st): State<AppState>,
    _: GameType,
    JsonObject(b): JsonObject,
) -> Answer {
    let persona = require_persona(&b)?;
    opt_object(&b, &["state"])?;
    if b.get("pendingItems")
        .is_some_and(|v| !v.is_array() && !v.is_null())
    {
        return Err(Failure::new(Reason::InvalidBody).with("error", "pendingItems must be a list"));
    }
    let reason = if st.sessions.get(&persona).is_none() {
        Reason::NoSessionManager
    } else {
        Reason::NoActiveRealtimeSession
    };
    Err(Failure::new(reason).with("persona_name", &persona))
}

/// The game type when its kind has the route (`serves`), else `unsupported_game_type`.
fn served(
    game_type: Result<GameType, Failure>,
    serves: fn(GameKind) -> bool,
) -> Result<String, Failure> {
    let GameType(game_type) = game_type?;
    if !serves(GameKind::of(&game_type)) {
        return Err(Failure::new(Reason::UnsupportedGameType));
    }
    Ok(game_type)
}

/// `POST /api/game/{game_type}/quick-lines` (soccer, badminton).
pub async fn quick_lines(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    game_type: Result<GameType, Failure>,
    body: Result<JsonObject, Failure>,
) -> Json<Value> {
    let input = || {
        let game_type = served(game_type, GameKind::has_quick_lines)?;
        let JsonObject(b) = body?;
        let persona = require_persona(&b)?;
        Ok::<_, Failure>((game_type, b, persona))
    };
    let (game_type, b, persona) = match input() {
        Ok(x) => x,
        Err(f) => {
            let reason = f.reason.code();
            return Json(json!({"ok": false, "reason": reason, "error": reason, "lines": {}}));
        }
    };
    let req = QuickLinesRequest::from_body(&b);
    Json(
        match quick_lines::quick_lines(&st, &games, &game_type, &persona, &req).await {
            QuickLines::Cached(lines) => json!({"ok": true, "character": persona,
                "lines": lines, "missing": [], "cached": true}),
            QuickLines::Generated {
                lines,
                missing,
                raw,
            } => json!({"ok": !lines.is_empty(), "character": persona, "lines": lines,
                "missing": missing, "raw": raw}),
            QuickLines::Failed {
                error,
                fallback: Some(lines),
            } => json!({"ok": true, "character": persona, "error": error, "lines": lines,
                "missing": [], "fallback": true}),
            QuickLines::Failed {
                error,
                fallback: None,
            } => json!({"ok": false, "character": persona, "error": error, "lines": {}}),
        },
    )
}

/// The passive guard's answer without a verdict (`observe_more`).
fn guard_fallback(reason: &str) -> Value {
    json!({"ok": false, "reason": reason, "recommendedAction": "observe_more", "exitPromptType": "none"})
}

/// `POST /api/game/{game_type}/passive-guard` (soccer): the passive-player classifier.
pub async fn passive_guard(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    game_type: Result<GameType, Failure>,
    call: Result<RouteCall, Failure>,
) -> Json<Value> {
    let call = served(game_type, GameKind::has_passive_guard).and(call);
    let RouteCall {
        game_type,
        persona,
        session,
        body: b,
    } = match call {
        Ok(call) => call,
        Err(f) => return Json(guard_fallback(f.reason.code())),
    };
    let state =
        match games
            .game_routes
            .with_active(&persona, &game_type, session.as_deref(), |r, cfg| {
                r.public_route(cfg)
            }) {
            Ok(s) => s,
            Err(Miss::Inactive) => return Json(guard_fallback("route_not_active")),
            Err(Miss::Mismatch(_)) => return Json(guard_fallback("session_id_mismatch")),
        };
    let req = GuardRequest::from_body(&b);
    match passive_guard::passive_guard(&st, &games, &persona, &req, state).await {
        Ok(verdict) => with_ok(verdict),
        Err(NoVerdict { reason, error }) => {
            let mut v = guard_fallback(reason);
            if let Some(e) = error {
                v["error"] = json!(e);
            }
            Json(v)
        }
    }
}

/// `GET /api/game/{game_type}/character`: model type and paths of the game
/// character (the query's existing character, else the current one).
pub async fn character(State(st): State<AppState>, _: GameType, RawQuery(raw): RawQuery) -> Answer {
    let q = parse_query(raw.as_deref());
    let persona = q
        .get("persona_name")
        .map(|p| p.trim())
        .filter(|p| !p.is_empty() && st.characters.exists(p))
        .map(str::to_string)
        .or_else(|| st.characters.resolve(None))
        .ok_or_else(|| Failure::new(Reason::MissingPersonaName))?;
    Ok(with_ok(character::info(&st, &persona)))
}

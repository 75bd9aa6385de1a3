//! `/api/game/{game_type}/chat`, `mirror-assistant`, `speak`, `realtime-context`,
//! `quick-lines`, `passive-guard` and `character`: what the game character says.
//! `chat`, `quick-lines` and `passive-guard` answer their own degraded
//! envelopes instead of the family's failure envelope.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use companiond_core::envelope::ok_json;
use companiond_core::{AppState, Ext};
use serde_json::{json, Map, Value};

use super::input::{
    body_map, game_type_of, opt_bool, opt_object, opt_str, parse_query, require_persona, session_of,
};
use super::refuse_icebreaker;
use crate::error::{respond, Failure, Outcome, Reason};
use crate::games::delivery::{MirrorRefused, SpeakRefused};
use crate::games::dialogue::{self, guard_fallback, ChatRequest};
use crate::games::game_routes::Miss;
use crate::games::kind::GameKind;
use crate::games::{character, Games};
use crate::text::clean_line;

/// Longest game line for speak / mirror.
const MAX_SPOKEN_CHARS: usize = 240;

/// The game type, body and character of a dialogue call, in that order.
async fn dialogue_input(
    gt: &str,
    body: Body,
    kind_ok: impl Fn(GameKind) -> bool,
) -> Result<(String, Map<String, Value>, String), Failure> {
    let game_type = game_type_of(gt)?;
    if !kind_ok(GameKind::of(&game_type)) {
        return Err(Failure::new(Reason::UnsupportedGameType));
    }
    let b = body_map(body).await?;
    let persona = require_persona(&b)?;
    Ok((game_type, b, persona))
}

/// `POST /api/game/{game_type}/chat`: one game event to one line and control.
pub async fn chat(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let input = async {
        let (game_type, b, persona) = dialogue_input(&gt, body, |_| true).await?;
        let session_id = session_of(&b)?;
        let event = match b.get("event") {
            None | Some(Value::Null) => return Err(Failure::new(Reason::MissingEvent)),
            Some(Value::Object(e)) => e.clone(),
            Some(_) => return Err(Failure::new(Reason::InvalidEvent)),
        };
        Ok(ChatRequest {
            game_type,
            persona,
            session_id,
            event,
        })
    }
    .await;
    match input {
        Ok(req) => ok_json(dialogue::chat(&st, &games, req).await),
        Err(f) => {
            let code = f.reason.code();
            ok_json(json!({"error": code, "reason": code, "line": "", "control": {}}))
        }
    }
}

/// `POST /api/game/{game_type}/mirror-assistant`: a game line into the chat (no speech).
pub async fn mirror_assistant(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        let game_type = game_type_of(&gt)?;
        let b = body_map(body).await?;
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
            Ok(delivered) => Ok(
                json!({"ok": true, "persona_name": persona, "method": method,
                "mirrored": true, "delivered": delivered, "line": line, "game_type": game_type,
                "session_id": session, "speech": false}),
            ),
            Err(MirrorRefused::OtherGame(other)) => {
                Err(Failure::new(Reason::RouteOwnedByOtherGame)
                    .with("persona_name", &persona)
                    .with("active_game_type", other))
            }
            Err(MirrorRefused::StaleSession(state)) => Ok(json!({"ok": true,
                "skipped": "stale_session", "reason": "session_id_mismatch", "handled": false,
                "persona_name": persona, "method": method, "state": state, "mirrored": false})),
            Err(MirrorRefused::NoSessionManager) => {
                Err(Failure::new(Reason::NoSessionManager).with("persona_name", &persona))
            }
        }
    }
    .await;
    respond(r)
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
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        refuse_icebreaker(&gt, "/api/icebreaker/speak")?;
        let game_type = game_type_of(&gt)?;
        let b = body_map(body).await?;
        let line = clean_line(&opt_str(&b, &["line"])?.unwrap_or_default(), MAX_SPOKEN_CHARS);
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
            SpeakRefused::StaleSession(state) => Ok(json!({"ok": true, "skipped": "stale_session",
                "reason": "session_id_mismatch", "handled": false, "persona_name": persona,
                "method": "project_tts", "state": state, "audio_sent": false,
                "audio_committed": false, "voice_source": voice_source("stale_session")})),
            SpeakRefused::RouteNotActive => Err(refused(Reason::RouteNotActive)),
            SpeakRefused::NoSessionManager => Err(refused(Reason::NoSessionManager)),
            SpeakRefused::NoVoiceProvider => Err(refused(Reason::NoVoiceProvider)
                .with("error", "no text-to-speech voice provider is available in this service; use mirror-assistant to show the line")
                .with("line", line)
                .with("tts_pipeline", tts_pipeline())),
        }
    }
    .await;
    respond(r)
}

/// `POST /api/game/{game_type}/realtime-context`: this service has no realtime
/// voice sessions, so a valid call always answers `no_active_realtime_session`.
pub async fn realtime_context(
    State(st): State<AppState>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        game_type_of(&gt)?;
        let b = body_map(body).await?;
        let persona = require_persona(&b)?;
        opt_object(&b, &["state"])?;
        if b.get("pendingItems")
            .is_some_and(|v| !v.is_array() && !v.is_null())
        {
            return Err(
                Failure::new(Reason::InvalidBody).with("error", "pendingItems must be a list")
            );
        }
        let reason = if st.sessions.get(&persona).is_none() {
            Reason::NoSessionManager
        } else {
            Reason::NoActiveRealtimeSession
        };
        Err(Failure::new(reason).with("persona_name", &persona))
    }
    .await;
    respond(r)
}

/// `POST /api/game/{game_type}/quick-lines` (soccer, badminton).
pub async fn quick_lines(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    match dialogue_input(&gt, body, GameKind::has_quick_lines).await {
        Ok((game_type, b, persona)) => {
            ok_json(dialogue::quick_lines(&st, &games, &game_type, &persona, &b).await)
        }
        Err(f) => {
            let reason = f.reason.code();
            ok_json(json!({"ok": false, "reason": reason, "error": reason, "lines": {}}))
        }
    }
}

/// `POST /api/game/{game_type}/passive-guard` (soccer): the passive-player classifier.
pub async fn passive_guard(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let input = async {
        let (game_type, b, persona) =
            dialogue_input(&gt, body, GameKind::has_passive_guard).await?;
        let session = session_of(&b)?;
        Ok::<_, Failure>((game_type, b, persona, session))
    }
    .await;
    let (game_type, b, persona, session) = match input {
        Ok(x) => x,
        Err(f) => return ok_json(guard_fallback(f.reason.code())),
    };
    let state =
        match games
            .game_routes
            .with_active(&persona, &game_type, session.as_deref(), |r, cfg| {
                r.public_state(cfg)
            }) {
            Ok(s) => s,
            Err(Miss::Inactive) => return ok_json(guard_fallback("route_not_active")),
            Err(Miss::Mismatch(_)) => return ok_json(guard_fallback("session_id_mismatch")),
        };
    ok_json(dialogue::passive_guard(&st, &games, &persona, &b, state).await)
}

/// `GET /api/game/{game_type}/character`: model type and paths of the game
/// character (the query's existing character, else the current one).
pub async fn character(
    State(st): State<AppState>,
    Path(gt): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Outcome = (|| {
        game_type_of(&gt)?;
        let q = parse_query(raw.as_deref());
        let persona = q
            .get("persona_name")
            .map(|p| p.trim())
            .filter(|p| !p.is_empty() && st.characters.exists(p))
            .map(str::to_string)
            .or_else(|| st.characters.resolve(None))
            .ok_or_else(|| Failure::new(Reason::MissingPersonaName))?;
        let mut v = character::info(&st, &persona);
        v["ok"] = json!(true);
        Ok(v)
    })();
    respond(r)
}

//! Thin HTTP handlers of `/api/game`: parse, call the domain, answer the envelope.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::llm::ChatMessage;
use companiond_core::{AppState, Ext};
use serde_json::{json, Map, Value};

use super::dialogue::{self, guard_fallback, ChatRequest};
use super::game_routes::{inactive_state, EndOutcome, Miss, Signals};
use super::leaderboard::{empty_page, normalize_mode, PageQuery, MAX_OFFSET, MAX_PAGE};
use super::logs::{NewEntry, ReadQuery, DEFAULT_LIMIT, MAX_LIMIT};
use super::{character, Games, ICEBREAKER_GAME_TYPE};
use crate::error::{respond, Failure, Outcome, Reason};
use crate::util::{
    clean_line, game_type as norm_game_type, opt_bool, opt_int, opt_object, opt_str, parse_object,
    parse_query, truncate_chars, MAX_SAFE_INT,
};

/// Largest JSON body of these routes.
pub const MAX_BODY: usize = 1024 * 1024;
/// Longest game line for speak / mirror.
pub const MAX_SPOKEN_CHARS: usize = 240;

/// Read and parse a JSON object body (at most [`MAX_BODY`]).
pub async fn body_map(body: Body) -> Result<Map<String, Value>, Failure> {
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        Failure::new(Reason::InvalidBody).with("error", "the body is too large or unreadable")
    })?;
    parse_object(&bytes)
}

/// The character named by a body (`persona_name`, aliases `personaName`, `lanlan_name`).
pub fn persona_of(b: &Map<String, Value>) -> Result<Option<String>, Failure> {
    let p = opt_str(b, &["persona_name", "personaName", "lanlan_name"])?;
    if p.as_ref().is_some_and(|p| p.chars().count() > 128) {
        return Err(Failure::new(Reason::InvalidBody).with("error", "persona_name is too long"));
    }
    Ok(p)
}

fn require_persona(b: &Map<String, Value>) -> Result<String, Failure> {
    persona_of(b)?.ok_or_else(|| Failure::new(Reason::MissingPersonaName))
}

fn session_of(b: &Map<String, Value>) -> Result<Option<String>, Failure> {
    let s = opt_str(b, &["session_id", "sessionId"])?;
    if s.as_ref().is_some_and(|s| s.chars().count() > 128) {
        return Err(Failure::new(Reason::InvalidBody).with("error", "session_id is too long"));
    }
    Ok(s)
}

/// The character of a query (`persona_name`), else the current one.
fn query_persona(
    st: &AppState,
    q: &std::collections::HashMap<String, String>,
) -> Result<String, Failure> {
    match q
        .get("persona_name")
        .or_else(|| q.get("lanlan_name"))
        .map(|s| s.trim())
    {
        Some(p) if !p.is_empty() => Ok(truncate_chars(p, 128)),
        _ => st
            .characters
            .resolve(None)
            .ok_or_else(|| Failure::new(Reason::MissingPersonaName)),
    }
}

fn not_a_game_route(route: &str) -> Failure {
    Failure::new(Reason::NotAGameRoute)
        .with("route", route)
        .with(
            "error",
            "new_user_icebreaker is the onboarding flow; use /api/icebreaker",
        )
}

fn query_int(
    q: &std::collections::HashMap<String, String>,
    key: &str,
) -> Result<Option<i64>, Failure> {
    match q.get(key).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s.parse::<i64>().map(Some).map_err(|_| {
            Failure::new(Reason::InvalidQuery).with("error", format!("{key} must be an integer"))
        }),
    }
}

// ------------------------------------------------------------------ logs

fn read_query(raw: Option<&str>) -> Result<ReadQuery, Failure> {
    let q = parse_query(raw);
    // Integers only (else 400 invalid_query); a negative cursor is 0 and the
    // limit is clamped to 1..=MAX_LIMIT (reference), before any conversion.
    let since = query_int(&q, "since")?.map(|s| s.max(0).unsigned_abs());
    let limit = query_int(&q, "limit")?
        .map(|l| {
            usize::try_from(l.max(1))
                .unwrap_or(MAX_LIMIT)
                .min(MAX_LIMIT)
        })
        .unwrap_or(DEFAULT_LIMIT);
    let game_type = match q
        .get("game_type")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        Some(g) => Some(norm_game_type(g)?),
        None => None,
    };
    Ok(ReadQuery {
        session_id: q
            .get("session_id")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        game_type,
        since,
        limit,
    })
}

pub async fn logs_get(Ext(games): Ext<Games>, RawQuery(raw): RawQuery) -> Response {
    match read_query(raw.as_deref()) {
        Ok(q) => no_store(ok_json(games.logs.read(&q))),
        Err(f) => f.into_response(),
    }
}

pub async fn logs_view(Ext(games): Ext<Games>, RawQuery(raw): RawQuery) -> Response {
    match read_query(raw.as_deref()) {
        Ok(q) => no_store(
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                games.logs.view(&q),
            )
                .into_response(),
        ),
        Err(f) => f.into_response(),
    }
}

fn log_ids(b: &Map<String, Value>) -> Result<(String, String, String), Failure> {
    let session = session_of(b)?.ok_or_else(|| Failure::new(Reason::MissingSessionId))?;
    let game = match opt_str(b, &["game_type", "gameType"])? {
        Some(g) => norm_game_type(&g)?,
        None => "game".to_string(),
    };
    let persona = persona_of(b)?.unwrap_or_default();
    Ok((session, game, persona))
}

pub async fn logs_post(Ext(games): Ext<Games>, body: Body) -> Response {
    let r: Outcome = async {
        let b = body_map(body).await?;
        let (session, game, persona) = log_ids(&b)?;
        match games
            .logs
            .ingest(&game, &session, &persona, NewEntry::from_body(&b))
        {
            Some(seq) => {
                Ok(json!({"ok": true, "seq": seq, "session_id": session, "game_type": game}))
            }
            None => Err(Failure::new(Reason::LogNotActive)
                .with("seq", Value::Null)
                .with("session_id", session)
                .with("game_type", game)),
        }
    }
    .await;
    respond(r)
}

pub async fn logs_enable(Ext(games): Ext<Games>, body: Body) -> Response {
    let r: Outcome = async {
        let b = body_map(body).await?;
        let (session, game, persona) = log_ids(&b)?;
        let reason = opt_str(&b, &["reason"])?
            .map(|r| truncate_chars(&r, 64))
            .unwrap_or_else(|| "manual".into());
        let seq = games.logs.enable(&game, &session, &persona, &reason);
        Ok(json!({"ok": true, "session_id": session, "game_type": game, "seq": seq}))
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ route lifecycle

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
    let recent: Vec<Value> = talk[talk.len().saturating_sub(6)..]
        .iter()
        .map(|m| json!({"role": m.role, "text": truncate_chars(m.content.as_deref().unwrap_or(""), 240)}))
        .collect();
    json!({"source": "session_history", "recent_dialogue": recent})
}

pub async fn route_start(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        if gt.trim().eq_ignore_ascii_case(ICEBREAKER_GAME_TYPE) {
            return Err(not_a_game_route("/api/icebreaker/route/start"));
        }
        let game_type = norm_game_type(&gt)?;
        let b = body_map(body).await?;
        let persona = require_persona(&b)?;
        let session = session_of(&b)?.unwrap_or_else(|| "default".into());
        let mode = match opt_str(&b, &["mode"])? {
            _ if game_type == "badminton" => {
                Some(normalize_mode(b.get("mode").and_then(Value::as_str)))
            }
            Some(m) => Some(truncate_chars(&m.to_ascii_lowercase(), 32)),
            None => None,
        };
        let ctx = pre_game_context(&st, &persona).await;
        let (state, superseded) = games.game_routes.start(
            &persona,
            &game_type,
            &session,
            mode,
            ctx,
            &Signals::from_body(&b),
        );
        let mut superseded_list = Vec::new();
        for f in &superseded {
            games.after_finalize(&st, f);
            if f.persona_name == persona {
                superseded_list.push(json!({"game_type": f.game_type, "session_id": f.session_id}));
            }
        }
        if game_type == "soccer" {
            games
                .logs
                .enable(&game_type, &session, &persona, "route_start");
        }
        games.log_event(
            &game_type,
            &session,
            "route_started",
            json!({"persona_name": persona}),
        );
        if let Some(m) = st.sessions.get(&persona) {
            m.notify(
                json!({"type": "game_window_state_change", "action": "opened",
                "persona_name": persona, "game_type": game_type, "session_id": session}),
            );
        }
        let mut out = Map::new();
        out.insert("ok".into(), json!(true));
        if let Value::Object(s) = &state {
            out.extend(s.clone());
        }
        out.insert("state".into(), state);
        out.insert("superseded".into(), json!(superseded_list));
        Ok(Value::Object(out))
    }
    .await;
    respond(r)
}

pub async fn route_state(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Outcome = (|| {
        let game_type = norm_game_type(&gt)?;
        let persona = query_persona(&st, &parse_query(raw.as_deref()))?;
        Ok(json!({"ok": true, "state": games.game_routes.state(&persona, &game_type)}))
    })();
    no_store(respond(r))
}

pub async fn route_active(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Outcome = (|| {
        let persona = query_persona(&st, &parse_query(raw.as_deref()))?;
        Ok(match games.game_routes.active_of(&persona) {
            Some((game_type, session_id)) => {
                json!({"ok": true, "active": true, "game_type": game_type,
                "session_id": session_id, "persona_name": persona})
            }
            None => {
                let mut v = json!({"ok": true, "active": false});
                if let Some(e) = games.game_routes.last_ended_of(&persona) {
                    v["ended_route"] = e;
                }
                v
            }
        })
    })();
    no_store(respond(r))
}

pub async fn route_drain(Ext(games): Ext<Games>, Path(gt): Path<String>, body: Body) -> Response {
    let r: Outcome = async {
        let game_type = norm_game_type(&gt)?;
        let b = body_map(body).await?;
        let persona = require_persona(&b)?;
        let session = session_of(&b)?;
        // Default 50; an integer is clamped to 1..=50 (reference); a value that
        // is no integer at all (or beyond ±2^53) is invalid_body.
        let limit = opt_int(&b, &["limit"], -MAX_SAFE_INT, MAX_SAFE_INT)?
            .unwrap_or(50)
            .clamp(1, 50);
        let limit = usize::try_from(limit).unwrap_or(50);
        let (outputs, state) =
            games
                .game_routes
                .drain(&persona, &game_type, session.as_deref(), limit);
        Ok(json!({"ok": true, "outputs": outputs, "state": state}))
    }
    .await;
    respond(r)
}

pub async fn route_voice_transcript(
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        let game_type = norm_game_type(&gt)?;
        let b = body_map(body).await?;
        let transcript = opt_str(&b, &["transcript", "text"])?
            .ok_or_else(|| Failure::new(Reason::MissingTranscript))?;
        let persona = require_persona(&b)?;
        let session = session_of(&b)?;
        let request_id = opt_str(&b, &["request_id", "requestId"])?;
        let text = truncate_chars(&transcript, 2000);
        match games.game_routes.transcript(
            &persona,
            &game_type,
            session.as_deref(),
            &text,
            request_id.as_deref(),
            &Signals::from_body(&b),
        ) {
            Ok((handled, state)) => {
                if let Some(sid) = state.get("session_id").and_then(Value::as_str) {
                    games.log_event(
                        &game_type,
                        sid,
                        "voice_transcript",
                        json!({"handled": handled, "chars": text.chars().count()}),
                    );
                }
                let mut v = json!({"ok": true, "handled": handled, "state": state});
                if !handled {
                    v["reason"] = json!("duplicate_request");
                }
                Ok(v)
            }
            Err(Miss::Inactive) => Err(Failure::new(Reason::RouteNotActive)
                .with("handled", false)
                .with("persona_name", &persona)
                .with("state", inactive_state())),
            Err(Miss::Mismatch(state)) => Err(Failure::new(Reason::SessionIdMismatch)
                .with("handled", false)
                .with("persona_name", &persona)
                .with("state", state)),
        }
    }
    .await;
    respond(r)
}

pub async fn route_heartbeat(
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        let game_type = norm_game_type(&gt)?;
        let b = body_map(body).await?;
        let persona = require_persona(&b)?;
        let session = session_of(&b)?;
        let cfg = &games.cfg;
        let base = |active: bool, state: Value| {
            let timeout = if state.get("page_visible") == Some(&json!(false)) {
                cfg.hidden_heartbeat_timeout
            } else {
                cfg.heartbeat_timeout
            };
            json!({
                "ok": true,
                "active": active,
                "heartbeat_interval_seconds": cfg.heartbeat_interval.as_secs_f64(),
                "heartbeat_timeout_seconds": timeout.as_secs_f64(),
                "foreground_heartbeat_timeout_seconds": cfg.heartbeat_timeout.as_secs_f64(),
                "hidden_heartbeat_timeout_seconds": cfg.hidden_heartbeat_timeout.as_secs_f64(),
                "state": state,
            })
        };
        Ok(
            match games.game_routes.heartbeat(
                &persona,
                &game_type,
                session.as_deref(),
                &Signals::from_body(&b),
            ) {
                Ok(state) => base(true, state),
                Err(Miss::Inactive) => base(false, inactive_state()),
                Err(Miss::Mismatch(state)) => {
                    let mut v = base(false, state);
                    v["reason"] = json!("session_id_mismatch");
                    v
                }
            },
        )
    }
    .await;
    respond(r)
}

async fn end_common(
    st: AppState,
    games: &Games,
    gt: String,
    body: Body,
    default_reason: &str,
) -> Outcome {
    if gt.trim().eq_ignore_ascii_case(ICEBREAKER_GAME_TYPE) {
        return Err(not_a_game_route("/api/icebreaker/route/end"));
    }
    let game_type = norm_game_type(&gt)?;
    let b = body_map(body).await?;
    // The body's character, else the current one; with neither there is no
    // round to end (the no-round answer below).
    let persona = match persona_of(&b)? {
        Some(p) => p,
        None => st.characters.resolve(None).unwrap_or_default(),
    };
    let reason = opt_str(&b, &["reason"])?
        .map(|r| truncate_chars(&r, 64))
        .unwrap_or_else(|| default_reason.to_string());
    let session = match session_of(&b)? {
        Some(s) => s,
        None => games
            .game_routes
            .with_active(&persona, &game_type, None, |r, _| r.session_id.clone())
            .unwrap_or_else(|_| "default".into()),
    };
    let signals = Signals::from_body(&b);
    match games
        .game_routes
        .end(&persona, &game_type, &session, &reason, &signals)
    {
        EndOutcome::Finalized(f) => {
            let closed = games.after_finalize(&st, &f);
            let started = f
                .archive
                .get("game_started")
                .and_then(Value::as_bool)
                .unwrap_or(false);
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
            if game_type == "badminton" {
                let final_score = f.archive.get("finalScore").cloned().unwrap_or(Value::Null);
                let mode = f.mode.clone().unwrap_or_else(|| normalize_mode(None));
                let recorded =
                    games
                        .board
                        .record(&f.persona_name, &f.session_id, &mode, &final_score);
                out["score_session_recorded"] = json!(recorded);
            }
            Ok(out)
        }
        EndOutcome::AlreadyEnded { archive, state } => {
            let closed = games.close_llm_session(&persona, &game_type, &session);
            Ok(
                json!({"ok": true, "closed": closed, "session_id": session, "route_closed": false,
                "already_ended": true, "archive": archive, "state": state}),
            )
        }
        EndOutcome::NoRoute => {
            // No running round is not an error: the cached model session (if any) is dropped.
            let closed = games.close_llm_session(&persona, &game_type, &session);
            Ok(
                json!({"ok": true, "closed": closed, "session_id": session, "route_closed": false,
                "archive": null}),
            )
        }
    }
}

pub async fn route_end(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    respond(end_common(st, &games, gt, body, "route_end").await)
}

pub async fn game_end(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    respond(end_common(st, &games, gt, body, "game_end").await)
}

// ------------------------------------------------------------------ dialogue

pub async fn chat(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let fail =
        |code: &str| ok_json(json!({"error": code, "reason": code, "line": "", "control": {}}));
    let game_type = match norm_game_type(&gt) {
        Ok(t) => t,
        Err(_) => return fail("invalid_game_type"),
    };
    let b = match body_map(body).await {
        Ok(b) => b,
        Err(_) => return fail("invalid_body"),
    };
    let persona = match require_persona(&b) {
        Ok(p) => p,
        Err(f) => return fail(f.reason.code()),
    };
    let session_id = match session_of(&b) {
        Ok(s) => s,
        Err(_) => return fail("invalid_body"),
    };
    let event = match b.get("event") {
        None | Some(Value::Null) => return fail("missing_event"),
        Some(Value::Object(e)) => e.clone(),
        Some(_) => return fail("invalid_event"),
    };
    ok_json(
        dialogue::chat(
            &st,
            &games,
            ChatRequest {
                game_type,
                persona,
                session_id,
                event,
            },
        )
        .await,
    )
}

pub async fn mirror_assistant(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        let game_type = norm_game_type(&gt)?;
        let b = body_map(body).await?;
        let raw_line = opt_str(&b, &["line", "text"])?.unwrap_or_default();
        let line = clean_line(&raw_line, MAX_SPOKEN_CHARS);
        if line.is_empty() {
            return Err(Failure::new(Reason::MissingLine));
        }
        let persona = require_persona(&b)?;
        let session = session_of(&b)?;
        let method = "project_text_mirror";
        if let Some((other, _)) = games.game_routes.active_of(&persona).filter(|(t, _)| *t != game_type) {
            return Err(Failure::new(Reason::RouteOwnedByOtherGame)
                .with("persona_name", &persona)
                .with("active_game_type", other));
        }
        // A matching route records the line; a route of another session makes it stale.
        let kind = b.get("event").and_then(|e| e.get("kind")).and_then(Value::as_str).map(str::to_string);
        if let Err(Miss::Mismatch(state)) = games.game_routes.with_active(&persona, &game_type, session.as_deref(), |_, _| ()) {
            return Ok(json!({"ok": true, "skipped": "stale_session", "reason": "session_id_mismatch",
                "handled": false, "persona_name": persona, "method": method, "state": state, "mirrored": false}));
        }
        let Some(mgr) = st.sessions.get(&persona) else {
            return Err(Failure::new(Reason::NoSessionManager).with("persona_name", &persona));
        };
        let _ = games.game_routes.with_active(&persona, &game_type, session.as_deref(), |r, _| {
            let mut d = Map::new();
            d.insert("type".into(), json!(if kind.as_deref() == Some("opening-line") { "opening_line" } else { "assistant" }));
            d.insert("text".into(), json!(line));
            r.push_dialog(d);
        });
        mgr.push_history(ChatMessage::assistant(line.clone())).await;
        let delivered = mgr.notify(json!({"type": "assistant_mirror", "text": line, "source": "game",
            "game_type": game_type, "session_id": session}));
        Ok(json!({"ok": true, "persona_name": persona, "method": method, "mirrored": true,
            "delivered": delivered, "line": line, "game_type": game_type, "session_id": session,
            "speech": false}))
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

pub async fn speak(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        if gt.trim().eq_ignore_ascii_case(ICEBREAKER_GAME_TYPE) {
            return Err(not_a_game_route("/api/icebreaker/speak"));
        }
        let game_type = norm_game_type(&gt)?;
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
        let base = |f: Failure, skipped: &str| {
            f.with("audio_sent", false)
                .with("audio_committed", false)
                .with("persona_name", &persona)
                .with("method", "project_tts")
                .with("voice_source", voice_source(skipped))
        };
        match games.game_routes.with_active(&persona, &game_type, session.as_deref(), |_, _| ()) {
            Err(Miss::Inactive) => return Err(base(Failure::new(Reason::RouteNotActive), "route_not_active")),
            Err(Miss::Mismatch(state)) => {
                return Ok(json!({"ok": true, "skipped": "stale_session", "reason": "session_id_mismatch",
                    "handled": false, "persona_name": persona, "method": "project_tts", "state": state,
                    "audio_sent": false, "audio_committed": false, "voice_source": voice_source("stale_session")}))
            }
            Ok(()) => {}
        }
        if st.sessions.get(&persona).is_none() {
            return Err(base(Failure::new(Reason::NoSessionManager), "no_session_manager"));
        }
        Err(base(Failure::new(Reason::NoVoiceProvider), "no_voice_provider")
            .with("error", "no text-to-speech voice provider is available in this service; use mirror-assistant to show the line")
            .with("line", line)
            .with("tts_pipeline", tts_pipeline()))
    }
    .await;
    respond(r)
}

pub async fn realtime_context(
    State(st): State<AppState>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        norm_game_type(&gt)?;
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
        if st.sessions.get(&persona).is_none() {
            return Err(Failure::new(Reason::NoSessionManager).with("persona_name", &persona));
        }
        // This service has no realtime voice sessions, so none can be active.
        Err(Failure::new(Reason::NoActiveRealtimeSession).with("persona_name", &persona))
    }
    .await;
    respond(r)
}

pub async fn quick_lines(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let fail = |reason: &str| {
        ok_json(json!({"ok": false, "reason": reason, "error": reason, "lines": {}}))
    };
    let game_type = match norm_game_type(&gt) {
        Ok(t) if t == "soccer" || t == "badminton" => t,
        Ok(_) => return fail("unsupported_game_type"),
        Err(f) => return fail(f.reason.code()),
    };
    let b = match body_map(body).await {
        Ok(b) => b,
        Err(f) => return fail(f.reason.code()),
    };
    let persona = match require_persona(&b) {
        Ok(p) => p,
        Err(f) => return fail(f.reason.code()),
    };
    ok_json(dialogue::quick_lines(&st, &games, &game_type, &persona, &b).await)
}

pub async fn passive_guard(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let game_type = match norm_game_type(&gt) {
        Ok(t) if t == "soccer" => t,
        Ok(_) => return ok_json(guard_fallback("unsupported_game_type")),
        Err(f) => return ok_json(guard_fallback(f.reason.code())),
    };
    let b = match body_map(body).await {
        Ok(b) => b,
        Err(f) => return ok_json(guard_fallback(f.reason.code())),
    };
    let (persona, session) = match (require_persona(&b), session_of(&b)) {
        (Ok(p), Ok(s)) => (p, s),
        (Err(f), _) | (_, Err(f)) => return ok_json(guard_fallback(f.reason.code())),
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

pub async fn character_info(
    State(st): State<AppState>,
    Path(gt): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Outcome = (|| {
        norm_game_type(&gt)?;
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

// ------------------------------------------------------------------ leaderboard

pub async fn leaderboard_get(
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Outcome = async {
        let game_type = norm_game_type(&gt)?;
        let q = parse_query(raw.as_deref());
        let limit = query_int(&q, "limit")?.unwrap_or(10).clamp(0, MAX_PAGE);
        let offset = query_int(&q, "offset")?.unwrap_or(0).clamp(0, MAX_OFFSET);
        if game_type != "badminton" {
            return Ok(empty_page(limit, offset));
        }
        let text = |k: &str| {
            q.get(k)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        games
            .board
            .page(PageQuery {
                persona_name: text("persona_name").map(|p| truncate_chars(&p, 80)),
                session_id: text("session_id").map(|s| truncate_chars(&s, 120)),
                limit,
                offset,
            })
            .await
    }
    .await;
    no_store(respond(r))
}

pub async fn leaderboard_post(
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        let game_type = norm_game_type(&gt)?;
        if game_type != "badminton" {
            return Err(Failure::new(Reason::UnsupportedGameType).with("game_type", game_type));
        }
        let b = body_map(body).await?;
        let sub = games.board.validate(&b)?;
        games.board.submit(sub).await
    }
    .await;
    respond(r)
}

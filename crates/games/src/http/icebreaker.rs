//! `/api/icebreaker/*`: the new-user icebreaker (onboarding) routes. The rules
//! are in docs/games.md, section Icebreaker.

use axum::extract::{RawQuery, State};
use axum::Json;
use companiond_core::{now_secs, AppState, Ext};
use serde_json::{json, Map, Value};

use super::extract::FamilyCall;
use super::input::{
    opt_bool, opt_str, parse_query, persona_or_current, query_text, require_persona, session_of,
};
use crate::error::{Answer, Failure, Reason};
use crate::icebreaker::choices::{self, ChoiceRecord, ChoiceWriteFailed};
use crate::icebreaker::free_text::{self, normalize_options, FreeText};
use crate::icebreaker::{
    inactive_state, ContextAdded, IceMiss, IceRoute, Icebreaker, Role, SpeakOptions,
    MAX_CONTEXT_CHARS, MAX_SPOKEN_CHARS, SOURCE,
};
use crate::text::{clean_line, truncate_chars};

/// The stale envelope: the route belongs to another session (a success, `handled:false`).
fn stale(persona: &str, method: &str, state: Value) -> Value {
    json!({"ok": true, "skipped": "stale_session", "reason": "session_id_mismatch", "handled": false,
           "persona_name": persona, "method": method, "state": state})
}

/// The character's route for a call of `method`: `Ok(Err(stale envelope))` when
/// it belongs to another session, `route_not_active` (with `source`, `method`) without one.
fn bound_route(
    icebreaker: &Icebreaker,
    persona: &str,
    session: Option<&str>,
    method: &str,
) -> Result<Result<IceRoute, Value>, Failure> {
    match icebreaker.check(persona, session, true) {
        Ok(r) => Ok(Ok(r)),
        Err(IceMiss::NotActive) => Err(Failure::new(Reason::RouteNotActive)
            .with("persona_name", persona)
            .with("source", SOURCE)
            .with("method", method)),
        Err(IceMiss::Stale(state)) => Ok(Err(stale(persona, method, state))),
    }
}

/// `POST /api/icebreaker/route/start` (CSRF): start (or replace) the character's route.
pub async fn start(FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker>) -> Answer {
    let persona = persona_or_current(&st, &b)?;
    let session = session_of(&b)?.ok_or_else(|| Failure::new(Reason::MissingSessionId))?;
    Ok(Json(
        json!({"ok": true, "state": icebreaker.start(&persona, &session)}),
    ))
}

/// `POST /api/icebreaker/route/end` (CSRF).
pub async fn end(FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker>) -> Answer {
    let persona = persona_or_current(&st, &b)?;
    let session = session_of(&b)?;
    let reason = opt_str(&b, &["reason"])?
        .map(|r| truncate_chars(&r, 64))
        .unwrap_or_else(|| "icebreaker_end".into());
    match icebreaker.end(&persona, session.as_deref()) {
        Err(state) => Err(Failure::new(Reason::SessionIdMismatch)
            .with("handled", false)
            .with("persona_name", &persona)
            .with("method", "route_end")
            .with("state", state)),
        Ok(ended) => Ok(Json(json!({
            "ok": true,
            "persona_name": persona,
            "reason": reason,
            "state": inactive_state(),
            "ended": ended.map(|r| json!({"session_id": r.session_id, "started_at": r.started_at,
                "last_activity": r.last_activity, "ended_at": now_secs(),
                "end_reason": reason})),
        }))),
    }
}

/// `GET /api/icebreaker/route/state` (the query's character, else the current one).
pub async fn state(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    RawQuery(raw): RawQuery,
) -> Answer {
    let q = parse_query(raw.as_deref());
    let persona = match query_text(&q, "persona_name") {
        Some(p) => Some(truncate_chars(&p, 128)),
        None => st.characters.resolve(None),
    };
    match persona {
        Some(p) => Ok(Json(json!({"ok": true, "state": icebreaker.state(&p)}))),
        None => Err(Failure::new(Reason::MissingPersonaName)),
    }
}

/// `POST /api/icebreaker/context` (CSRF): a line into the session history.
pub async fn context(FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker>) -> Answer {
    let method = "project_session_history";
    let role = opt_str(&b, &["role"])?
        .as_deref()
        .and_then(Role::parse)
        .ok_or_else(|| Failure::new(Reason::InvalidRole))?;
    let text = opt_str(&b, &["text"])?.ok_or_else(|| Failure::new(Reason::MissingText))?;
    if text.chars().count() > MAX_CONTEXT_CHARS {
        return Err(Failure::new(Reason::InvalidTextLength).with("max_length", MAX_CONTEXT_CHARS));
    }
    let persona = require_persona(&b)?;
    let session = session_of(&b)?;
    let route = match bound_route(&icebreaker, &persona, session.as_deref(), method)? {
        Ok(r) => r,
        Err(stale) => return Ok(Json(stale)),
    };
    let Some(mgr) = st.sessions.get(&persona) else {
        return Err(Failure::new(Reason::NoSessionManager).with("persona_name", &persona));
    };
    let request_id = match opt_str(&b, &["request_id"])? {
        Some(id) => Some(id),
        None => match b.get("event") {
            Some(Value::Object(e)) => opt_str(e, &["request_id"])?,
            _ => None,
        },
    };
    let request_id = request_id.map(|id| truncate_chars(&id, 128));
    let mut v = json!({"ok": true, "method": method, "persona_name": persona, "source": SOURCE,
                       "session_id": route.session_id});
    match icebreaker
        .add_context(&st, &mgr, &route, role, &text, request_id.as_deref())
        .await
    {
        ContextAdded::Deduped => {
            v["deduped"] = json!(true);
            v["memory_cached"] = json!(false);
        }
        ContextAdded::Added { memory_cached } => {
            v["memory_cached"] = json!(memory_cached);
            v["role"] = json!(role.as_str());
        }
    }
    Ok(Json(v))
}

/// The last free-text turns (at most 4) and the derail streak (0 or 1) of a body.
fn free_text_history(b: &Map<String, Value>) -> (Vec<Value>, i64) {
    let recent: Vec<Value> = b
        .get("recent_free_text_turns")
        .or_else(|| b.get("recentFreeTextTurns"))
        .and_then(Value::as_array)
        .map(|a| a.iter().rev().take(4).rev().cloned().collect())
        .unwrap_or_default();
    let derail = b
        .get("free_text_derail_streak")
        .or_else(|| b.get("freeTextDerailStreak"))
        .and_then(Value::as_i64)
        .map(|n| if n > 0 { 1 } else { 0 })
        .unwrap_or(0);
    (recent, derail)
}

/// `POST /api/icebreaker/free-text/interpret`: what the user typed, through the model.
pub async fn free_text(FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker>) -> Answer {
    let method = "free_text_interpreter";
    let persona = require_persona(&b)?;
    let user_text = opt_str(&b, &["user_text", "userText"])?
        .ok_or_else(|| Failure::new(Reason::MissingUserText).with("persona_name", &persona))?;
    let session = session_of(&b)?
        .ok_or_else(|| Failure::new(Reason::MissingSessionId).with("persona_name", &persona))?;
    match icebreaker.check(&persona, Some(&session), true) {
        Ok(_) => {}
        Err(IceMiss::NotActive) => {
            return Err(Failure::new(Reason::RouteNotActive)
                .with("persona_name", &persona)
                .with("method", method))
        }
        Err(IceMiss::Stale(state)) => {
            return Err(Failure::new(Reason::SessionIdMismatch)
                .with("skipped", "stale_session")
                .with("handled", false)
                .with("persona_name", &persona)
                .with("method", method)
                .with("state", state))
        }
    }
    let options = match b.get("options") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => normalize_options(v).ok_or_else(|| {
            Failure::new(Reason::InvalidBody).with("error", "options must be a list")
        })?,
    };
    if options.is_empty() {
        return Err(Failure::new(Reason::MissingOptions).with("persona_name", &persona));
    }
    let assistant_line = opt_str(&b, &["assistant_line", "assistantLine"])?.unwrap_or_default();
    let (recent_turns, derail_streak) = free_text_history(&b);
    let req = FreeText {
        persona,
        options,
        assistant_line,
        user_text,
        recent_turns,
        derail_streak,
        day: b.get("day").cloned(),
        node_id: b.get("node_id").cloned(),
    };
    let interpretation = free_text::interpret(&st, icebreaker.cfg.free_text_timeout, &req)
        .await
        .map_err(|e| Failure::from(e).with("persona_name", &req.persona))?;
    let mut v = json!(interpretation);
    v["ok"] = json!(true);
    v["method"] = json!(method);
    v["persona_name"] = json!(req.persona);
    v["session_id"] = json!(session);
    v["source"] = json!(SOURCE);
    Ok(Json(v))
}

/// `day` of a choice: an integer or an integer string, 0..=9999.
fn day_of(b: &Map<String, Value>) -> Result<i64, Failure> {
    let not_integer = || Failure::new(Reason::InvalidBody).with("error", "day must be an integer");
    let missing = || Failure::new(Reason::MissingDay).with("source", SOURCE);
    let day = match b.get("day") {
        None | Some(Value::Null) => return Err(missing()),
        Some(Value::Number(n)) => n.as_i64().ok_or_else(not_integer)?,
        Some(Value::String(s)) if !s.trim().is_empty() => {
            s.trim().parse::<i64>().map_err(|_| not_integer())?
        }
        Some(Value::String(_)) => return Err(missing()),
        Some(_) => return Err(not_integer()),
    };
    if !(0..=9999).contains(&day) {
        return Err(Failure::new(Reason::InvalidBody).with("error", "day is out of range"));
    }
    Ok(day)
}

/// `POST /api/icebreaker/choice` (CSRF): record a choice (write-only).
pub async fn choice(FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker>) -> Answer {
    let method = "tutorial_choices";
    let persona = require_persona(&b)?;
    let session = session_of(&b)?;
    let route = match bound_route(&icebreaker, &persona, session.as_deref(), method)? {
        Ok(r) => r,
        Err(stale) => return Ok(Json(stale)),
    };
    let day = day_of(&b)?;
    let node_id = opt_str(&b, &["node_id"])?;
    let choice = opt_str(&b, &["choice"])?;
    let (Some(node_id), Some(choice)) = (node_id, choice) else {
        return Err(Failure::new(Reason::InvalidChoice).with("source", SOURCE));
    };
    let label = opt_str(&b, &["label"])?.unwrap_or_default();
    let handoff = opt_bool(&b, &["handoff"], false)?;
    let completed = opt_bool(&b, &["completed"], false)?;
    let seq = match b.get("seq") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().ok_or_else(|| {
            Failure::new(Reason::InvalidBody).with("error", "seq must be an integer")
        })?,
    };
    let rec = ChoiceRecord {
        persona: truncate_chars(&persona, 128),
        session_id: truncate_chars(&route.session_id, 128),
        day,
        node_id: truncate_chars(&node_id, 64),
        choice: truncate_chars(&choice, 16),
        label: truncate_chars(&label, 200),
        handoff,
        completed,
        seq,
    };
    match choices::record(&st, rec).await {
        Ok(deduped) => Ok(Json(
            json!({"ok": true, "deduped": deduped, "persona_name": persona, "day": day,
            "source": SOURCE, "method": method, "session_id": route.session_id}),
        )),
        Err(ChoiceWriteFailed(e)) => Err(Failure::new(Reason::ChoiceWriteFailed)
            .with("error", e)
            .with("persona_name", &persona)
            .with("source", SOURCE)),
    }
}

/// `POST /api/icebreaker/speak` (CSRF): show a spoken line (there is no voice).
pub async fn speak(FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker>) -> Answer {
    let method = "project_tts";
    let line = clean_line(
        &opt_str(&b, &["line"])?.unwrap_or_default(),
        MAX_SPOKEN_CHARS,
    );
    if line.is_empty() {
        return Err(Failure::new(Reason::MissingLine).with("audio_sent", false));
    }
    let persona = persona_or_current(&st, &b)?;
    let session = session_of(&b)?;
    let options = SpeakOptions {
        mirror_text: opt_bool(&b, &["mirror_text"], true)?,
        emit_turn_end: opt_bool(&b, &["emit_turn_end"], true)?,
        interrupt_audio: opt_bool(&b, &["interrupt_audio"], false)?,
    };
    let route = match bound_route(&icebreaker, &persona, session.as_deref(), method) {
        Ok(Ok(r)) => r,
        Ok(Err(mut v)) => {
            v["audio_sent"] = json!(false);
            v["audio_committed"] = json!(false);
            v["voice_source"] = json!({"provider": "project_tts", "method": "project_tts", "skipped": "stale_session"});
            return Ok(Json(v));
        }
        Err(f) => return Err(f.with("audio_sent", false)),
    };
    let Some(mgr) = st.sessions.get(&persona) else {
        return Err(Failure::new(Reason::NoSessionManager)
            .with("persona_name", &persona)
            .with("audio_sent", false));
    };
    let spoken = icebreaker.speak(&mgr, &route, &line, options).await;
    Ok(Json(json!({
        "ok": true,
        "persona_name": persona,
        "method": method,
        "session_id": route.session_id,
        "line": line,
        "mirrored": options.mirror_text,
        "mirror_delivered": spoken.mirror_delivered,
        "turn_end_emitted": options.emit_turn_end,
        "audio_interrupted": options.interrupt_audio,
        "audio_sent": false,
        "audio_committed": false,
        "voice_source": {"provider": "none", "method": method, "reason": "no_voice_provider"},
    })))
}

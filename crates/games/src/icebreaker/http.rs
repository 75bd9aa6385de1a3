//! Thin HTTP handlers of `/api/icebreaker` (the rules are in docs/games.md, Icebreaker).

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::response::Response;
use companiond_core::characters::{validate_name, NameRules};
use companiond_core::history::{Entry, Speaker};
use companiond_core::llm::{CallOptions, ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::text::reply_json_object;
use companiond_core::{AppState, Ext};
use serde_json::{json, Map, Value};

use super::{
    apply_choice, inactive_state, normalize_interpretation, normalize_options, ChoiceRecord,
    IceMiss, Icebreaker, CHOICES_DOC, MAX_CONTEXT_CHARS, MAX_SPOKEN_CHARS, SOURCE,
};
use crate::error::{respond, Failure, Outcome, Reason};
use crate::games::http::{body_map, persona_of};
use crate::util::{clean_line, opt_bool, opt_str, parse_query, truncate_chars};

/// The body's character, else the current one (route/start, route/end, speak).
fn persona_or_current(st: &AppState, b: &Map<String, Value>) -> Result<String, Failure> {
    match persona_of(b)? {
        Some(p) => Ok(p),
        None => st
            .characters
            .resolve(None)
            .ok_or_else(|| Failure::new(Reason::MissingPersonaName)),
    }
}

fn session_of(b: &Map<String, Value>) -> Result<Option<String>, Failure> {
    let s = opt_str(b, &["session_id", "sessionId"])?;
    if s.as_ref().is_some_and(|s| s.chars().count() > 128) {
        return Err(Failure::new(Reason::InvalidBody).with("error", "session_id is too long"));
    }
    Ok(s)
}

/// The stale envelope: the route belongs to another session (a success, `handled:false`).
fn stale(persona: &str, method: &str, state: Value) -> Value {
    json!({"ok": true, "skipped": "stale_session", "reason": "session_id_mismatch", "handled": false,
           "persona_name": persona, "method": method, "state": state})
}

pub async fn route_start(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        let b = body_map(body).await?;
        let persona = persona_or_current(&st, &b)?;
        let session = session_of(&b)?.ok_or_else(|| Failure::new(Reason::MissingSessionId))?;
        Ok(json!({"ok": true, "state": icebreaker.start(&persona, &session)}))
    }
    .await;
    respond(r)
}

pub async fn route_end(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    body: Body,
) -> Response {
    let r: Outcome = async {
        let b = body_map(body).await?;
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
            Ok(ended) => Ok(json!({
                "ok": true,
                "persona_name": persona,
                "reason": reason,
                "state": inactive_state(),
                "ended": ended.map(|r| json!({"session_id": r.session_id, "started_at": r.started_at,
                    "last_activity": r.last_activity, "ended_at": companiond_core::now_secs(),
                    "end_reason": reason})),
            })),
        }
    }
    .await;
    respond(r)
}

pub async fn route_state(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    RawQuery(raw): RawQuery,
) -> Response {
    let q = parse_query(raw.as_deref());
    let persona = match q
        .get("persona_name")
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
    {
        Some(p) => Some(truncate_chars(p, 128)),
        None => st.characters.resolve(None),
    };
    respond(match persona {
        Some(p) => Ok(json!({"ok": true, "state": icebreaker.state(&p)})),
        None => Err(Failure::new(Reason::MissingPersonaName)),
    })
}

/// Append a line to the character's chat history, marked as onboarding's.
async fn cache_in_memory(st: &AppState, persona: &str, role: &str, text: &str) -> bool {
    let Ok(name) = validate_name(persona, NameRules::EXISTING) else {
        return false;
    };
    if !st.characters.exists(&name) {
        return false;
    }
    let speaker = if role == "user" {
        Speaker::Human
    } else {
        Speaker::Ai
    };
    let entry = Entry::new(speaker, text).from_source(SOURCE);
    st.history.append(&name, vec![entry]).await.is_ok()
}

pub async fn context(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    body: Body,
) -> Response {
    let method = "project_session_history";
    let r: Outcome = async {
        let b = body_map(body).await?;
        let role = opt_str(&b, &["role"])?.unwrap_or_default();
        if role != "assistant" && role != "user" {
            return Err(Failure::new(Reason::InvalidRole));
        }
        let text = opt_str(&b, &["text"])?.ok_or_else(|| Failure::new(Reason::MissingText))?;
        if text.chars().count() > MAX_CONTEXT_CHARS {
            return Err(
                Failure::new(Reason::InvalidTextLength).with("max_length", MAX_CONTEXT_CHARS)
            );
        }
        let persona = persona_of(&b)?.ok_or_else(|| Failure::new(Reason::MissingPersonaName))?;
        let session = session_of(&b)?;
        let route = match icebreaker.check(&persona, session.as_deref(), true) {
            Ok(r) => r,
            Err(IceMiss::NotActive) => {
                return Err(Failure::new(Reason::RouteNotActive)
                    .with("persona_name", &persona)
                    .with("source", SOURCE)
                    .with("method", method))
            }
            Err(IceMiss::Stale(state)) => return Ok(stale(&persona, method, state)),
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
        let base = json!({"ok": true, "method": method, "persona_name": persona, "source": SOURCE,
                          "session_id": route.session_id});
        if let Some(id) = &request_id {
            if !icebreaker.first_request(&persona, &route.session_id, &truncate_chars(id, 128)) {
                let mut v = base;
                v["deduped"] = json!(true);
                v["memory_cached"] = json!(false);
                return Ok(v);
            }
        }
        let msg = if role == "user" {
            ChatMessage::user(text.clone())
        } else {
            ChatMessage::assistant(text.clone())
        };
        mgr.push_history(msg).await;
        let cached = cache_in_memory(&st, &persona, &role, &text).await;
        let mut v = base;
        v["memory_cached"] = json!(cached);
        v["role"] = json!(role);
        Ok(v)
    }
    .await;
    respond(r)
}

pub async fn free_text(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    body: Body,
) -> Response {
    let method = "free_text_interpreter";
    let r: Outcome = async {
        let b = body_map(body).await?;
        let persona = persona_of(&b)?.ok_or_else(|| Failure::new(Reason::MissingPersonaName))?;
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
            Some(v) => normalize_options(v)
                .ok_or_else(|| Failure::new(Reason::InvalidBody).with("error", "options must be a list"))?,
        };
        if options.is_empty() {
            return Err(Failure::new(Reason::MissingOptions).with("persona_name", &persona));
        }
        let assistant_line = opt_str(&b, &["assistant_line", "assistantLine"])?.unwrap_or_default();
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
        let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
            return Err(Failure::new(Reason::LlmApiNotConfigured)
                .with("error", LlmError::NotConfigured.to_string())
                .with("persona_name", &persona));
        };
        let opts_text: Vec<String> = options.iter().map(|c| format!("{}) {}", c.id, c.label)).collect();
        let system = format!(
            "You interpret what a new user typed during {persona}'s onboarding conversation. \
             The question offered these options:\n{}\nIf the user clearly picks one, answer action \"choose\" \
             with its letter in \"choice\". If they said something else, answer action \
             \"respond_and_keep_options\" with a short in-character \"reply\" (at most 2 sentences). If they \
             want to stop, answer action \"release\". Also give \"topic_state\": on_topic, soft_derail or \
             hard_exit. Reply with ONLY a JSON object {{\"action\", \"choice\", \"reply\", \"topic_state\"}}.",
            opts_text.join("\n")
        );
        let payload = json!({
            "assistant_line": truncate_chars(&assistant_line, 800),
            "user_text": truncate_chars(&user_text, 800),
            "recent_free_text_turns": recent,
            "free_text_derail_streak": derail,
            "day": b.get("day"),
            "node_id": b.get("node_id"),
        });
        let call = CallOptions {
            timeout: icebreaker.cfg.free_text_timeout,
            max_tokens: Some(512),
            character: persona.clone(),
            ..Default::default()
        };
        let c = st
            .llm
            .complete_at(&ep, Slot::Conversation, &[ChatMessage::system(system), ChatMessage::user(payload.to_string())], &[], &call)
            .await
            .map_err(|e| {
                let reason = if e == LlmError::Timeout { Reason::Timeout } else { Reason::FreeTextInterpreterFailed };
                Failure::new(reason).with("error", e.to_string()).with("persona_name", &persona)
            })?;
        let Some(mut v) = normalize_interpretation(reply_json_object(&c.content), &options) else {
            return Err(Failure::new(Reason::ParseFailed)
                .with("error", "the model reply was not a JSON object")
                .with("persona_name", &persona));
        };
        v["ok"] = json!(true);
        v["method"] = json!(method);
        v["persona_name"] = json!(persona);
        v["session_id"] = json!(session);
        v["source"] = json!(SOURCE);
        Ok(v)
    }
    .await;
    respond(r)
}

pub async fn choice(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    body: Body,
) -> Response {
    let method = "tutorial_choices";
    let r: Outcome = async {
        let b = body_map(body).await?;
        let persona = persona_of(&b)?.ok_or_else(|| Failure::new(Reason::MissingPersonaName))?;
        let session = session_of(&b)?;
        let route = match icebreaker.check(&persona, session.as_deref(), true) {
            Ok(r) => r,
            Err(IceMiss::NotActive) => {
                return Err(Failure::new(Reason::RouteNotActive)
                    .with("persona_name", &persona)
                    .with("source", SOURCE)
                    .with("method", method))
            }
            Err(IceMiss::Stale(state)) => return Ok(stale(&persona, method, state)),
        };
        let day = match b.get("day") {
            None | Some(Value::Null) => {
                return Err(Failure::new(Reason::MissingDay).with("source", SOURCE))
            }
            Some(Value::Number(n)) => n.as_i64().ok_or_else(|| {
                Failure::new(Reason::InvalidBody).with("error", "day must be an integer")
            })?,
            Some(Value::String(s)) if !s.trim().is_empty() => {
                s.trim().parse::<i64>().map_err(|_| {
                    Failure::new(Reason::InvalidBody).with("error", "day must be an integer")
                })?
            }
            Some(Value::String(_)) => {
                return Err(Failure::new(Reason::MissingDay).with("source", SOURCE))
            }
            Some(_) => {
                return Err(
                    Failure::new(Reason::InvalidBody).with("error", "day must be an integer")
                )
            }
        };
        if !(0..=9999).contains(&day) {
            return Err(Failure::new(Reason::InvalidBody).with("error", "day is out of range"));
        }
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
        let written = st
            .store
            .try_update(CHOICES_DOC, move |cur: Option<Value>| {
                apply_choice(cur, &rec)
            })
            .await;
        match written {
            Ok(Ok(deduped)) => Ok(
                json!({"ok": true, "deduped": deduped, "persona_name": persona, "day": day,
                "source": SOURCE, "method": method, "session_id": route.session_id}),
            ),
            Ok(Err(e)) => Err(Failure::new(Reason::ChoiceWriteFailed)
                .with("error", e)
                .with("persona_name", &persona)
                .with("source", SOURCE)),
            Err(e) => Err(Failure::new(Reason::ChoiceWriteFailed)
                .with("error", e.to_string())
                .with("persona_name", &persona)
                .with("source", SOURCE)),
        }
    }
    .await;
    respond(r)
}

pub async fn speak(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    body: Body,
) -> Response {
    let method = "project_tts";
    let r: Outcome = async {
        let b = body_map(body).await?;
        let line = clean_line(&opt_str(&b, &["line"])?.unwrap_or_default(), MAX_SPOKEN_CHARS);
        if line.is_empty() {
            return Err(Failure::new(Reason::MissingLine).with("audio_sent", false));
        }
        let persona = persona_or_current(&st, &b)?;
        let session = session_of(&b)?;
        let mirror_text = opt_bool(&b, &["mirror_text"], true)?;
        let emit_turn_end = opt_bool(&b, &["emit_turn_end"], true)?;
        let interrupt_audio = opt_bool(&b, &["interrupt_audio"], false)?;
        let route = match icebreaker.check(&persona, session.as_deref(), true) {
            Ok(r) => r,
            Err(IceMiss::NotActive) => {
                return Err(Failure::new(Reason::RouteNotActive)
                    .with("persona_name", &persona)
                    .with("source", SOURCE)
                    .with("method", method)
                    .with("audio_sent", false))
            }
            Err(IceMiss::Stale(state)) => {
                let mut v = stale(&persona, method, state);
                v["audio_sent"] = json!(false);
                v["audio_committed"] = json!(false);
                v["voice_source"] = json!({"provider": "project_tts", "method": "project_tts", "skipped": "stale_session"});
                return Ok(v);
            }
        };
        let Some(mgr) = st.sessions.get(&persona) else {
            return Err(Failure::new(Reason::NoSessionManager)
                .with("persona_name", &persona)
                .with("audio_sent", false));
        };
        if interrupt_audio {
            mgr.notify(json!({"type": "interrupt_audio", "source": SOURCE, "session_id": route.session_id}));
        }
        let mut delivered = 0;
        if mirror_text {
            mgr.push_history(ChatMessage::assistant(line.clone())).await;
            delivered = mgr.notify(json!({"type": "assistant_mirror", "text": line, "source": SOURCE,
                                          "session_id": route.session_id}));
        }
        if emit_turn_end {
            mgr.notify(json!({"type": "turn_end", "source": SOURCE, "session_id": route.session_id}));
        }
        Ok(json!({
            "ok": true,
            "persona_name": persona,
            "method": method,
            "session_id": route.session_id,
            "line": line,
            "mirrored": mirror_text,
            "mirror_delivered": delivered,
            "turn_end_emitted": emit_turn_end,
            "audio_interrupted": interrupt_audio,
            "audio_sent": false,
            "audio_committed": false,
            "voice_source": {"provider": "none", "method": method, "reason": "no_voice_provider"},
        }))
    }
    .await;
    respond(r)
}

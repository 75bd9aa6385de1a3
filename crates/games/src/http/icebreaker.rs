//! `/api/icebreaker/*`: the new-user icebreaker (onboarding) routes. The rules
//! are in docs/games.md, section Icebreaker.

use axum::extract::State;
use axum::Json;
use companiond_core::{now_secs, AppState, Ext};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::body::{
    first_sent, first_text, invalid, BodyCharacter, BodyCharacterOptional, BodySession,
    BodySessionRequired, Field,
};
use super::dialogue::SpeakBody;
use super::extract::FamilyCall;
use super::queries::*;
use super::stale::{StaleSession, StaleState, VoiceSource};
use crate::error::{Failure, Reason};
use crate::icebreaker::choices::{self, ChoiceRecord, ChoiceWriteFailed};
use crate::icebreaker::free_text::{self, normalize_options, FreeText, Interpretation};
use crate::icebreaker::{
    inactive_state, ContextAdded, IceMiss, IceRoute, IceState, Icebreaker, Role, SpeakOptions,
    MAX_CONTEXT_CHARS, MAX_SPOKEN_CHARS, SOURCE,
};
use crate::text::{clean_line, truncate_chars};
use companiond_core::envelope::QueryOf;

/// `POST /api/icebreaker/route/start` (the character defaults to the current one).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1"}))]
pub struct IceStartBody {
    #[serde(flatten)]
    character: BodyCharacterOptional,
    #[serde(flatten)]
    session: BodySessionRequired,
}

/// `POST /api/icebreaker/route/end` (the character defaults to the current one).
#[derive(Deserialize, ToSchema)]
pub struct IceEndBody {
    #[serde(flatten)]
    character: BodyCharacterOptional,
    #[serde(flatten)]
    session: BodySession,
    /// Default `icebreaker_end`; at most 64 characters kept.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    reason: Field,
}

/// `POST /api/icebreaker/context`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1", "role": "assistant",
    "text": "Nice to meet you!"}))]
pub struct IceContextBody {
    /// `user` or `assistant`.
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    role: Field,
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    text: Field,
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    /// A repeated id is deduplicated (else `event.request_id` is read).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    request_id: Field,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    event: Field,
}

/// `POST /api/icebreaker/free-text/interpret`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1", "user_text": "the cat one",
    "options": [{"choice": "a", "label": "Cats"}, {"choice": "b", "label": "Dogs"}]}))]
pub struct FreeTextBody {
    #[serde(flatten)]
    character: BodyCharacter,
    /// What the user typed (also `userText`).
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    user_text: Field,
    /// Another spelling of `user_text`.
    #[serde(default, rename = "userText")]
    #[schema(value_type = Option<String>)]
    user_text_camel: Field,
    #[serde(flatten)]
    session: BodySessionRequired,
    /// The offered options: `{choice, label}` objects or strings.
    #[schema(value_type = Vec<Value>, required = true)]
    #[serde(default)]
    options: Field,
    /// Also `assistantLine`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    assistant_line: Field,
    /// Another spelling of `assistant_line`.
    #[serde(default, rename = "assistantLine")]
    #[schema(value_type = Option<String>)]
    assistant_line_camel: Field,
    /// The last turns (at most 4 are used; also `recentFreeTextTurns`).
    #[schema(value_type = Option<Vec<Value>>)]
    #[serde(default)]
    recent_free_text_turns: Field,
    /// Another spelling of `recent_free_text_turns`.
    #[serde(default, rename = "recentFreeTextTurns")]
    #[schema(value_type = Option<Vec<Value>>)]
    recent_free_text_turns_camel: Field,
    /// Also `freeTextDerailStreak`; above 0 counts as 1.
    #[schema(value_type = Option<i64>)]
    #[serde(default)]
    free_text_derail_streak: Field,
    /// Another spelling of `free_text_derail_streak`.
    #[serde(default, rename = "freeTextDerailStreak")]
    #[schema(value_type = Option<i64>)]
    free_text_derail_streak_camel: Field,
    #[schema(value_type = Option<Value>)]
    #[serde(default)]
    day: Field,
    #[schema(value_type = Option<Value>)]
    #[serde(default)]
    node_id: Field,
}

impl FreeTextBody {
    /// The last free-text turns (at most 4) and the derail streak (0 or 1):
    /// each from its first spelling sent, ignored when of another type.
    fn history(&self) -> (Vec<Value>, i64) {
        let recent: Vec<Value> = first_sent(&[
            &self.recent_free_text_turns,
            &self.recent_free_text_turns_camel,
        ])
        .and_then(Value::as_array)
        .map(|a| a.iter().rev().take(4).rev().cloned().collect())
        .unwrap_or_default();
        let derail = first_sent(&[
            &self.free_text_derail_streak,
            &self.free_text_derail_streak_camel,
        ])
        .and_then(Value::as_i64)
        .map(|n| if n > 0 { 1 } else { 0 })
        .unwrap_or(0);
        (recent, derail)
    }
}

/// `POST /api/icebreaker/choice`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "ice1", "day": 1,
    "node_id": "n1", "choice": "a", "label": "Cats"}))]
pub struct ChoiceBody {
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    /// 0..=9999 (an integer or its text).
    #[schema(value_type = i64, required = true, minimum = 0, maximum = 9999)]
    #[serde(default)]
    day: Field,
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    node_id: Field,
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    choice: Field,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    label: Field,
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    handoff: Field,
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    completed: Field,
    #[schema(value_type = Option<i64>)]
    #[serde(default)]
    seq: Field,
}

impl ChoiceBody {
    /// `day`: an integer or an integer text, 0..=9999 (absent, `null` or
    /// blank: `missing_day`).
    fn day(&self) -> Result<i64, Failure> {
        let not_integer = || invalid("day must be an integer");
        let missing = || Failure::new(Reason::MissingDay).with("source", SOURCE);
        let day = match self.day.get() {
            None => return Err(missing()),
            Some(Value::Number(n)) => n.as_i64().ok_or_else(not_integer)?,
            Some(Value::String(s)) if !s.trim().is_empty() => {
                s.trim().parse::<i64>().map_err(|_| not_integer())?
            }
            Some(Value::String(_)) => return Err(missing()),
            Some(_) => return Err(not_integer()),
        };
        if !(0..=9999).contains(&day) {
            return Err(invalid("day is out of range"));
        }
        Ok(day)
    }

    /// `seq`: a JSON integer, default 0.
    fn seq(&self) -> Result<i64, Failure> {
        match self.seq.get() {
            None => Ok(0),
            Some(v) => v.as_i64().ok_or_else(|| invalid("seq must be an integer")),
        }
    }
}

fn stale(persona: &str, method: &'static str, state: IceState) -> StaleSession {
    StaleSession::new(persona, method, StaleState::Onboarding(state))
}

/// `{ok, state}`: the character's onboarding route.
#[derive(Serialize, ToSchema)]
pub struct IceStateAnswer {
    ok: bool,
    state: IceState,
}

/// `POST /api/icebreaker/route/end`: the route that ended, if any.
#[derive(Serialize, ToSchema)]
pub struct IceEnded {
    ok: bool,
    persona_name: String,
    reason: String,
    /// Always inactive.
    state: IceState,
    /// Null when no route was active.
    ended: Option<EndedIce>,
}

/// An ended onboarding route (unix seconds).
#[derive(Serialize, ToSchema)]
pub struct EndedIce {
    session_id: String,
    started_at: f64,
    last_activity: f64,
    ended_at: f64,
    end_reason: String,
}

/// `POST /api/icebreaker/context`: the line went into the history (or was a repeat).
#[derive(Serialize, ToSchema)]
pub struct ContextAnswer {
    ok: bool,
    /// `project_session_history`.
    method: &'static str,
    persona_name: String,
    source: &'static str,
    session_id: String,
    /// A repeated `request_id`: nothing was added.
    #[serde(skip_serializing_if = "Option::is_none")]
    deduped: Option<bool>,
    memory_cached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
}

/// `POST /api/icebreaker/free-text/interpret`: what the text means, and the call's fields.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"action": "choose", "choice": "a", "reply": "",
    "topic_state": "on_topic", "selected_option": {"choice": "a", "label": "Cats"},
    "ok": true, "method": "free_text_interpreter", "persona_name": "Mika",
    "session_id": "ice1", "source": "new_user_icebreaker"}))]
pub struct Interpreted {
    #[serde(flatten)]
    interpretation: Interpretation,
    ok: bool,
    /// `free_text_interpreter`.
    method: &'static str,
    persona_name: String,
    session_id: String,
    source: &'static str,
}

/// `POST /api/icebreaker/choice`: recorded (or a repeat).
#[derive(Serialize, ToSchema)]
pub struct ChoiceRecorded {
    ok: bool,
    deduped: bool,
    persona_name: String,
    day: i64,
    source: &'static str,
    /// `tutorial_choices`.
    method: &'static str,
    session_id: String,
}

/// `POST /api/icebreaker/speak`: the line was shown (and spoken when a voice is set).
#[derive(Serialize, ToSchema)]
pub struct IceSpoken {
    ok: bool,
    persona_name: String,
    /// `project_tts`.
    method: &'static str,
    session_id: String,
    line: String,
    mirrored: bool,
    /// How many chat pages received the mirrored text.
    mirror_delivered: usize,
    turn_end_emitted: bool,
    audio_interrupted: bool,
    audio_sent: bool,
    /// The line is being spoken (its audio follows on the chat pages).
    audio_queued: bool,
    audio_committed: bool,
    /// The speech of the line (absent when it is not spoken).
    #[serde(skip_serializing_if = "Option::is_none")]
    speech_id: Option<String>,
    voice_source: VoiceSource,
}

/// An answer or the stale envelope.
#[derive(Serialize)]
#[serde(untagged)]
pub enum OrStale<T> {
    Done(T),
    Stale(Box<StaleSession>),
}

/// `context`: added, or the other session's route.
pub type ContextOrStale = OrStale<ContextAnswer>;
/// `choice`: recorded, or the other session's route.
pub type ChoiceOrStale = OrStale<ChoiceRecorded>;
/// `speak`: shown, or the other session's route.
pub type SpokenOrStale = OrStale<IceSpoken>;

any_of_schema!(ContextOrStale as "ContextOrStale": ContextAnswer, StaleSession);
any_of_schema!(ChoiceOrStale as "ChoiceOrStale": ChoiceRecorded, StaleSession);
any_of_schema!(SpokenOrStale as "SpokenOrStale": IceSpoken, StaleSession);

/// The character's route for a call of `method`: `Ok(Err(stale envelope))` when
/// it belongs to another session, `route_not_active` (with `source`, `method`) without one.
fn bound_route(
    icebreaker: &Icebreaker,
    persona: &str,
    session: Option<&str>,
    method: &'static str,
) -> Result<Result<IceRoute, StaleSession>, Failure> {
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
pub async fn start(
    FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker, IceStartBody>,
) -> Result<Json<IceStateAnswer>, Failure> {
    let persona = b.character.or_current(&st)?;
    let session = b
        .session
        .id()?
        .ok_or_else(|| Failure::new(Reason::MissingSessionId))?;
    Ok(Json(IceStateAnswer {
        ok: true,
        state: icebreaker.start(&persona, &session),
    }))
}

/// `POST /api/icebreaker/route/end` (CSRF).
pub async fn end(
    FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker, IceEndBody>,
) -> Result<Json<IceEnded>, Failure> {
    let persona = b.character.or_current(&st)?;
    let session = b.session.id()?;
    let reason = b
        .reason
        .text("reason")?
        .map(|r| truncate_chars(&r, 64))
        .unwrap_or_else(|| "icebreaker_end".into());
    match icebreaker.end(&persona, session.as_deref()) {
        Err(state) => Err(Failure::new(Reason::SessionIdMismatch)
            .with("handled", false)
            .with("persona_name", &persona)
            .with("method", "route_end")
            .with("state", state)),
        Ok(ended) => Ok(Json(IceEnded {
            ok: true,
            persona_name: persona,
            ended: ended.map(|r| EndedIce {
                session_id: r.session_id,
                started_at: r.started_at,
                last_activity: r.last_activity,
                ended_at: now_secs(),
                end_reason: reason.clone(),
            }),
            reason,
            state: inactive_state(),
        })),
    }
}

/// `GET /api/icebreaker/route/state` (the query's character, else the current one).
pub async fn state(
    State(st): State<AppState>,
    Ext(icebreaker): Ext<Icebreaker>,
    QueryOf(q): QueryOf<PersonaNameQuery>,
) -> Result<Json<IceStateAnswer>, Failure> {
    let persona = match q.persona_name {
        Some(p) => Some(truncate_chars(&p, 128)),
        None => st.characters.resolve(None),
    };
    match persona {
        Some(p) => Ok(Json(IceStateAnswer {
            ok: true,
            state: icebreaker.state(&p),
        })),
        None => Err(Failure::new(Reason::MissingPersonaName)),
    }
}

/// `POST /api/icebreaker/context` (CSRF): a line into the session history.
pub async fn context(
    FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker, IceContextBody>,
) -> Result<Json<ContextOrStale>, Failure> {
    let method = "project_session_history";
    let role = b
        .role
        .text("role")?
        .as_deref()
        .and_then(Role::parse)
        .ok_or_else(|| Failure::new(Reason::InvalidRole))?;
    let text = b
        .text
        .text("text")?
        .ok_or_else(|| Failure::new(Reason::MissingText))?;
    if text.chars().count() > MAX_CONTEXT_CHARS {
        return Err(Failure::new(Reason::InvalidTextLength).with("max_length", MAX_CONTEXT_CHARS));
    }
    let persona = b.character.name()?;
    let session = b.session.id()?;
    let route = match bound_route(&icebreaker, &persona, session.as_deref(), method)? {
        Ok(r) => r,
        Err(stale) => return Ok(Json(OrStale::Stale(Box::new(stale)))),
    };
    let Some(mgr) = st.sessions.get(&persona) else {
        return Err(Failure::new(Reason::NoSessionManager).with("persona_name", &persona));
    };
    let request_id = match b.request_id.text("request_id")? {
        Some(id) => Some(id),
        None => match b.event.as_object() {
            Some(e) => Field::within(e, "request_id").text("request_id")?,
            None => None,
        },
    };
    let request_id = request_id.map(|id| truncate_chars(&id, 128));
    let added = icebreaker
        .add_context(&st, &mgr, &route, role, &text, request_id.as_deref())
        .await;
    let (deduped, memory_cached, role) = match added {
        ContextAdded::Deduped => (Some(true), false, None),
        ContextAdded::Added { memory_cached } => (None, memory_cached, Some(role.as_str())),
    };
    Ok(Json(OrStale::Done(ContextAnswer {
        ok: true,
        method,
        persona_name: persona,
        source: SOURCE,
        session_id: route.session_id,
        deduped,
        memory_cached,
        role,
    })))
}

/// `POST /api/icebreaker/free-text/interpret`: what the user typed, through the model.
pub async fn free_text(
    FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker, FreeTextBody>,
) -> Result<Json<Interpreted>, Failure> {
    let method = "free_text_interpreter";
    let persona = b.character.name()?;
    let user_text = first_text(&[
        (&b.user_text, "user_text"),
        (&b.user_text_camel, "userText"),
    ])?
    .ok_or_else(|| Failure::new(Reason::MissingUserText).with("persona_name", &persona))?;
    let session = b
        .session
        .id()?
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
    let options = match b.options.get() {
        None => Vec::new(),
        Some(v) => normalize_options(v).ok_or_else(|| invalid("options must be a list"))?,
    };
    if options.is_empty() {
        return Err(Failure::new(Reason::MissingOptions).with("persona_name", &persona));
    }
    let assistant_line = first_text(&[
        (&b.assistant_line, "assistant_line"),
        (&b.assistant_line_camel, "assistantLine"),
    ])?
    .unwrap_or_default();
    let (recent_turns, derail_streak) = b.history();
    let req = FreeText {
        persona,
        options,
        assistant_line,
        user_text,
        recent_turns,
        derail_streak,
        day: b.day.sent().cloned(),
        node_id: b.node_id.sent().cloned(),
    };
    let interpretation = free_text::interpret(&st, icebreaker.cfg.free_text_timeout, &req)
        .await
        .map_err(|e| Failure::from(e).with("persona_name", &req.persona))?;
    Ok(Json(Interpreted {
        interpretation,
        ok: true,
        method,
        persona_name: req.persona,
        session_id: session,
        source: SOURCE,
    }))
}

/// `POST /api/icebreaker/choice` (CSRF): record a choice (write-only).
pub async fn choice(
    FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker, ChoiceBody>,
) -> Result<Json<ChoiceOrStale>, Failure> {
    let method = "tutorial_choices";
    let persona = b.character.name()?;
    let session = b.session.id()?;
    let route = match bound_route(&icebreaker, &persona, session.as_deref(), method)? {
        Ok(r) => r,
        Err(stale) => return Ok(Json(OrStale::Stale(Box::new(stale)))),
    };
    let day = b.day()?;
    let node_id = b.node_id.text("node_id")?;
    let choice = b.choice.text("choice")?;
    let (Some(node_id), Some(choice)) = (node_id, choice) else {
        return Err(Failure::new(Reason::InvalidChoice).with("source", SOURCE));
    };
    let label = b.label.text("label")?.unwrap_or_default();
    let handoff = b.handoff.flag("handoff", false)?;
    let completed = b.completed.flag("completed", false)?;
    let seq = b.seq()?;
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
        Ok(deduped) => Ok(Json(OrStale::Done(ChoiceRecorded {
            ok: true,
            deduped,
            persona_name: persona,
            day,
            source: SOURCE,
            method,
            session_id: route.session_id,
        }))),
        Err(ChoiceWriteFailed(e)) => Err(Failure::new(Reason::ChoiceWriteFailed)
            .with("error", e)
            .with("persona_name", &persona)
            .with("source", SOURCE)),
    }
}

/// `POST /api/icebreaker/speak` (CSRF): show a line and speak it on the chat
/// pages that play speech (docs/voice.md).
pub async fn speak(
    FamilyCall(st, icebreaker, b): FamilyCall<Icebreaker, SpeakBody>,
) -> Result<Json<SpokenOrStale>, Failure> {
    let method = "project_tts";
    let line = clean_line(&b.line.text("line")?.unwrap_or_default(), MAX_SPOKEN_CHARS);
    if line.is_empty() {
        return Err(Failure::new(Reason::MissingLine).with("audio_sent", false));
    }
    let persona = b.character.or_current(&st)?;
    let session = b.session.id()?;
    let options = SpeakOptions {
        mirror_text: b.mirror_text.flag("mirror_text", true)?,
        emit_turn_end: b.emit_turn_end.flag("emit_turn_end", true)?,
        interrupt_audio: b.interrupt_audio.flag("interrupt_audio", false)?,
    };
    let route = match bound_route(&icebreaker, &persona, session.as_deref(), method) {
        Ok(Ok(r)) => r,
        Ok(Err(stale)) => {
            return Ok(Json(OrStale::Stale(Box::new(stale.unspoken()))));
        }
        Err(f) => return Err(f.with("audio_sent", false)),
    };
    let Some(mgr) = st.sessions.get(&persona) else {
        return Err(Failure::new(Reason::NoSessionManager)
            .with("persona_name", &persona)
            .with("audio_sent", false));
    };
    let spoken = icebreaker.speak(&mgr, &route, &line, options).await;
    // The line is spoken on the chat pages that play speech (docs/voice.md).
    if options.interrupt_audio {
        mgr.interrupt_speech();
    }
    let audio = mgr.speak_line(&line).await.ok();
    let voice_source = match &audio {
        Some(a) => VoiceSource::spoken(a.provider),
        None => VoiceSource {
            provider: "none",
            method,
            skipped: None,
            reason: Some("no_voice_provider"),
        },
    };
    Ok(Json(OrStale::Done(IceSpoken {
        ok: true,
        persona_name: persona,
        method,
        session_id: route.session_id,
        line,
        mirrored: options.mirror_text,
        mirror_delivered: spoken.mirror_delivered,
        turn_end_emitted: options.emit_turn_end,
        audio_interrupted: options.interrupt_audio,
        audio_sent: audio.is_some(),
        audio_queued: audio.is_some(),
        audio_committed: false,
        speech_id: audio.map(|a| a.speech_id),
        voice_source,
    })))
}

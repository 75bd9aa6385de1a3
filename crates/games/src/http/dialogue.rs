//! `/api/game/{game_type}/chat`, `mirror-assistant`, `speak`, `realtime-context`,
//! `quick-lines`, `passive-guard` and `character`: what the game character says.
//! `chat`, `quick-lines` and `passive-guard` answer their own degraded
//! envelopes instead of the family's failure envelope.

use axum::extract::State;
use axum::Json;
use companiond_core::frames::{Marks, Origin, ServerFrame};
use companiond_core::sessions::SessionManager;
use companiond_core::speech::pipeline::SpeakRefused as SpeakLineRefused;
use companiond_core::{AppState, Ext};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::body::{first_text, invalid, BodyCharacter, BodyCharacterOptional, BodySession, Field};
use super::extract::{Body, FamilyCall, GameType, PlayableGameType, RouteCall};
use super::queries::*;
use super::stale::{StaleSession, StaleState, VoiceSource};
use crate::error::{Answer, Failure, Reason};
use crate::games::chat::{self, ChatLine, ChatRequest, NoLine};
use crate::games::delivery::{MirrorRefused, SpeakRefused};
use crate::games::game_routes::{Miss, RouteState};
use crate::games::kind::GameKind;
use crate::games::leaderboard::normalize_mode;
use crate::games::passive_guard::{self, GuardRequest, NoVerdict, Verdict};
use crate::games::quick_lines::{self, QuickLines, QuickLinesRequest};
use crate::games::{character, Games};
use crate::text::{clean_line, truncate_chars};
use companiond_core::envelope::QueryOf;

/// Longest game line for speak / mirror.
const MAX_SPOKEN_CHARS: usize = 240;

/// `POST /api/game/{game_type}/chat`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1",
    "event": {"kind": "goal", "score": [1, 0]}}))]
pub struct ChatBody {
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    /// The game event (kept as sent; `kind` names it).
    #[schema(value_type = Object, required = true)]
    #[serde(default)]
    event: Field,
}

/// `POST /api/game/{game_type}/mirror-assistant`.
#[derive(Deserialize, ToSchema)]
pub struct MirrorBody {
    /// The line (also `text`; at most 240 characters kept).
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    line: Field,
    /// Another spelling of `line`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    text: Field,
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    /// `kind` names the event the line answers.
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    event: Field,
}

/// `POST /api/game/{game_type}/speak` and `/api/icebreaker/speak`. The
/// character is required for games; the icebreaker defaults to the current one.
#[derive(Deserialize, ToSchema)]
pub struct SpeakBody {
    /// At most 240 characters kept.
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    pub line: Field,
    #[serde(flatten)]
    pub character: BodyCharacterOptional,
    #[serde(flatten)]
    pub session: BodySession,
    /// A flag (`true`/`false`, `1`/`0`, or its text: `yes`, `off`, ...).
    #[schema(value_type = Option<bool>, default = true)]
    #[serde(default)]
    pub mirror_text: Field,
    #[schema(value_type = Option<bool>, default = true)]
    #[serde(default)]
    pub emit_turn_end: Field,
    #[schema(value_type = Option<bool>, default = false)]
    #[serde(default)]
    pub interrupt_audio: Field,
}

/// `POST /api/game/{game_type}/realtime-context`.
#[derive(Deserialize, ToSchema)]
pub struct RealtimeContextBody {
    #[serde(flatten)]
    character: BodyCharacter,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    state: Field,
    #[serde(default, rename = "pendingItems")]
    #[schema(value_type = Option<Vec<Value>>)]
    pending_items: Field,
}

/// `POST /api/game/{game_type}/quick-lines`.
#[derive(Deserialize, ToSchema)]
pub struct QuickLinesBody {
    #[serde(flatten)]
    character: BodyCharacter,
    /// The lines' language (also `i18n_language`, `lang`: the first that is
    /// text; at most 20 characters; default: the user's).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    language: Field,
    /// Another spelling of `language`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    i18n_language: Field,
    /// Another spelling of `language`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    lang: Field,
    /// Badminton's mode (`spectator` or `duel`).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    mode: Field,
}

impl QuickLinesBody {
    /// The language and mode asked for (values of another type are ignored).
    fn request(&self) -> QuickLinesRequest {
        QuickLinesRequest {
            language: [&self.language, &self.i18n_language, &self.lang]
                .iter()
                .find_map(|f| f.as_str())
                .map(|s| truncate_chars(s.trim(), 20))
                .unwrap_or_default(),
            mode: normalize_mode(self.mode.as_str()),
        }
    }
}

/// `POST /api/game/{game_type}/passive-guard` (soccer). The page's state is
/// passed to the classifier as sent.
#[derive(Deserialize, ToSchema)]
pub struct PassiveGuardBody {
    #[serde(flatten)]
    character: BodyCharacter,
    #[serde(flatten)]
    session: BodySession,
    #[schema(value_type = Option<Value>)]
    #[serde(default)]
    stage: Field,
    /// `rest` or `surrender` (default).
    #[serde(default, rename = "promptType")]
    #[schema(value_type = Option<String>)]
    prompt_type: Field,
    #[serde(default, rename = "preGameContext")]
    #[schema(value_type = Option<Value>)]
    pre_game_context: Field,
    #[serde(default, rename = "currentState")]
    #[schema(value_type = Option<Value>)]
    current_state: Field,
    #[serde(default, rename = "passiveGuardState")]
    #[schema(value_type = Option<Value>)]
    passive_guard_state: Field,
    #[schema(value_type = Option<Value>)]
    #[serde(default)]
    trigger: Field,
    /// At most 240 characters kept.
    #[serde(default, rename = "userSpeech")]
    #[schema(value_type = Option<String>)]
    user_speech: Field,
}

impl PassiveGuardBody {
    /// What the classifier is given: the page's values as sent (a missing or
    /// mistyped prompt type or speech is the default).
    fn request(&self) -> GuardRequest {
        GuardRequest {
            stage: self.stage.sent().cloned().unwrap_or(Value::Null),
            prompt_type: match self.prompt_type.as_str() {
                Some("rest") => "rest",
                _ => "surrender",
            },
            pre_game_context: self.pre_game_context.sent().cloned(),
            current_state: self.current_state.sent().cloned(),
            passive_guard_state: self.passive_guard_state.sent().cloned(),
            trigger: self.trigger.sent().cloned(),
            user_speech: self
                .user_speech
                .as_str()
                .map(|s| truncate_chars(s, 240))
                .unwrap_or_default(),
        }
    }
}

routed!(ChatBody, PassiveGuardBody);

/// `POST /api/game/{game_type}/chat`: one game event to one line and control.
pub async fn chat(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    call: Result<RouteCall<ChatBody>, Failure>,
) -> Json<ChatAnswer> {
    let input = || {
        let call = call?;
        let event = match call.body.event.get() {
            None => return Err(Failure::new(Reason::MissingEvent)),
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
            return Json(ChatAnswer::Refused(ChatRefused {
                error: code,
                reason: code,
                line: String::new(),
                control: Map::new(),
            }));
        }
    };
    let persona = req.persona.clone();
    Json(match chat::chat(&st, &games, req).await {
        Ok(line) => ChatAnswer::Line(chat_line(line)),
        Err(no_line) => ChatAnswer::NoLine(no_chat_line(&persona, no_line)),
    })
}

/// `POST /api/game/{game_type}/chat`: a line, no line (with why), or a refused request.
#[derive(Serialize)]
#[serde(untagged)]
pub enum ChatAnswer {
    Line(ChatLineAnswer),
    NoLine(NoChatLine),
    Refused(ChatRefused),
}
any_of_schema!(ChatAnswer as "ChatAnswer": ChatLineAnswer, NoChatLine, ChatRefused);

/// The character's line and the game control.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "line": "Nice shot!", "control": {}, "persona_name": "Mika",
    "game_type": "soccer", "session_id": "s1", "method": "game_chat",
    "metrics": {"llm_ms": 420, "total_ms": 431}}))]
pub struct ChatLineAnswer {
    ok: bool,
    line: String,
    /// The normalised control object.
    #[schema(value_type = Object)]
    control: Value,
    persona_name: String,
    game_type: String,
    session_id: String,
    /// `game_chat`.
    method: &'static str,
    metrics: ChatMetrics,
    /// `route_inactive` when the route ended meanwhile (nothing recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped_memory: Option<&'static str>,
}

/// Milliseconds of the model call and of the whole call.
#[derive(Serialize, ToSchema)]
pub struct ChatMetrics {
    llm_ms: u64,
    total_ms: u64,
}

/// An empty line and why: the route is inactive or another session's
/// (`ok:true`, `handled:false`), or the model could not answer (`error`).
#[derive(Serialize, ToSchema)]
pub struct NoChatLine {
    /// Always empty.
    line: String,
    #[schema(value_type = Object)]
    control: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ok: Option<bool>,
    /// `route_inactive` or `stale_session`.
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<&'static str>,
    /// `rate_limited`, `provider_unavailable` or `timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    handled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    persona_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'static str>,
    /// The other session's route.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<RouteState>,
    /// Seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// A request `chat` could not read: `error` and `reason` are the family's reason code.
#[derive(Serialize, ToSchema)]
pub struct ChatRefused {
    error: &'static str,
    reason: &'static str,
    line: String,
    #[schema(value_type = Object)]
    control: Map<String, Value>,
}

/// The success answer of `chat`.
fn chat_line(l: ChatLine) -> ChatLineAnswer {
    ChatLineAnswer {
        ok: true,
        line: l.line,
        control: l.control,
        persona_name: l.persona_name,
        game_type: l.game_type,
        session_id: l.session_id,
        method: "game_chat",
        metrics: ChatMetrics {
            llm_ms: l.llm_ms,
            total_ms: l.total_ms,
        },
        skipped_memory: (!l.recorded).then_some("route_inactive"),
    }
}

/// The empty line of `chat` with the reason there is none.
fn no_chat_line(persona: &str, no_line: NoLine) -> NoChatLine {
    let base = |reason: &'static str| NoChatLine {
        line: String::new(),
        control: Map::new(),
        ok: None,
        skipped: None,
        error: None,
        reason,
        handled: None,
        persona_name: None,
        method: None,
        state: None,
        retry_after: None,
        message: None,
    };
    let skipped = |skipped: &'static str, reason: &'static str| NoChatLine {
        ok: Some(true),
        skipped: Some(skipped),
        handled: Some(false),
        persona_name: Some(persona.to_string()),
        method: Some("game_chat"),
        ..base(reason)
    };
    match no_line {
        NoLine::RouteInactive => skipped("route_inactive", "route_not_active"),
        NoLine::StaleSession(state) => NoChatLine {
            state: Some(state),
            ..skipped("stale_session", "session_id_mismatch")
        },
        NoLine::RateLimited { retry_after } => NoChatLine {
            error: Some("rate_limited"),
            retry_after: Some(retry_after),
            ..base("rate_limited")
        },
        NoLine::ProviderUnavailable { reason, message } => NoChatLine {
            error: Some("provider_unavailable"),
            message: Some(message),
            ..base(reason)
        },
        NoLine::Timeout => NoChatLine {
            error: Some("timeout"),
            ..base("timeout")
        },
    }
}

/// `POST /api/game/{game_type}/mirror-assistant`: the line went into the chat.
#[derive(Serialize, ToSchema)]
pub struct Mirrored {
    ok: bool,
    persona_name: String,
    /// `project_text_mirror`.
    method: &'static str,
    mirrored: bool,
    /// How many chat pages received it.
    delivered: usize,
    line: String,
    game_type: String,
    session_id: Option<String>,
    /// Always false: no speech.
    speech: bool,
}

/// `mirror-assistant`: mirrored, or the other session's route.
#[derive(Serialize)]
#[serde(untagged)]
pub enum MirrorAnswer {
    Mirrored(Mirrored),
    Stale(StaleSession),
}
any_of_schema!(MirrorAnswer as "MirrorAnswer": Mirrored, StaleSession);

/// `POST /api/game/{game_type}/mirror-assistant`: a game line into the chat (no speech).
pub async fn mirror_assistant(
    GameType(game_type): GameType,
    FamilyCall(st, games, b): FamilyCall<Games, MirrorBody>,
) -> Result<Json<MirrorAnswer>, Failure> {
    let raw_line = first_text(&[(&b.line, "line"), (&b.text, "text")])?.unwrap_or_default();
    let line = clean_line(&raw_line, MAX_SPOKEN_CHARS);
    if line.is_empty() {
        return Err(Failure::new(Reason::MissingLine));
    }
    let persona = b.character.name()?;
    let session = b.session.id()?;
    let method = "project_text_mirror";
    let kind = b
        .event
        .get()
        .and_then(|e| e.get("kind"))
        .and_then(Value::as_str);
    match games
        .mirror_line(&st, &persona, &game_type, session.as_deref(), &line, kind)
        .await
    {
        Ok(delivered) => Ok(Json(MirrorAnswer::Mirrored(Mirrored {
            ok: true,
            persona_name: persona,
            method,
            mirrored: true,
            delivered,
            line,
            game_type,
            session_id: session,
            speech: false,
        }))),
        Err(MirrorRefused::OtherGame(other)) => Err(Failure::new(Reason::RouteOwnedByOtherGame)
            .with("persona_name", &persona)
            .with("active_game_type", other)),
        Err(MirrorRefused::StaleSession(state)) => {
            let mut stale = StaleSession::new(&persona, method, StaleState::Game(state));
            stale.mirrored = Some(false);
            Ok(Json(MirrorAnswer::Stale(stale)))
        }
        Err(MirrorRefused::NoSessionManager) => {
            Err(Failure::new(Reason::NoSessionManager).with("persona_name", &persona))
        }
    }
}

fn voice_source(skipped: &'static str) -> VoiceSource {
    VoiceSource::skipped(skipped)
}

/// The speech pipeline state of the character's first speaking connection
/// (all off when none plays speech).
fn pipeline_state(mgr: Option<&SessionManager>) -> Value {
    match mgr.and_then(SessionManager::speech_state) {
        Some(s) => serde_json::to_value(s).unwrap_or(Value::Null),
        None => json!({"tts_available": false, "tts_thread_alive": false, "tts_ready": false,
            "tts_pending_chunks": 0, "current_speech_id": null}),
    }
}

/// `POST /api/game/{game_type}/speak`: the line spoken.
#[derive(Serialize, ToSchema)]
pub struct GameSpoken {
    ok: bool,
    persona_name: String,
    game_type: String,
    /// `project_tts`.
    method: &'static str,
    line: String,
    speech_id: String,
    audio_sent: bool,
    audio_queued: bool,
    /// How many chat connections play the line.
    audio_connections: usize,
    audio_interrupted: bool,
    mirrored: bool,
    turn_end_emitted: bool,
    voice_source: VoiceSource,
    /// The speech state before and after the line was queued.
    #[schema(value_type = Object)]
    tts_pipeline: Value,
}

/// `speak`: spoken, or the other session's route.
#[derive(Serialize)]
#[serde(untagged)]
pub enum GameSpokenOrStale {
    Spoken(Box<GameSpoken>),
    Stale(Box<StaleSession>),
}

any_of_schema!(GameSpokenOrStale as "GameSpokenOrStale": GameSpoken, StaleSession);

/// `POST /api/game/{game_type}/speak`: the line spoken through the speech
/// pipeline on the character's chat connections (docs/voice.md), or refused
/// with the reason (`no_voice_provider` when none is configured or no
/// connection plays speech).
pub async fn speak(
    PlayableGameType(game_type): PlayableGameType,
    FamilyCall(st, games, b): FamilyCall<Games, SpeakBody>,
) -> Result<Json<GameSpokenOrStale>, Failure> {
    let line = clean_line(&b.line.text("line")?.unwrap_or_default(), MAX_SPOKEN_CHARS);
    if line.is_empty() {
        return Err(Failure::new(Reason::MissingLine).with("audio_sent", false));
    }
    let persona = b.character.name()?;
    let session = b.session.id()?;
    let mirror_text = b.mirror_text.flag("mirror_text", true)?;
    let emit_turn_end = b.emit_turn_end.flag("emit_turn_end", true)?;
    let interrupt_audio = b.interrupt_audio.flag("interrupt_audio", false)?;
    let refused = |reason: Reason| {
        Failure::new(reason)
            .with("audio_sent", false)
            .with("audio_committed", false)
            .with("persona_name", &persona)
            .with("method", "project_tts")
            .with("voice_source", voice_source(reason.code()))
    };
    match games.speak_line(&st, &persona, &game_type, session.as_deref()) {
        SpeakRefused::StaleSession(state) => Ok(Json(GameSpokenOrStale::Stale(Box::new(
            StaleSession::new(&persona, "project_tts", StaleState::Game(state)).unspoken(),
        )))),
        SpeakRefused::RouteNotActive => Err(refused(Reason::RouteNotActive)),
        SpeakRefused::NoSessionManager => Err(refused(Reason::NoSessionManager)),
        SpeakRefused::NoVoiceProvider => {
            let Some(mgr) = st.sessions.get(&persona) else {
                return Err(refused(Reason::NoSessionManager));
            };
            let before = pipeline_state(Some(&mgr));
            let interrupted = interrupt_audio && mgr.interrupt_speech() > 0;
            let spoken = match mgr.speak_line(&line).await {
                Ok(s) => s,
                Err(why) => {
                    let error = match why {
                        SpeakLineRefused::NoListener => "no chat page of the character plays speech; use mirror-assistant to show the line".to_string(),
                        SpeakLineRefused::NoProvider => "no text-to-speech voice provider is configured (docs/voice.md); use mirror-assistant to show the line".to_string(),
                        SpeakLineRefused::Invalid(e) => e.to_string(),
                    };
                    return Err(refused(Reason::NoVoiceProvider)
                        .with("error", error)
                        .with("line", line)
                        .with(
                            "tts_pipeline",
                            json!({"before": before, "after": pipeline_state(Some(&mgr))}),
                        ));
                }
            };
            let origin = Origin {
                source: "game",
                game_type: Some(game_type.to_string()),
                session_id: session.clone(),
            };
            if mirror_text {
                mgr.notify(ServerFrame::AssistantMirror {
                    text: line.to_string(),
                    origin: origin.clone(),
                });
            }
            if emit_turn_end {
                mgr.notify(ServerFrame::TurnEnd {
                    marks: Marks {
                        origin: Some(origin),
                        ..Marks::default()
                    },
                });
            }
            let after = pipeline_state(Some(&mgr));
            Ok(Json(GameSpokenOrStale::Spoken(Box::new(GameSpoken {
                ok: true,
                persona_name: persona,
                game_type,
                method: "project_tts",
                line,
                speech_id: spoken.speech_id,
                audio_sent: true,
                audio_queued: true,
                audio_connections: spoken.connections,
                audio_interrupted: interrupted,
                mirrored: mirror_text,
                turn_end_emitted: emit_turn_end,
                voice_source: VoiceSource::spoken(spoken.provider),
                tts_pipeline: json!({"before": before, "after": after}),
            }))))
        }
    }
}

/// `POST /api/game/{game_type}/realtime-context`: this service has no realtime
/// voice sessions, so a valid call always answers `no_active_realtime_session`.
pub async fn realtime_context(
    State(st): State<AppState>,
    _: GameType,
    Body(b): Body<RealtimeContextBody>,
) -> Answer {
    let persona = b.character.name()?;
    b.state.object("state")?;
    if b.pending_items.get().is_some_and(|v| !v.is_array()) {
        return Err(invalid("pendingItems must be a list"));
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
    body: Result<Body<QuickLinesBody>, Failure>,
) -> Json<QuickLinesAnswer> {
    let input = || {
        let game_type = served(game_type, GameKind::has_quick_lines)?;
        let Body(b) = body?;
        let persona = b.character.name()?;
        Ok::<_, Failure>((game_type, b, persona))
    };
    let (game_type, b, persona) = match input() {
        Ok(x) => x,
        Err(f) => {
            let reason = f.reason.code();
            return Json(QuickLinesAnswer {
                reason: Some(reason),
                error: Some(reason.to_string()),
                ..QuickLinesAnswer::new(false, None, Map::new())
            });
        }
    };
    let req = b.request();
    Json(
        match quick_lines::quick_lines(&st, &games, &game_type, &persona, &req).await {
            QuickLines::Cached(lines) => QuickLinesAnswer {
                missing: Some(Vec::new()),
                cached: Some(true),
                ..QuickLinesAnswer::new(true, Some(persona), lines_of(lines))
            },
            QuickLines::Generated {
                lines,
                missing,
                raw,
            } => QuickLinesAnswer {
                missing: Some(missing),
                raw: Some(raw),
                ..QuickLinesAnswer::new(!lines.is_empty(), Some(persona), lines)
            },
            QuickLines::Failed {
                error,
                fallback: Some(lines),
            } => QuickLinesAnswer {
                error: Some(error),
                missing: Some(Vec::new()),
                fallback: Some(true),
                ..QuickLinesAnswer::new(true, Some(persona), lines)
            },
            QuickLines::Failed {
                error,
                fallback: None,
            } => QuickLinesAnswer {
                error: Some(error),
                ..QuickLinesAnswer::new(false, Some(persona), Map::new())
            },
        },
    )
}

/// Cached lines as a map (they were stored as an object).
fn lines_of(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `POST /api/game/{game_type}/quick-lines`: the lines by key (cached,
/// generated, or badminton's built-in `fallback`), `ok:false` without any.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "character": "Mika", "lines": {"goal": "Goal!"},
    "missing": [], "cached": true}))]
pub struct QuickLinesAnswer {
    ok: bool,
    /// The request could not be read: the family's reason code.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    character: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Line key to text.
    #[schema(value_type = Object)]
    lines: Map<String, Value>,
    /// Keys the model left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cached: Option<bool>,
    /// The model's reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback: Option<bool>,
}

impl QuickLinesAnswer {
    fn new(ok: bool, character: Option<String>, lines: Map<String, Value>) -> Self {
        QuickLinesAnswer {
            ok,
            reason: None,
            character,
            error: None,
            lines,
            missing: None,
            cached: None,
            raw: None,
            fallback: None,
        }
    }
}

/// `POST /api/game/{game_type}/passive-guard`: the classifier's verdict
/// (`ok:true`), or `observe_more` with the reason there is none (`ok:false`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuardAnswer {
    ok: bool,
    /// Without a verdict: a family reason code, `route_not_active`,
    /// `session_id_mismatch`, `llm_api_not_configured`, `timeout` or `exception`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    classification: Option<String>,
    /// 0 to 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<f64>,
    /// `observe_more`, `cancel_candidate`, `send_rescue_hint` or `prepare_exit_prompt`.
    recommended_action: String,
    /// `none`, `rest` or `surrender`.
    exit_prompt_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence_tags: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counter_action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason_for_debug: Option<String>,
    /// The model call's error (`exception`).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl GuardAnswer {
    fn verdict(v: Verdict) -> GuardAnswer {
        GuardAnswer {
            ok: true,
            reason: None,
            classification: Some(v.classification),
            confidence: Some(v.confidence),
            recommended_action: v.recommended_action,
            exit_prompt_type: v.exit_prompt_type,
            evidence_tags: Some(v.evidence_tags),
            counter_action: Some(v.counter_action),
            reason_for_debug: Some(v.reason_for_debug),
            error: None,
        }
    }
}

/// The passive guard's answer without a verdict (`observe_more`).
fn guard_fallback(reason: &'static str) -> Json<GuardAnswer> {
    Json(GuardAnswer {
        ok: false,
        reason: Some(reason),
        classification: None,
        confidence: None,
        recommended_action: "observe_more".into(),
        exit_prompt_type: "none",
        evidence_tags: None,
        counter_action: None,
        reason_for_debug: None,
        error: None,
    })
}

/// `POST /api/game/{game_type}/passive-guard` (soccer): the passive-player classifier.
pub async fn passive_guard(
    State(st): State<AppState>,
    Ext(games): Ext<Games>,
    game_type: Result<GameType, Failure>,
    call: Result<RouteCall<PassiveGuardBody>, Failure>,
) -> Json<GuardAnswer> {
    let call = served(game_type, GameKind::has_passive_guard).and(call);
    let RouteCall {
        game_type,
        persona,
        session,
        body: b,
    } = match call {
        Ok(call) => call,
        Err(f) => return guard_fallback(f.reason.code()),
    };
    let state =
        match games
            .game_routes
            .with_active(&persona, &game_type, session.as_deref(), |r, cfg| {
                r.public_route(cfg)
            }) {
            Ok(s) => s,
            Err(Miss::Inactive) => return guard_fallback("route_not_active"),
            Err(Miss::Mismatch(_)) => return guard_fallback("session_id_mismatch"),
        };
    let req = b.request();
    match passive_guard::passive_guard(&st, &games, &persona, &req, state).await {
        Ok(verdict) => Json(GuardAnswer::verdict(verdict)),
        Err(NoVerdict { reason, error }) => {
            let Json(mut v) = guard_fallback(reason);
            v.error = error;
            Json(v)
        }
    }
}

/// `GET /api/game/{game_type}/character`: model type and paths of the game
/// character (the query's existing character, else the current one).
pub async fn character(
    State(st): State<AppState>,
    _: GameType,
    QueryOf(q): QueryOf<PersonaNameQuery>,
) -> Result<Json<GameCharacter>, Failure> {
    let persona = q
        .persona_name
        .filter(|p| st.characters.exists(p))
        .or_else(|| st.characters.resolve(None))
        .ok_or_else(|| Failure::new(Reason::MissingPersonaName))?;
    Ok(Json(GameCharacter {
        ok: true,
        info: character::info(&st, &persona),
    }))
}

/// `GET /api/game/{game_type}/character`: `{ok, ...the character's model info}`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "persona_name": "Mika", "model_type": "live2d",
    "live3d_sub_type": "", "live2d_path": "/static/mika/mika.model3.json", "mmd_path": "",
    "vrm_path": "", "pngtuber_path": "", "language": "en"}))]
pub struct GameCharacter {
    ok: bool,
    #[serde(flatten)]
    info: character::CharacterInfo,
}

//! `chat`: one game event to one line of the character and a control object
//! (mood, expression, ...), through the language model, in a dialogue model
//! session per round, rate-limited per character and session. Failures answer
//! an empty line with the reason.

use std::time::Instant;

use companiond_core::llm::{ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use super::game_routes::{Miss, RouteState};
use super::kind::GameKind;
use super::{llm_key, Games, LlmSession};
use crate::model::{call_options, persona_prompt};
use crate::text::{clean_line, split_trailing_json, truncate_chars};

/// Longest game line.
pub const MAX_LINE_CHARS: usize = 120;
/// Messages of a game dialogue session sent with each event (besides the system prompt).
const SESSION_MESSAGES: usize = 20;
/// Rate-limit keys kept (least recently used dropped).
const MAX_RATE_KEYS: usize = 128;

pub const SOCCER_MOODS: &[&str] = &[
    "happy",
    "excited",
    "calm",
    "angry",
    "sad",
    "surprised",
    "smug",
    "nervous",
    "playful",
    "tired",
    "focused",
    "neutral",
];
pub const DIFFICULTIES: &[&str] = &["easy", "normal", "hard"];
pub const BADMINTON_EXPRESSIONS: &[&str] =
    &["cheer", "shock", "hype", "anticipate", "bored", "tease"];
pub const INTENSITIES: &[&str] = &["low", "medium", "high"];

/// Normalise the control object of a game line.
pub fn normalize_control(game_type: &str, raw: Option<Map<String, Value>>) -> Value {
    let Some(raw) = raw else {
        return json!({});
    };
    let mut out = Map::new();
    let pick = |k: &str, allowed: &[&str]| {
        raw.get(k)
            .and_then(Value::as_str)
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| allowed.contains(&s.as_str()))
    };
    let kind = GameKind::of(game_type);
    match kind {
        GameKind::Soccer | GameKind::Badminton => {
            if let Some(m) = pick("mood", SOCCER_MOODS) {
                out.insert("mood".into(), json!(m));
            }
            if let Some(d) = pick("difficulty", DIFFICULTIES) {
                out.insert("difficulty".into(), json!(d));
            }
            if let Some(r) = raw.get("reason").and_then(Value::as_str) {
                out.insert("reason".into(), json!(truncate_chars(r.trim(), 120)));
            }
            if kind == GameKind::Badminton {
                if let Some(e) = pick("expression", BADMINTON_EXPRESSIONS) {
                    out.insert("expression".into(), json!(e));
                }
                if let Some(i) = pick("intensity", INTENSITIES) {
                    out.insert("intensity".into(), json!(i));
                }
            }
        }
        GameKind::Other => {
            for (k, v) in raw.iter().take(16) {
                let k = truncate_chars(k, 64);
                match v {
                    Value::String(s) => {
                        out.insert(k, json!(truncate_chars(s, 120)));
                    }
                    Value::Number(_) | Value::Bool(_) => {
                        out.insert(k, v.clone());
                    }
                    _ => {}
                }
            }
        }
    }
    Value::Object(out)
}

fn control_hint(game_type: &str) -> String {
    match game_type {
        "soccer" => format!(
            "\"mood\" (one of {}), \"difficulty\" (one of {}), \"reason\" (short)",
            SOCCER_MOODS.join("|"),
            DIFFICULTIES.join("|")
        ),
        "badminton" => format!(
            "\"mood\" (one of {}), \"expression\" (one of {}), \"intensity\" (one of {}), \"reason\" (short)",
            SOCCER_MOODS.join("|"),
            BADMINTON_EXPRESSIONS.join("|"),
            INTENSITIES.join("|")
        ),
        _ => "any small flat object the game understands, or {}".into(),
    }
}

async fn game_system_prompt(st: &AppState, persona: &str, game_type: &str, event: &str) -> String {
    let own = persona_prompt(st, persona, event).await;
    format!(
        "{own}\nYou are playing the {game_type} mini-game together with the user. \
         For each game event (given as JSON) answer with ONE short, natural, in-character spoken line \
         (at most 40 characters, no narration, no quotes). Then, on the last line, give a JSON object \
         with control fields: {}.",
        control_hint(game_type)
    )
}

/// Check and count one chat call against the rate limit; `Err(retry_after_secs)` when over.
fn rate_check(games: &Games, persona: &str, session: &str) -> Result<(), u64> {
    let limit = games.cfg.chat_rate_limit.max(1);
    let window = games.cfg.chat_rate_window;
    let mut map = games.rate.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    if map.len() >= MAX_RATE_KEYS && !map.contains_key(&(persona.into(), session.into())) {
        let stale = map
            .iter()
            .min_by_key(|(_, q)| q.back().copied().unwrap_or(now))
            .map(|(k, _)| k.clone());
        if let Some(k) = stale {
            map.remove(&k);
        }
    }
    let q = map.entry((persona.into(), session.into())).or_default();
    while q.front().is_some_and(|t| now.duration_since(*t) >= window) {
        q.pop_front();
    }
    if q.len() >= limit {
        let wait = q
            .front()
            .map(|t| window.saturating_sub(now.duration_since(*t)))
            .unwrap_or(window);
        return Err(wait.as_secs_f64().ceil().max(1.0) as u64);
    }
    q.push_back(now);
    Ok(())
}

/// Inputs of a game chat call (validated by the handler).
pub struct ChatRequest {
    pub game_type: String,
    pub persona: String,
    pub session_id: Option<String>,
    pub event: Map<String, Value>,
}

/// A line of the character for a game event.
#[derive(Debug)]
pub struct ChatLine {
    pub line: String,
    /// The normalised control object (see [`normalize_control`]).
    pub control: Value,
    pub persona_name: String,
    pub game_type: String,
    pub session_id: String,
    pub llm_ms: u64,
    pub total_ms: u64,
    /// The event and line were recorded in the route (false: it ended meanwhile).
    pub recorded: bool,
}

/// Why there is no line (the caller answers an empty line with the reason).
#[derive(Debug)]
pub enum NoLine {
    /// No active route of that game type.
    RouteInactive,
    /// The route belongs to another session: its state.
    StaleSession(RouteState),
    /// Over the rate limit; retry after this many seconds.
    RateLimited {
        retry_after: u64,
    },
    /// No model, or the model call failed: the model error's code and message.
    ProviderUnavailable {
        reason: &'static str,
        message: String,
    },
    Timeout,
}

impl From<LlmError> for NoLine {
    fn from(e: LlmError) -> NoLine {
        match e {
            LlmError::Timeout => NoLine::Timeout,
            e => NoLine::ProviderUnavailable {
                reason: e.code(),
                message: e.to_string(),
            },
        }
    }
}

/// One game event to one line of the character (in the round's dialogue model session).
pub async fn chat(st: &AppState, games: &Games, req: ChatRequest) -> Result<ChatLine, NoLine> {
    let started = Instant::now();
    let ChatRequest {
        game_type,
        persona,
        session_id,
        event,
    } = req;
    let session =
        match games
            .game_routes
            .with_active(&persona, &game_type, session_id.as_deref(), |r, _| {
                r.session_id.clone()
            }) {
            Ok(s) => s,
            Err(Miss::Inactive) => return Err(NoLine::RouteInactive),
            Err(Miss::Mismatch(state)) => return Err(NoLine::StaleSession(state)),
        };
    if let Err(retry_after) = rate_check(games, &persona, &session) {
        return Err(NoLine::RateLimited { retry_after });
    }
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return Err(LlmError::NotConfigured.into());
    };
    let key = llm_key(&persona, &game_type, &session);
    let history: Vec<ChatMessage> = {
        let map = games.llm_sessions.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&key)
            .map(|s| s.messages.clone())
            .unwrap_or_default()
    };
    let event_json = Value::Object(event.clone()).to_string();
    let user_msg = ChatMessage::user(format!("Game event: {}", truncate_chars(&event_json, 4000)));
    let mut messages = vec![ChatMessage::system(
        game_system_prompt(st, &persona, &game_type, &event_json).await,
    )];
    messages.extend(
        history
            .iter()
            .skip(history.len().saturating_sub(SESSION_MESSAGES))
            .cloned(),
    );
    messages.push(user_msg.clone());
    let opts = call_options(&persona, games.cfg.chat_timeout, 200);
    let llm_started = Instant::now();
    let c = st
        .llm
        .complete_at(&ep, Slot::Conversation, &messages, &[], &opts)
        .await?;
    let llm_ms = llm_started.elapsed().as_millis() as u64;
    let (line, control) = split_trailing_json(&c.content);
    let line = clean_line(&line, MAX_LINE_CHARS);
    let control = normalize_control(&game_type, control);
    {
        let mut map = games.llm_sessions.lock().unwrap_or_else(|e| e.into_inner());
        let s = map.entry(key).or_insert_with(|| LlmSession {
            messages: Vec::new(),
            last_used: Instant::now(),
        });
        s.messages.push(user_msg);
        s.messages.push(ChatMessage::assistant(c.content.clone()));
        let excess = s.messages.len().saturating_sub(SESSION_MESSAGES * 2);
        s.messages.drain(..excess);
        s.last_used = Instant::now();
    }
    let kind = event
        .get("kind")
        .or_else(|| event.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("event")
        .to_string();
    let text = event
        .get("textRaw")
        .or_else(|| event.get("label"))
        .and_then(Value::as_str)
        .map(|s| truncate_chars(s, 240))
        .unwrap_or_default();
    let current_state = event.get("currentState").filter(|v| v.is_object()).cloned();
    let recorded = games
        .game_routes
        .with_active(&persona, &game_type, Some(&session), |r, _| {
            if let Some(cs) = current_state {
                r.last_state = cs;
            }
            let mut d = Map::new();
            d.insert("type".into(), json!("game_event"));
            d.insert("kind".into(), json!(kind));
            d.insert("text".into(), json!(text));
            d.insert("result_line".into(), json!(line));
            d.insert("control".into(), control.clone());
            r.push_dialog(d);
        });
    Ok(ChatLine {
        line,
        control,
        persona_name: persona,
        game_type,
        session_id: session,
        llm_ms,
        total_ms: started.elapsed().as_millis() as u64,
        recorded: recorded.is_ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_filtered() {
        let raw = json!({"mood": "HAPPY", "expression": "cheer", "intensity": "loud", "x": 1});
        let c = normalize_control("badminton", raw.as_object().cloned());
        assert_eq!(c, json!({"mood": "happy", "expression": "cheer"}));
        let c = normalize_control("chess", raw.as_object().cloned());
        assert_eq!(c["x"], 1);
    }
}

//! Game dialogue through the language model (conversation slot): `chat` (one
//! event → one line + control), `quick-lines` (pre-generated reaction lines,
//! badminton cached) and the soccer `passive-guard` classifier. Failures never
//! escape as errors: each route answers its own degraded envelope.

use std::time::{Duration, Instant};

use companiond_core::llm::{CallOptions, ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::text::reply_json_object;
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use super::game_routes::Miss;
use super::leaderboard::normalize_mode;
use super::{llm_key, Games, LlmSession};
use crate::text::{clean_line, split_trailing_json, truncate_chars};

/// Longest game line.
pub const MAX_LINE_CHARS: usize = 120;
/// Messages of a game dialogue session sent with each event (besides the system prompt).
const SESSION_MESSAGES: usize = 20;
/// Rate-limit keys kept (least recently used dropped).
const MAX_RATE_KEYS: usize = 128;
/// Badminton quick-lines cache entries.
const QUICK_CACHE_ENTRIES: usize = 32;

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

pub const SOCCER_KEYS: &[&str] = &[
    "goal-scored",
    "goal-conceded",
    "own-goal-by-ai",
    "own-goal-by-player",
    "steal",
    "stolen",
    "player-idle",
    "player-charging-long",
    "free-ball",
    "startle-direct",
    "startle-graze",
    "zoneout",
];
pub const BADMINTON_KEYS: &[&str] = &[
    "line_in",
    "net_touch",
    "zone_in",
    "out",
    "net",
    "shot_missed",
    "game_over",
    "long_aim",
    "close_to_record",
    "new_record",
    "streak_5",
    "streak_10",
    "streak_15",
    "streak_20",
];

/// The character's own prompt text (profile `system_prompt`), if any.
pub fn persona_prompt(st: &AppState, persona: &str) -> String {
    let p = st.characters.profile(persona).unwrap_or(Value::Null);
    p.get("system_prompt")
        .or_else(|| p.get("_reserved").and_then(|r| r.get("system_prompt")))
        .and_then(Value::as_str)
        .map(|s| truncate_chars(&s.replace("{name}", persona), 2000))
        .unwrap_or_default()
}

fn empty_reply(extra: Value) -> Value {
    let mut v = json!({"line": "", "control": {}});
    if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
        m.extend(e);
    }
    v
}

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
    match game_type {
        "soccer" | "badminton" => {
            if let Some(m) = pick("mood", SOCCER_MOODS) {
                out.insert("mood".into(), json!(m));
            }
            if let Some(d) = pick("difficulty", DIFFICULTIES) {
                out.insert("difficulty".into(), json!(d));
            }
            if let Some(r) = raw.get("reason").and_then(Value::as_str) {
                out.insert("reason".into(), json!(truncate_chars(r.trim(), 120)));
            }
            if game_type == "badminton" {
                if let Some(e) = pick("expression", BADMINTON_EXPRESSIONS) {
                    out.insert("expression".into(), json!(e));
                }
                if let Some(i) = pick("intensity", INTENSITIES) {
                    out.insert("intensity".into(), json!(i));
                }
            }
        }
        _ => {
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

fn game_system_prompt(st: &AppState, persona: &str, game_type: &str) -> String {
    let own = persona_prompt(st, persona);
    format!(
        "You are {persona}. {own}\nYou are playing the {game_type} mini-game together with the user. \
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

/// `POST /api/game/{game_type}/chat`.
pub async fn chat(st: &AppState, games: &Games, req: ChatRequest) -> Value {
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
            Err(Miss::Inactive) => {
                return empty_reply(
                    json!({"ok": true, "skipped": "route_inactive", "reason": "route_not_active",
                "handled": false, "persona_name": persona, "method": "game_chat"}),
                )
            }
            Err(Miss::Mismatch(state)) => {
                return empty_reply(
                    json!({"ok": true, "skipped": "stale_session", "reason": "session_id_mismatch",
                "handled": false, "persona_name": persona, "method": "game_chat", "state": state}),
                )
            }
        };
    if let Err(retry) = rate_check(games, &persona, &session) {
        return empty_reply(
            json!({"error": "rate_limited", "reason": "rate_limited", "retry_after": retry}),
        );
    }
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        let e = LlmError::NotConfigured;
        return empty_reply(
            json!({"error": "provider_unavailable", "reason": e.code(), "message": e.to_string()}),
        );
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
    let mut messages = vec![ChatMessage::system(game_system_prompt(
        st, &persona, &game_type,
    ))];
    messages.extend(
        history
            .iter()
            .skip(history.len().saturating_sub(SESSION_MESSAGES))
            .cloned(),
    );
    messages.push(user_msg.clone());
    let opts = CallOptions {
        timeout: games.cfg.chat_timeout,
        max_tokens: Some(200),
        character: persona.clone(),
        ..Default::default()
    };
    let llm_started = Instant::now();
    let c = match st
        .llm
        .complete_at(&ep, Slot::Conversation, &messages, &[], &opts)
        .await
    {
        Ok(c) => c,
        Err(LlmError::Timeout) => {
            return empty_reply(json!({"error": "timeout", "reason": "timeout"}));
        }
        Err(e) => {
            return empty_reply(
                json!({"error": "provider_unavailable", "reason": e.code(), "message": e.to_string()}),
            );
        }
    };
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
    let mut out = json!({
        "ok": true,
        "line": line,
        "control": control,
        "persona_name": persona,
        "game_type": game_type,
        "session_id": session,
        "method": "game_chat",
        "metrics": {"llm_ms": llm_ms, "total_ms": started.elapsed().as_millis() as u64},
    });
    if recorded.is_err() {
        out["skipped_memory"] = json!("route_inactive");
    }
    out
}

/// Normalise quick lines: allowed keys only; each a list of at most 4 strings of at most 24 chars.
pub fn normalize_lines(keys: &[&str], raw: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for k in keys {
        let list: Vec<String> = match raw.get(*k) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(|s| truncate_chars(&crate::text::collapse_ws(s), 24))
                .filter(|s| !s.is_empty())
                .take(4)
                .collect(),
            Some(Value::String(s)) => vec![truncate_chars(&crate::text::collapse_ws(s), 24)]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect(),
            _ => Vec::new(),
        };
        if !list.is_empty() {
            out.insert((*k).to_string(), json!(list));
        }
    }
    out
}

/// Built-in badminton lines used when the model is unavailable.
pub fn badminton_fallback() -> Map<String, Value> {
    let pairs: &[(&str, [&str; 2])] = &[
        ("line_in", ["Right on the line!", "Just in!"]),
        ("net_touch", ["It clipped the net!", "Net cord, lucky!"]),
        ("zone_in", ["Perfect placement!", "Right in the zone!"]),
        ("out", ["That's out!", "Too far!"]),
        ("net", ["Into the net...", "Caught the net!"]),
        ("shot_missed", ["Missed it!", "So close!"]),
        ("game_over", ["Good game!", "That was fun!"]),
        ("long_aim", ["Take your time~", "Aiming carefully?"]),
        ("close_to_record", ["Almost a record!", "Keep going!"]),
        ("new_record", ["New record!", "You did it!"]),
        ("streak_5", ["Five in a row!", "Nice streak!"]),
        ("streak_10", ["Ten straight!", "On fire!"]),
        ("streak_15", ["Fifteen! Wow!", "Unstoppable!"]),
        ("streak_20", ["Twenty! Amazing!", "Legendary!"]),
    ];
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect()
}

/// `POST /api/game/{game_type}/quick-lines` for soccer and badminton.
pub async fn quick_lines(
    st: &AppState,
    games: &Games,
    game_type: &str,
    persona: &str,
    body: &Map<String, Value>,
) -> Value {
    let keys = if game_type == "soccer" {
        SOCCER_KEYS
    } else {
        BADMINTON_KEYS
    };
    let badminton = game_type == "badminton";
    let language = ["language", "i18n_language", "lang"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str))
        .map(|s| truncate_chars(s.trim(), 20))
        .unwrap_or_default();
    let mode = normalize_mode(body.get("mode").and_then(Value::as_str));
    let cache_key = format!("{}:{}:{}", truncate_chars(persona, 80), language, mode);
    if badminton {
        let cache = games.quick_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, lines)) = cache.iter().find(|(k, _)| *k == cache_key) {
            return json!({"ok": true, "character": persona, "lines": lines, "missing": [], "cached": true});
        }
    }
    let failure = |error: String| {
        if badminton {
            json!({"ok": true, "character": persona, "error": error, "lines": badminton_fallback(),
                   "missing": [], "fallback": true})
        } else {
            json!({"ok": false, "character": persona, "error": error, "lines": {}})
        }
    };
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return failure(LlmError::NotConfigured.to_string());
    };
    let own = persona_prompt(st, persona);
    let lang = if language.is_empty() {
        "the user's language".to_string()
    } else {
        language.clone()
    };
    let prompt = format!(
        "You are {persona}. {own}\nWrite quick spoken reaction lines for the {game_type} mini-game in {lang}. \
         Answer with ONLY a JSON object whose keys are exactly: {}. Each value is a list of 1 to 4 short \
         in-character lines, each at most 24 characters.",
        keys.join(", ")
    );
    let opts = CallOptions {
        timeout: games.cfg.quick_lines_timeout,
        max_tokens: Some(800),
        character: persona.to_string(),
        ..Default::default()
    };
    let c = match st
        .llm
        .complete_at(
            &ep,
            Slot::Conversation,
            &[ChatMessage::system(prompt)],
            &[],
            &opts,
        )
        .await
    {
        Ok(c) => c,
        Err(e) => return failure(e.to_string()),
    };
    let Some(raw) = reply_json_object(&c.content) else {
        return failure("the model reply was not a JSON object".into());
    };
    let lines = normalize_lines(keys, &raw);
    let missing: Vec<&str> = {
        let mut m: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| !lines.contains_key(*k))
            .collect();
        m.sort_unstable();
        m
    };
    if badminton && !lines.is_empty() {
        let mut cache = games.quick_cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|(k, _)| *k != cache_key);
        cache.push_back((cache_key, Value::Object(lines.clone())));
        while cache.len() > QUICK_CACHE_ENTRIES {
            cache.pop_front();
        }
    }
    json!({
        "ok": !lines.is_empty(),
        "character": persona,
        "lines": lines,
        "missing": missing,
        "raw": truncate_chars(&c.content, 1200),
    })
}

/// The fallback fields of every passive-guard failure.
pub fn guard_fallback(reason: &str) -> Value {
    json!({"ok": false, "reason": reason, "recommendedAction": "observe_more", "exitPromptType": "none"})
}

const GUARD_ACTIONS: &[&str] = &[
    "observe_more",
    "cancel_candidate",
    "send_rescue_hint",
    "prepare_exit_prompt",
];

/// Normalise the classifier's JSON into the passive-guard reply.
pub fn normalize_guard(raw: Option<Map<String, Value>>, stage: &Value, prompt_type: &str) -> Value {
    let raw = raw.unwrap_or_default();
    let s = |k: &str, max: usize| {
        raw.get(k)
            .and_then(Value::as_str)
            .map(|v| truncate_chars(v.trim(), max))
            .unwrap_or_default()
    };
    let classification = Some(s("classification", 40))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "inconclusive".into());
    let confidence = raw
        .get("confidence")
        .and_then(Value::as_f64)
        .filter(|f| f.is_finite())
        .unwrap_or(0.0)
        .clamp(0.0, 1.0);
    let mut action = s("recommendedAction", 40);
    if !GUARD_ACTIONS.contains(&action.as_str()) {
        action = "observe_more".into();
    }
    let stage_str = stage.as_str().unwrap_or("");
    let stage_num = stage
        .as_f64()
        .or_else(|| stage.as_str().and_then(|s| s.trim().parse::<f64>().ok()));
    let mut exit = "none";
    if matches!(stage_str, "user_soothing" | "user_recovery")
        && matches!(classification.as_str(), "soothed" | "recovered")
    {
        action = "cancel_candidate".into();
    } else if action == "prepare_exit_prompt" {
        if stage_num.is_some_and(|n| n < 8.0) {
            action = "observe_more".into();
        } else {
            exit = if prompt_type == "rest" {
                "rest"
            } else {
                "surrender"
            };
        }
    }
    let tags: Vec<String> = raw
        .get("evidenceTags")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|t| truncate_chars(t, 40))
                .take(8)
                .collect()
        })
        .unwrap_or_default();
    json!({
        "ok": true,
        "classification": classification,
        "confidence": confidence,
        "recommendedAction": action,
        "exitPromptType": exit,
        "evidenceTags": tags,
        "counterAction": s("counterAction", 80),
        "reasonForDebug": s("reasonForDebug", 160),
    })
}

/// `POST /api/game/soccer/passive-guard` once the route is checked.
pub async fn passive_guard(
    st: &AppState,
    games: &Games,
    persona: &str,
    body: &Map<String, Value>,
    route_state: Value,
) -> Value {
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return guard_fallback("llm_api_not_configured");
    };
    let stage = body.get("stage").cloned().unwrap_or(Value::Null);
    let prompt_type = match body.get("promptType").and_then(Value::as_str) {
        Some("rest") => "rest",
        _ => "surrender",
    };
    let payload = json!({
        "staticRules": {"schemaVersion": 1, "stageLessThan8CannotOpenPrompt": true,
            "ordinaryExitType": "surrender", "withdrawnExitType": "rest", "teachingNeverUsesPrompt": true},
        "preGameContext": body.get("preGameContext").cloned().unwrap_or_else(|| route_state.get("preGameContext").cloned().unwrap_or(json!({}))),
        "recentDialogues": route_state.get("last_dialogues").cloned().unwrap_or(json!([])),
        "currentState": body.get("currentState").cloned().unwrap_or(json!({})),
        "passiveGuardState": body.get("passiveGuardState").cloned().unwrap_or(json!({})),
        "stage": stage,
        "trigger": body.get("trigger").cloned().unwrap_or(Value::Null),
        "promptType": prompt_type,
        "userSpeech": body.get("userSpeech").and_then(Value::as_str).map(|s| truncate_chars(s, 240)).unwrap_or_default(),
    });
    let prompt = format!(
        "You classify whether the player of a soccer mini-game with {persona} has become passive \
         (idle, frustrated, wanting to stop). Answer with ONLY a JSON object: {{\"classification\": string, \
         \"confidence\": 0..1, \"recommendedAction\": one of {}, \"evidenceTags\": [strings], \
         \"counterAction\": string, \"reasonForDebug\": string}}.",
        GUARD_ACTIONS.join("|")
    );
    let opts = CallOptions {
        timeout: games.cfg.passive_guard_timeout,
        max_tokens: Some(500),
        character: persona.to_string(),
        ..Default::default()
    };
    let messages = [
        ChatMessage::system(prompt),
        ChatMessage::user(truncate_chars(&payload.to_string(), 12000)),
    ];
    let call = st
        .llm
        .complete_at(&ep, Slot::Conversation, &messages, &[], &opts);
    let c = match tokio::time::timeout(
        games.cfg.passive_guard_timeout + Duration::from_millis(500),
        call,
    )
    .await
    {
        Err(_) | Ok(Err(LlmError::Timeout)) => return guard_fallback("timeout"),
        Ok(Err(e)) => {
            let mut v = guard_fallback("exception");
            v["error"] = json!(e.to_string());
            return v;
        }
        Ok(Ok(c)) => c,
    };
    normalize_guard(
        reply_json_object(&c.content),
        &body.get("stage").cloned().unwrap_or(Value::Null),
        prompt_type,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_rules() {
        let raw = |a: &str, c: &str| {
            let v = json!({"recommendedAction": a, "classification": c});
            v.as_object().cloned()
        };
        let v = normalize_guard(raw("prepare_exit_prompt", "x"), &json!(3), "surrender");
        assert_eq!(v["recommendedAction"], "observe_more");
        assert_eq!(v["exitPromptType"], "none");
        let v = normalize_guard(raw("prepare_exit_prompt", "x"), &json!(9), "rest");
        assert_eq!(v["exitPromptType"], "rest");
        let v = normalize_guard(
            raw("send_rescue_hint", "soothed"),
            &json!("user_soothing"),
            "rest",
        );
        assert_eq!(v["recommendedAction"], "cancel_candidate");
        let v = normalize_guard(None, &Value::Null, "surrender");
        assert_eq!(v["classification"], "inconclusive");
        assert_eq!(v["recommendedAction"], "observe_more");
    }

    #[test]
    fn control_filtered() {
        let raw = json!({"mood": "HAPPY", "expression": "cheer", "intensity": "loud", "x": 1});
        let c = normalize_control("badminton", raw.as_object().cloned());
        assert_eq!(c, json!({"mood": "happy", "expression": "cheer"}));
        let c = normalize_control("chess", raw.as_object().cloned());
        assert_eq!(c["x"], 1);
    }

    #[test]
    fn lines_normalized() {
        let raw = json!({"out": ["That's out!", "a very very long line that is over the limit", "", 5, "x", "y", "z"], "bogus": ["q"]});
        let l = normalize_lines(BADMINTON_KEYS, raw.as_object().unwrap());
        assert_eq!(l.len(), 1);
        let out = l["out"].as_array().unwrap();
        assert_eq!(out.len(), 4);
        assert!(out
            .iter()
            .all(|s| s.as_str().unwrap().chars().count() <= 24));
    }
}

//! `quick-lines`: pre-generated reaction lines of the character for soccer
//! and badminton (badminton's cached, with built-in lines when the model fails).

use companiond_core::llm::{ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::text::reply_json_object;
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use super::kind::GameKind;
use super::Games;
use crate::model::{call_options, persona_prompt};
use crate::text::{collapse_ws, truncate_chars};

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

/// Badminton quick-lines cache entries.
const QUICK_CACHE_ENTRIES: usize = 32;

/// Normalise quick lines: allowed keys only; each a list of at most 4 strings of at most 24 chars.
pub fn normalize_lines(keys: &[&str], raw: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for k in keys {
        let list: Vec<String> = match raw.get(*k) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(|s| truncate_chars(&collapse_ws(s), 24))
                .filter(|s| !s.is_empty())
                .take(4)
                .collect(),
            Some(Value::String(s)) => vec![truncate_chars(&collapse_ws(s), 24)]
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

/// What the page asks quick lines for.
pub struct QuickLinesRequest {
    /// The lines' language (`language`, `i18n_language` or `lang`; empty: the user's).
    pub language: String,
    /// Badminton's mode (part of the cache key).
    pub mode: String,
}

/// The quick lines of a character.
pub enum QuickLines {
    /// Badminton lines generated before for the same character, language and mode.
    Cached(Value),
    /// Lines the model wrote: the allowed keys it filled, the ones it missed, its reply.
    Generated {
        lines: Map<String, Value>,
        missing: Vec<&'static str>,
        raw: String,
    },
    /// No lines from the model: the error, and badminton's built-in lines.
    Failed {
        error: String,
        fallback: Option<Map<String, Value>>,
    },
}

/// Quick lines for soccer and badminton.
pub async fn quick_lines(
    st: &AppState,
    games: &Games,
    game_type: &str,
    persona: &str,
    req: &QuickLinesRequest,
) -> QuickLines {
    let kind = GameKind::of(game_type);
    let keys = if kind == GameKind::Soccer {
        SOCCER_KEYS
    } else {
        BADMINTON_KEYS
    };
    let badminton = kind == GameKind::Badminton;
    let language = req.language.clone();
    let mode = &req.mode;
    let cache_key = format!("{}:{}:{}", truncate_chars(persona, 80), language, mode);
    if badminton {
        let cache = games.quick_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, lines)) = cache.iter().find(|(k, _)| *k == cache_key) {
            return QuickLines::Cached(lines.clone());
        }
    }
    let failure = |error: String| QuickLines::Failed {
        error,
        fallback: badminton.then(badminton_fallback),
    };
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return failure(LlmError::NotConfigured.to_string());
    };
    let own = persona_prompt(st, persona, game_type).await;
    let lang = if language.is_empty() {
        "the user's language".to_string()
    } else {
        language.clone()
    };
    let prompt = format!(
        "{own}\nWrite quick spoken reaction lines for the {game_type} mini-game in {lang}. \
         Answer with ONLY a JSON object whose keys are exactly: {}. Each value is a list of 1 to 4 short \
         in-character lines, each at most 24 characters.",
        keys.join(", ")
    );
    let opts = call_options(persona, games.cfg.quick_lines_timeout, 800);
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
    let missing: Vec<&'static str> = {
        let mut m: Vec<&'static str> = keys
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
    QuickLines::Generated {
        lines,
        missing,
        raw: truncate_chars(&c.content, 1200),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

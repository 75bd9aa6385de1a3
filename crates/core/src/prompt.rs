//! The one prompt builder of a character: chat turns (`turn`), proactive chat
//! and game dialogue all take the character's prompt from here.
//!
//! Order of the system text (docs/characters.md): the system prompt (the
//! card's or the profile's `system_prompt`, else the default; `{{original}}`
//! in it is the default), the lorebook entries placed `before_char`, the
//! description, personality and scenario, the lorebook entries placed
//! `after_char`, the profile's own fields, then the example dialogue
//! (`mes_example`). `post_history_instructions` come after the history
//! ([`Prompt::post_history`]). `{{char}}`, `{{user}}` (the master's name) and
//! `{{original}}` are replaced everywhere. The lorebook rules are in [`lorebook`].

use serde_json::{Map, Value};

use crate::cards::{field_text, reserved, CARD_KEY};
use crate::characters::{Profile, MASTER_DOC, SYSTEM_RESERVED};
use crate::state::AppState;

/// The token budget of the lorebook when the card gives none.
pub const DEFAULT_TOKEN_BUDGET: usize = 2048;
/// Messages scanned for lorebook keys when the card gives no `scan_depth`.
pub const DEFAULT_SCAN_DEPTH: usize = 2;
/// The master's name when none is set.
pub const DEFAULT_USER: &str = "User";

/// Profile keys that are not about the character (besides the system-reserved
/// ones, `_`-prefixed and `master_` keys): companiond's `name`, model data, the card fields shown
/// elsewhere in the prompt, and the original application's workshop keys.
const NOT_TRAITS: &[&str] = &[
    "name",
    "avatar",
    "pngtuber",
    "description",
    "描述",
    "tags",
    "标签",
    "关键词",
    "原始数据",
    "文件路径",
    "创意工坊物品ID",
];

/// A character's prompt for one model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The system message that opens the call.
    pub system: String,
    /// `post_history_instructions`: a system message after the history.
    pub post_history: Option<String>,
}

impl Prompt {
    /// Both parts as one text (one-shot calls without a history).
    pub fn single(&self) -> String {
        match &self.post_history {
            Some(p) => format!("{}\n\n{p}", self.system),
            None => self.system.clone(),
        }
    }
}

pub use crate::characters::default_system_prompt as default_system;

/// The master's name (`档案名` of the master profile), else [`DEFAULT_USER`].
pub async fn master_name(st: &AppState) -> String {
    st.store
        .read::<Value>(MASTER_DOC)
        .await
        .ok()
        .flatten()
        .and_then(|m| {
            m.get("档案名")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| DEFAULT_USER.to_string())
}

/// The prompt of character `name`; `scan` are the latest messages, oldest
/// first (the lorebook looks for its keys in the last `scan_depth` of them).
pub async fn for_character(st: &AppState, name: &str, scan: &[String]) -> Prompt {
    let profile = st.characters.profile(name).unwrap_or_default();
    let user = master_name(st).await;
    build(name, &profile, &user, scan)
}

/// The character's greeting for a new conversation: `first_mes`, or the
/// alternate greeting chosen by `_reserved.card_greeting` (1 = the first
/// alternate), macros replaced; `None` without one.
pub async fn greeting(st: &AppState, name: &str) -> Option<String> {
    let profile = st.characters.profile(name)?;
    let d = reserved(&profile, CARD_KEY).and_then(|c| c.get("data"))?;
    let pick = reserved(&profile, "card_greeting")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    let alternates = d.get("alternate_greetings").and_then(Value::as_array);
    let text = match pick {
        0 => d.get("first_mes").and_then(Value::as_str),
        n => alternates
            .and_then(|a| a.get(n - 1))
            .and_then(Value::as_str)
            .or_else(|| d.get("first_mes").and_then(Value::as_str)),
    }?;
    let user = master_name(st).await;
    let m = Macros::new(name, &profile, &user);
    Some(m.apply(text)).filter(|t| !t.trim().is_empty())
}

struct Macros {
    char_name: String,
    user: String,
    original: String,
    name: String,
}

impl Macros {
    fn new(name: &str, profile: &Profile, user: &str) -> Macros {
        let nickname = profile
            .card_data()
            .and_then(|d| d.get("nickname"))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty());
        Macros {
            char_name: nickname.unwrap_or(name).to_string(),
            user: user.to_string(),
            original: default_system(name),
            name: name.to_string(),
        }
    }

    /// `{{char}}`/`<BOT>`, `{{user}}`/`<USER>`, `{{original}}` (any case) and
    /// the older `{name}`.
    fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        let table: [(&str, &str); 6] = [
            ("{{char}}", &self.char_name),
            ("{{user}}", &self.user),
            ("{{original}}", &self.original),
            ("<bot>", &self.char_name),
            ("<user>", &self.user),
            ("{name}", &self.name),
        ];
        'outer: while !rest.is_empty() {
            for (pat, with) in table {
                if rest.len() >= pat.len()
                    && rest.is_char_boundary(pat.len())
                    && rest[..pat.len()].eq_ignore_ascii_case(pat)
                {
                    out.push_str(with);
                    rest = &rest[pat.len()..];
                    continue 'outer;
                }
            }
            let Some(c) = rest.chars().next() else { break };
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        out
    }
}

/// The prompt of a character from its profile (pure; see [`for_character`]).
pub fn build(name: &str, profile: &Profile, user: &str, scan: &[String]) -> Prompt {
    let m = Macros::new(name, profile, user);
    let empty = Map::new();
    let d = profile.card_data().unwrap_or(&empty);
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let system = profile.system_prompt(name);
    let mut parts: Vec<String> = vec![m.apply(&system)];
    let (before, after) = match d.get("character_book") {
        Some(b) => lorebook(b, scan),
        None => (Vec::new(), Vec::new()),
    };
    parts.extend(before.iter().map(|e| m.apply(e)));
    if let Some(s) = profile.description() {
        parts.push(m.apply(s));
    }
    if let Some(s) = text(d.get("personality")) {
        parts.push(m.apply(&format!("{{{{char}}}}'s personality: {s}")));
    }
    if let Some(s) = text(d.get("scenario")) {
        parts.push(m.apply(&format!("Scenario: {s}")));
    }
    parts.extend(after.iter().map(|e| m.apply(e)));
    let own: Vec<String> = profile
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !k.starts_with('_')
                && !SYSTEM_RESERVED.contains(&k.as_str())
                && !NOT_TRAITS.contains(&k.as_str())
                && !k.starts_with("master_")
        })
        .filter_map(|(k, v)| field_text(v).map(|t| format!("{k}: {t}")))
        .collect();
    if !own.is_empty() {
        parts.push(m.apply(&format!("About {name}:\n{}", own.join("\n"))));
    }
    if let Some(ex) = text(d.get("mes_example")) {
        let blocks: Vec<&str> = ex
            .split("<START>")
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .collect();
        if !blocks.is_empty() {
            parts.push(m.apply(&format!(
                "Example dialogue (the style of {{{{char}}}}, not part of the conversation):\n{}",
                blocks.join("\n\n")
            )));
        }
    }
    let post_history = text(d.get("post_history_instructions")).map(|s| m.apply(&s));
    Prompt {
        system: parts.join("\n\n"),
        post_history,
    }
}

/// Tokens of a text, estimated without a tokenizer: one per four ASCII
/// characters (rounded up), one per other character.
pub fn estimate_tokens(s: &str) -> usize {
    let ascii = s.chars().filter(char::is_ascii).count();
    let other = s.chars().count() - ascii;
    ascii.div_ceil(4) + other
}

/// The lorebook entries of `book` that apply to `scan`, as (before_char,
/// after_char) contents in insertion order. Rules:
/// - an entry is skipped when `enabled` is false or its content is empty;
/// - `constant` entries always apply;
/// - otherwise one of `keys` must occur in the last `scan_depth` messages
///   (default [`DEFAULT_SCAN_DEPTH`]) — as a substring, ignoring case unless
///   `case_sensitive` — and, when `selective` and `secondary_keys` is not
///   empty, one of `secondary_keys` too;
/// - the budget (`token_budget`, default [`DEFAULT_TOKEN_BUDGET`], estimated
///   by [`estimate_tokens`]) is filled constant entries first, then by
///   `priority` (higher first), then `insertion_order`; an entry that does not
///   fit is left out;
/// - the chosen entries are placed by `position` (`after_char`, else
///   `before_char`) sorted by `insertion_order` (lower first).
pub fn lorebook(book: &Value, scan: &[String]) -> (Vec<String>, Vec<String>) {
    let entries = book
        .get("entries")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let depth = book
        .get("scan_depth")
        .and_then(Value::as_u64)
        .map(|d| d as usize)
        .unwrap_or(DEFAULT_SCAN_DEPTH);
    let budget = book
        .get("token_budget")
        .and_then(Value::as_u64)
        .map(|b| b as usize)
        .unwrap_or(DEFAULT_TOKEN_BUDGET);
    let window = scan[scan.len().saturating_sub(depth)..].join("\n");
    let window_lower = window.to_lowercase();
    let num = |e: &Value, k: &str| e.get(k).and_then(Value::as_i64).unwrap_or(0);
    let flag =
        |e: &Value, k: &str, default: bool| e.get(k).and_then(Value::as_bool).unwrap_or(default);
    let keys = |e: &Value, k: &str| -> Vec<String> {
        e.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let hit = |e: &Value, list: &[String]| {
        let cs = flag(e, "case_sensitive", false);
        list.iter().any(|k| {
            if cs {
                window.contains(k.as_str())
            } else {
                window_lower.contains(&k.to_lowercase())
            }
        })
    };
    let mut chosen: Vec<(usize, &Value)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| flag(e, "enabled", true))
        .filter(|(_, e)| {
            e.get("content")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.trim().is_empty())
        })
        .filter(|(_, e)| {
            if flag(e, "constant", false) {
                return true;
            }
            if !hit(e, &keys(e, "keys")) {
                return false;
            }
            let second = keys(e, "secondary_keys");
            !flag(e, "selective", false) || second.is_empty() || hit(e, &second)
        })
        .collect();
    chosen.sort_by_key(|(i, e)| {
        (
            !flag(e, "constant", false),
            -num(e, "priority"),
            num(e, "insertion_order"),
            *i,
        )
    });
    let mut used = 0usize;
    let mut kept: Vec<(usize, &Value)> = Vec::new();
    for (i, e) in chosen {
        let content = e.get("content").and_then(Value::as_str).unwrap_or("");
        let t = estimate_tokens(content);
        if used + t <= budget {
            used += t;
            kept.push((i, e));
        }
    }
    kept.sort_by_key(|(i, e)| (num(e, "insertion_order"), *i));
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for (_, e) in kept {
        let content = e
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string();
        if e.get("position").and_then(Value::as_str) == Some("after_char") {
            after.push(content);
        } else {
            before.push(content);
        }
    }
    (before, after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn macros_any_case_and_unicode() {
        let m = Macros::new("Mika", &Profile::default(), "Ash");
        assert_eq!(
            m.apply("{{Char}} 和 {{user}}: <USER>/<bot> {name}"),
            "Mika 和 Ash: Ash/Mika Mika"
        );
        assert!(m.apply("{{original}}").starts_with("You are Mika"));
    }

    #[test]
    fn profile_fields_join_the_prompt_but_not_model_data() {
        let profile = json!({"性别": "女", "Core Traits": ["calm", "kind"], "voice_id": "v1",
            "live2d": "yui", "pngtuber": {"idle_image": "a.png"}, "master_name": "x",
            "description": "A fox.", "_reserved": {"system_prompt": "Be {{char}}."}});
        let p = build("Mika", &Profile::from(profile), "Ash", &[]);
        assert_eq!(
            p.system,
            "Be Mika.\n\nA fox.\n\nAbout Mika:\n性别: 女\nCore Traits: calm; kind"
        );
    }

    #[test]
    fn a_plain_profile_keeps_the_old_prompt() {
        let p = build("Mika", &Profile::default(), "User", &[]);
        assert_eq!(p.system, default_system("Mika"));
        assert_eq!(p.post_history, None);
    }

    #[test]
    fn lorebook_rules() {
        let book = json!({"scan_depth": 1, "token_budget": 5, "entries": [
            {"keys": ["Apple"], "content": "A", "insertion_order": 2, "case_sensitive": true},
            {"keys": ["pear"], "content": "P", "insertion_order": 1},
            {"keys": ["pear"], "secondary_keys": ["plum"], "selective": true, "content": "S"},
            {"keys": [], "constant": true, "content": "C", "position": "after_char"},
            {"keys": ["pear"], "enabled": false, "content": "D"},
            {"keys": ["old"], "content": "O"},
            {"keys": ["pear"], "content": "a very long entry over the budget", "priority": 9},
        ]});
        let scan = vec!["old news".to_string(), "an Apple and a PEAR".to_string()];
        let (before, after) = lorebook(&book, &scan);
        assert_eq!(before, vec!["P", "A"]);
        assert_eq!(after, vec!["C"]);
        let scan = vec!["an apple, a pear, a plum".to_string()];
        assert_eq!(lorebook(&book, &scan).0, vec!["S", "P"]);
    }
}

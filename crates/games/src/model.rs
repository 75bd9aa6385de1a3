//! What every language-model call of both families shares: the call options
//! (the character it is for, a timeout, a token cap) and the character's own
//! prompt text.

use std::time::Duration;

use companiond_core::llm::CallOptions;
use companiond_core::AppState;
use serde_json::Value;

use crate::text::truncate_chars;

/// The options of a call for `persona`.
pub fn call_options(persona: &str, timeout: Duration, max_tokens: u32) -> CallOptions {
    CallOptions {
        timeout,
        max_tokens: Some(max_tokens),
        character: persona.to_string(),
        ..Default::default()
    }
}

/// The character's own prompt text (profile `system_prompt`), if any.
pub fn persona_prompt(st: &AppState, persona: &str) -> String {
    let p = st.characters.profile(persona).unwrap_or(Value::Null);
    p.get("system_prompt")
        .or_else(|| p.get("_reserved").and_then(|r| r.get("system_prompt")))
        .and_then(Value::as_str)
        .map(|s| truncate_chars(&s.replace("{name}", persona), 2000))
        .unwrap_or_default()
}

//! What every language-model call of both families shares: the call options
//! (the character it is for, a timeout, a token cap) and the character's own
//! prompt text.

use std::time::Duration;

use companiond_core::llm::CallOptions;
use companiond_core::AppState;

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

/// The character's prompt (`companiond_core::prompt`, the one builder of chat,
/// proactive chat and games), one-shot; `scan` is what the lorebook looks at
/// (the game event).
pub async fn persona_prompt(st: &AppState, persona: &str, scan: &str) -> String {
    let p = companiond_core::prompt::for_character(st, persona, &[scan.to_string()]).await;
    truncate_chars(&p.single(), 6000)
}

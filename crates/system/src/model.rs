//! The shape of the family's one-shot model calls (emotion, translation, a
//! proactive round): one system prompt, one user message, a few options.

use std::time::Duration;

use companiond_core::llm::{CallOptions, ChatMessage};

/// A one-shot call's options: `character` is who the tokens are booked for
/// (empty: nobody).
pub fn options(
    character: &str,
    timeout: Duration,
    temperature: f64,
    max_tokens: Option<u32>,
) -> CallOptions {
    CallOptions {
        timeout,
        temperature: Some(temperature),
        max_tokens,
        character: character.to_string(),
        ..Default::default()
    }
}

/// A one-shot call's messages: the system prompt, then the user message.
pub fn one_shot(system: impl Into<String>, user: impl Into<String>) -> [ChatMessage; 2] {
    [ChatMessage::system(system), ChatMessage::user(user)]
}

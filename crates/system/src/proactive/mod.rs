//! Proactive chat: the companion speaks first. `POST /api/proactive_chat` runs one
//! round (source selection → model → dedup → delivery, [`round`]); the music
//! feedback signal forgets used music sources ([`sources`]); a round may instead
//! deliver a mini-game invitation, whose state machine lives in [`invitations`].
//!
//! In memory per character: the running-round guard, the proactive messages of the last
//! hour (dedup, [`dedup`]), the source history (a used source is skipped for
//! [`sources::SOURCE_SKIP`]) and the invitation state. Persisted:
//! `<data>/state/proactive_chat_totals.json` (`{version:2, totals:{name:int},
//! ever_delivered:{name:true}}`; `ever_delivered` = an invitation was delivered once).

mod dedup;
pub mod invitations;
pub use invitations::InviteRespondBody;
pub mod round;
mod sources;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use serde_json::{Map, Value};

/// The in-memory proactive state of every character.
#[derive(Default)]
pub struct Proactive {
    running: Mutex<HashSet<String>>,
    sent: Mutex<HashMap<String, Vec<dedup::Sent>>>,
    sources: Mutex<HashMap<String, Vec<sources::SourceUse>>>,
    invites: Mutex<HashMap<String, invitations::Invite>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn text_field(body: &Map<String, Value>, key: &str, max: usize) -> Option<String> {
    body.get(key)
        .and_then(Value::as_str)
        .map(|s| s.trim().chars().take(max).collect::<String>())
        .filter(|s| !s.is_empty())
}

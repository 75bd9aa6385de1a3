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

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use utoipa::ToSchema;

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

/// `POST /api/proactive_chat`: one round's context. Read as the original round
/// read it: a field of another type counts as absent (the round still runs).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Companion", "enabled_modes": ["music", "window", "chat"],
    "is_playing_music": false}))]
pub struct ProactiveBody {
    /// The character (else the current one; `lanlan_name` is the older spelling).
    #[serde(default, deserialize_with = "if_typed")]
    persona_name: Option<String>,
    /// The older spelling of `persona_name` (read when that is not text).
    #[serde(default, deserialize_with = "if_typed")]
    lanlan_name: Option<String>,
    /// Sources to draw from (default all three: `music`, `window`, `chat`).
    #[serde(default, deserialize_with = "modes")]
    enabled_modes: Option<Vec<String>>,
    #[serde(default, deserialize_with = "if_typed")]
    #[schema(default = false)]
    is_playing_music: Option<bool>,
    /// At most 200 characters.
    #[serde(default, deserialize_with = "if_typed")]
    current_track: Option<String>,
    /// At most 200 characters (else the activity tracker's).
    #[serde(default, deserialize_with = "if_typed")]
    window_title: Option<String>,
    /// Whether a round may invite to a mini-game.
    #[serde(default, deserialize_with = "if_typed")]
    #[schema(default = true)]
    mini_game_invite_enabled: Option<bool>,
    /// The reply language (else `lang`, else `i18n_language`).
    #[serde(default, deserialize_with = "if_typed")]
    language: Option<String>,
    #[serde(default, deserialize_with = "if_typed")]
    lang: Option<String>,
    #[serde(default, deserialize_with = "if_typed")]
    i18n_language: Option<String>,
}

/// A `T`, or `None` for a value of another type (`null` too).
fn if_typed<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).ok())
}

/// The text items of an array, trimmed and lower-cased; `None` for anything else.
fn modes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(a) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| s.trim().to_ascii_lowercase())
                .collect(),
        ),
        _ => None,
    })
}

/// `s` trimmed and cut at `max` characters; `None` when blank.
fn cut(s: &Option<String>, max: usize) -> Option<String> {
    s.as_deref()
        .map(|s| s.trim().chars().take(max).collect::<String>())
        .filter(|s| !s.is_empty())
}

impl ProactiveBody {
    /// `persona_name`, else `lanlan_name`, trimmed; `None` when blank.
    pub fn named(&self) -> Option<String> {
        crate::persona::first_named(self.persona_name.as_deref(), self.lanlan_name.as_deref())
    }

    /// The enabled sources (all three when not given).
    pub fn modes(&self) -> Vec<String> {
        self.enabled_modes
            .clone()
            .unwrap_or_else(|| vec!["music".into(), "window".into(), "chat".into()])
    }

    pub fn is_playing_music(&self) -> bool {
        self.is_playing_music.unwrap_or(false)
    }

    pub fn invites_enabled(&self) -> bool {
        self.mini_game_invite_enabled.unwrap_or(true)
    }

    pub fn current_track(&self) -> Option<String> {
        cut(&self.current_track, 200)
    }

    pub fn window_title(&self) -> Option<String> {
        cut(&self.window_title, 200)
    }

    /// The first non-blank of `language`, `lang`, `i18n_language` (16 characters).
    pub fn language(&self) -> Option<String> {
        [&self.language, &self.lang, &self.i18n_language]
            .into_iter()
            .find_map(|l| cut(l, 16))
    }
}

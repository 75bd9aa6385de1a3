//! Proactive-chat settings (`/api/proactive/mode`, `/api/proactive/settings`): the
//! proactive fields of the conversation settings, their presets (modes), strict
//! (type and value) read-back and mode inference. The runtime that acts on them
//! (proactive rounds) is the system family's.

use serde_json::{json, Map, Value};

use crate::conversation::{self, validate, Doc, Verdict};
use crate::error::ConfigError;

/// The interval settings of proactive chat (seconds).
const INTERVAL_FIELDS: &[&str] = &["proactiveChatInterval", "proactiveVisionInterval"];

/// The proactive-chat fields (the subset shown by the proactive routes), in order.
fn fields() -> impl Iterator<Item = &'static str> {
    conversation::PROACTIVE_BOOL_FIELDS
        .iter()
        .chain(INTERVAL_FIELDS)
        .copied()
}

/// Fields only the conversation-settings route may change.
pub const USER_OWNED: &[&str] = &["proactiveVisionEnabled"];

/// Modes in inference order (also `available_modes`).
pub const MODES: &[&str] = &["off", "normal", "focus", "frequent"];

/// The preset of a mode. `off` leaves the intervals as they are.
pub fn preset(mode: &str) -> Option<Map<String, Value>> {
    // (chat, visionChat, news, video, personal, community, music, meme, miniGame, intervals)
    let (flags, intervals): ([bool; 9], Option<(i64, i64)>) = match mode {
        "off" => ([false; 9], None),
        "normal" => ([true; 9], Some((15, 10))),
        "focus" => (
            [true, false, false, false, true, false, false, false, false],
            Some((60, 60)),
        ),
        "frequent" => ([true; 9], Some((5, 5))),
        _ => return None,
    };
    let names = [
        "proactiveChatEnabled",
        "proactiveVisionChatEnabled",
        "proactiveNewsChatEnabled",
        "proactiveVideoChatEnabled",
        "proactivePersonalChatEnabled",
        "proactiveCommunityChatEnabled",
        "proactiveMusicEnabled",
        "proactiveMemeEnabled",
        "proactiveMiniGameInviteEnabled",
    ];
    let mut m = Map::new();
    for (n, f) in names.iter().zip(flags) {
        m.insert((*n).to_string(), Value::Bool(f));
    }
    if let Some((chat, vision)) = intervals {
        m.insert("proactiveChatInterval".into(), json!(chat));
        m.insert("proactiveVisionInterval".into(), json!(vision));
    }
    Some(m)
}

/// Strict equality: same JSON type and same value (`1` is not `true`, `1.0` is not `1`).
pub fn strict_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() != y.is_f64() {
                return false;
            }
            x == y
        }
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

/// The proactive fields actually stored (no defaults filled in).
pub fn subset(settings: &Map<String, Value>) -> Map<String, Value> {
    fields()
        .filter_map(|k| settings.get(k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// The first preset every field of which is stored with the same type and value,
/// else `custom`.
pub fn infer_mode(settings: &Map<String, Value>) -> &'static str {
    for mode in MODES {
        if let Some(p) = preset(mode) {
            if p.iter()
                .all(|(k, v)| settings.get(k).is_some_and(|s| strict_eq(s, v)))
            {
                return mode;
            }
        }
    }
    "custom"
}

/// Fields of a proactive write and how they were sorted.
#[derive(Debug, Default)]
pub struct Sorted {
    pub writable: Map<String, Value>,
    pub rejected: Vec<String>,
    pub user_owned: Vec<String>,
}

/// Split a `POST /settings` body: unknown keys dropped, user-owned keys set aside,
/// type/range failures rejected.
pub fn sort(body: Map<String, Value>) -> Sorted {
    let mut s = Sorted::default();
    for (k, v) in body {
        if !fields().any(|f| f == k) {
            continue;
        }
        if USER_OWNED.contains(&k.as_str()) {
            s.user_owned.push(k);
            continue;
        }
        match validate(&k, &v) {
            Verdict::Valid => {
                s.writable.insert(k, v);
            }
            _ => s.rejected.push(k),
        }
    }
    s.user_owned.sort();
    s
}

/// Result of a proactive write: the applied (read back) fields, the keys that did
/// not persist, and the document as read back.
#[derive(Debug)]
pub struct Applied {
    pub applied: Map<String, Value>,
    pub rejected: Vec<String>,
    pub doc: Doc,
}

/// Write `fields` into the conversation settings (bumping the revision when
/// something changed), then read the document back from disk and compare each
/// field strictly.
pub async fn write_fields(
    st: &companiond_core::AppState,
    fields: Map<String, Value>,
    already_rejected: Vec<String>,
) -> Result<Applied, ConfigError> {
    let to_write = fields.clone();
    conversation::transact(st, move |cur| {
        let mut next = cur.clone();
        for (k, v) in to_write {
            if validate(&k, &v) == Verdict::Valid && !USER_OWNED.contains(&k.as_str()) {
                next.settings.insert(k, v);
            }
        }
        if next.settings != cur.settings && cur.revision < conversation::MAX_REVISION {
            next.revision = cur.revision + 1;
            (Some(next), ())
        } else {
            (None, ())
        }
    })
    .await?;
    let doc = conversation::load(st).await?;
    let mut applied = Map::new();
    let mut rejected = already_rejected;
    for (k, v) in &fields {
        match doc.settings.get(k) {
            Some(stored) if strict_eq(stored, v) => {
                applied.insert(k.clone(), stored.clone());
            }
            _ => rejected.push(k.clone()),
        }
    }
    Ok(Applied {
        applied,
        rejected,
        doc,
    })
}

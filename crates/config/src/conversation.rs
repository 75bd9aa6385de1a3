//! Global conversation settings (`config/conversation_settings.json`): the field
//! whitelist, the revision used for optimistic concurrency, the ASR decision
//! tuple and the reset marker. The proactive routes write through the same
//! document and validator.
//!
//! File shape:
//! ```json
//! {"settings": {...}, "revision": 3, "asr_decision": {"writeId":1,"writerId":"w","value":true},
//!  "reset": false, "uiLanguage": "en"}
//! ```

use std::sync::Arc;

use companiond_core::store::{self, StoreError};
use companiond_core::task::blocking;
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use crate::error::ConfigError;

/// The document, relative to the data dir.
pub const DOC: &str = "config/conversation_settings.json";

/// Largest revision (2^53 − 1); a document at it refuses further writes (412).
pub const MAX_REVISION: u64 = 9_007_199_254_740_991;
/// Largest accepted ASR decision `writeId` (2^53 − 2).
pub const MAX_WRITE_ID: u64 = 9_007_199_254_740_990;
const YEAR_MS: u64 = 365 * 24 * 3600 * 1000;

/// Boolean settings of proactive chat (also shown by the proactive routes).
pub const PROACTIVE_BOOL_FIELDS: &[&str] = &[
    "proactiveChatEnabled",
    "proactiveVisionEnabled",
    "proactiveVisionChatEnabled",
    "proactiveNewsChatEnabled",
    "proactiveCommunityChatEnabled",
    "proactiveVideoChatEnabled",
    "proactivePersonalChatEnabled",
    "proactiveMusicEnabled",
    "proactiveMemeEnabled",
    "proactiveMiniGameInviteEnabled",
];

/// The other boolean settings.
pub const BOOL_FIELDS: &[&str] = &[
    "mergeMessagesEnabled",
    "focusModeEnabled",
    "focusCognitionEnabled",
    "avatarReactionBubbleEnabled",
    "slopFilterEnabled",
    "subtitleEnabled",
    "noiseReductionEnabled",
    "independentAsrEnabled",
    "voiceInputResourceOptimizationEnabled",
];

/// Integer settings and their inclusive ranges.
pub const INT_FIELDS: &[(&str, i64, i64)] = &[
    ("proactiveChatInterval", 1, 3600),
    ("proactiveVisionInterval", 1, 3600),
    ("textGuardMaxLength", 0, 2000),
];

/// `independentAsrProviderPreference` values.
pub const ASR_PROVIDERS: &[&str] = &["auto", "faster_whisper"];
const MAX_LANGUAGE_LEN: usize = 64;

/// How a field of a write was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    /// A known field with a wrong type or out of range.
    Invalid,
    /// Not a conversation setting.
    Unknown,
}

/// Judge one field.
pub fn validate(key: &str, v: &Value) -> Verdict {
    if PROACTIVE_BOOL_FIELDS.contains(&key) || BOOL_FIELDS.contains(&key) {
        return if v.is_boolean() {
            Verdict::Valid
        } else {
            Verdict::Invalid
        };
    }
    if let Some((_, lo, hi)) = INT_FIELDS.iter().find(|(k, _, _)| *k == key) {
        return match v.as_i64() {
            Some(n) if v.is_i64() || v.is_u64() => {
                if (*lo..=*hi).contains(&n) {
                    Verdict::Valid
                } else {
                    Verdict::Invalid
                }
            }
            _ => Verdict::Invalid,
        };
    }
    match key {
        "userLanguage" => match v.as_str() {
            Some(s) if !s.trim().is_empty() && s.len() <= MAX_LANGUAGE_LEN => Verdict::Valid,
            _ => Verdict::Invalid,
        },
        "independentAsrProviderPreference" => match v.as_str() {
            Some(s) if ASR_PROVIDERS.contains(&s) => Verdict::Valid,
            _ => Verdict::Invalid,
        },
        _ => Verdict::Unknown,
    }
}

/// The ASR decision tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub write_id: u64,
    pub writer_id: String,
    pub value: bool,
}

impl Decision {
    pub fn to_json(&self) -> Value {
        json!({"writeId": self.write_id, "writerId": self.writer_id, "value": self.value})
    }
    fn key(&self) -> (u64, &str) {
        (self.write_id, self.writer_id.as_str())
    }
    /// Parse and validate a tuple (`now_ms` bounds `writeId` to a year ahead).
    pub fn parse(v: &Value, now_ms: u64) -> Option<Decision> {
        let o = v.as_object()?;
        let wid = o.get("writeId")?;
        if !(wid.is_u64() || wid.is_i64()) {
            return None;
        }
        let write_id = wid.as_u64()?;
        if write_id > MAX_WRITE_ID.min(now_ms.saturating_add(YEAR_MS)) {
            return None;
        }
        let writer_id = o.get("writerId")?.as_str()?;
        if writer_id.is_empty()
            || writer_id.len() > 128
            || !writer_id.chars().all(|c| c.is_ascii_graphic() || c == ' ')
        {
            return None;
        }
        let value = o.get("value")?.as_bool()?;
        Some(Decision {
            write_id,
            writer_id: writer_id.to_string(),
            value,
        })
    }
}

/// The stored document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Doc {
    pub settings: Map<String, Value>,
    pub revision: u64,
    pub decision: Option<Decision>,
    pub reset: bool,
    /// Other top-level keys (e.g. `uiLanguage`) are kept as they are.
    pub extra: Map<String, Value>,
}

impl Doc {
    /// Read leniently: a bad revision counts as 0, a bad decision as none; only a
    /// document that is not a JSON object is an error.
    pub fn from_value(v: Value) -> Result<Doc, StoreError> {
        let Value::Object(mut o) = v else {
            return Err(StoreError::Corrupt(format!(
                "{DOC}: the document is not a JSON object"
            )));
        };
        let settings = match o.remove("settings") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let revision = o
            .remove("revision")
            .and_then(|r| if r.is_boolean() { None } else { r.as_u64() })
            .filter(|r| *r <= MAX_REVISION)
            .unwrap_or(0);
        let decision = o
            .remove("asr_decision")
            .and_then(|d| Decision::parse(&d, u64::MAX / 2));
        let reset = o.remove("reset").and_then(|r| r.as_bool()).unwrap_or(false);
        Ok(Doc {
            settings,
            revision,
            decision,
            reset,
            extra: o,
        })
    }

    pub fn to_value(&self) -> Value {
        let mut o = self.extra.clone();
        o.insert("settings".into(), Value::Object(self.settings.clone()));
        o.insert("revision".into(), json!(self.revision));
        if let Some(d) = &self.decision {
            o.insert("asr_decision".into(), d.to_json());
        }
        o.insert("reset".into(), json!(self.reset));
        Value::Object(o)
    }

    /// The decisions visible to clients: the stored ASR decision when its value
    /// agrees with the stored `independentAsrEnabled`.
    pub fn decisions(&self) -> Value {
        let mut m = Map::new();
        if let Some(d) = &self.decision {
            if self.settings.get("independentAsrEnabled") == Some(&Value::Bool(d.value)) {
                m.insert("independentAsrEnabled".into(), d.to_json());
            }
        }
        Value::Object(m)
    }

    /// `{settings, revision, decisions, reset}` (revision as a string, see docs).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            settings: self.settings.clone(),
            revision: self.revision.to_string(),
            decisions: self.decisions(),
            reset: self.reset,
        }
    }

    pub fn etag(&self) -> String {
        etag(self.revision)
    }
}

/// What every answer of the conversation-settings routes shows of the document.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Snapshot {
    /// The settings (open: docs/config.md lists the known fields and their ranges).
    pub settings: Map<String, Value>,
    /// The revision as digits; the `ETag` is `"conversation-settings-<revision>"`.
    pub revision: String,
    /// The ASR decision, when one is in force.
    #[schema(value_type = Object)]
    pub decisions: Value,
    pub reset: bool,
}

/// The ETag of a revision.
pub fn etag(revision: u64) -> String {
    format!("\"conversation-settings-{revision}\"")
}

/// Parse an `If-Match` value: `"conversation-settings-N"` (optionally `W/`), also
/// the bare forms `conversation-settings-N`, `"N"` and `N` (the body's revision).
pub fn parse_if_match(raw: &str) -> Option<u64> {
    let s = raw.trim();
    let s = s.strip_prefix("W/").unwrap_or(s);
    let s = match s.strip_prefix('"') {
        Some(inner) => inner.strip_suffix('"')?,
        None => s,
    };
    let digits = s.strip_prefix("conversation-settings-").unwrap_or(s);
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A write of `POST /conversation-settings`.
#[derive(Debug, Default)]
pub struct Write {
    pub body: Map<String, Value>,
    pub if_match: Option<u64>,
    pub decision: Option<Decision>,
    pub full_snapshot: bool,
}

/// What a write did.
#[derive(Debug)]
pub enum Outcome {
    Saved {
        doc: Doc,
        changed: bool,
        rejected: Vec<String>,
        ignored: Vec<String>,
    },
    /// Stale `If-Match`, an older ASR decision, or the revision is exhausted.
    Conflict(Doc),
}

/// Apply a write to the current document (pure; `now_ms` for legacy decisions).
/// Returns the outcome and whether the document must be written.
pub fn apply(cur: Doc, w: Write, now_ms: u64) -> Outcome {
    if let Some(rev) = w.if_match {
        if rev != cur.revision {
            return Outcome::Conflict(cur);
        }
    }
    let mut accepted = Map::new();
    let mut rejected = Vec::new();
    let mut ignored = Vec::new();
    for (k, v) in w.body {
        if k.starts_with('_') {
            continue;
        }
        match validate(&k, &v) {
            Verdict::Valid => {
                accepted.insert(k, v);
            }
            Verdict::Invalid => rejected.push(k),
            Verdict::Unknown => ignored.push(k),
        }
    }
    let asr = accepted
        .get("independentAsrEnabled")
        .and_then(Value::as_bool);
    let incoming = w.decision.filter(|d| asr == Some(d.value));
    let mut next = cur.clone();
    if let Some(d) = incoming {
        if let Some(s) = &cur.decision {
            if d.key() < s.key() || (d.key() == s.key() && d.value != s.value) {
                return Outcome::Conflict(cur);
            }
        }
        next.decision = Some(d);
    } else if let Some(v) = asr {
        if cur.settings.get("independentAsrEnabled") != Some(&Value::Bool(v)) {
            let floor = cur
                .decision
                .as_ref()
                .map(|s| s.write_id.saturating_add(1))
                .unwrap_or(0);
            let cap = MAX_WRITE_ID.min(now_ms.saturating_add(YEAR_MS));
            let d = Decision {
                write_id: now_ms.max(floor).min(cap),
                writer_id: "server-legacy".into(),
                value: v,
            };
            if let Some(s) = &cur.decision {
                if d.key() <= s.key() {
                    return Outcome::Conflict(cur);
                }
            }
            next.decision = Some(d);
        }
    }
    for (k, v) in accepted {
        next.settings.insert(k, v);
    }
    if w.full_snapshot {
        next.reset = false;
    }
    let changed =
        next.settings != cur.settings || next.reset != cur.reset || next.decision != cur.decision;
    if changed {
        if cur.revision >= MAX_REVISION {
            return Outcome::Conflict(cur);
        }
        next.revision = cur.revision + 1;
    }
    Outcome::Saved {
        doc: next,
        changed,
        rejected,
        ignored,
    }
}

/// Read the document (a missing file is the empty document).
pub async fn load(st: &AppState) -> Result<Doc, ConfigError> {
    // Through the store: a document that is not JSON is set aside (docs/data.md).
    let v = st.store.read::<Value>(DOC).await?;
    match v {
        None => Ok(Doc::default()),
        Some(v) => Ok(Doc::from_value(v)?),
    }
}

/// Run `f` on the current document under the document's lock and write the
/// document it returns (if any). `f` decides; nothing is written when it returns
/// `None` as the new document.
pub async fn transact<R: Send + 'static>(
    st: &AppState,
    f: impl FnOnce(Doc) -> (Option<Doc>, R) + Send + 'static,
) -> Result<R, ConfigError> {
    let lock: Arc<tokio::sync::Mutex<()>> = st.store.lock_for(DOC);
    let _g = lock.lock().await;
    let cur = load(st).await?;
    let (new, r) = f(cur);
    if let Some(doc) = new {
        let path = st.store.path(DOC);
        let value = doc.to_value();
        blocking(move || {
            store::atomic_write_json(&path, &value)
                .map_err(|e| ConfigError::Storage(format!("cannot save the settings: {e}")))
        })
        .await?;
    }
    Ok(r)
}

/// Save a write of `POST /conversation-settings`.
pub async fn save(st: &AppState, w: Write) -> Result<Outcome, ConfigError> {
    let now = companiond_core::now_millis().max(0) as u64;
    transact(st, move |cur| {
        let out = apply(cur, w, now);
        let new = match &out {
            Outcome::Saved {
                doc, changed: true, ..
            } => Some(doc.clone()),
            _ => None,
        };
        (new, out)
    })
    .await
}

/// Apply `noiseReductionEnabled` to every active session; how many were told.
pub fn apply_noise_reduction(st: &AppState, value: bool) -> usize {
    let mut change = Map::new();
    change.insert("noiseReductionEnabled".into(), Value::Bool(value));
    st.sessions
        .all()
        .into_iter()
        .filter(|m| m.is_active())
        .map(|m| {
            m.apply_settings(change.clone());
            1
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_forms() {
        assert_eq!(parse_if_match("\"conversation-settings-3\""), Some(3));
        assert_eq!(parse_if_match(" W/\"conversation-settings-0\" "), Some(0));
        assert_eq!(parse_if_match("7"), Some(7));
        assert_eq!(parse_if_match("*"), None);
        assert_eq!(parse_if_match("\"conversation-settings-x\""), None);
        assert_eq!(parse_if_match("\"conversation-settings-3"), None);
    }

    #[test]
    fn validation() {
        assert_eq!(
            validate("proactiveChatInterval", &json!(15)),
            Verdict::Valid
        );
        assert_eq!(
            validate("proactiveChatInterval", &json!(0)),
            Verdict::Invalid
        );
        assert_eq!(
            validate("proactiveChatInterval", &json!(15.5)),
            Verdict::Invalid
        );
        assert_eq!(
            validate("proactiveChatInterval", &json!("15")),
            Verdict::Invalid
        );
        assert_eq!(
            validate("proactiveChatEnabled", &json!(1)),
            Verdict::Invalid
        );
        assert_eq!(validate("nope", &json!(1)), Verdict::Unknown);
    }
}

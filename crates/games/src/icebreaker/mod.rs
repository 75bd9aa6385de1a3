//! Icebreaker (`/api/icebreaker`): the per-character onboarding route (in
//! memory), request-id de-duplication of context lines, the free-text
//! interpretation normaliser, and the write-only choice record
//! (`<data>/state/icebreaker_choices.json`). `http` holds the handlers.

pub mod http;

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use companiond_core::{now_millis, now_secs};
use serde_json::{json, Map, Value};

use crate::config::GamesConfig;
use crate::util::{collapse_ws, truncate_chars};

/// The source tag of everything the onboarding flow writes.
pub const SOURCE: &str = "new_user_icebreaker";
/// The choice record, relative to the data dir.
pub const CHOICES_DOC: &str = "state/icebreaker_choices.json";
/// Longest context line.
pub const MAX_CONTEXT_CHARS: usize = 2000;
/// Longest spoken line (after tag stripping).
pub const MAX_SPOKEN_CHARS: usize = 240;
/// Request ids remembered per (character, session) for context de-duplication.
const MAX_REQUEST_IDS: usize = 256;
/// Icebreaker routes kept at once (the least recently active is dropped first).
const MAX_ROUTES: usize = 256;
/// Choice-record caps: characters, days per character, choices per day.
const MAX_CHARACTERS: usize = 32;
const MAX_DAYS: usize = 64;
const MAX_CHOICES_PER_DAY: usize = 128;

/// One active onboarding route.
#[derive(Debug, Clone)]
pub struct IceRoute {
    pub persona_name: String,
    pub session_id: String,
    pub started_at: f64,
    pub last_activity: f64,
}

impl IceRoute {
    pub fn public_state(&self) -> Value {
        json!({
            "icebreaker_active": true,
            "persona_name": self.persona_name,
            "session_id": self.session_id,
            "started_at": self.started_at,
            "last_activity": self.last_activity,
            "source": SOURCE,
        })
    }
}

/// The state when no onboarding route is active.
pub fn inactive_state() -> Value {
    json!({"icebreaker_active": false})
}

/// Why a route-bound call cannot proceed.
#[derive(Debug)]
pub enum IceMiss {
    NotActive,
    /// Active for another session: the route's public state.
    Stale(Value),
}

/// The onboarding family's in-memory state.
pub struct Icebreaker {
    pub cfg: GamesConfig,
    routes: Mutex<HashMap<String, IceRoute>>,
    request_ids: Mutex<HashMap<String, VecDeque<String>>>,
}

impl Icebreaker {
    pub fn new(cfg: GamesConfig) -> Self {
        Icebreaker {
            cfg,
            routes: Mutex::default(),
            request_ids: Mutex::default(),
        }
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, IceRoute>> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Activate (or replace) the route of a character.
    pub fn start(&self, persona: &str, session_id: &str) -> Value {
        let now = now_secs();
        let r = IceRoute {
            persona_name: persona.into(),
            session_id: session_id.into(),
            started_at: now,
            last_activity: now,
        };
        let state = r.public_state();
        let mut map = self.routes();
        if !map.contains_key(persona) && map.len() >= MAX_ROUTES {
            let stale = map
                .iter()
                .min_by(|a, b| a.1.last_activity.total_cmp(&b.1.last_activity))
                .map(|(k, _)| k.clone());
            if let Some(k) = stale {
                map.remove(&k);
            }
        }
        map.insert(persona.into(), r);
        state
    }

    /// End the route: `Err(state)` when `session_id` is given and differs (route kept);
    /// `Ok(Some(ended))` when a route ended, `Ok(None)` when none was active.
    pub fn end(&self, persona: &str, session_id: Option<&str>) -> Result<Option<IceRoute>, Value> {
        let mut map = self.routes();
        match map.get(persona) {
            Some(r) if session_id.is_some_and(|s| s != r.session_id) => Err(r.public_state()),
            Some(_) => Ok(map.remove(persona)),
            None => Ok(None),
        }
    }

    pub fn state(&self, persona: &str) -> Value {
        self.routes()
            .get(persona)
            .map(IceRoute::public_state)
            .unwrap_or_else(inactive_state)
    }

    /// The active route bound to `session_id` (absent adopts the route's session);
    /// touches `last_activity` when `touch`.
    pub fn check(
        &self,
        persona: &str,
        session_id: Option<&str>,
        touch: bool,
    ) -> Result<IceRoute, IceMiss> {
        let mut map = self.routes();
        match map.get_mut(persona) {
            None => Err(IceMiss::NotActive),
            Some(r) if session_id.is_some_and(|s| s != r.session_id) => {
                Err(IceMiss::Stale(r.public_state()))
            }
            Some(r) => {
                if touch {
                    r.last_activity = now_secs();
                }
                Ok(r.clone())
            }
        }
    }

    /// Remember a request id; false when it was already seen for this route.
    pub fn first_request(&self, persona: &str, session_id: &str, request_id: &str) -> bool {
        let mut map = self.request_ids.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > 1024 {
            map.clear();
        }
        let q = map
            .entry(format!("{persona}\u{0}{session_id}"))
            .or_default();
        if q.iter().any(|x| x == request_id) {
            return false;
        }
        q.push_back(request_id.to_string());
        while q.len() > MAX_REQUEST_IDS {
            q.pop_front();
        }
        true
    }
}

// ------------------------------------------------------------------ free text

/// One option of a free-text question.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub id: String,
    pub label: String,
}

/// Normalise `options`: a list (first 4 items) of `{choice|id, label}` objects or
/// plain strings (then lettered A, B, C, D). `None` when the value is not a list.
pub fn normalize_options(v: &Value) -> Option<Vec<Choice>> {
    let items = v.as_array()?;
    let letters = ["A", "B", "C", "D"];
    let mut out: Vec<Choice> = Vec::new();
    for (i, item) in items.iter().take(4).enumerate() {
        let (id, label) = match item {
            Value::String(s) => (letters[i].to_string(), s.clone()),
            Value::Object(m) => {
                let id = m
                    .get("choice")
                    .or_else(|| m.get("id"))
                    .map(|v| match v {
                        Value::String(s) => s.trim().to_string(),
                        Value::Number(n) => n.to_string(),
                        _ => String::new(),
                    })
                    .unwrap_or_default();
                let label = m
                    .get("label")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                (id, label)
            }
            _ => continue,
        };
        let id = id.trim().to_uppercase();
        let label = truncate_chars(&collapse_ws(&label), 200);
        if id.is_empty() || id.chars().count() > 16 || out.iter().any(|c| c.id == id) {
            continue;
        }
        out.push(Choice { id, label });
    }
    Some(out)
}

/// Normalise the interpreter's JSON reply; `None` when it is not usable JSON.
pub fn normalize_interpretation(
    raw: Option<Map<String, Value>>,
    options: &[Choice],
) -> Option<Value> {
    let raw = raw?;
    let s = |k: &str| {
        raw.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let mut action = s("action").to_ascii_lowercase();
    if !matches!(
        action.as_str(),
        "choose" | "respond_and_keep_options" | "release"
    ) {
        action = "respond_and_keep_options".into();
    }
    let mut choice = s("choice").to_uppercase();
    let mut reply = truncate_chars(&collapse_ws(&s("reply")), 240);
    if action == "choose" {
        if !options.iter().any(|o| o.id == choice) {
            action = "respond_and_keep_options".into();
            choice.clear();
        } else {
            reply.clear();
        }
    } else {
        choice.clear();
    }
    let mut topic = s("topic_state").to_ascii_lowercase();
    if !matches!(topic.as_str(), "on_topic" | "soft_derail" | "hard_exit") {
        topic = if action == "release" {
            "hard_exit"
        } else {
            "on_topic"
        }
        .into();
    }
    let selected = options
        .iter()
        .find(|o| o.id == choice)
        .map(|o| json!({"choice": o.id, "label": o.label}));
    Some(json!({
        "action": action,
        "choice": choice,
        "reply": reply,
        "topic_state": topic,
        "selected_option": selected,
    }))
}

// ------------------------------------------------------------------ choices

/// One recorded choice.
#[derive(Debug, Clone)]
pub struct ChoiceRecord {
    pub persona: String,
    pub session_id: String,
    pub day: i64,
    pub node_id: String,
    pub choice: String,
    pub label: String,
    pub handoff: bool,
    pub completed: bool,
    pub seq: i64,
}

/// Apply a choice to the record document; returns whether it was a duplicate.
/// The caps keep the newest entries (oldest dropped first).
pub fn apply_choice(doc: Option<Value>, c: &ChoiceRecord) -> Result<(Value, bool), String> {
    let mut doc = match doc {
        None => json!({"version": 1, "kind": "tutorial_choices", "characters": {}}),
        Some(Value::Object(m)) => Value::Object(m),
        Some(_) => return Err("the choice record is not a JSON object".into()),
    };
    let now = now_millis();
    let Some(root) = doc.as_object_mut() else {
        return Err("the choice record is not a JSON object".into());
    };
    let chars = root.entry("characters").or_insert_with(|| json!({}));
    if !chars.is_object() {
        *chars = json!({});
    }
    let Some(chars) = chars.as_object_mut() else {
        return Err("unexpected choice record shape".into());
    };
    if !chars.contains_key(&c.persona) && chars.len() >= MAX_CHARACTERS {
        let oldest = chars
            .iter()
            .min_by_key(|(_, v)| latest_update(v))
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            chars.shift_remove(&k);
        }
    }
    let ch = chars
        .entry(c.persona.clone())
        .or_insert_with(|| json!({"days": {}}));
    if !ch.get("days").is_some_and(Value::is_object) {
        *ch = json!({"days": {}});
    }
    let Some(days) = ch.get_mut("days").and_then(Value::as_object_mut) else {
        return Err("unexpected choice record shape".into());
    };
    let day_key = c.day.to_string();
    if !days.contains_key(&day_key) && days.len() >= MAX_DAYS {
        let oldest = days
            .iter()
            .min_by_key(|(_, v)| v.get("updated_at").and_then(Value::as_i64).unwrap_or(0))
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            days.shift_remove(&k);
        }
    }
    let day = days.entry(day_key).or_insert_with(|| {
        json!({"day": c.day, "session_id": c.session_id, "source": SOURCE, "completed": false,
               "first_recorded_at": now, "updated_at": now, "choices": []})
    });
    let Some(day) = day.as_object_mut() else {
        return Err("unexpected choice record shape".into());
    };
    day.insert("session_id".into(), json!(c.session_id));
    day.insert("updated_at".into(), json!(now));
    let was_completed = day
        .get("completed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    day.insert("completed".into(), json!(was_completed || c.completed));
    let list = day.entry("choices").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return Err("unexpected choice record shape".into());
    };
    let duplicate = !c.session_id.is_empty()
        && list.iter().any(|e| {
            e.get("session_id").and_then(Value::as_str) == Some(c.session_id.as_str())
                && e.get("node_id").and_then(Value::as_str) == Some(c.node_id.as_str())
                && e.get("choice").and_then(Value::as_str) == Some(c.choice.as_str())
                && e.get("handoff").and_then(Value::as_bool) == Some(c.handoff)
        });
    if !duplicate {
        list.push(json!({
            "node_id": c.node_id, "choice": c.choice, "label": c.label, "handoff": c.handoff,
            "session_id": c.session_id, "seq": c.seq, "at": now,
        }));
        let excess = list.len().saturating_sub(MAX_CHOICES_PER_DAY);
        list.drain(..excess);
    }
    Ok((doc, duplicate))
}

fn latest_update(ch: &Value) -> i64 {
    ch.get("days")
        .and_then(Value::as_object)
        .map(|d| {
            d.values()
                .filter_map(|v| v.get("updated_at").and_then(Value::as_i64))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(node: &str) -> ChoiceRecord {
        ChoiceRecord {
            persona: "A".into(),
            session_id: "s".into(),
            day: 1,
            node_id: node.into(),
            choice: "A".into(),
            label: "x".into(),
            handoff: false,
            completed: false,
            seq: 1,
        }
    }

    #[test]
    fn choices_dedup_and_cap() {
        let (doc, dup) = apply_choice(None, &rec("n1")).unwrap();
        assert!(!dup);
        let (doc, dup) = apply_choice(Some(doc), &rec("n1")).unwrap();
        assert!(dup);
        let mut doc = doc;
        for i in 0..200 {
            doc = apply_choice(Some(doc), &rec(&format!("m{i}"))).unwrap().0;
        }
        let list = doc["characters"]["A"]["days"]["1"]["choices"]
            .as_array()
            .unwrap();
        assert_eq!(list.len(), MAX_CHOICES_PER_DAY);
        assert_eq!(list.last().unwrap()["node_id"], "m199");
    }

    #[test]
    fn interpretation_rules() {
        let opts = normalize_options(&json!([{"choice": "a", "label": "Yes"}, "No"])).unwrap();
        assert_eq!(opts[0].id, "A");
        assert_eq!(opts[1].id, "B");
        let v = normalize_interpretation(
            json!({"action": "choose", "choice": "b", "reply": "hi"})
                .as_object()
                .cloned(),
            &opts,
        )
        .unwrap();
        assert_eq!(v["choice"], "B");
        assert_eq!(v["reply"], "");
        let v = normalize_interpretation(
            json!({"action": "choose", "choice": "z"})
                .as_object()
                .cloned(),
            &opts,
        )
        .unwrap();
        assert_eq!(v["action"], "respond_and_keep_options");
        let v = normalize_interpretation(json!({"action": "release"}).as_object().cloned(), &opts)
            .unwrap();
        assert_eq!(v["topic_state"], "hard_exit");
        assert!(normalize_interpretation(None, &opts).is_none());
    }
}

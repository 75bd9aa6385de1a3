//! The write-only record of onboarding choices (`<data>/state/icebreaker_choices.json`):
//! never given to memory or the model.

use companiond_core::now_millis;
use companiond_core::AppState;
use serde_json::{json, Value};

use super::SOURCE;

/// The choice record, relative to the data dir.
pub const CHOICES_DOC: &str = "state/icebreaker_choices.json";

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

/// Choice-record caps: characters, days per character, choices per day.
const MAX_CHARACTERS: usize = 32;
const MAX_DAYS: usize = 64;
const MAX_CHOICES_PER_DAY: usize = 128;

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

/// Why a choice was not written (the record is left as it was).
#[derive(Debug)]
pub struct ChoiceWriteFailed(pub String);

/// Write a choice to the record (atomically); whether it was a duplicate.
pub async fn record(st: &AppState, c: ChoiceRecord) -> Result<bool, ChoiceWriteFailed> {
    match st
        .store
        .try_update(CHOICES_DOC, move |cur: Option<Value>| apply_choice(cur, &c))
        .await
    {
        Ok(Ok(deduped)) => Ok(deduped),
        Ok(Err(e)) => Err(ChoiceWriteFailed(e)),
        Err(e) => Err(ChoiceWriteFailed(e.to_string())),
    }
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
}

//! Journal records: what a recorded change writes to the journal, and how a
//! record read back is replayed onto the library.

use super::*;

impl Library {
    // -------------------------------------------------------------- journal replay

    /// Replay one journal record (raw: no cascades, those are records of their own).
    pub fn replay(&mut self, op: &JournalOp) {
        match op {
            JournalOp::Song { id, change } => {
                replay_record(&mut self.songs, id, change, |s, id| s.id = id)
            }
            JournalOp::Action { id, change } => {
                replay_record(&mut self.actions, id, change, |a, id| a.id = id)
            }
            JournalOp::Bindings { id, map } => match map {
                Some(m) => {
                    self.bindings.put(id.clone(), m.clone());
                }
                None => {
                    self.bindings.take(id);
                }
            },
        }
    }
}

/// Replay one record's change onto `records` (`set_id` gives a put record its id).
fn replay_record<V: Serialize + serde::de::DeserializeOwned>(
    records: &mut Ordered<V>,
    id: &str,
    change: &OpChange,
    set_id: fn(&mut V, String),
) {
    match change {
        OpChange::Put(v) => {
            if let Ok(mut r) = serde_json::from_value::<V>(Value::Object(v.clone())) {
                set_id(&mut r, id.to_string());
                records.put(id.to_string(), r);
            }
        }
        OpChange::Set(fields) => {
            if let Some(r) = records.get_mut(id) {
                if let Some(n) = patched(&*r, fields) {
                    *r = n;
                }
            }
        }
        OpChange::Del => {
            records.take(id);
        }
    }
}

/// `v` with `fields` replaced (through its JSON form); `None` when that fails.
fn patched<T: Serialize + serde::de::DeserializeOwned>(
    v: &T,
    fields: &Map<String, Value>,
) -> Option<T> {
    let Ok(Value::Object(mut m)) = serde_json::to_value(v) else {
        return None;
    };
    for (k, x) in fields {
        m.insert(k.clone(), x.clone());
    }
    serde_json::from_value(Value::Object(m)).ok()
}

/// The JSON fields of `new` that differ from `old` (a field missing from
/// `new` cannot happen: records always serialise every known field).
pub fn changed_fields<T: Serialize>(old: &T, new: &T) -> Map<String, Value> {
    let (Ok(Value::Object(o)), Ok(Value::Object(n))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return Map::new();
    };
    n.into_iter().filter(|(k, v)| o.get(k) != Some(v)).collect()
}

// ------------------------------------------------------------------ journal records

/// How one record changed.
#[derive(Clone, Debug, PartialEq)]
pub enum OpChange {
    /// The whole record (new).
    Put(Map<String, Value>),
    /// Only these fields (an edit; a hand edit of other fields survives replay).
    Set(Map<String, Value>),
    Del,
}

/// One record of a journal line, serialised as
/// `{"s"|"a": id, "put"|"set": {...}}`, `{"s"|"a": id, "del": true}` or
/// `{"b": song id, "map": {...} | null}`.
#[derive(Clone, Debug, PartialEq)]
pub enum JournalOp {
    Song { id: String, change: OpChange },
    Action { id: String, change: OpChange },
    Bindings { id: String, map: Option<BindingMap> },
}

impl JournalOp {
    pub fn to_json(&self) -> Value {
        let rec = |kind: &str, id: &str, c: &OpChange| match c {
            OpChange::Put(m) => json!({kind: id, "put": m}),
            OpChange::Set(m) => json!({kind: id, "set": m}),
            OpChange::Del => json!({kind: id, "del": true}),
        };
        match self {
            JournalOp::Song { id, change } => rec("s", id, change),
            JournalOp::Action { id, change } => rec("a", id, change),
            JournalOp::Bindings { id, map } => json!({"b": id, "map": map}),
        }
    }

    pub fn from_json(v: &Value) -> Option<JournalOp> {
        let o = v.as_object()?;
        let change = || -> Option<OpChange> {
            if let Some(m) = o.get("put").and_then(Value::as_object) {
                Some(OpChange::Put(m.clone()))
            } else if let Some(m) = o.get("set").and_then(Value::as_object) {
                Some(OpChange::Set(m.clone()))
            } else if o.get("del").is_some() {
                Some(OpChange::Del)
            } else {
                None
            }
        };
        if let Some(id) = o.get("s").and_then(Value::as_str) {
            return Some(JournalOp::Song {
                id: id.to_string(),
                change: change()?,
            });
        }
        if let Some(id) = o.get("a").and_then(Value::as_str) {
            return Some(JournalOp::Action {
                id: id.to_string(),
                change: change()?,
            });
        }
        let id = o.get("b").and_then(Value::as_str)?.to_string();
        let map = match o.get("map") {
            None | Some(Value::Null) => None,
            Some(m) => Some(serde_json::from_value::<BindingMap>(m.clone()).ok()?),
        };
        Some(JournalOp::Bindings { id, map })
    }
}

/// The journal records of one kind's changed records (`record` makes the
/// journal record of an id).
fn record_ops<V: Serialize>(
    changes: &[Changed<V>],
    now: &Ordered<V>,
    ops: &mut Vec<JournalOp>,
    record: impl Fn(String, OpChange) -> JournalOp,
) {
    let to_map = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for c in changes {
        let change = match (&c.old, now.get(&c.id)) {
            (_, None) => OpChange::Del,
            (None, Some(n)) => OpChange::Put(to_map(json!(n))),
            (Some((seq, o)), Some(n)) if Some(*seq) == c.new => OpChange::Set(changed_fields(o, n)),
            (Some(_), Some(n)) => {
                // Removed and added again: it moved to the end.
                ops.push(record(c.id.clone(), OpChange::Del));
                OpChange::Put(to_map(json!(n)))
            }
        };
        ops.push(record(c.id.clone(), change));
    }
}

impl Changes {
    /// The journal records of this change.
    pub fn ops(&self, lib: &Library) -> Vec<JournalOp> {
        let mut ops = Vec::new();
        record_ops(&self.songs, &lib.songs, &mut ops, |id, change| {
            JournalOp::Song { id, change }
        });
        record_ops(&self.actions, &lib.actions, &mut ops, |id, change| {
            JournalOp::Action { id, change }
        });
        for c in &self.bindings {
            if c.old.as_ref().is_some_and(|(seq, _)| Some(*seq) != c.new) {
                ops.push(JournalOp::Bindings {
                    id: c.id.clone(),
                    map: None,
                });
            }
            ops.push(JournalOp::Bindings {
                id: c.id.clone(),
                map: lib.bindings.get(&c.id).cloned(),
            });
        }
        ops
    }
}

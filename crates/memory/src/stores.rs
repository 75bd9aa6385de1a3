//! The long-term memory stores of a character, in the original application's
//! JSON shapes (docs/memory.md § Long-term memory):
//!
//! * `facts.json`: array of facts `{id, text, importance, entity, source, tags,
//!   hash, created_at, event_*, schema_version, absorbed, signal_processed,
//!   embedding*}` plus companiond's `updated_at`, `evidence_count`, `evidence`;
//! * `facts_archive.json`: superseded / replaced facts, stamped with
//!   `arbitration_archived_at`, `arbitration_reason`, `superseded_by`;
//! * `reflections.json` (an array, or an object with a `reflections` array) and
//!   `reflections_archive.json`: patterns over several facts;
//! * `persona.json`: `{entity: {"facts": [entry]}}` for `master` (the user),
//!   `neko` (the character) and `relationship`;
//! * `surfaced.json`: references to surfaced reflections (only cleaned here).
//!
//! Entries are kept as JSON objects so fields this crate does not know (written
//! by the original application) survive every rewrite. All functions here are
//! blocking; writers hold [`lock_rel`]'s store lock. A file that is not valid
//! JSON is an error and is never overwritten.

use std::path::{Path, PathBuf};

use companiond_core::notices::Notices;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

pub const FACTS: &str = "facts.json";
pub const FACTS_ARCHIVE: &str = "facts_archive.json";
pub const REFLECTIONS: &str = "reflections.json";
pub const REFLECTIONS_ARCHIVE: &str = "reflections_archive.json";
pub const PERSONA: &str = "persona.json";
pub const SURFACED: &str = "surfaced.json";
/// Every file [`Stores::load`] reads.
pub const FILES: [&str; 6] = [
    FACTS,
    FACTS_ARCHIVE,
    REFLECTIONS,
    REFLECTIONS_ARCHIVE,
    PERSONA,
    SURFACED,
];

/// Whom a memory is about.
pub const ENTITIES: [&str; 3] = ["master", "neko", "relationship"];
/// The schema version of entries written here (the original's current one).
pub const SCHEMA_VERSION: i64 = 2;

pub type Obj = Map<String, Value>;

/// The store lock (relative to the data dir) every long-term write of
/// `name` holds: one lock for the whole set, so multi-file commits
/// (archive, facts, reflections, persona) never interleave.
pub fn lock_rel(name: &str) -> PathBuf {
    Path::new(companiond_core::layout::MEMORY)
        .join(name)
        .join(FACTS)
}

/// How a list document was shaped on disk.
#[derive(Clone, Debug, Default)]
pub enum Shape {
    #[default]
    Array,
    /// An object holding the list under `key` (other keys kept).
    Wrapped(Obj, String),
}

/// A list document (facts, archives, reflections, surfaced).
#[derive(Clone, Debug, Default)]
pub struct ListDoc {
    pub items: Vec<Value>,
    pub shape: Shape,
    pub dirty: bool,
}

impl ListDoc {
    fn load(path: &Path, key: &str, notices: Option<&Notices>) -> Result<ListDoc, StoresError> {
        let v = match read_value(path, notices)? {
            None => return Ok(ListDoc::default()),
            Some(v) => v,
        };
        match v {
            Value::Array(items) => Ok(ListDoc {
                items,
                shape: Shape::Array,
                dirty: false,
            }),
            Value::Object(mut m) => match m.remove(key) {
                Some(Value::Array(items)) => Ok(ListDoc {
                    items,
                    shape: Shape::Wrapped(m, key.to_string()),
                    dirty: false,
                }),
                None if m.is_empty() => Ok(ListDoc::default()),
                _ => Err(StoresError::Unreadable(format!(
                    "{} is not a list of entries",
                    path.display()
                ))),
            },
            _ => Err(StoresError::Unreadable(format!(
                "{} is not a list of entries",
                path.display()
            ))),
        }
    }

    fn to_value(&self) -> Value {
        match &self.shape {
            Shape::Array => Value::Array(self.items.clone()),
            Shape::Wrapped(m, key) => {
                let mut m = m.clone();
                m.insert(key.clone(), Value::Array(self.items.clone()));
                Value::Object(m)
            }
        }
    }

    /// The object entries.
    pub fn objects(&self) -> impl Iterator<Item = &Obj> {
        self.items.iter().filter_map(Value::as_object)
    }

    pub fn find(&self, id: &str) -> Option<&Obj> {
        self.objects().find(|o| str_of(o, "id") == Some(id))
    }

    pub fn find_mut(&mut self, id: &str) -> Option<&mut Obj> {
        self.items
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .find(|o| str_of(o, "id") == Some(id))
    }

    /// Remove the entries with `id`; how many.
    pub fn remove(&mut self, id: &str) -> Vec<Obj> {
        let mut out = Vec::new();
        self.items.retain(|v| match v.as_object() {
            Some(o) if str_of(o, "id") == Some(id) => {
                out.push(o.clone());
                false
            }
            _ => true,
        });
        if !out.is_empty() {
            self.dirty = true;
        }
        out
    }

    pub fn push(&mut self, o: Obj) {
        self.items.push(Value::Object(o));
        self.dirty = true;
    }
}

/// Every long-term store of one character.
#[derive(Clone, Debug, Default)]
pub struct Stores {
    pub facts: ListDoc,
    pub facts_archive: ListDoc,
    pub reflections: ListDoc,
    pub reflections_archive: ListDoc,
    pub persona: Obj,
    pub persona_dirty: bool,
    pub surfaced: ListDoc,
}

/// Why the stores could not be read.
#[derive(Debug)]
pub enum StoresError {
    /// A store is not JSON, or not of its shape.
    Unreadable(String),
    /// The disk refused the read.
    Failed(String),
}

impl std::fmt::Display for StoresError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoresError::Unreadable(m) | StoresError::Failed(m) => f.write_str(m),
        }
    }
}

impl From<StoresError> for crate::error::MemoryError {
    fn from(e: StoresError) -> Self {
        match e {
            StoresError::Unreadable(m) => crate::error::MemoryError::Unreadable(m),
            StoresError::Failed(m) => crate::error::MemoryError::Storage(m),
        }
    }
}

/// Read a store; one that is not JSON at all is set aside and `notices` told
/// when they are given (a request's read: the next one starts it anew), else
/// left where it is (background work).
fn read_value(path: &Path, notices: Option<&Notices>) -> Result<Option<Value>, StoresError> {
    match std::fs::read(path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok(None),
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
            if let Some(n) = notices {
                companiond_core::store::set_aside_unreadable(path, Some(n));
            }
            StoresError::Unreadable(format!("{} is not valid JSON: {e}", path.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoresError::Failed(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

impl Stores {
    /// Read every store of the memory directory `dir` (missing = empty).
    /// `notices`: see [`read_value`].
    pub fn load(dir: &Path, notices: Option<&Notices>) -> Result<Stores, StoresError> {
        let persona = match read_value(&dir.join(PERSONA), notices)? {
            None => Obj::new(),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Err(StoresError::Unreadable(format!(
                    "{PERSONA} is not an object"
                )))
            }
        };
        Ok(Stores {
            facts: ListDoc::load(&dir.join(FACTS), "facts", notices)?,
            facts_archive: ListDoc::load(&dir.join(FACTS_ARCHIVE), "facts", notices)?,
            reflections: ListDoc::load(&dir.join(REFLECTIONS), "reflections", notices)?,
            reflections_archive: ListDoc::load(
                &dir.join(REFLECTIONS_ARCHIVE),
                "reflections",
                notices,
            )?,
            persona,
            persona_dirty: false,
            surfaced: ListDoc::load(&dir.join(SURFACED), "surfaced", notices)?,
        })
    }

    /// Write the changed stores atomically: archives first (an interrupted
    /// commit leaves an entry in both files, never in none), then the rest.
    pub fn save(&mut self, dir: &Path) -> Result<(), String> {
        let write = |file: &str, v: &Value| {
            companiond_core::store::atomic_write_json(&dir.join(file), v)
                .map_err(|e| format!("cannot write {file}: {e}"))
        };
        for (file, doc) in [
            (FACTS_ARCHIVE, &mut self.facts_archive),
            (REFLECTIONS_ARCHIVE, &mut self.reflections_archive),
            (FACTS, &mut self.facts),
            (REFLECTIONS, &mut self.reflections),
            (SURFACED, &mut self.surfaced),
        ] {
            if doc.dirty {
                write(file, &doc.to_value())?;
                doc.dirty = false;
            }
        }
        if self.persona_dirty {
            write(PERSONA, &Value::Object(self.persona.clone()))?;
            self.persona_dirty = false;
        }
        Ok(())
    }

    /// Active facts (objects with an id and a text).
    pub fn active_facts(&self) -> impl Iterator<Item = &Obj> {
        self.facts
            .objects()
            .filter(|o| str_of(o, "id").is_some() && str_of(o, "text").is_some())
    }

    /// Persona entries per entity: `(entity, entry)`.
    pub fn persona_entries(&self) -> Vec<(String, &Obj)> {
        let mut out = Vec::new();
        for (entity, section) in &self.persona {
            if let Some(list) = section.get("facts").and_then(Value::as_array) {
                for e in list.iter().filter_map(Value::as_object) {
                    out.push((entity.clone(), e));
                }
            }
        }
        out
    }

    /// Add a persona entry under `entity`.
    pub fn persona_push(&mut self, entity: &str, entry: Obj) {
        let section = self
            .persona
            .entry(entity.to_string())
            .or_insert_with(|| json!({"facts": []}));
        if !section.is_object() {
            *section = json!({"facts": []});
        }
        if let Some(s) = section.as_object_mut() {
            let list = s.entry("facts").or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            if let Some(l) = list.as_array_mut() {
                l.push(Value::Object(entry));
                self.persona_dirty = true;
            }
        }
    }

    /// Remove persona entries whose `id` or `source_id` is `id`; how many.
    pub fn persona_remove(&mut self, id: &str) -> usize {
        let mut n = 0;
        for section in self.persona.values_mut() {
            if let Some(list) = section.get_mut("facts").and_then(Value::as_array_mut) {
                let before = list.len();
                list.retain(|e| {
                    !(e.get("id").and_then(Value::as_str) == Some(id)
                        || e.get("source_id").and_then(Value::as_str) == Some(id))
                });
                n += before - list.len();
            }
        }
        if n > 0 {
            self.persona_dirty = true;
        }
        n
    }

    /// Remove every trace of `id` (a fact, reflection or persona entry): the
    /// active and archived entries, persona entries derived from it, its place
    /// in reflections' `source_fact_ids` and in `surfaced.json`. Returns what
    /// was removed, as `(kind, id)`.
    pub fn forget(&mut self, id: &str) -> Vec<(&'static str, String)> {
        let mut removed = Vec::new();
        if !self.facts.remove(id).is_empty() {
            removed.push(("fact", id.to_string()));
        }
        if !self.facts_archive.remove(id).is_empty() && removed.is_empty() {
            removed.push(("fact", id.to_string()));
        }
        if !self.reflections.remove(id).is_empty() {
            removed.push(("reflection", id.to_string()));
        }
        if !self.reflections_archive.remove(id).is_empty()
            && !removed.iter().any(|(k, _)| *k == "reflection")
        {
            removed.push(("reflection", id.to_string()));
        }
        // Persona entries derived from it (their own ids go with them).
        let derived: Vec<String> = self
            .persona_entries()
            .into_iter()
            .filter(|(_, e)| str_of(e, "id") == Some(id) || str_of(e, "source_id") == Some(id))
            .filter_map(|(_, e)| str_of(e, "id").map(str::to_string))
            .collect();
        if self.persona_remove(id) > 0 {
            for d in derived {
                removed.push(("persona", d));
            }
        }
        // References in reflections.
        for doc in [&mut self.reflections, &mut self.reflections_archive] {
            for r in doc.items.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(ids) = r.get_mut("source_fact_ids").and_then(Value::as_array_mut) {
                    let before = ids.len();
                    ids.retain(|v| v.as_str() != Some(id));
                    if ids.len() != before {
                        doc.dirty = true;
                    }
                }
            }
        }
        let before = self.surfaced.items.len();
        self.surfaced.items.retain(|v| {
            let refers = |k: &str| v.get(k).and_then(Value::as_str) == Some(id);
            !(v.as_str() == Some(id) || refers("id") || refers("reflection_id"))
        });
        if self.surfaced.items.len() != before {
            self.surfaced.dirty = true;
        }
        removed
    }
}

/// A string field of an entry.
pub fn str_of<'a>(o: &'a Obj, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

/// The original's content hash: first 16 hex digits of SHA-256 of the text.
pub fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))[..16].to_string()
}

/// A normalised form for exact-duplicate checks.
pub fn normalised(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(['.', '。', '!', '！'])
        .to_lowercase()
}

/// Milliseconds since the epoch of an entry's time field (`created_at` ...).
pub fn entry_time(o: &Obj, keys: &[&str]) -> Option<i64> {
    keys.iter()
        .filter_map(|k| str_of(o, k))
        .find_map(crate::timefmt::parse)
}

/// An id like the original's: `<prefix>_<YYYYmmddHHMMSS>_<8 hex>`.
pub fn new_id(prefix: &str, now_ms: i64, text: &str) -> String {
    let salt = uuid::Uuid::new_v4().simple().to_string();
    let h = content_hash(&format!("{text}\n{salt}"));
    format!("{prefix}_{}_{}", crate::timefmt::compact(now_ms), &h[..8])
}

/// A new fact entry in the original's shape.
pub fn new_fact(text: &str, entity: &str, importance: i64, now_ms: i64) -> Obj {
    let now = crate::timefmt::iso(now_ms);
    let v = json!({
        "id": new_id("fact", now_ms, text),
        "text": text,
        "importance": importance,
        "entity": entity,
        "source": "user_observation",
        "tags": [],
        "hash": content_hash(text),
        "created_at": now,
        "event_when_raw": null,
        "event_start_at": now,
        "event_end_at": null,
        "schema_version": SCHEMA_VERSION,
        "absorbed": false,
        "signal_processed": true,
        "embedding": null,
        "embedding_text_sha256": null,
        "embedding_model_id": null,
        "updated_at": now,
        "evidence_count": 0,
        "evidence": [],
    });
    v.as_object().cloned().unwrap_or_default()
}

/// A new reflection entry in the original's shape.
pub fn new_reflection(text: &str, entity: &str, source_fact_ids: Vec<String>, now_ms: i64) -> Obj {
    let now = crate::timefmt::iso(now_ms);
    let v = json!({
        "id": new_id("reflection", now_ms, text),
        "text": text,
        "entity": entity,
        "status": "pending",
        "source_fact_ids": source_fact_ids,
        "created_at": now,
        "feedback": null,
        "next_eligible_at": now,
        "reinforcement": 0.0,
        "rein_last_signal_at": null,
        "relation_type": null,
        "temporal_scope": null,
        "subject": null,
        "event_when_raw": null,
        "event_start_at": now,
        "event_end_at": null,
        "schema_version": SCHEMA_VERSION,
        "hash": content_hash(text),
    });
    v.as_object().cloned().unwrap_or_default()
}

/// A new persona entry in the original's shape, derived from a fact.
pub fn new_persona_entry(text: &str, source_id: &str, now_ms: i64) -> Obj {
    let v = json!({
        "id": new_id("persona", now_ms, text),
        "text": text,
        "source": "fact",
        "source_id": source_id,
        "recent_mentions": [],
        "suppress": false,
        "suppressed_at": null,
        "protected": false,
        "reinforcement": 0.0,
        "disputation": 0.0,
        "rein_last_signal_at": null,
        "disp_last_signal_at": null,
        "sub_zero_days": 0,
        "sub_zero_last_increment_date": null,
        "user_fact_reinforce_count": 0,
        "merged_from_ids": [],
        "version_history": [],
        "created_at": crate::timefmt::iso(now_ms),
    });
    v.as_object().cloned().unwrap_or_default()
}

/// Stamp an entry that leaves the active store.
pub fn archived(mut o: Obj, reason: &str, superseded_by: Option<&str>, now_ms: i64) -> Obj {
    o.insert(
        "arbitration_archived_at".into(),
        json!(crate::timefmt::iso(now_ms)),
    );
    o.insert("arbitration_reason".into(), json!(reason));
    if let Some(s) = superseded_by {
        o.insert("superseded_by".into(), json!(s));
    }
    o
}

/// An entry's integer field.
pub fn int_of(o: &Obj, key: &str) -> Option<i64> {
    o.get(key).and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_survive_and_forget_cleans_everything() {
        let d = std::env::temp_dir().join(format!("mem-stores-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(REFLECTIONS), r#"{"version": 3, "reflections": [{"id": "r1", "text": "x", "source_fact_ids": ["f1", "f2"]}]}"#).unwrap();
        std::fs::write(
            d.join(FACTS),
            r#"[{"id": "f1", "text": "likes tea", "extra": 1}, 7]"#,
        )
        .unwrap();
        std::fs::write(d.join(PERSONA), r#"{"master": {"facts": [{"id": "p1", "source_id": "f1", "text": "likes tea"}, {"id": "p2", "text": "card"}]}}"#).unwrap();
        std::fs::write(
            d.join(SURFACED),
            r#"[{"reflection_id": "r1"}, {"id": "f1"}, "f1"]"#,
        )
        .unwrap();
        let mut s = Stores::load(&d, None).unwrap();
        let removed = s.forget("f1");
        assert_eq!(
            removed,
            vec![("fact", "f1".to_string()), ("persona", "p1".to_string())]
        );
        s.save(&d).unwrap();
        let facts: Value = serde_json::from_slice(&std::fs::read(d.join(FACTS)).unwrap()).unwrap();
        assert_eq!(facts, json!([7]));
        let refl: Value =
            serde_json::from_slice(&std::fs::read(d.join(REFLECTIONS)).unwrap()).unwrap();
        assert_eq!(refl["version"], 3);
        assert_eq!(refl["reflections"][0]["source_fact_ids"], json!(["f2"]));
        let sur: Value = serde_json::from_slice(&std::fs::read(d.join(SURFACED)).unwrap()).unwrap();
        assert_eq!(sur, json!([{"reflection_id": "r1"}]));
        let p: Value = serde_json::from_slice(&std::fs::read(d.join(PERSONA)).unwrap()).unwrap();
        assert_eq!(p["master"]["facts"].as_array().unwrap().len(), 1);
        std::fs::write(d.join(FACTS), b"{broken").unwrap();
        assert!(Stores::load(&d, None).is_err());
        let _ = std::fs::remove_dir_all(d);
    }
}

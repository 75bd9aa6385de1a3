//! The chat history of a character: `memory/<name>/recent.json`.
//!
//! This module owns the file: its path, the typed entry every writer appends,
//! appends, the tail a new session starts from, and the lock under which a whole-file
//! replacement (the memory browser's save, a cloud-save download, a rename) runs.
//! Nobody else builds its path or its entries.
//!
//! The file is a UTF-8 JSON array, written atomically (docs/memory.md). An entry
//! is `{"type": "human"|"ai"|"system", "data": {"content": <text>}}`, plus
//! `"source"` when another feature than the chat wrote it (e.g. onboarding).
//! Readers also accept `{"role": "user"|"assistant"|"system", "content": ...}`
//! (older files, hand edits), and keep entries they do not understand.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::{Store, StoreError};

/// File name of the history inside a character's memory directory.
pub const FILE: &str = "recent.json";

/// Who said a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    /// The user (`human`).
    Human,
    /// The character (`ai`).
    Ai,
    /// A system note (theater capsules and similar).
    System,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Content {
    content: String,
}

/// One stored line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(rename = "type")]
    pub speaker: Speaker,
    data: Content,
    /// The feature that wrote the line, when not the chat itself.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source: Option<String>,
}

impl Entry {
    pub fn new(speaker: Speaker, text: impl Into<String>) -> Entry {
        Entry {
            speaker,
            data: Content {
                content: text.into(),
            },
            source: None,
        }
    }
    pub fn human(text: impl Into<String>) -> Entry {
        Entry::new(Speaker::Human, text)
    }
    pub fn ai(text: impl Into<String>) -> Entry {
        Entry::new(Speaker::Ai, text)
    }
    /// Mark the feature that wrote the line.
    pub fn from_source(mut self, source: &str) -> Entry {
        self.source = Some(source.to_string());
        self
    }
    pub fn text(&self) -> &str {
        &self.data.content
    }

    /// Read a stored value in any accepted shape; `None` for entries that are
    /// not a line of text by a known speaker.
    pub fn parse(v: &Value) -> Option<Entry> {
        let speaker = match v.get("type").and_then(Value::as_str) {
            Some("human") => Speaker::Human,
            Some("ai") => Speaker::Ai,
            Some("system") => Speaker::System,
            Some(_) => return None,
            None => match v.get("role").and_then(Value::as_str)? {
                "user" | "human" => Speaker::Human,
                "assistant" | "ai" => Speaker::Ai,
                "system" => Speaker::System,
                _ => return None,
            },
        };
        let text = v
            .get("data")
            .and_then(|d| d.get("content"))
            .or_else(|| v.get("content"))?
            .as_str()?;
        Some(Entry {
            speaker,
            data: Content {
                content: text.to_string(),
            },
            source: v.get("source").and_then(Value::as_str).map(str::to_string),
        })
    }
}

/// `memory/<name>/recent.json`, relative to the data dir (`name` must be a
/// validated character name).
pub fn rel_path(name: &str) -> PathBuf {
    Path::new(crate::layout::MEMORY).join(name).join(FILE)
}

/// The histories of every character, over the data dir's store.
#[derive(Clone)]
pub struct History {
    store: Store,
}

impl History {
    pub fn new(store: Store) -> History {
        History { store }
    }

    /// Absolute path of `name`'s history.
    pub fn path(&self, name: &str) -> PathBuf {
        self.store.path(rel_path(name))
    }

    /// The lock every write of `name`'s history holds: appends take it, and a
    /// whole-file replacement (memory save, cloud-save download) holds it so no
    /// append lands in between.
    pub fn lock(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.store.lock_for(rel_path(name))
    }

    /// Append `entries` at the end of `name`'s history (created when missing).
    /// A history that is not a JSON array is left untouched (error).
    pub async fn append(&self, name: &str, entries: Vec<Entry>) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        self.store
            .update(rel_path(name), move |cur: Option<Vec<Value>>| {
                let mut v = cur.unwrap_or_default();
                v.extend(entries.iter().filter_map(|e| serde_json::to_value(e).ok()));
                (v, ())
            })
            .await
    }

    /// The last `n` lines of `name`'s history that are text by a known speaker,
    /// oldest first. A missing or unreadable history is empty.
    pub async fn tail(&self, name: &str, n: usize) -> Vec<Entry> {
        let items = match self.store.read::<Vec<Value>>(rel_path(name)).await {
            Ok(Some(items)) => items,
            Ok(None) => return Vec::new(),
            Err(e) => {
                tracing::warn!("cannot read the history of {name}: {e}");
                return Vec::new();
            }
        };
        let mut out: Vec<Entry> = items
            .iter()
            .rev()
            .filter_map(Entry::parse)
            .take(n)
            .collect();
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entry_shapes() {
        assert_eq!(
            serde_json::to_value(Entry::human("hi")).unwrap(),
            json!({"type": "human", "data": {"content": "hi"}})
        );
        assert_eq!(
            serde_json::to_value(Entry::ai("yo").from_source("onboarding")).unwrap(),
            json!({"type": "ai", "data": {"content": "yo"}, "source": "onboarding"})
        );
        let full =
            json!({"type": "ai", "data": {"content": "x", "additional_kwargs": {}, "type": "ai"}});
        assert_eq!(Entry::parse(&full), Some(Entry::ai("x")));
        assert_eq!(
            Entry::parse(&json!({"role": "user", "content": "old"})),
            Some(Entry::human("old"))
        );
        assert_eq!(
            Entry::parse(&json!({"type": "tool", "data": {"content": "x"}})),
            None
        );
        assert_eq!(
            Entry::parse(&json!({"type": "ai", "data": {"content": 5}})),
            None
        );
        assert_eq!(Entry::parse(&json!([1])), None);
    }

    #[tokio::test]
    async fn append_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::new(Store::new(dir.path()));
        assert!(h.tail("A", 5).await.is_empty());
        h.append("A", vec![Entry::human("1"), Entry::ai("2")])
            .await
            .unwrap();
        h.append("A", vec![Entry::human("3")]).await.unwrap();
        let t = h.tail("A", 2).await;
        assert_eq!(t, vec![Entry::ai("2"), Entry::human("3")]);
        // A history that is not an array is never overwritten.
        std::fs::create_dir_all(dir.path().join("memory/B")).unwrap();
        std::fs::write(h.path("B"), b"{\"not\":\"a list\"}").unwrap();
        assert!(h.append("B", vec![Entry::human("x")]).await.is_err());
        assert_eq!(std::fs::read(h.path("B")).unwrap(), b"{\"not\":\"a list\"}");
    }
}

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
//! (older files, hand edits), and keep entries they do not understand. The
//! memory page's save writes the original application's full message form
//! (`{type, data: {content, additional_kwargs, ...}}`), and theater memory lines
//! carry `data.metadata.source`: both, and the readers of any line, are in
//! [`line`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::{Store, StoreError};

pub mod line;

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
    /// A reply whose speech was cut off by the user (barge-in; docs/voice.md).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub interrupted: bool,
}

impl Entry {
    pub fn new(speaker: Speaker, text: impl Into<String>) -> Entry {
        Entry {
            speaker,
            data: Content {
                content: text.into(),
            },
            source: None,
            interrupted: false,
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
    /// Mark a reply whose speech was cut off.
    pub fn interrupted(mut self) -> Entry {
        self.interrupted = true;
        self
    }
    pub fn text(&self) -> &str {
        &self.data.content
    }

    /// Read a stored value in any accepted shape; `None` for entries that are
    /// not a line of text by a known speaker.
    pub fn parse(v: &Value) -> Option<Entry> {
        let speaker = match line::kind_of(v) {
            "human" => Speaker::Human,
            "ai" => Speaker::Ai,
            "system" => Speaker::System,
            _ => return None,
        };
        let text = line::content_str(v)?;
        Some(Entry {
            speaker,
            data: Content {
                content: text.to_string(),
            },
            source: v.get("source").and_then(Value::as_str).map(str::to_string),
            interrupted: v.get("interrupted").and_then(Value::as_bool) == Some(true),
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
    ///
    /// The stored lines are not parsed into values: the file is checked to be
    /// one JSON array and the new entries are spliced in before its closing
    /// bracket, so every stored line keeps its exact bytes and a long history
    /// costs a scan and a copy, not a parse and a re-serialisation.
    pub async fn append(&self, name: &str, entries: Vec<Entry>) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.path(name);
        let lock = self.lock(name);
        let _g = lock.lock().await;
        let notices = self.store.notices().cloned();
        crate::task::blocking(move || {
            let old = match std::fs::read(&path) {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(StoreError::Io(e)),
            };
            let bytes = match spliced(old.as_deref(), &entries) {
                Ok(b) => b,
                // Not JSON at all (torn, garbage): kept aside, told, started anew.
                Err(e) => match crate::store::set_aside_unreadable(&path, notices.as_ref()) {
                    Some(_) => spliced(None, &entries)
                        .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))?,
                    None => return Err(StoreError::Corrupt(format!("{}: {e}", path.display()))),
                },
            };
            crate::store::atomic_write_deferred(&path, &bytes).map_err(StoreError::Io)
        })
        .await
    }

    /// Mark the last reply of `name`'s history as cut off by the user (its
    /// speech was interrupted; docs/voice.md); with `heard`, the reply's text
    /// becomes the part the user heard (a spoken barge-in). Nothing happens
    /// when there is no reply or it is marked already.
    pub async fn mark_last_reply_interrupted(
        &self,
        name: &str,
        heard: Option<String>,
    ) -> Result<(), StoreError> {
        let path = self.path(name);
        let lock = self.lock(name);
        let _g = lock.lock().await;
        crate::task::blocking(move || {
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(StoreError::Io(e)),
            };
            let mut items: Vec<Value> = serde_json::from_slice(&bytes)
                .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))?;
            let last = items
                .iter_mut()
                .rev()
                .find(|v| Entry::parse(v).is_some_and(|e| e.speaker == Speaker::Ai));
            let Some(Value::Object(reply)) = last else {
                return Ok(());
            };
            if reply.get("interrupted") == Some(&Value::Bool(true)) {
                return Ok(());
            }
            reply.insert("interrupted".into(), Value::Bool(true));
            if let Some(h) = heard {
                match reply.get_mut("data").and_then(Value::as_object_mut) {
                    Some(data) => {
                        data.insert("content".into(), Value::String(h));
                    }
                    None => {
                        reply.insert("content".into(), Value::String(h));
                    }
                }
            }
            let bytes = encode(&items)
                .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))?;
            crate::store::atomic_write_deferred(&path, &bytes).map_err(StoreError::Io)
        })
        .await
    }

    /// The last `n` lines of `name`'s history that are text by a known speaker,
    /// oldest first. A missing or unreadable history is empty.
    ///
    /// A history in the stored layout ([`encode`]: one entry per line) is read
    /// from its end, a few kilobytes for a turn's context whatever its length
    /// ([`tail_of_layout`]); any other file is parsed whole.
    pub async fn tail(&self, name: &str, n: usize) -> Vec<Entry> {
        let path = self.path(name);
        let fast =
            crate::task::blocking(move || Ok::<_, StoreError>(tail_of_layout(&path, n))).await;
        if let Ok(Some(entries)) = fast {
            return entries;
        }
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

/// The last `n` text entries of the history file at `path` read from its
/// end, when the file is in the stored layout (`[` alone on the first line,
/// one compact entry per line, `]` alone on the last): chunks of 16 KiB,
/// then four times more, until `n` entries are found or the file is read.
/// `Some(vec![])` for a missing file; `None` when the file is in another
/// layout or any line read is not an entry (the caller then parses it whole,
/// and sets aside a damaged one). Written here because no crate reads JSON
/// lines backwards; a turn's context costs the same at 10 lines and 10,000
/// (`cargo bench --bench heavy -- history_append`).
fn tail_of_layout(path: &Path, n: usize) -> Option<Vec<Entry>> {
    use std::io::{Read, Seek, SeekFrom};
    if n == 0 {
        return Some(Vec::new());
    }
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Vec::new()),
        Err(_) => return None,
    };
    let len = f.metadata().ok()?.len();
    let mut head = [0u8; 2];
    f.read_exact(&mut head).ok()?;
    if &head == b"[]" {
        return Some(Vec::new());
    }
    if &head != b"[\n" {
        return None;
    }
    let mut size: u64 = 16 * 1024;
    loop {
        let start = len.saturating_sub(size);
        f.seek(SeekFrom::Start(start)).ok()?;
        let mut buf = Vec::with_capacity((len - start) as usize);
        f.by_ref().take(len - start).read_to_end(&mut buf).ok()?;
        let text = buf.trim_ascii_end();
        let body = text.strip_suffix(b"]")?;
        let mut lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
        // The first piece is cut unless the chunk starts the file.
        if start > 0 {
            lines.remove(0);
        }
        let mut out = Vec::new();
        for line in lines.iter().rev() {
            let line = line.trim_ascii();
            if line.is_empty() || (start == 0 && line == b"[") {
                continue;
            }
            let line = line.strip_suffix(b",").unwrap_or(line);
            let v: Value = serde_json::from_slice(line).ok()?;
            if let Some(e) = Entry::parse(&v) {
                out.push(e);
                if out.len() == n {
                    break;
                }
            }
        }
        if out.len() == n || start == 0 {
            out.reverse();
            return Some(out);
        }
        size *= 4;
    }
}

/// Writes a history file's bytes in its stored layout: a JSON array with one
/// entry per line as compact JSON (`[` and `]` on lines of their own; `[]`
/// when empty). Every writer of the file uses it, so the chat's appends, the
/// memory browser's saves and the rewrites of a rename or a review all keep
/// one layout.
///
/// Why not indent 2 like the original application: a history is rewritten
/// whole by a save and copied whole by every read, and the indentation of its
/// nested message objects is a fifth of its bytes (4.57 MB indented against
/// 3.66 MB for 10,000 messages). One entry per line stays readable and
/// diffable; readers accept any layout, so files written by the original or
/// by an earlier release are read as they are and take this layout on their
/// next rewrite (docs/memory.md).
pub struct Encoder {
    out: Vec<u8>,
    entries: usize,
}

impl Encoder {
    /// An encoder with room for `bytes` bytes of entries.
    pub fn with_capacity(bytes: usize) -> Encoder {
        let mut out = Vec::with_capacity(bytes + 4);
        out.push(b'[');
        Encoder { out, entries: 0 }
    }

    /// An encoder of the entries that follow those of another encoder, whose
    /// [`Encoder::into_part`] came before it (and held at least one entry):
    /// its bytes continue that part's, so large histories can be encoded in
    /// parts at once.
    pub fn after(bytes: usize) -> Encoder {
        Encoder {
            out: Vec::with_capacity(bytes + 4),
            entries: 1,
        }
    }

    /// The bytes so far, unclosed: a part that an [`Encoder::after`]'s bytes
    /// continue.
    pub fn into_part(self) -> Vec<u8> {
        self.out
    }

    /// Start the next entry: the buffer to write its compact JSON into.
    pub fn next_entry(&mut self) -> &mut Vec<u8> {
        self.out
            .extend_from_slice(if self.entries == 0 { b"\n" } else { b",\n" });
        self.entries += 1;
        &mut self.out
    }

    /// Add an entry.
    pub fn entry<T: Serialize + ?Sized>(&mut self, v: &T) -> serde_json::Result<()> {
        serde_json::to_writer(self.next_entry(), v)
    }

    /// The bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.out
            .extend_from_slice(if self.entries == 0 { b"]" } else { b"\n]" });
        self.out
    }
}

/// The stored bytes of a history holding `items` ([`Encoder`]).
pub fn encode<T: Serialize>(items: &[T]) -> serde_json::Result<Vec<u8>> {
    let mut enc = Encoder::with_capacity(0);
    for item in items {
        enc.entry(item)?;
    }
    Ok(enc.finish())
}

/// The history `old` (absent = empty) with `entries` added at its end, one
/// per line ([`Encoder`]). The stored entries keep their bytes, so a history
/// written by [`encode`] gives exactly what encoding the whole array gives.
/// `old` must be one JSON array.
fn spliced(old: Option<&[u8]>, entries: &[Entry]) -> Result<Vec<u8>, serde_json::Error> {
    let Some(old) = old else {
        return encode(entries);
    };
    // One JSON array (anything else is an error, and nothing is written).
    let items: Vec<serde::de::IgnoredAny> = serde_json::from_slice(old)?;
    let end = old
        .iter()
        .rposition(|&b| b == b']')
        .ok_or_else(|| serde::de::Error::custom("no closing bracket"))?;
    let body = old[..end].trim_ascii_end();
    let mut out = Vec::with_capacity(body.len() + entries.len() * 128 + 4);
    out.extend_from_slice(body);
    for (i, e) in entries.iter().enumerate() {
        out.extend_from_slice(if i == 0 && items.is_empty() {
            b"\n"
        } else {
            b",\n"
        });
        serde_json::to_writer(&mut out, e)?;
    }
    out.extend_from_slice(b"\n]");
    Ok(out)
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
    async fn the_tail_read_from_the_end_equals_the_whole_parse() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::new(Store::new(dir.path()));
        let mut all = Vec::new();
        for i in 0..3000 {
            let e = if i % 2 == 0 {
                Entry::human(format!("line {i} with a \"quote\" and\na newline"))
            } else {
                Entry::ai("x".repeat(i % 97))
            };
            all.push(e);
        }
        h.append("A", all.clone()).await.unwrap();
        for n in [0, 1, 2, 40, 333, 2999, 3000, 5000] {
            let want: Vec<Entry> = all[all.len().saturating_sub(n)..].to_vec();
            assert!(
                tail_of_layout(&h.path("A"), n) == Some(want.clone()),
                "n={n}"
            );
            assert!(h.tail("A", n).await == want, "n={n}");
        }
        assert_eq!(tail_of_layout(&h.path("missing"), 5), Some(Vec::new()));
        // Another layout (the original's pretty-printed file) is parsed whole.
        let pretty = serde_json::to_vec_pretty(&all[..3]).unwrap();
        std::fs::create_dir_all(dir.path().join("memory/P")).unwrap();
        std::fs::write(h.path("P"), &pretty).unwrap();
        assert_eq!(tail_of_layout(&h.path("P"), 2), None);
        assert_eq!(h.tail("P", 2).await, all[1..3].to_vec());
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
        // A torn one (not JSON at all) is kept aside, whole, and a new one begins.
        let notices = crate::notices::Notices::default();
        let h = History::new(Store::new(dir.path()).with_notices(notices.clone()));
        std::fs::write(h.path("B"), b"[{\"type\": \"human\"").unwrap();
        h.append("B", vec![Entry::human("x")]).await.unwrap();
        assert_eq!(h.tail("B", 5).await, vec![Entry::human("x")]);
        let aside: Vec<_> = std::fs::read_dir(dir.path().join("memory/B"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1);
        assert_eq!(
            std::fs::read(aside[0].path()).unwrap(),
            b"[{\"type\": \"human\""
        );
        assert_eq!(notices.peek().0.len(), 1);
    }

    /// The stored layout: one compact entry per line.
    #[test]
    fn layout() {
        assert_eq!(encode::<Entry>(&[]).unwrap(), b"[]");
        assert_eq!(
            String::from_utf8(encode(&[Entry::human("a"), Entry::ai("b")]).unwrap()).unwrap(),
            "[\n{\"type\":\"human\",\"data\":{\"content\":\"a\"}},\n\
             {\"type\":\"ai\",\"data\":{\"content\":\"b\"}}\n]"
        );
    }

    /// A history encoded in parts is the history encoded at once.
    #[test]
    fn parts_continue_each_other() {
        let all = [Entry::human("a"), Entry::ai("b"), Entry::human("c")];
        for cut in 1..all.len() {
            let mut first = Encoder::with_capacity(0);
            for e in &all[..cut] {
                first.entry(e).unwrap();
            }
            let mut rest = Encoder::after(0);
            for e in &all[cut..] {
                rest.entry(e).unwrap();
            }
            let mut bytes = first.into_part();
            bytes.extend(rest.finish());
            assert_eq!(bytes, encode(&all).unwrap(), "cut at {cut}");
        }
    }

    /// Appending gives the bytes encoding the whole array gives, for a
    /// missing, an empty and an encoded history; a history in another layout
    /// (the original's indent 2, a compact one) keeps its stored bytes.
    #[test]
    fn splice_matches_a_full_rewrite() {
        let add = [
            Entry::human("new \"q\"\n猫"),
            Entry::ai("a").from_source("s"),
        ];
        let as_values = |e: &[Entry]| -> Vec<Value> {
            e.iter().map(|e| serde_json::to_value(e).unwrap()).collect()
        };
        assert_eq!(spliced(None, &add).unwrap(), encode(&add).unwrap());
        for old in [
            json!([]),
            json!([{"type": "ai", "data": {"content": "x", "k": [1, {}]}}, {"z": 1, "a": 2}]),
        ] {
            let old_v: Vec<Value> = serde_json::from_value(old).unwrap();
            let mut all = old_v.clone();
            all.extend(as_values(&add));
            let mut with_ws = encode(&old_v).unwrap();
            with_ws.extend_from_slice(b"\n\n");
            let want = encode(&all).unwrap();
            assert_eq!(spliced(Some(&encode(&old_v).unwrap()), &add).unwrap(), want);
            assert_eq!(spliced(Some(&with_ws), &add).unwrap(), want);
            assert_eq!(
                spliced(Some(b"[ \n ]"), &add).unwrap(),
                encode(&add).unwrap()
            );
            let pretty = serde_json::to_vec_pretty(&old_v).unwrap();
            let out = spliced(Some(&pretty), &add).unwrap();
            assert!(out.starts_with(
                pretty
                    .trim_ascii_end()
                    .strip_suffix(b"]")
                    .unwrap()
                    .trim_ascii_end()
            ));
            assert_eq!(serde_json::from_slice::<Vec<Value>>(&out).unwrap(), all);
        }
        let compact = br#"[{"type":"human","data":{"content":"old"}}]"#;
        let out = spliced(Some(compact), &add).unwrap();
        assert!(out.starts_with(br#"[{"type":"human","data":{"content":"old"}},"#));
        let back: Vec<Value> = serde_json::from_slice(&out).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(Entry::parse(&back[1]), Some(add[0].clone()));
        for bad in [&b"{}"[..], b"", b"[1,", b"[1] x", b"nope"] {
            assert!(spliced(Some(bad), &add).is_err(), "{bad:?}");
        }
    }
}

//! Stored message format of `recent.json` and the theater merge of a save
//! (docs/memory.md).
//!
//! A stored message is `{"type": "human"|"ai"|"system", "data": {"content": ..}}`;
//! readers also accept `{"role": "user"|"assistant"|"system", "content": ..}`.
//! A theater memory message has `data.metadata.source == "theater_numeric_v2"`
//! and is read-only for the browser.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// `data.metadata.source` of theater memory messages.
pub const THEATER_SOURCE: &str = "theater_numeric_v2";

/// One validated entry of a save request (unknown fields already dropped).
#[derive(Clone, Debug, PartialEq)]
pub struct ChatEntry {
    pub role: String,
    pub text: String,
    pub source_index: Option<usize>,
    pub theater: bool,
}

/// Is this stored message a theater memory message?
pub fn is_theater(v: &Value) -> bool {
    let src = |m: Option<&Value>| {
        m.and_then(|m| m.get("source"))
            .and_then(Value::as_str)
            .is_some_and(|s| s == THEATER_SOURCE)
    };
    src(v.get("data").and_then(|d| d.get("metadata"))) || src(v.get("metadata"))
}

/// The stored type of a message (`human`, `ai`, `system`, ...).
pub fn message_type(v: &Value) -> String {
    if let Some(t) = v.get("type").and_then(Value::as_str) {
        return t.to_string();
    }
    match v.get("role").and_then(Value::as_str) {
        Some("user") => "human".into(),
        Some("assistant") => "ai".into(),
        Some(r) => r.to_string(),
        None => String::new(),
    }
}

/// The text of a message (non-string contents are compared as their JSON text).
pub fn message_text(v: &Value) -> String {
    let c = v
        .get("data")
        .and_then(|d| d.get("content"))
        .or_else(|| v.get("content"));
    match c {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct StoredData<'a> {
    content: &'a str,
    additional_kwargs: Empty,
    response_metadata: Empty,
    #[serde(rename = "type")]
    kind: &'a str,
    name: Option<()>,
    id: Option<()>,
    example: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[(); 0]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    invalid_tool_calls: Option<[(); 0]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage_metadata: Option<Option<()>>,
}

/// The stored form of a browser-written message:
/// `{type, data: {content, additional_kwargs, response_metadata, type, name, id,
/// example}}`, plus `tool_calls`, `invalid_tool_calls`, `usage_metadata` for `ai`.
#[derive(Serialize)]
pub struct StoredMessage<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    data: StoredData<'a>,
}

impl<'a> StoredMessage<'a> {
    pub fn new(e: &'a ChatEntry) -> Self {
        let ai = e.role == "ai";
        StoredMessage {
            kind: &e.role,
            data: StoredData {
                content: &e.text,
                additional_kwargs: Empty {},
                response_metadata: Empty {},
                kind: &e.role,
                name: None,
                id: None,
                example: false,
                tool_calls: ai.then_some([]),
                invalid_tool_calls: ai.then_some([]),
                usage_metadata: ai.then_some(None),
            },
        }
    }
}

/// The stored form of a browser-written message as a JSON value.
pub fn stored_message(e: &ChatEntry) -> Value {
    serde_json::to_value(StoredMessage::new(e)).unwrap_or(Value::Null)
}

/// One entry of a merged history: a stored message kept verbatim (its exact
/// JSON text), or a new one.
pub enum Merged<'a> {
    Kept(&'a RawValue),
    New(&'a ChatEntry),
}

impl Serialize for Merged<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Merged::Kept(v) => v.serialize(s),
            Merged::New(e) => StoredMessage::new(e).serialize(s),
        }
    }
}

/// A stored message as the merge sees it: its exact JSON text, its type, its
/// text and whether it is a theater message. Parsing borrows from the file
/// bytes, so a large history is not turned into a tree of maps.
pub struct Stored<'a> {
    pub raw: &'a RawValue,
    pub kind: Cow<'a, str>,
    pub text: Cow<'a, str>,
    pub theater: bool,
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
    #[serde(default, borrow)]
    metadata: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ProbeData<'a> {
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    metadata: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ProbeMeta<'a> {
    #[serde(default, borrow)]
    source: Option<Cow<'a, str>>,
}

fn theater_meta(raw: Option<&RawValue>) -> bool {
    raw.and_then(|m| serde_json::from_str::<ProbeMeta>(m.get()).ok())
        .and_then(|m| m.source)
        .is_some_and(|s| s == THEATER_SOURCE)
}

fn raw_text(raw: Option<&RawValue>) -> Cow<'_, str> {
    let Some(raw) = raw else {
        return Cow::Borrowed("");
    };
    if let Ok(s) = serde_json::from_str::<Cow<str>>(raw.get()) {
        return s;
    }
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Null) | Err(_) => Cow::Borrowed(""),
        Ok(other) => Cow::Owned(other.to_string()),
    }
}

impl<'a> Stored<'a> {
    fn from_raw(raw: &'a RawValue) -> Stored<'a> {
        let Ok(p) = serde_json::from_str::<Probe>(raw.get()) else {
            return Stored {
                raw,
                kind: Cow::Borrowed(""),
                text: Cow::Borrowed(""),
                theater: false,
            };
        };
        let data = p
            .data
            .and_then(|d| serde_json::from_str::<ProbeData>(d.get()).ok());
        let kind = match (p.kind, p.role) {
            (Some(k), _) => k,
            (None, Some(r)) if r == "user" => Cow::Borrowed("human"),
            (None, Some(r)) if r == "assistant" => Cow::Borrowed("ai"),
            (None, Some(r)) => r,
            (None, None) => Cow::Borrowed(""),
        };
        let (content, data_meta) = match &data {
            Some(d) => (d.content.or(p.content), d.metadata),
            None => (p.content, None),
        };
        Stored {
            raw,
            kind,
            text: raw_text(content),
            theater: theater_meta(data_meta) || theater_meta(p.metadata),
        }
    }
}

/// Parse a stored history (`None` when it is not a JSON array).
pub fn parse_stored(bytes: &[u8]) -> Option<Vec<Stored<'_>>> {
    let raws: Vec<&RawValue> = serde_json::from_slice(bytes).ok()?;
    Some(raws.into_iter().map(Stored::from_raw).collect())
}

/// Could `bytes` (a stored history) hold a theater message? A cheap test that
/// lets a save skip parsing the stored history when it cannot.
pub fn may_hold_theater(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.contains(THEATER_SOURCE),
        Err(_) => true,
    }
}

/// The merge refused the save (`RECENT_FILE_THEATER_READONLY`).
#[derive(Debug, PartialEq, Eq)]
pub struct TheaterReadonly;

/// Build the new history from the current snapshot and the posted entries.
/// Without theater messages in the snapshot the posted entries are the history.
/// Otherwise every theater message is kept verbatim at its position relative
/// to the ordinary messages it was between.
pub fn merge<'a>(
    snapshot: &'a [Stored<'a>],
    posted: &'a [ChatEntry],
) -> Result<Vec<Merged<'a>>, TheaterReadonly> {
    let theater: Vec<usize> = snapshot
        .iter()
        .enumerate()
        .filter(|(_, v)| v.theater)
        .map(|(i, _)| i)
        .collect();
    if theater.is_empty() {
        return Ok(posted.iter().map(Merged::New).collect());
    }
    let n = snapshot.len();
    let mut emitted = vec![false; n];
    let mut out = Vec::with_capacity(posted.len() + theater.len());
    let mut cursor = 0usize;
    let mut matched = 0usize;
    let mut unresolved = false;
    for e in posted {
        let source = match e.source_index {
            Some(i) if cursor <= i && i < n => Some(i),
            _ => (cursor..n).find(|&j| snapshot[j].kind == e.role && snapshot[j].text == e.text),
        };
        let Some(s) = source else {
            if !e.theater {
                out.push(Merged::New(e));
                unresolved = true;
            }
            continue;
        };
        cursor = s + 1;
        for &t in theater.iter().take_while(|&&t| t <= s) {
            if !emitted[t] {
                emitted[t] = true;
                out.push(Merged::Kept(snapshot[t].raw));
            }
        }
        if snapshot[s].theater {
            matched += 1;
            continue;
        }
        if e.theater {
            continue;
        }
        out.push(Merged::New(e));
    }
    for &t in &theater {
        if !emitted[t] {
            out.push(Merged::Kept(snapshot[t].raw));
        }
    }
    if unresolved && matched < theater.len() {
        return Err(TheaterReadonly);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(v: Result<Vec<Merged<'_>>, TheaterReadonly>) -> Result<Vec<Value>, TheaterReadonly> {
        v.map(|v| v.iter().map(|m| serde_json::to_value(m).unwrap()).collect())
    }

    /// Run the merge over `snap` as stored bytes.
    fn run(snap: &[Value], posted: &[ChatEntry]) -> Result<Vec<Value>, TheaterReadonly> {
        let bytes = serde_json::to_vec_pretty(snap).unwrap();
        let stored = parse_stored(&bytes).unwrap();
        values(merge(&stored, posted))
    }

    fn m(t: &str, c: &str) -> Value {
        json!({"type": t, "data": {"content": c}})
    }
    fn th(c: &str) -> Value {
        json!({"type": "system", "data": {"content": c, "metadata": {"source": THEATER_SOURCE, "story_id": "s1"}}})
    }
    fn e(role: &str, text: &str, idx: Option<usize>, theater: bool) -> ChatEntry {
        ChatEntry {
            role: role.into(),
            text: text.into(),
            source_index: idx,
            theater,
        }
    }
    fn texts(v: &[Value]) -> Vec<String> {
        v.iter().map(message_text).collect()
    }

    #[test]
    fn no_theater_writes_payload() {
        let snap = vec![m("human", "a")];
        let out = run(&snap, &[e("human", "b", None, false)]).unwrap();
        assert_eq!(texts(&out), vec!["b"]);
        assert_eq!(out[0]["data"]["type"], "human");
        assert_eq!(out[0]["data"]["additional_kwargs"], json!({}));
        assert!(out[0]["data"].get("tool_calls").is_none());
        let ai = stored_message(&e("ai", "x", None, false));
        assert_eq!(ai["data"]["tool_calls"], json!([]));
        assert_eq!(ai["data"]["invalid_tool_calls"], json!([]));
        assert!(
            ai["data"]["usage_metadata"].is_null() && ai["data"].get("usage_metadata").is_some()
        );
        assert!(ai["data"]["name"].is_null() && ai["data"].get("name").is_some());
        assert!(may_hold_theater(THEATER_SOURCE.as_bytes()));
        assert!(!may_hold_theater(b"[]"));
    }

    #[test]
    fn theater_kept_when_client_drops_it() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b")];
        let posted = [e("human", "a", None, false), e("ai", "b", None, false)];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["a", "T", "b"]);
        assert_eq!(out[1], snap[1]);
    }

    #[test]
    fn deletion_around_theater() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b"), m("human", "c")];
        let out = run(&snap, &[e("ai", "b", None, false)]).unwrap();
        assert_eq!(texts(&out), vec!["T", "b"]);
        let out = run(&snap, &[e("human", "a", None, false)]).unwrap();
        assert_eq!(texts(&out), vec!["a", "T"]);
    }

    #[test]
    fn edit_with_source_index_keeps_position() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b")];
        let posted = [
            e("human", "A!", Some(0), false),
            e("system", "edited theater", Some(1), true),
            e("ai", "B!", Some(2), false),
        ];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["A!", "T", "B!"]);
        assert_eq!(out[1], snap[1]);
    }

    #[test]
    fn edit_without_source_index_is_refused_when_theater_unmatched() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b")];
        let posted = [e("human", "A!", None, false), e("ai", "b", None, false)];
        assert_eq!(run(&snap, &posted), Err(TheaterReadonly));
        // The same edit is accepted when the client echoes the theater message.
        let posted = [
            e("human", "A!", None, false),
            e("system", "T", None, true),
            e("ai", "b", None, false),
        ];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["A!", "T", "b"]);
    }

    #[test]
    fn unmatched_theater_flagged_entry_is_dropped() {
        let snap = vec![th("T"), m("ai", "b")];
        let posted = [e("system", "fake", None, true), e("ai", "b", None, false)];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["T", "b"]);
    }

    #[test]
    fn out_of_range_source_index_falls_back_to_matching() {
        let snap = vec![m("human", "a"), th("T")];
        let out = run(&snap, &[e("human", "a", Some(99), false)]).unwrap();
        assert_eq!(texts(&out), vec!["a", "T"]);
    }
}

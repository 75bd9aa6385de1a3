//! A history's stored lines as the writers and readers other than the chat's
//! own [`super::Entry`] see them, kept beside it so the line has one owner:
//!
//! - [`PageLine`]: the original application's full message form, which the
//!   memory page's save writes for every line it sends;
//! - readers of any stored line as a value ([`kind_of`], [`text_of`],
//!   [`content_str`], [`set_content`], [`is_theater`]), for the review;
//! - [`StoredLine`] / [`parse_lines`]: a borrowed view of each line of a stored
//!   file (its exact JSON text, kind, text, theater mark), so a save reads a
//!   10,000-line history without building a tree of maps
//!   (`cargo bench --bench heavy -- recent_save`).
//!
//! Every shape written or read here is one the module docs of [`super`] name.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// `data.metadata.source` of theater memory messages.
pub const THEATER_SOURCE: &str = "theater_numeric_v2";

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
pub fn kind_of(v: &Value) -> &str {
    if let Some(t) = v.get("type").and_then(Value::as_str) {
        return t;
    }
    match v.get("role").and_then(Value::as_str) {
        Some("user") => "human",
        Some("assistant") => "ai",
        Some(r) => r,
        None => "",
    }
}

/// The text of a message (non-string contents are compared as their JSON text).
pub fn text_of(v: &Value) -> String {
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

/// A line as the memory page's save writes it, the original application's
/// full message form:
/// `{type, data: {content, additional_kwargs, response_metadata, type, name, id,
/// example}}`, plus `tool_calls`, `invalid_tool_calls`, `usage_metadata` for `ai`.
#[derive(Serialize)]
pub struct PageLine<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    data: StoredData<'a>,
}

impl<'a> PageLine<'a> {
    /// The line of a `role` (`human`, `ai`, `system`, ...) saying `text`.
    pub fn new(role: &'a str, text: &'a str) -> Self {
        let ai = role == "ai";
        PageLine {
            kind: role,
            data: StoredData {
                content: text,
                additional_kwargs: Empty {},
                response_metadata: Empty {},
                kind: role,
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

/// The text of a line when it is a string (`data.content`, else `content`).
pub fn content_str(v: &Value) -> Option<&str> {
    v.get("data")
        .and_then(|d| d.get("content"))
        .or_else(|| v.get("content"))
        .and_then(Value::as_str)
}

/// Replace the text of a line where [`content_str`] reads it.
pub fn set_content(v: &mut Value, text: String) {
    if let Some(d) = v.get_mut("data").and_then(Value::as_object_mut) {
        if d.contains_key("content") {
            d.insert("content".into(), Value::String(text));
            return;
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.insert("content".into(), Value::String(text));
    }
}

/// A stored line as a whole-history rewrite sees it: its exact JSON text, its type, its
/// text and whether it is a theater message. Parsing borrows from the file
/// bytes, so a large history is not turned into a tree of maps.
pub struct StoredLine<'a> {
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

impl<'a> StoredLine<'a> {
    fn from_raw(raw: &'a RawValue) -> StoredLine<'a> {
        let Ok(p) = serde_json::from_str::<Probe>(raw.get()) else {
            return StoredLine {
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
        StoredLine {
            raw,
            kind,
            text: raw_text(content),
            theater: theater_meta(data_meta) || theater_meta(p.metadata),
        }
    }
}

/// Parse a stored history (`None` when it is not a JSON array).
pub fn parse_lines(bytes: &[u8]) -> Option<Vec<StoredLine<'_>>> {
    let raws: Vec<&RawValue> = serde_json::from_slice(bytes).ok()?;
    Some(raws.into_iter().map(StoredLine::from_raw).collect())
}

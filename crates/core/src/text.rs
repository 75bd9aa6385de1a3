//! Small text helpers shared by every family: sizes in messages and JSON in
//! language-model replies.

use serde_json::{Map, Value};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// A byte count for people, in binary units written the way the API writes
/// its limits in messages: whole units without decimals ("500 MB", "2 GB"), one
/// decimal otherwise ("1.5 GB", "12.3 MB"), "<n> bytes" below 1 MB.
pub fn human_size(bytes: u64) -> String {
    let unit = |size: u64, name: &str| {
        if bytes.is_multiple_of(size) {
            format!("{} {name}", bytes / size)
        } else {
            format!("{:.1} {name}", bytes as f64 / size as f64)
        }
    };
    if bytes >= GIB {
        unit(GIB, "GB")
    } else if bytes >= MIB {
        unit(MIB, "MB")
    } else {
        format!("{bytes} bytes")
    }
}

/// A client-supplied name for a message: debug-quoted, at most 80 characters
/// (the rest elided with "…"), so a hostile name cannot flood a log or an answer.
pub fn shown_name(name: &str) -> String {
    if name.chars().count() > 80 {
        let head: String = name.chars().take(80).collect();
        format!("{head:?}…")
    } else {
        format!("{name:?}")
    }
}

/// The first JSON object in a model reply: the whole reply, a fenced
/// ```` ```json ```` block, or the span from the first `{` to the last `}`;
/// trailing commas are forgiven ([`crate::llm::lenient_json`]).
pub fn reply_json_object(text: &str) -> Option<Map<String, Value>> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```JSON"))
        .or_else(|| t.strip_prefix("```"))
        .unwrap_or(t);
    let t = t.trim().strip_suffix("```").unwrap_or(t).trim();
    if let Some(Value::Object(m)) = crate::llm::lenient_json(t) {
        return Some(m);
    }
    let start = t.find('{')?;
    let end = t.rfind('}')?;
    if end <= start {
        return None;
    }
    match crate::llm::lenient_json(&t[start..=end]) {
        Some(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// `text` up to the end of its last whole sentence (`.`, `!`, `?`, `…`, `。`,
/// `！`, `？`, optionally followed by a closing quote or bracket); the whole
/// text when it has no sentence end (nothing better to deliver).
pub fn whole_sentences(text: &str) -> &str {
    let t = text.trim_end();
    let mut end = None;
    let mut chars = t.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？') {
            let mut stop = i + c.len_utf8();
            while let Some(&(j, q)) = chars.peek() {
                if matches!(q, '"' | '\'' | '”' | '’' | ')' | '）' | '」' | '』') {
                    stop = j + q.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            end = Some(stop);
        }
    }
    match end {
        Some(e) => &t[..e],
        None => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_to_whole_sentences() {
        assert_eq!(whole_sentences("Hi there! How was your da"), "Hi there!");
        assert_eq!(whole_sentences("你好。今天怎么"), "你好。");
        assert_eq!(
            whole_sentences("She said \"yes.\" And then"),
            "She said \"yes.\""
        );
        assert_eq!(whole_sentences("no end at all"), "no end at all");
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(512), "512 bytes");
        assert_eq!(human_size(500 * MIB), "500 MB");
        assert_eq!(human_size(2 * GIB), "2 GB");
        assert_eq!(human_size(3 * GIB / 2), "1.5 GB");
        assert_eq!(human_size(MIB + MIB / 10), "1.1 MB");
    }

    #[test]
    fn reply_objects() {
        assert_eq!(
            reply_json_object("```json\n{\"a\":1}\n```").and_then(|m| m.get("a").cloned()),
            Some(serde_json::json!(1))
        );
        assert!(reply_json_object("sure: {\"b\":2} done").is_some());
        assert!(reply_json_object("no json here").is_none());
        assert!(reply_json_object("} {").is_none());
    }
}

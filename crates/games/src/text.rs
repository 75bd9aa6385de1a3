//! Text helpers: truncation, whitespace, SSML-like tag stripping for spoken
//! lines, HTML and query escaping, the trailing JSON of a model reply.

use serde_json::{Map, Value};

/// The first `max` characters of `s`.
pub fn truncate_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// Collapse runs of whitespace into one space and trim.
pub fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// SSML-like tag names removed from spoken and mirrored lines.
const SSML_TAGS: &[&str] = &[
    "speak",
    "p",
    "s",
    "break",
    "say-as",
    "phoneme",
    "sub",
    "prosody",
    "emphasis",
    "voice",
    "audio",
    "mark",
    "lang",
    "w",
    "token",
    "express-as",
    "effect",
];

/// Remove SSML-like tags (`<break time="1s"/>`, `</prosody>`, `<mstts:express-as ...>`,
/// case-insensitive, optionally namespaced, at most 120 characters of attributes);
/// other text, including other angle-bracket text, is kept.
pub fn strip_ssml(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '<' {
            if let Some(end) = ssml_tag_end(&chars, i) {
                i = end + 1;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// If an SSML-like tag starts at `start` (a `<`), the index of its closing `>`.
fn ssml_tag_end(chars: &[char], start: usize) -> Option<usize> {
    let mut i = start + 1;
    if chars.get(i) == Some(&'/') {
        i += 1;
    }
    let name_start = i;
    while i < chars.len()
        && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '-' | ':' | '_'))
    {
        i += 1;
    }
    if i == name_start {
        return None;
    }
    let full: String = chars[name_start..i]
        .iter()
        .collect::<String>()
        .to_ascii_lowercase();
    let local = full.rsplit(':').next().unwrap_or("");
    if !SSML_TAGS.contains(&local) {
        return None;
    }
    // Attributes: up to 120 characters without another '<', then '>'.
    let attr_start = i;
    while i < chars.len() && chars[i] != '>' {
        if chars[i] == '<' || i - attr_start > 120 {
            return None;
        }
        i += 1;
    }
    if i >= chars.len() {
        return None;
    }
    // The name must end at a boundary: whitespace, '/', or '>'.
    match chars.get(attr_start) {
        Some(c) if c.is_whitespace() || *c == '/' || *c == '>' => Some(i),
        _ => None,
    }
}

/// A spoken / mirrored line: SSML-like tags stripped, whitespace collapsed, at most `max` chars.
pub fn clean_line(raw: &str, max: usize) -> String {
    let stripped = collapse_ws(&strip_ssml(raw));
    truncate_chars(&stripped, max).trim().to_string()
}

/// Escape text for HTML element content and attribute values.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Percent-encode a query parameter value.
pub fn query_escape(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Split a model reply into its visible line and a trailing JSON object (if any).
pub fn split_trailing_json(text: &str) -> (String, Option<Map<String, Value>>) {
    let t = text.trim().to_string();
    // A trailing fenced block.
    if t.ends_with("```") {
        if let Some(open) = t[..t.len() - 3].rfind("```") {
            let inner = t[open + 3..t.len() - 3]
                .trim_start_matches("json")
                .trim()
                .to_string();
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&inner) {
                return (t[..open].trim().to_string(), Some(m));
            }
        }
    }
    if !t.ends_with('}') {
        return (t, None);
    }
    let limit = t.len().saturating_sub(4000);
    for (pos, _) in t.char_indices().filter(|(_, c)| *c == '{') {
        if pos < limit {
            continue;
        }
        if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&t[pos..]) {
            return (t[..pos].trim().to_string(), Some(m));
        }
    }
    (t, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssml_stripped() {
        assert_eq!(
            strip_ssml("<speak>Hi <break time=\"1s\"/>there</speak>"),
            "Hi there"
        );
        assert_eq!(
            strip_ssml("<mstts:express-as style='x'>ok</mstts:express-as>"),
            "ok"
        );
        assert_eq!(strip_ssml("a < b and <b>bold</b>"), "a < b and <b>bold</b>");
        assert_eq!(strip_ssml("<PROSODY rate=\"slow\">x</Prosody>"), "x");
        assert_eq!(strip_ssml("<speaker>x"), "<speaker>x");
    }

    #[test]
    fn trailing_json() {
        let (l, c) = split_trailing_json("Nice shot! {\"mood\": \"happy\"}");
        assert_eq!(l, "Nice shot!");
        assert_eq!(c.unwrap()["mood"], "happy");
        let (l, c) = split_trailing_json("Just text");
        assert_eq!(l, "Just text");
        assert!(c.is_none());
        let (l, c) = split_trailing_json("Hey\n```json\n{\"a\":{\"b\":1}}\n```");
        assert_eq!(l, "Hey");
        assert_eq!(c.unwrap()["a"]["b"], 1);
    }

    #[test]
    fn html() {
        assert_eq!(
            html_escape("<script>&\"'"),
            "&lt;script&gt;&amp;&quot;&#39;"
        );
    }
}

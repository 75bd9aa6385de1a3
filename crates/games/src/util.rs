//! Small helpers shared by the games and onboarding modules: lenient body
//! parsing, field readers, text cleaning (SSML-like tags, truncation) and
//! HTML escaping. Nothing here knows about HTTP routes.

use serde_json::{Map, Value};

use crate::error::{Failure, Reason};

/// Parse a JSON request body: empty (or whitespace) is `{}`; anything that is
/// not a JSON object is `invalid_body`.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, Failure> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => {
            Err(Failure::new(Reason::InvalidBody).with("error", "the body must be a JSON object"))
        }
        Err(e) => {
            Err(Failure::new(Reason::InvalidBody).with("error", format!("invalid JSON: {e}")))
        }
    }
}

/// A trimmed string field (first of `keys` present). A present non-string,
/// non-null value is `invalid_body`. Empty after trimming counts as absent.
pub fn opt_str(body: &Map<String, Value>, keys: &[&str]) -> Result<Option<String>, Failure> {
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => {
                let t = s.trim();
                if t.is_empty() {
                    continue;
                }
                return Ok(Some(t.to_string()));
            }
            Some(Value::Number(n)) if *k == "session_id" || *k == "sessionId" => {
                return Ok(Some(n.to_string()));
            }
            Some(_) => {
                return Err(Failure::new(Reason::InvalidBody)
                    .with("error", format!("{k} must be a string")))
            }
        }
    }
    Ok(None)
}

/// A boolean option: `true`/`false`, or the strings `true|false|1|0|yes|no|on|off`.
/// Absent or null gives `default`; anything else is `invalid_body`.
pub fn opt_bool(body: &Map<String, Value>, keys: &[&str], default: bool) -> Result<bool, Failure> {
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::Bool(b)) => return Ok(*b),
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => return Ok(true),
                "false" | "0" | "no" | "off" => return Ok(false),
                _ => {}
            },
            Some(Value::Number(n)) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
                return Ok(n.as_i64() == Some(1))
            }
            Some(_) => {}
        }
        return Err(
            Failure::new(Reason::InvalidBody).with("error", format!("{k} must be a boolean"))
        );
    }
    Ok(default)
}

/// Largest integer a JavaScript client represents exactly (2^53 - 1).
pub const MAX_SAFE_INT: i64 = (1 << 53) - 1;

/// An integer field (first of `keys`): a JSON integer or a string holding one,
/// within `min..=max`. Absent or null is `None`; anything else — a fraction,
/// NaN, a value outside the range (2^64, 1e308, -1 when `min` is 0), an
/// object — is `invalid_body` naming the field and its range. No conversion
/// happens before the check.
pub fn opt_int(
    body: &Map<String, Value>,
    keys: &[&str],
    min: i64,
    max: i64,
) -> Result<Option<i64>, Failure> {
    for k in keys {
        let bad = || {
            Failure::new(Reason::InvalidBody).with(
                "error",
                format!("{k} must be an integer from {min} to {max}"),
            )
        };
        let n = match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
            Some(_) => None,
        };
        return match n {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(bad()),
        };
    }
    Ok(None)
}

/// An object field (first of `keys`); a present non-object is `invalid_body`.
pub fn opt_object(
    body: &Map<String, Value>,
    keys: &[&str],
) -> Result<Option<Map<String, Value>>, Failure> {
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(m)) => return Ok(Some(m.clone())),
            Some(_) => {
                return Err(Failure::new(Reason::InvalidBody)
                    .with("error", format!("{k} must be an object")))
            }
        }
    }
    Ok(None)
}

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

/// Parse a raw query string into key → value (last wins).
pub fn parse_query(raw: Option<&str>) -> std::collections::HashMap<String, String> {
    url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Normalise the `{game_type}` path segment: trimmed, lower-cased, 1..=64 characters of
/// `[a-z0-9_-]`.
pub fn game_type(raw: &str) -> Result<String, Failure> {
    let g = raw.trim().to_ascii_lowercase();
    if g.is_empty()
        || g.len() > 64
        || !g
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(
            Failure::new(Reason::InvalidGameType).with("game_type", truncate_chars(raw, 64))
        );
    }
    Ok(g)
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

//! The bytes of a saved history: exactly what the history's own encoder
//! ([`companiond_core::history::encode`], one compact entry per line) gives
//! for the merged entries, written faster.
//!
//! A browser save writes up to 10,000 messages of one shape
//! ([`companiond_core::history::line::PageLine`]). serde_json formats each one field by field;
//! here each role's message is formatted once by serde_json around a marker
//! content, and every message of that role is that template with its
//! content in place. A content with nothing to escape (most chat text) is
//! copied as it is; any other goes through serde_json's own string writer,
//! so the output is byte for byte serde_json's. A test pins the equality.

use std::collections::HashMap;

use companiond_core::history::line::PageLine;
use companiond_core::history::Encoder;

use crate::theater::Merged;

/// The content that marks where a template's text goes; serde_json writes it
/// as `"\u0001"`, which no other part of a template contains.
const MARK: &str = "\u{1}";
const MARK_JSON: &[u8] = br#""\u0001""#;

/// One role's message as compact JSON, split around its content.
struct Template {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Template {
    fn of(role: &str) -> serde_json::Result<Template> {
        let element = serde_json::to_vec(&PageLine::new(role, MARK))?;
        let at = element
            .windows(MARK_JSON.len())
            .position(|w| w == MARK_JSON)
            .ok_or_else(|| serde::ser::Error::custom("no content in the template"))?;
        Ok(Template {
            head: element[..at].to_vec(),
            tail: element[at + MARK_JSON.len()..].to_vec(),
        })
    }
}

/// Does `s` hold a byte that JSON strings escape (`"`, `\`, control)?
/// Written as a branch-free fold per block so it compiles to vector code.
fn needs_escape(s: &[u8]) -> bool {
    s.chunks(64).any(|block| {
        block.iter().fold(false, |any, &b| {
            any | (b < 0x20) | (b == b'"') | (b == b'\\')
        })
    })
}

/// `companiond_core::history::encode(merged)`.
pub fn encode(merged: &[Merged<'_>]) -> serde_json::Result<Vec<u8>> {
    encode_into(merged, Encoder::with_capacity(room(merged))).map(Encoder::finish)
}

/// Histories from this many entries on are encoded in two parts at once.
const PARTS_FROM: usize = 1024;

/// [`encode`] as consecutive parts (their concatenation is its bytes): a
/// long history is encoded by two threads, one half each, and the parts can
/// be written at once too ([`companiond_core::store::Staged::write_parts`]).
pub fn encode_parts(merged: &[Merged<'_>]) -> serde_json::Result<Vec<Vec<u8>>> {
    if merged.len() < PARTS_FROM {
        return encode(merged).map(|b| vec![b]);
    }
    let (head, tail) = merged.split_at(merged.len() / 2);
    let (first, second) = companiond_core::task::join(
        || encode_into(head, Encoder::with_capacity(room(head))).map(Encoder::into_part),
        || encode_into(tail, Encoder::after(room(tail))).map(Encoder::finish),
    );
    Ok(vec![first?, second?])
}

/// Room for the bytes of `merged` at once: a message's template is under 300
/// bytes.
fn room(merged: &[Merged<'_>]) -> usize {
    merged
        .iter()
        .map(|m| match m {
            Merged::Kept(raw) => raw.get().len() + 4,
            Merged::New(e) => e.text.len() + e.role.len() * 2 + 300,
        })
        .sum()
}

fn encode_into(merged: &[Merged<'_>], mut enc: Encoder) -> serde_json::Result<Encoder> {
    let mut templates: HashMap<&str, Template> = HashMap::new();
    for m in merged {
        let out = enc.next_entry();
        match m {
            Merged::Kept(raw) => out.extend_from_slice(raw.get().as_bytes()),
            Merged::New(e) => {
                let t = match templates.entry(e.role.as_str()) {
                    std::collections::hash_map::Entry::Occupied(t) => t.into_mut(),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(Template::of(&e.role)?)
                    }
                };
                out.extend_from_slice(&t.head);
                if needs_escape(e.text.as_bytes()) {
                    serde_json::to_writer(&mut *out, &e.text)?;
                } else {
                    out.push(b'"');
                    out.extend_from_slice(e.text.as_bytes());
                    out.push(b'"');
                }
                out.extend_from_slice(&t.tail);
            }
        }
    }
    Ok(enc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::theater::ChatEntry;
    use companiond_core::history;
    use serde_json::value::RawValue;

    fn entry(role: &str, text: &str) -> ChatEntry {
        ChatEntry {
            role: role.into(),
            text: text.into(),
            source_index: None,
            theater: false,
        }
    }

    #[test]
    fn same_bytes_as_the_history_encoder() {
        let texts = [
            "",
            "plain text",
            "quote \" and backslash \\ and\nnew line\ttab \u{1} \u{1f} \u{7f}",
            "猫娘 é 🙂 \u{2028}",
            &"long ".repeat(100),
        ];
        let roles = ["human", "ai", "system", "a \"strange\" role\n", "猫"];
        let kept = RawValue::from_string(
            r#"{"type": "system", "data": {"content": "kept", "metadata": {"source": "theater_numeric_v2"}}}"#
                .into(),
        )
        .unwrap();
        let entries: Vec<ChatEntry> = roles
            .iter()
            .flat_map(|r| texts.iter().map(move |t| entry(r, t)))
            .collect();
        let mut merged: Vec<Merged> = entries.iter().map(Merged::New).collect();
        merged.insert(3, Merged::Kept(&kept));
        merged.push(Merged::Kept(&kept));
        for n in [0, 1, 2, merged.len()] {
            let part = &merged[..n];
            assert_eq!(
                String::from_utf8(encode(part).unwrap()).unwrap(),
                String::from_utf8(history::encode(part).unwrap()).unwrap(),
                "{n} entries"
            );
        }
        // In parts (a long history), the same bytes.
        let many: Vec<ChatEntry> = (0..PARTS_FROM + 3)
            .map(|i| entry(roles[i % roles.len()], texts[i % texts.len()]))
            .collect();
        let mut merged: Vec<Merged> = many.iter().map(Merged::New).collect();
        merged.insert(700, Merged::Kept(&kept));
        let parts = encode_parts(&merged).unwrap();
        assert_eq!(parts.len(), 2);
        assert!(parts.concat() == history::encode(&merged).unwrap());
        let only_kept = [Merged::Kept(&kept)];
        assert_eq!(
            encode(&only_kept).unwrap(),
            history::encode(&only_kept).unwrap()
        );
    }

    #[test]
    fn escape_test() {
        assert!(!needs_escape(b""));
        assert!(!needs_escape("plain 猫 \u{7f}".repeat(40).as_bytes()));
        for b in [b'"', b'\\', b'\n', 0, 0x1f] {
            let mut s = vec![b'x'; 200];
            s[130] = b;
            assert!(needs_escape(&s), "{b}");
        }
    }
}

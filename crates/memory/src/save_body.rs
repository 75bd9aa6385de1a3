//! Reading the body of `POST /api/memory/recent_file/save` in one pass.
//!
//! A save carries up to 10,000 chat entries (megabytes of JSON). Parsing it
//! into a `serde_json::Value` builds a map per entry and copies every key;
//! here serde's visitors keep only the fields the save reads (`filename`,
//! `chat`, `fingerprint`, `identity_token`; per entry `role`, `text`,
//! `source_index`, `theater`) and skip everything else without building it.
//! The result keeps each field's JSON value and its absence, so
//! [`crate::recent`] validates exactly as it would over the parsed tree: a
//! value of the wrong shape is reported by that validation, never here. As in
//! a JSON object parsed into a map, the last of repeated keys counts.
//!
//! A large body is read by two threads at once ([`parse`]): one reads it up to
//! an entry boundary near its middle, the other from there on, each as a
//! JSON document of its own, and the two halves' fields are joined. Why this
//! is the same as one pass, and when it falls back to one pass, is told at
//! [`split_parse`].

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The body of `POST /api/memory/recent_file/save`; other fields are skipped.
// The parser ([`parse`]) and the OpenAPI schema at once: each field keeps its
// JSON value or its absence (`None`), and `value_type` states what
// `recent::parse_save_bytes` then requires of it, in its fixed order (JSON,
// filename, chat, token types → 400; missing tokens → 409).
#[derive(Debug, Default, PartialEq, utoipa::ToSchema)]
#[schema(as = SaveBody, example = json!({"filename": "recent_Companion.json",
    "fingerprint": "3f2a…", "identity_token": "9c41…",
    "chat": [{"role": "human", "text": "hi"}, {"role": "ai", "text": "hello"}]}))]
pub struct SaveFields {
    /// Logical file name `recent_<character>.json`.
    #[schema(value_type = String, required = true, pattern = "^recent_.+\\.json$")]
    pub filename: Option<Value>,
    /// The whole new history (at most 10,000 entries, 2,097,152 text characters).
    #[schema(value_type = Vec<EntryFields>, required = true, max_items = 10000)]
    pub chat: Option<Shaped<Vec<Shaped<EntryFields>>>>,
    /// `fingerprint` of the read this edit started from.
    #[schema(value_type = String, required = true)]
    pub fingerprint: Option<Value>,
    /// `identity_token` of the read this edit started from.
    #[schema(value_type = String, required = true)]
    pub identity_token: Option<Value>,
    /// How many `chat` keys the object has, and whether `chat` was its last
    /// key (what [`split_parse`] checks of its halves).
    #[schema(ignore)]
    chat_keys: usize,
    #[schema(ignore)]
    ends_in_chat: bool,
}

/// One chat entry of a save; other fields are skipped.
#[derive(Debug, Default, PartialEq, utoipa::ToSchema)]
#[schema(as = SaveEntry)]
pub struct EntryFields {
    /// `human`, `ai`, `system`, ... (non-empty).
    #[schema(value_type = String, required = true, min_length = 1)]
    pub role: Option<Scalar>,
    /// At most 32,768 characters; absent or null = empty.
    #[schema(value_type = Option<String>, max_length = 32768)]
    pub text: Option<Scalar>,
    /// Position of a read-only theater message in the read (keeps its place).
    #[schema(value_type = Option<u64>)]
    pub source_index: Option<Scalar>,
    /// A theater memory message (read-only).
    #[schema(value_type = Option<bool>)]
    pub theater: Option<Scalar>,
}

/// An entry field's value as the save reads it: a string, an unsigned
/// integer, a boolean, null, or anything else (skipped). A quarter of the
/// size of a `Value`, so 10,000 entries stay one small allocation.
#[derive(Debug, PartialEq)]
pub enum Scalar {
    Str(String),
    U64(u64),
    Bool(bool),
    Null,
    Other,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(b))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(u64::try_from(v).map_or(Scalar::Other, Scalar::U64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::U64(v))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(s))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar, A::Error> {
                drain_seq::<A, ()>(seq).map(|_| Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar, A::Error> {
                drain_map::<A, ()>(map).map(|_| Scalar::Other)
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}

/// A JSON value read as `T` when it has `T`'s shape (an object for the field
/// structs, an array for lists), or `Other` for any other value (skipped).
#[derive(Debug, PartialEq)]
pub enum Shaped<T> {
    Is(T),
    Other,
}

/// Bodies from this size on are read by two threads ([`split_parse`]).
const SPLIT_FROM: usize = 256 * 1024;

/// Parse a save body. `Ok(Shaped::Other)` when the body is JSON but not an
/// object; `Err` only when it is not JSON at all.
pub fn parse(bytes: &[u8]) -> Result<Shaped<SaveFields>, serde_json::Error> {
    parse_from(bytes, SPLIT_FROM)
}

fn parse_from(bytes: &[u8], split_from: usize) -> Result<Shaped<SaveFields>, serde_json::Error> {
    if bytes.len() >= split_from {
        if let Some(fields) = split_parse(bytes) {
            return Ok(Shaped::Is(fields));
        }
    }
    serde_json::from_slice(bytes)
}

/// Read a body in two halves at once, or `None` (then one pass reads it, and
/// reports any error as it would).
///
/// The cut is the first `},{` after the middle (within [`SPLIT_WITHIN`]
/// bytes): the comma `p` there may sit
/// between two entries of `chat`. The first half is `body[..p]` followed by
/// `]}`, the second `{"chat":[` followed by `body[p+1..]`.
///
/// Parsing is a walk from the start whose state at each byte does not depend
/// on what follows, so the first half parses as an object whose last key is
/// `chat` only if, at `p`, the walk of the whole body is inside the top-level
/// object, inside the array of its last key `chat`, right after an element —
/// a cut inside a string, a nested value or any other key's array leaves the
/// appended `]}` unable to close the document, or closes it at another key.
/// After that comma the whole walk expects the next element of that array,
/// which is where the second half's walk stands after its `{"chat":[`; from
/// there both read the same bytes. So the entries are the first half's
/// followed by the second half's, and each other field is the second half's
/// when it has it (the later key counts), else the first half's. A second
/// half with a `chat` key of its own (a repeated key) falls back, as does any
/// error.
fn split_parse(bytes: &[u8]) -> Option<SaveFields> {
    let mid = bytes.len() / 2;
    // An entry is at most 32,768 characters (some 200 KB escaped): a body
    // without a cut this close to its middle is read in one pass.
    let near = bytes.get(mid..)?;
    let near = near.get(..SPLIT_WITHIN).unwrap_or(near);
    let p = mid + memchr::memmem::find(near, b"},{")? + 1;
    parse_halves(bytes, p)
}

/// How far after the middle [`split_parse`] looks for its cut.
const SPLIT_WITHIN: usize = 256 * 1024;

/// [`split_parse`] cut at the comma `p`.
fn parse_halves(bytes: &[u8], p: usize) -> Option<SaveFields> {
    let (head, tail) = (bytes.get(..p)?, bytes.get(p + 1..)?);
    let half = |prefix: &[u8], part: &[u8], suffix: &[u8]| {
        let mut buf = Vec::with_capacity(prefix.len() + part.len() + suffix.len());
        buf.extend_from_slice(prefix);
        buf.extend_from_slice(part);
        buf.extend_from_slice(suffix);
        serde_json::from_slice::<Shaped<SaveFields>>(&buf).ok()
    };
    let (first, second) = companiond_core::task::join(
        || half(b"", head, b"]}"),
        || half(br#"{"chat":["#, tail, b""),
    );
    let (Shaped::Is(first), Shaped::Is(second)) = (first?, second?) else {
        return None;
    };
    if !first.ends_in_chat || second.chat_keys != 1 {
        return None;
    }
    let (Some(Shaped::Is(mut chat)), Some(Shaped::Is(rest))) = (first.chat, second.chat) else {
        return None;
    };
    chat.extend(rest);
    Some(SaveFields {
        filename: second.filename.or(first.filename),
        chat: Some(Shaped::Is(chat)),
        fingerprint: second.fingerprint.or(first.fingerprint),
        identity_token: second.identity_token.or(first.identity_token),
        chat_keys: first.chat_keys,
        ends_in_chat: second.ends_in_chat,
    })
}

/// Read the fields of an object whose keys this type knows.
trait FromObject: Sized + Default {
    fn field<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// `FromObject` for a struct of `Option` fields, each read from the key of
/// the same name; other keys are skipped.
macro_rules! read_fields {
    ($ty:ty { $($field:ident),* }) => {
        impl FromObject for $ty {
            fn field<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
                match key {
                    $(stringify!($field) => self.$field = Some(map.next_value()?),)*
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(())
            }
        }
    };
}

impl FromObject for SaveFields {
    fn field<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        self.ends_in_chat = key == "chat";
        match key {
            "filename" => self.filename = Some(map.next_value()?),
            "chat" => {
                self.chat_keys += 1;
                self.chat = Some(map.next_value()?);
            }
            "fingerprint" => self.fingerprint = Some(map.next_value()?),
            "identity_token" => self.identity_token = Some(map.next_value()?),
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}
read_fields!(EntryFields {
    role,
    text,
    source_index,
    theater
});

/// What a [`Shaped`] visitor does with the value of the expected shape.
trait Shape<'de>: Sized {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Shaped<Self>, A::Error> {
        drain_map(map)
    }
    fn seq<A: SeqAccess<'de>>(seq: A) -> Result<Shaped<Self>, A::Error> {
        drain_seq(seq)
    }
}

fn drain_map<'de, A: MapAccess<'de>, T>(mut map: A) -> Result<Shaped<T>, A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(Shaped::Other)
}

fn drain_seq<'de, A: SeqAccess<'de>, T>(mut seq: A) -> Result<Shaped<T>, A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(Shaped::Other)
}

impl<'de, T: FromObject> Shape<'de> for T {
    fn map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<T>, A::Error> {
        let mut out = T::default();
        while let Some(key) = map.next_key::<Key>()? {
            out.field(key.as_str(), &mut map)?;
        }
        Ok(Shaped::Is(out))
    }
}

impl<'de, T> Shape<'de> for Vec<Shaped<T>>
where
    Shaped<T>: Deserialize<'de>,
{
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Shaped<Self>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(16_384));
        while let Some(item) = seq.next_element()? {
            out.push(item);
        }
        Ok(Shaped::Is(out))
    }
}

/// An object key, read without allocating: the keys a save reads are short,
/// and a longer one reads as the empty key (which nothing reads).
struct Key {
    len: usize,
    bytes: [u8; 16],
}

impl Key {
    fn as_str(&self) -> &str {
        self.bytes
            .get(..self.len)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E>(self, s: &str) -> Result<Key, E> {
                let mut key = Key {
                    len: 0,
                    bytes: [0; 16],
                };
                if let Some(slot) = key.bytes.get_mut(..s.len()) {
                    slot.copy_from_slice(s.as_bytes());
                    key.len = s.len();
                }
                Ok(key)
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

struct ShapedVisitor<T>(PhantomData<T>);

impl<'de, T: Shape<'de>> Visitor<'de> for ShapedVisitor<T> {
    type Value = Shaped<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Shaped<T>, E> {
        Ok(Shaped::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Shaped<T>, E> {
        Ok(Shaped::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Shaped<T>, E> {
        Ok(Shaped::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Shaped<T>, E> {
        Ok(Shaped::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Shaped<T>, E> {
        Ok(Shaped::Other)
    }
    fn visit_unit<E>(self) -> Result<Shaped<T>, E> {
        Ok(Shaped::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Shaped<T>, A::Error> {
        T::seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Shaped<T>, A::Error> {
        T::map(map)
    }
}

impl<'de> Deserialize<'de> for Shaped<SaveFields> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapedVisitor::<SaveFields>(PhantomData))
    }
}

impl<'de> Deserialize<'de> for Shaped<EntryFields> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapedVisitor::<EntryFields>(PhantomData))
    }
}

impl<'de> Deserialize<'de> for Shaped<Vec<Shaped<EntryFields>>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapedVisitor::<Vec<Shaped<EntryFields>>>(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_read_fields_and_their_absence() {
        let body = br#"{"x": {"deep": [1, {"a": 2}]}, "filename": "recent_a.json",
            "a_key_longer_than_sixteen_bytes": 1,
            "chat": [{"role": "ai", "text": "t\n\"q\"", "extra": [1], "source_index": 3},
                     "not an object", {"theater": true, "role": null}],
            "fingerprint": null, "filename": "recent_b.json", "fil\u0065name": "recent_c.json"}"#;
        let Shaped::Is(f) = parse(body).unwrap() else {
            panic!("an object")
        };
        // The last of repeated keys counts, as in a parsed map (keys compare
        // unescaped).
        assert_eq!(f.filename, Some(json!("recent_c.json")));
        assert_eq!(f.fingerprint, Some(Value::Null));
        assert_eq!(f.identity_token, None);
        let Some(Shaped::Is(chat)) = f.chat else {
            panic!("an array")
        };
        assert_eq!(chat.len(), 3);
        let Shaped::Is(e) = &chat[0] else {
            panic!("an object")
        };
        assert_eq!(e.role, Some(Scalar::Str("ai".into())));
        assert_eq!(e.text, Some(Scalar::Str("t\n\"q\"".into())));
        assert_eq!(e.source_index, Some(Scalar::U64(3)));
        assert_eq!(e.theater, None);
        assert!(matches!(chat[1], Shaped::Other));
        let Shaped::Is(e) = &chat[2] else {
            panic!("an object")
        };
        assert_eq!(
            (&e.role, &e.theater),
            (&Some(Scalar::Null), &Some(Scalar::Bool(true)))
        );
    }

    /// Every cut at a `},{` reads a body as one pass does, or falls back:
    /// cuts between entries, inside texts, inside nested values, inside other
    /// keys' arrays, with repeated and escaped keys, and with errors after
    /// the cut.
    #[test]
    fn halves_read_what_one_pass_reads() {
        let entries: Vec<Value> = (0..12)
            .map(|i| match i % 4 {
                0 => json!({"role": "human", "text": format!("t{i} }},{{ not a cut")}),
                1 => json!({"role": "ai", "text": "x", "extra": [{"a": 1}, {"b": [{}, {}]}]}),
                2 => json!({"source_index": i, "theater": true, "role": "ai"}),
                _ => json!({"role": "human", "text": "\\\"},{\""}),
            })
            .collect();
        let mut bodies: Vec<String> = vec![
            json!({"filename": "recent_a.json", "chat": entries, "fingerprint": "f",
                   "identity_token": "i"})
            .to_string(),
            json!({"x": [{}, {"y": [{}, {}]}], "chat": entries, "z": [{}, {}],
                   "fingerprint": "f"})
            .to_string(),
            json!({"chat": entries}).to_string(),
            format!(
                r#"{{"chat": [{{}},{{}}], "ch\u0061t": {}, "filename": "b"}}"#,
                json!(entries)
            ),
            format!(
                r#"{{"chat": {}, "chat": [{{"role": "ai"}},{{}}]}}"#,
                json!(entries)
            ),
            format!(r#"{{"filename": 1, "chat": {}}} x"#, json!(entries)),
            format!(r#"[{{}},{{}}]"#),
        ];
        let broken = json!({"chat": entries, "filename": "a"}).to_string();
        bodies.push(broken.replacen(r#""filename""#, r#""filename"#, 1));
        bodies.push(format!(
            r#"{{"chat": {}, "fingerprint": [{{}},{{}}]}}"#,
            json!(entries)
        ));
        let mut used = 0;
        for body in &bodies {
            let b = body.as_bytes();
            let one: Result<Shaped<SaveFields>, _> = serde_json::from_slice(b);
            for p in 1..b.len().saturating_sub(1) {
                if &b[p - 1..p + 2] != b"},{" {
                    continue;
                }
                if let Some(two) = parse_halves(b, p) {
                    used += 1;
                    match &one {
                        Ok(Shaped::Is(one)) => assert_eq!(&two, one, "{body} cut at {p}"),
                        _ => panic!("{body}: cut at {p} read what one pass rejects"),
                    }
                }
            }
            let whole = parse_from(b, 0);
            match (&one, &whole) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!("{body}: {one:?} / {whole:?}"),
            }
        }
        assert!(used >= 11 * 3, "the cuts between entries are used ({used})");
    }

    #[test]
    fn other_shapes_and_bad_json() {
        for body in [&b"[1, {}]"[..], b"\"s\"", b"1", b"-1.5", b"true", b"null"] {
            assert!(matches!(parse(body).unwrap(), Shaped::Other), "{body:?}");
        }
        let Shaped::Is(f) = parse(br#"{"chat": {"role": "ai"}}"#).unwrap() else {
            panic!("an object")
        };
        assert!(matches!(f.chat, Some(Shaped::Other)));
        for bad in [&b""[..], b"{", b"{\"chat\": [}", b"[1,]", b"{} x"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}

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

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The fields of a save body that the save reads (`None` = absent).
#[derive(Debug, Default)]
pub struct SaveFields {
    pub filename: Option<Value>,
    pub chat: Option<Shaped<Vec<Shaped<EntryFields>>>>,
    pub fingerprint: Option<Value>,
    pub identity_token: Option<Value>,
}

/// The fields of one chat entry that the save reads (`None` = absent).
#[derive(Debug, Default)]
pub struct EntryFields {
    pub role: Option<Scalar>,
    pub text: Option<Scalar>,
    pub source_index: Option<Scalar>,
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
#[derive(Debug)]
pub enum Shaped<T> {
    Is(T),
    Other,
}

/// Parse a save body. `Ok(Shaped::Other)` when the body is JSON but not an
/// object; `Err` only when it is not JSON at all.
pub fn parse(bytes: &[u8]) -> Result<Shaped<SaveFields>, serde_json::Error> {
    serde_json::from_slice(bytes)
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

read_fields!(SaveFields {
    filename,
    chat,
    fingerprint,
    identity_token
});
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

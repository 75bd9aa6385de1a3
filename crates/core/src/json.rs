//! JSON checked exactly as parsing it into a [`serde_json::Value`] checks it
//! (the same parser calls: string escapes, number range and nesting depth
//! alike), without building it.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Any valid JSON value, read and dropped.
pub struct AnyJson;

impl<'de> Deserialize<'de> for AnyJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AnyJson, D::Error> {
        d.deserialize_any(AnyJsonVisitor)
    }
}

struct AnyJsonVisitor;

impl<'de> Visitor<'de> for AnyJsonVisitor {
    type Value = AnyJson;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_i64<E>(self, _: i64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_u64<E>(self, _: u64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_f64<E>(self, _: f64) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_str<E>(self, _: &str) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_unit<E>(self) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_none<E>(self) -> Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<AnyJson, D::Error> {
        AnyJson::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AnyJson, A::Error> {
        while seq.next_element::<AnyJson>()?.is_some() {}
        Ok(AnyJson)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyJson, A::Error> {
        while map.next_entry::<AnyJson, AnyJson>()?.is_some() {}
        Ok(AnyJson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_value_accepts() {
        for text in [
            r#"{"a":[1,-2.5e3,true,null,"\u00e9\ud83d\ude00"],"b":{}}"#,
            "\"x\"",
            "[]",
        ] {
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_ok(),
                "{text}"
            );
            assert!(serde_json::from_str::<AnyJson>(text).is_ok(), "{text}");
        }
        for text in [r#""\ud800""#, "1e400", "[1,]", "\"a\u{1}\"", "{\"a\" 1}"] {
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_err(),
                "{text}"
            );
            assert!(serde_json::from_str::<AnyJson>(text).is_err(), "{text}");
        }
    }
}

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

    #[test]
    fn json_check_answers_as_a_full_parse() {
        let deep_ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let deep_bad = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let docs: Vec<Vec<u8>> = vec![
            br#"{"a": [1, -2, 3.5, 1e300, true, null, "x\u00e9\n"], "b": {}}"#.to_vec(),
            br#"{"a": 1, "a": 2}"#.to_vec(),
            b"".to_vec(),
            b"{broken".to_vec(),
            br#"{"a": 1} x"#.to_vec(),
            br#"[1e999]"#.to_vec(),
            br#"["\ud800"]"#.to_vec(),
            br#"["\ud800\udc00"]"#.to_vec(),
            br#"["\x"]"#.to_vec(),
            b"[\"\xff\"]".to_vec(),
            b"[\"a\x01\"]".to_vec(),
            br#"{1: 2}"#.to_vec(),
            deep_ok.into_bytes(),
            deep_bad.into_bytes(),
        ];
        for d in docs {
            let full = serde_json::from_slice::<serde_json::Value>(&d)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let check = serde_json::from_slice::<AnyJson>(&d)
                .map(|_| ())
                .map_err(|e| e.to_string());
            assert_eq!(check, full, "{}", String::from_utf8_lossy(&d));
        }
    }
}

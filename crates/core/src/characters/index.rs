//! The characters file as start-up reads it: validated by the JSON parser
//! and indexed (names, current character, where each profile lies), with no
//! profile built. See [`super::Characters`].

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::json::AnyJson;
use crate::store::StoreError;

/// The characters file with each profile left as JSON text: the file's text
/// and, per name, where its profile lies in it.
pub(super) struct IndexedDoc {
    text: Arc<[u8]>,
    pub(super) current: String,
    pub(super) characters: IndexMap<String, Range<usize>>,
}

impl IndexedDoc {
    /// Every profile parsed, in file order: the whole text in one pass (faster
    /// than profile by profile), each profile alone only if that fails.
    pub(super) fn profiles(&self) -> Map<String, Value> {
        #[derive(serde::Deserialize)]
        struct Profiles {
            characters: Map<String, Value>,
        }
        match serde_json::from_slice::<Profiles>(&self.text) {
            Ok(p) => p.characters,
            Err(_) => self
                .characters
                .iter()
                .map(|(name, span)| (name.clone(), self.profile_at(span)))
                .collect(),
        }
    }

    /// The profile at `span` (validated when indexed; one nested deeper than
    /// the parser allows reads as `null`).
    pub(super) fn profile_at(&self, span: &Range<usize>) -> Value {
        self.text
            .get(span.clone())
            .and_then(|bytes| serde_json::from_slice(bytes).ok())
            .unwrap_or(Value::Null)
    }
}

/// Read the characters file as an index; `Ok(None)` when it is missing.
pub(super) fn read_indexed(path: &Path) -> Result<Option<IndexedDoc>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => index_doc(bytes.into())
            .map(Some)
            .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Io(e)),
    }
}

/// Index the characters file: the same document the registry's
/// `CharactersDoc` reads
/// (an object with a string `current` and an object `characters`, each once;
/// other members ignored), every value validated by the JSON parser, the
/// profiles only located, not built.
fn index_doc(text: Arc<[u8]>) -> Result<IndexedDoc, String> {
    let mut scan = Scan { text: &text, at: 0 };
    let mut current = None;
    let mut characters = None;
    scan.object(|scan, key| {
        match key.as_str() {
            "current" if current.is_some() => return Err("duplicate field `current`".into()),
            "characters" if characters.is_some() => {
                return Err("duplicate field `characters`".into())
            }
            "current" => current = Some(scan.value::<String>()?),
            "characters" => {
                let mut map = IndexMap::new();
                scan.object(|scan, name| {
                    let start = scan.at;
                    scan.value::<AnyJson>()?;
                    // A repeated name keeps its first place and its last profile.
                    map.insert(name, start..scan.at);
                    Ok(())
                })?;
                characters = Some(map);
            }
            _ => {
                scan.value::<AnyJson>()?;
            }
        }
        Ok(())
    })?;
    scan.end()?;
    let current = current.ok_or("missing field `current`")?;
    let characters = characters.ok_or("missing field `characters`")?;
    Ok(IndexedDoc {
        text: text.clone(),
        current,
        characters,
    })
}

/// A cursor over JSON text: the structure of objects by hand, every value and
/// key by the JSON parser (which also tells where it ended).
struct Scan<'a> {
    text: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn skip_space(&mut self) {
        while self
            .text
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    /// The next non-space byte, consumed.
    fn next_byte(&mut self) -> Option<u8> {
        self.skip_space();
        let b = self.text.get(self.at).copied();
        self.at += 1;
        b
    }

    fn peek_byte(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    /// One JSON value of type `T` starting here.
    fn value<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, String> {
        self.skip_space();
        let rest = self.text.get(self.at..).unwrap_or_default();
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        let value = match values.next() {
            Some(Ok(v)) => v,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("EOF while parsing a value".into()),
        };
        self.at += values.byte_offset();
        Ok(value)
    }

    /// An object: `member` is called with each key, the cursor on its value.
    fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, String) -> Result<(), String>,
    ) -> Result<(), String> {
        if self.next_byte() != Some(b'{') {
            return Err(format!("expected an object at byte {}", self.at - 1));
        }
        if self.peek_byte() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            if self.peek_byte() != Some(b'"') {
                return Err(format!("expected a key at byte {}", self.at));
            }
            let key = self.value::<String>()?;
            if self.next_byte() != Some(b':') {
                return Err(format!("expected `:` at byte {}", self.at - 1));
            }
            member(self, key)?;
            match self.next_byte() {
                Some(b',') => continue,
                Some(b'}') => return Ok(()),
                _ => return Err(format!("expected `,` or `}}` at byte {}", self.at - 1)),
            }
        }
    }

    /// Nothing but space may follow the document.
    fn end(&mut self) -> Result<(), String> {
        match self.peek_byte() {
            None => Ok(()),
            Some(_) => Err(format!("trailing characters at byte {}", self.at)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry's document, parsed the plain way.
    #[derive(serde::Deserialize)]
    struct CharactersDoc {
        current: String,
        characters: Map<String, Value>,
    }

    /// The index reads exactly the documents the plain parse reads, with the
    /// same profiles in the same order, and refuses what it refuses.
    #[test]
    fn the_index_agrees_with_the_plain_parse() {
        let good = [
            r#"{"current":"A","characters":{"A":{"x":1},"B":{}}}"#,
            " \n{ \"characters\" : { \"B\" : [1, {\"y\": \"}\"}] , \"A\":null } ,\"current\":\"Z\", \"other\": {\"k\": [true]} }\r\n",
            r#"{"current":"","characters":{}}"#,
            r#"{"current":"A","characters":{"A":1,"B":"s","A":{"again":true}}}"#,
            r#"{"current":"\u00e9\"","characters":{"\u00e9\"":{"n":-1.5e3}}}"#,
        ];
        for text in good {
            let plain: CharactersDoc = serde_json::from_str(text).unwrap();
            let indexed = index_doc(text.as_bytes().into()).unwrap();
            let profiles = indexed.profiles();
            assert_eq!(indexed.current, plain.current, "{text}");
            assert_eq!(profiles, plain.characters, "{text}");
            let order: Vec<_> = profiles.keys().collect();
            let plain_order: Vec<_> = plain.characters.keys().collect();
            assert_eq!(order, plain_order, "{text}");
        }
        let bad = [
            "",
            "{\"current\": ",
            "[]",
            r#"{"characters":{}}"#,
            r#"{"current":"A"}"#,
            r#"{"current":1,"characters":{}}"#,
            r#"{"current":"A","characters":[]}"#,
            r#"{"current":"A","characters":{"A":{}},"current":"B"}"#,
            r#"{"current":"A","characters":{"A":{}}} x"#,
            r#"{"current":"A","characters":{"A":{},}}"#,
            r#"{"current":"A","characters":{"A":tru}}"#,
            r#"{"current":"A" "characters":{}}"#,
            r#"{current:"A","characters":{}}"#,
        ];
        for text in bad {
            assert!(
                serde_json::from_str::<CharactersDoc>(text).is_err(),
                "{text}"
            );
            assert!(index_doc(text.as_bytes().into()).is_err(), "{text}");
        }
    }
}

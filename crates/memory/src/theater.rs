//! The theater merge of a history save (docs/memory.md): the lines a save
//! sends, and how the read-only theater memory lines of the stored history
//! keep their places among them. The stored line itself (its forms and its
//! readers) is `companiond_core::history::line`'s.

use companiond_core::history::line::{PageLine, StoredLine, THEATER_SOURCE};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// One validated entry of a save request (unknown fields already dropped).
#[derive(Clone, Debug, PartialEq)]
pub struct ChatEntry {
    pub role: String,
    pub text: String,
    pub source_index: Option<usize>,
    pub theater: bool,
}

/// One entry of a merged history: a stored message kept verbatim (its exact
/// JSON text), or a new one.
pub enum Merged<'a> {
    Kept(&'a RawValue),
    New(&'a ChatEntry),
}

impl Serialize for Merged<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Merged::Kept(v) => v.serialize(s),
            Merged::New(e) => PageLine::new(&e.role, &e.text).serialize(s),
        }
    }
}

/// Could `bytes` (a stored history) hold a theater message? A cheap test that
/// lets a save skip parsing the stored history when it cannot.
pub fn may_hold_theater(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.contains(THEATER_SOURCE),
        Err(_) => true,
    }
}

/// The merge refused the save (`RECENT_FILE_THEATER_READONLY`).
#[derive(Debug, PartialEq, Eq)]
pub struct TheaterReadonly;

/// Build the new history from the current snapshot and the posted entries.
/// Without theater messages in the snapshot the posted entries are the history.
/// Otherwise every theater message is kept verbatim at its position relative
/// to the ordinary messages it was between.
pub fn merge<'a>(
    snapshot: &'a [StoredLine<'a>],
    posted: &'a [ChatEntry],
) -> Result<Vec<Merged<'a>>, TheaterReadonly> {
    let theater: Vec<usize> = snapshot
        .iter()
        .enumerate()
        .filter(|(_, v)| v.theater)
        .map(|(i, _)| i)
        .collect();
    if theater.is_empty() {
        return Ok(posted.iter().map(Merged::New).collect());
    }
    let n = snapshot.len();
    let mut emitted = vec![false; n];
    let mut out = Vec::with_capacity(posted.len() + theater.len());
    let mut cursor = 0usize;
    let mut matched = 0usize;
    let mut unresolved = false;
    for e in posted {
        let source = match e.source_index {
            Some(i) if cursor <= i && i < n => Some(i),
            _ => (cursor..n).find(|&j| snapshot[j].kind == e.role && snapshot[j].text == e.text),
        };
        let Some(s) = source else {
            if !e.theater {
                out.push(Merged::New(e));
                unresolved = true;
            }
            continue;
        };
        cursor = s + 1;
        for &t in theater.iter().take_while(|&&t| t <= s) {
            if !emitted[t] {
                emitted[t] = true;
                out.push(Merged::Kept(snapshot[t].raw));
            }
        }
        if snapshot[s].theater {
            matched += 1;
            continue;
        }
        if e.theater {
            continue;
        }
        out.push(Merged::New(e));
    }
    for &t in &theater {
        if !emitted[t] {
            out.push(Merged::Kept(snapshot[t].raw));
        }
    }
    if unresolved && matched < theater.len() {
        return Err(TheaterReadonly);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use companiond_core::history::line::{parse_lines, text_of};
    use serde_json::{json, Value};

    fn values(v: Result<Vec<Merged<'_>>, TheaterReadonly>) -> Result<Vec<Value>, TheaterReadonly> {
        v.map(|v| v.iter().map(|m| serde_json::to_value(m).unwrap()).collect())
    }

    /// Run the merge over `snap` as stored bytes.
    fn run(snap: &[Value], posted: &[ChatEntry]) -> Result<Vec<Value>, TheaterReadonly> {
        let bytes = serde_json::to_vec_pretty(snap).unwrap();
        let stored = parse_lines(&bytes).unwrap();
        values(merge(&stored, posted))
    }

    fn m(t: &str, c: &str) -> Value {
        json!({"type": t, "data": {"content": c}})
    }
    fn th(c: &str) -> Value {
        json!({"type": "system", "data": {"content": c, "metadata": {"source": THEATER_SOURCE, "story_id": "s1"}}})
    }
    fn e(role: &str, text: &str, idx: Option<usize>, theater: bool) -> ChatEntry {
        ChatEntry {
            role: role.into(),
            text: text.into(),
            source_index: idx,
            theater,
        }
    }
    fn texts(v: &[Value]) -> Vec<String> {
        v.iter().map(text_of).collect()
    }

    #[test]
    fn no_theater_writes_payload() {
        let snap = vec![m("human", "a")];
        let out = run(&snap, &[e("human", "b", None, false)]).unwrap();
        assert_eq!(texts(&out), vec!["b"]);
        assert_eq!(out[0]["data"]["type"], "human");
        assert_eq!(out[0]["data"]["additional_kwargs"], json!({}));
        assert!(out[0]["data"].get("tool_calls").is_none());
        let ai = serde_json::to_value(PageLine::new("ai", "x")).unwrap();
        assert_eq!(ai["data"]["tool_calls"], json!([]));
        assert_eq!(ai["data"]["invalid_tool_calls"], json!([]));
        assert!(
            ai["data"]["usage_metadata"].is_null() && ai["data"].get("usage_metadata").is_some()
        );
        assert!(ai["data"]["name"].is_null() && ai["data"].get("name").is_some());
        assert!(may_hold_theater(THEATER_SOURCE.as_bytes()));
        assert!(!may_hold_theater(b"[]"));
    }

    #[test]
    fn theater_kept_when_client_drops_it() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b")];
        let posted = [e("human", "a", None, false), e("ai", "b", None, false)];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["a", "T", "b"]);
        assert_eq!(out[1], snap[1]);
    }

    #[test]
    fn deletion_around_theater() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b"), m("human", "c")];
        let out = run(&snap, &[e("ai", "b", None, false)]).unwrap();
        assert_eq!(texts(&out), vec!["T", "b"]);
        let out = run(&snap, &[e("human", "a", None, false)]).unwrap();
        assert_eq!(texts(&out), vec!["a", "T"]);
    }

    #[test]
    fn edit_with_source_index_keeps_position() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b")];
        let posted = [
            e("human", "A!", Some(0), false),
            e("system", "edited theater", Some(1), true),
            e("ai", "B!", Some(2), false),
        ];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["A!", "T", "B!"]);
        assert_eq!(out[1], snap[1]);
    }

    #[test]
    fn edit_without_source_index_is_refused_when_theater_unmatched() {
        let snap = vec![m("human", "a"), th("T"), m("ai", "b")];
        let posted = [e("human", "A!", None, false), e("ai", "b", None, false)];
        assert_eq!(run(&snap, &posted), Err(TheaterReadonly));
        // The same edit is accepted when the client echoes the theater message.
        let posted = [
            e("human", "A!", None, false),
            e("system", "T", None, true),
            e("ai", "b", None, false),
        ];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["A!", "T", "b"]);
    }

    #[test]
    fn unmatched_theater_flagged_entry_is_dropped() {
        let snap = vec![th("T"), m("ai", "b")];
        let posted = [e("system", "fake", None, true), e("ai", "b", None, false)];
        let out = run(&snap, &posted).unwrap();
        assert_eq!(texts(&out), vec!["T", "b"]);
    }

    #[test]
    fn out_of_range_source_index_falls_back_to_matching() {
        let snap = vec![m("human", "a"), th("T")];
        let out = run(&snap, &[e("human", "a", Some(99), false)]).unwrap();
        assert_eq!(texts(&out), vec!["a", "T"]);
    }
}

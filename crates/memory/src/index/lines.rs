//! The history lines: `memory_lines` follows `recent.json` (an append is
//! read from the last indexed element on, any other change by a multiset
//! diff), and what the extraction has not read yet.

use companiond_core::history::line::PageLine;
use std::collections::HashMap;
use std::path::Path;

use rusqlite::{params, Connection};
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::stores;
use crate::timefmt;
use crate::unit;

use super::{
    cursor, db_err, fts_body, meta_get, meta_set, META_LINES_DIGEST, META_LINES_N, META_LINES_TAIL,
};

pub(crate) fn line_ref(speaker: &str, text: &str) -> String {
    stores::content_hash(&format!("{speaker}\n{text}"))
}

/// One line of the history as indexed.
#[derive(Clone, Debug)]
pub struct Line {
    pub id: i64,
    pub speaker: String,
    pub text: String,
    pub ts: i64,
}

/// The bytes of `recent.json` (empty when it does not exist).
pub(crate) fn read_history(path: &Path) -> Result<Vec<u8>, String> {
    match std::fs::read(path) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("cannot read the history: {e}")),
    }
}

/// The text lines of stored history elements: `(speaker, text)`.
pub(crate) fn lines_of(raws: &[&RawValue]) -> Vec<(String, String)> {
    raws.iter()
        .filter_map(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .filter_map(|v| companiond_core::history::Entry::parse(&v))
        .map(|e| {
            let speaker = match e.speaker {
                companiond_core::history::Speaker::Human => "human",
                companiond_core::history::Speaker::Ai => "ai",
                companiond_core::history::Speaker::System => "system",
            };
            (speaker.to_string(), e.text().to_string())
        })
        .filter(|(_, t)| !t.trim().is_empty())
        .collect()
}

/// Text lines read from history bytes, `(speaker, text)`, and where the last
/// element read ends (`None`: no element).
type ReadLines = (Vec<(String, String)>, Option<usize>);

/// Where `raw` (a slice of `buf`) ends in `buf`.
pub(crate) fn end_in(buf: &[u8], raw: &RawValue) -> usize {
    raw.get().as_ptr() as usize - buf.as_ptr() as usize + raw.get().len()
}

/// The text lines of a history file's bytes (`(speaker, text)`), and where its
/// last element ends (`None` for an empty array or no file).
fn history_lines(bytes: &[u8]) -> Result<ReadLines, String> {
    if bytes.is_empty() {
        return Ok((Vec::new(), None));
    }
    let raws: Vec<&RawValue> = serde_json::from_slice(bytes)
        .map_err(|e| format!("the history is not a JSON array: {e}"))?;
    let end = raws.last().map(|last| end_in(bytes, last));
    Ok((lines_of(&raws), end))
}

/// The history as far as the index has read it: the end of the last element
/// indexed and a CRC-32 of the bytes before it. When a history's bytes up to
/// `end` are still those, it was only appended to (the chat's append keeps the
/// stored bytes: `companiond_core::history`), and the next sync reads only
/// what follows. A CRC-32 is enough here: a collision would only leave a
/// stale search index until the next full sync, never lose data.
#[derive(Debug, PartialEq)]
struct Tail {
    end: usize,
    crc: u32,
}

impl Tail {
    fn of(bytes: &[u8], end: usize) -> Option<Tail> {
        bytes.get(..end).map(|b| Tail {
            end,
            crc: crc32fast::hash(b),
        })
    }

    fn parse(s: &str) -> Option<Tail> {
        let (end, crc) = s.split_once(':')?;
        Some(Tail {
            end: end.parse().ok()?,
            crc: crc.parse().ok()?,
        })
    }

    fn text(&self) -> String {
        format!("{}:{}", self.end, self.crc)
    }

    /// The lines after the indexed ones and the new end, when `bytes` only
    /// grew since (`Some((vec![], None))`: nothing new); `None` when the file
    /// changed otherwise.
    fn appended(&self, bytes: &[u8]) -> Option<ReadLines> {
        if crc32fast::hash(bytes.get(..self.end)?) != self.crc {
            return None;
        }
        let rest = &bytes[self.end..];
        let after = rest.trim_ascii_start();
        match after.first()? {
            b']' if after[1..].trim_ascii().is_empty() => Some((Vec::new(), None)),
            b',' => {
                // `[` + what follows the comma: the new elements as an array.
                let comma = self.end + (rest.len() - after.len());
                let mut buf = Vec::with_capacity(bytes.len() - comma);
                buf.push(b'[');
                buf.extend_from_slice(&bytes[comma + 1..]);
                let raws: Vec<&RawValue> = serde_json::from_slice(&buf).ok()?;
                let last = raws.last()?;
                let end = comma + end_in(&buf, last);
                Some((lines_of(&raws), Some(end)))
            }
            _ => None,
        }
    }
}

/// How many history lines the index holds (`lines_n`).
fn indexed_lines(conn: &Connection) -> Result<usize, String> {
    Ok(meta_get(conn, META_LINES_N)?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// Index the lines appended since the last sync, when the history only grew
/// (see [`Tail`]); `None` when a full sync is needed.
fn sync_appended(
    conn: &mut Connection,
    bytes: &[u8],
    now: i64,
) -> Result<Option<LineSync>, String> {
    let Some(tail) = meta_get(conn, META_LINES_TAIL)?.and_then(|t| Tail::parse(&t)) else {
        return Ok(None);
    };
    let Some((lines, end)) = tail.appended(bytes) else {
        return Ok(None);
    };
    let Some(end) = end else {
        return Ok(Some(LineSync::default()));
    };
    let old_n = indexed_lines(conn)?;
    let tx = conn.transaction().map_err(db_err)?;
    for (speaker, text) in &lines {
        insert_line(&tx, speaker, text, now)?;
    }
    meta_set(&tx, META_LINES_N, &(old_n + lines.len()).to_string())?;
    // The digest of every line is not recomputed from a tail: without it, the
    // next full sync (after a rewrite of the file) diffs line by line.
    tx.execute(
        "DELETE FROM memory_meta WHERE key = ?1",
        [META_LINES_DIGEST],
    )
    .map_err(db_err)?;
    if let Some(t) = Tail::of(bytes, end) {
        meta_set(&tx, META_LINES_TAIL, &t.text())?;
    }
    tx.commit().map_err(db_err)?;
    Ok(Some(LineSync {
        added: lines.len(),
        removed: 0,
    }))
}

fn digest(refs: &[String]) -> String {
    let mut h = Sha256::new();
    for r in refs {
        h.update(r.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Index one history line seen at `ts` (also appended to the original's
/// `time_indexed_original`); its row id. Callers batch these in a transaction.
pub fn insert_line(conn: &Connection, speaker: &str, text: &str, ts: i64) -> Result<i64, String> {
    insert_line_ref(conn, &line_ref(speaker, text), speaker, text, ts)
}

pub(crate) fn insert_line_ref(
    conn: &Connection,
    r: &str,
    speaker: &str,
    text: &str,
    ts: i64,
) -> Result<i64, String> {
    conn.execute(
        "INSERT INTO memory_lines(ref, speaker, text, ts) VALUES (?1, ?2, ?3, ?4)",
        params![r, speaker, text, ts],
    )
    .map_err(db_err)?;
    let id = conn.last_insert_rowid();
    conn.execute(
        "INSERT INTO memory_lines_fts(rowid, body) VALUES (?1, ?2)",
        params![id, fts_body(text)],
    )
    .map_err(db_err)?;
    // The original's time index, in its shape (a langchain message per row).
    let message =
        serde_json::to_string(&PageLine::new(speaker, text)).map_err(|e| e.to_string())?;
    conn.execute(
        "INSERT INTO time_indexed_original(session_id, message, timestamp) VALUES (?1, ?2, ?3)",
        params![
            format!("companiond-{}", timefmt::date(ts)),
            message,
            timefmt::iso(ts).replace('T', " ")
        ],
    )
    .map_err(db_err)?;
    Ok(id)
}

fn delete_line(conn: &Connection, id: i64) -> Result<(), String> {
    conn.execute("DELETE FROM memory_lines WHERE id = ?1", [id])
        .map_err(db_err)?;
    conn.execute("DELETE FROM memory_lines_fts WHERE rowid = ?1", [id])
        .map_err(db_err)?;
    Ok(())
}

/// What a line sync did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineSync {
    pub added: usize,
    pub removed: usize,
}

/// Bring the indexed lines in step with the history file of `dir`. New lines
/// get the time `now`; when the index held no line yet, the file's
/// modification time (the lines are older than this first indexing). A
/// history that was only appended to since is read from the last indexed
/// line on ([`Tail`]); any other change is diffed line by line.
pub fn sync_lines(conn: &mut Connection, dir: &Path, now: i64) -> Result<LineSync, String> {
    let path = dir.join(unit::RECENT);
    let bytes = read_history(&path)?;
    // A fold cut short (a kill between its archive commit and its file
    // write) is undone or completed first (crate::fold).
    crate::fold::settle(conn, &bytes)?;
    if let Some(done) = sync_appended(conn, &bytes, now)? {
        return Ok(done);
    }
    let (lines, end) = history_lines(&bytes)?;
    let refs: Vec<String> = lines.iter().map(|(s, t)| line_ref(s, t)).collect();
    let old_n = indexed_lines(conn)?;
    let old_digest = meta_get(conn, META_LINES_DIGEST)?;
    let new_digest = digest(&refs);
    // Nothing changed (or nothing to index yet): no write at all, so an idle
    // index file stays byte for byte what it was.
    if (old_n == refs.len() && old_digest.as_deref() == Some(new_digest.as_str()))
        || (refs.is_empty() && old_n == 0 && index_is_empty(conn)?)
    {
        return Ok(LineSync::default());
    }
    let tx = conn.transaction().map_err(db_err)?;
    let mut report = LineSync::default();
    let appended =
        old_n <= refs.len() && old_digest.as_deref() == Some(digest(&refs[..old_n]).as_str());
    if appended {
        for (i, (speaker, text)) in lines.iter().enumerate().skip(old_n) {
            insert_line_ref(&tx, &refs[i], speaker, text, now)?;
            report.added += 1;
        }
    } else {
        // Multiset diff: keep lines still present (and their times). Lines
        // folded out of the file into the archive are not the file's: they
        // stay whatever the file holds (crate::fold).
        let mut have: HashMap<String, Vec<i64>> = HashMap::new();
        {
            let mut st = tx.prepare(crate::fold::LIVE_LINES).map_err(db_err)?;
            let rows = st
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
                .map_err(db_err)?;
            for row in rows {
                let (id, r) = row.map_err(db_err)?;
                have.entry(r).or_default().push(id);
            }
        }
        let ts = if have.is_empty() {
            std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64)
                .unwrap_or(now)
        } else {
            now
        };
        let mut fresh = Vec::new();
        for (i, r) in refs.iter().enumerate() {
            match have.get_mut(r) {
                Some(ids) if !ids.is_empty() => {
                    ids.remove(0);
                }
                _ => fresh.push(i),
            }
        }
        for id in have.into_values().flatten() {
            delete_line(&tx, id)?;
            report.removed += 1;
        }
        for i in fresh {
            insert_line_ref(&tx, &refs[i], &lines[i].0, &lines[i].1, ts)?;
            report.added += 1;
        }
    }
    meta_set(&tx, META_LINES_N, &refs.len().to_string())?;
    meta_set(&tx, META_LINES_DIGEST, &new_digest)?;
    match end.and_then(|end| Tail::of(&bytes, end)) {
        Some(t) => meta_set(&tx, META_LINES_TAIL, &t.text())?,
        None => {
            tx.execute("DELETE FROM memory_meta WHERE key = ?1", [META_LINES_TAIL])
                .map_err(db_err)?;
        }
    }
    tx.commit().map_err(db_err)?;
    Ok(report)
}

fn index_is_empty(conn: &Connection) -> Result<bool, String> {
    conn.query_row("SELECT NOT EXISTS (SELECT 1 FROM memory_lines)", [], |r| {
        r.get(0)
    })
    .map_err(db_err)
}

/// Lines by the user or the character after line `after` (oldest first).
pub fn lines_after(conn: &Connection, after: i64, limit: usize) -> Result<Vec<Line>, String> {
    let mut st = conn
        .prepare(
            "SELECT id, speaker, text, ts FROM memory_lines
             WHERE id > ?1 AND speaker IN ('human', 'ai') ORDER BY id LIMIT ?2",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![after, limit as i64], |r| {
            Ok(Line {
                id: r.get(0)?,
                speaker: r.get(1)?,
                text: r.get(2)?,
                ts: r.get(3)?,
            })
        })
        .map_err(db_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
}

/// How many lines the extraction has not read yet.
pub fn pending(conn: &Connection) -> Result<usize, String> {
    let c = cursor(conn)?;
    conn.query_row(
        "SELECT count(*) FROM memory_lines WHERE id > ?1 AND speaker IN ('human', 'ai')",
        [c],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as usize)
    .map_err(db_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::testutil::{synced, tmp};
    use crate::index::*;
    use serde_json::json;

    #[test]
    fn lines_follow_the_history_and_search_works() {
        let d = tmp();
        let write = |v: Value| std::fs::write(d.join("recent.json"), v.to_string()).unwrap();
        write(json!([
            {"type": "human", "data": {"content": "My cat is called Miso"}},
            {"type": "ai", "data": {"content": "Miso is a lovely name!"}},
        ]));
        let mut c = open(&d).unwrap();
        assert_eq!(synced(&mut c, &d, 1000), (2, 0));
        assert_eq!(sync_lines(&mut c, &d, 1000).unwrap(), LineSync::default());
        write(json!([
            {"type": "human", "data": {"content": "My cat is called Miso"}},
            {"type": "ai", "data": {"content": "Miso is a lovely name!"}},
            {"type": "human", "data": {"content": "我喜欢猫"}},
        ]));
        assert_eq!(synced(&mut c, &d, 5000), (1, 0));
        let q = |t: &str| Query {
            text: t.into(),
            limit: 10,
            ..Default::default()
        };
        let hits = search_lines(&c, &q("cats called")).unwrap();
        assert_eq!(hits[0].text, "My cat is called Miso");
        assert_eq!(search_lines(&c, &q("喜欢")).unwrap()[0].ts, 5000);
        // The first indexing dates old lines by the file's modification time.
        let windowed = Query {
            until: Some(6000),
            ..q("miso")
        };
        assert!(search_lines(&c, &windowed).unwrap().is_empty());
        let windowed = Query {
            until: Some(6000),
            ..q("喜欢")
        };
        assert_eq!(search_lines(&c, &windowed).unwrap().len(), 1);
        // An edit elsewhere in the file: a diff keeps the other lines' times.
        write(json!([
            {"type": "human", "data": {"content": "My dog is called Miso"}},
            {"type": "human", "data": {"content": "我喜欢猫"}},
        ]));
        assert_eq!(synced(&mut c, &d, 9000), (1, 2));
        assert_eq!(search_lines(&c, &q("喜欢")).unwrap()[0].ts, 5000);
        assert_eq!(search_lines(&c, &q("dog")).unwrap()[0].ts, 9000);
        assert_eq!(lines_after(&c, 0, 10).unwrap().len(), 2);
        let orig: i64 = c
            .query_row("SELECT count(*) FROM time_indexed_original", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(orig, 4);
        let _ = std::fs::remove_dir_all(d);
    }

    /// A history that only grew is read from its last indexed element on; the
    /// index then holds what a full sync of the same file gives, and a rewrite
    /// of the file falls back to the line-by-line diff.
    #[test]
    fn appended_lines_are_read_from_the_tail() {
        let d = tmp();
        let write = |v: &[Value]| {
            std::fs::write(d.join("recent.json"), serde_json::to_vec_pretty(v).unwrap()).unwrap()
        };
        let m = |t: &str, c: &str| json!({"type": t, "data": {"content": c}});
        let mut hist = vec![m("human", "one"), m("ai", "two"), json!({"type": "tool"})];
        write(&hist);
        let mut c = open(&d).unwrap();
        assert_eq!(synced(&mut c, &d, 1000), (2, 0));
        let tail = |c: &Connection| meta_get(c, META_LINES_TAIL).unwrap();
        assert!(tail(&c).is_some());
        // Appends (as the chat writes them: the stored bytes are kept).
        for (i, text) in ["three", "four"].iter().enumerate() {
            hist.push(m("human", text));
            hist.push(m("ai", ""));
            write(&hist);
            assert_eq!(synced(&mut c, &d, 2000 + i as i64), (1, 0));
            assert_eq!(
                meta_get(&c, META_LINES_DIGEST).unwrap(),
                None,
                "read from the tail"
            );
        }
        assert_eq!(sync_lines(&mut c, &d, 3000).unwrap(), LineSync::default());
        let texts = |c: &Connection| -> Vec<(String, i64)> {
            lines_after(c, 0, 100)
                .unwrap()
                .into_iter()
                .map(|l| (l.text, l.ts))
                .collect()
        };
        let mut want = vec![("one".to_string(), 0), ("two".to_string(), 0)];
        want.extend([("three".to_string(), 2000), ("four".to_string(), 2001)]);
        let got = texts(&c);
        assert_eq!(
            got.iter().map(|(t, _)| t).collect::<Vec<_>>(),
            want.iter().map(|(t, _)| t).collect::<Vec<_>>()
        );
        assert_eq!((got[2].1, got[3].1), (2000, 2001));
        // A full sync of the same file finds nothing to change.
        let d2 = tmp();
        std::fs::copy(d.join("recent.json"), d2.join("recent.json")).unwrap();
        let mut fresh = open(&d2).unwrap();
        assert_eq!(synced(&mut fresh, &d2, 1000), (4, 0));
        // A rewrite (an edit of an old line) is diffed line by line and keeps
        // the other lines' times.
        hist[0] = m("human", "ONE");
        write(&hist);
        assert_eq!(synced(&mut c, &d, 4000), (1, 1));
        let got = texts(&c);
        assert!(got.contains(&("three".to_string(), 2000)), "{got:?}");
        assert!(got.contains(&("ONE".to_string(), 4000)), "{got:?}");
        assert!(meta_get(&c, META_LINES_DIGEST).unwrap().is_some());
        // Then appends are read from the tail again.
        hist.push(m("human", "five"));
        write(&hist);
        assert_eq!(synced(&mut c, &d, 5000), (1, 0));
        // Bytes that are not a grown copy: a truncation, a non-array.
        hist.truncate(2);
        write(&hist);
        assert_eq!(synced(&mut c, &d, 6000), (0, 3));
        std::fs::write(d.join("recent.json"), b"{}").unwrap();
        assert!(sync_lines(&mut c, &d, 7000).is_err());
        let _ = std::fs::remove_dir_all(d);
        let _ = std::fs::remove_dir_all(d2);
    }

    #[test]
    fn tail_reads_only_what_follows() {
        let bytes = br#"[{"a": 1}, {"b": 2}]"#;
        let t = Tail::of(bytes, 9).unwrap();
        assert_eq!(Tail::parse(&t.text()), Some(Tail { end: 9, crc: t.crc }));
        let (lines, end) = t.appended(bytes).unwrap();
        assert!(lines.is_empty());
        assert_eq!(end, Some(bytes.len() - 1));
        let grown = br#"[{"a": 1},{"type":"ai","data":{"content":"x"}} ]"#;
        let (lines, end) = t.appended(grown).unwrap();
        assert_eq!(lines, vec![("ai".to_string(), "x".to_string())]);
        assert_eq!(end, Some(grown.len() - 2));
        assert_eq!(
            Tail::of(bytes, 19).unwrap().appended(bytes),
            Some((vec![], None))
        );
        for other in [
            &br#"[{"a": 2}, {"b": 2}]"#[..],
            br#"[{"a""#,
            br#"[{"a": 1} x"#,
            br#"[{"a": 1}, ]"#,
        ] {
            assert_eq!(t.appended(other), None, "{:?}", std::str::from_utf8(other));
        }
    }
}

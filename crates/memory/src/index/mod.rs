//! The time index and full-text search of a character's memory:
//! `memory/<name>/time_indexed.db` (SQLite, part of the character unit).
//!
//! Tables (beside the original's `time_indexed_original` /
//! `time_indexed_compressed`, which keep their shape; every newly indexed
//! history line is also appended to `time_indexed_original`):
//!
//! * `memory_lines(id, ref, speaker, text, ts)`: every text line of
//!   `recent.json` with the time it was first seen (ms since the epoch);
//!   `memory_lines_fts`: its FTS5 index (contentless, rowid = line id).
//! * `memory_docs(id, kind, ref, entity, text, ts, sig)`: every active fact,
//!   reflection and persona entry (`kind` = `fact` / `reflection` /
//!   `persona`, `ref` = its id); `memory_docs_fts`: its FTS5 index.
//! * `memory_meta(key, value)`: sync state and the extraction cursor.
//! * `memory_vectors(doc, model, sig, dim, vec)`: the embedding of a doc
//!   (`doc` = its row id, `vec` little-endian f32) by the model `model`, when
//!   an embedding endpoint is configured ([`crate::vectors`]).
//!
//! Search is FTS5 BM25 over text this module tokenises itself (lowercased
//! words with plural forms folded; CJK text one character per token, searched
//! by character bigrams), pruned by document frequency ([`plan`]). The index mirrors
//! the files: lines follow `recent.json` (an append is indexed as new lines,
//! any other change by a multiset diff), docs follow the JSON stores. Lines
//! folded out of `recent.json` stay, marked in `memory_archive`
//! ([`crate::fold`]); the diff leaves them alone.
//!
//! Connections are cached per character ([`Handles`]); everything here is
//! blocking and runs on the blocking pool.
//!
//! The module is split by job: `stamps` (which files the last full sync
//! read), `terms` (tokenising and search planning), `lines` (the history
//! lines), `docs` (facts, reflections, persona entries) and `search` (the
//! searches); everything public is re-exported here.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use companiond_core::notices::Notices;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::unit;

mod docs;
mod lines;
mod search;
mod stamps;
mod terms;

pub use docs::{delete_doc, docs_of, sync_docs, upsert_doc, Doc};
pub(crate) use lines::{end_in, insert_line_ref, line_ref, lines_of, read_history};
pub use lines::{insert_line, lines_after, pending, sync_lines, Line, LineSync};
pub(crate) use search::doc_hit;
pub use search::{count_docs, rrf, search_docs, search_lines, Hit, Query};
pub use stamps::{set_synced_from, synced_from, synced_key, Sources};
pub use terms::{
    fts_body, fts_query, is_cjk, plan, stem, terms, Plan, Term, MAX_TERMS, POSTINGS_BUDGET,
};

/// The statement creating the FTS5 index `$name`: contentless (rowid = the
/// indexed row's id, so rows can be deleted), over the one column `body`.
macro_rules! fts5_index {
    ($name:literal) => {
        concat!(
            "CREATE VIRTUAL TABLE IF NOT EXISTS ",
            $name,
            " USING fts5(
    body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
"
        )
    };
}

/// Tables of companiond's index (the original's tables come from [`unit::TIME_INDEX_SCHEMA`]).
pub const SCHEMA: &str = concat!(
    "
CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_lines (
    id INTEGER PRIMARY KEY,
    ref TEXT NOT NULL,
    speaker TEXT NOT NULL,
    text TEXT NOT NULL,
    ts INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_lines_ts ON memory_lines(ts);
",
    fts5_index!("memory_lines_fts"),
    "CREATE TABLE IF NOT EXISTS memory_docs (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    entity TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    ts INTEGER NOT NULL,
    sig TEXT NOT NULL,
    UNIQUE(kind, ref)
);
CREATE INDEX IF NOT EXISTS memory_docs_kind_ts ON memory_docs(kind, ts);
",
    fts5_index!("memory_docs_fts"),
    "CREATE TABLE IF NOT EXISTS memory_vectors (
    doc INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    sig TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL
);
"
);

/// Meta key: last line id the extraction has read.
pub const META_CURSOR: &str = "extract_cursor";
const META_LINES_N: &str = "lines_n";
const META_LINES_DIGEST: &str = "lines_digest";
/// Where the last indexed element of the history ends, with a CRC-32 of the
/// bytes up to there (`lines::Tail`).
const META_LINES_TAIL: &str = "lines_tail";
/// What a full sync derives from the files; a new value re-syncs every index once.
const SOURCES_VERSION: &str = "sources-v1";

pub(crate) fn db_err(e: rusqlite::Error) -> String {
    format!("time index: {e}")
}

/// Open (creating the database file and tables when missing) the index of the
/// memory directory `dir`, which must exist.
pub fn open(dir: &Path) -> Result<Connection, String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a memory directory", dir.display()));
    }
    let path = dir.join(unit::TIME_INDEX);
    if path.symlink_metadata().is_err() {
        unit::create_time_index(&path).map_err(|e| format!("cannot create the time index: {e}"))?;
    }
    let conn = Connection::open_with_flags(
        &path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(db_err)?;
    // Read through a memory map (up to 1 GiB of the file; address space, not
    // memory): searches touch many pages (vectors above all) and a map avoids
    // a copy per page. Reads come from the map, so SQLite's own page cache
    // holds only the pages a write changes: 512 KiB of it is plenty (its
    // default, 2 MiB per open index, filled over hours and stayed: the soak,
    // docs/performance.md § Soak).
    conn.execute_batch(&format!(
        "PRAGMA mmap_size = {MAP_BYTES}; PRAGMA cache_size = -512"
    ))
    .map_err(db_err)?;
    let mut conn = conn;
    unit::TIME_INDEX_DB
        .migrate(&mut conn)
        .map_err(|e| format!("time index: {e}"))?;
    Ok(conn)
}

/// How much of an index file is read through a memory map.
const MAP_BYTES: i64 = 1 << 30;

/// Open connections, one per character.
#[derive(Default)]
pub struct Handles {
    conns: Mutex<HashMap<String, Arc<Mutex<Connection>>>>,
}

impl Handles {
    /// The connection of `name` (its memory directory is `dir`), opened when needed.
    /// A damaged database is set aside first and `notices` told
    /// ([`companiond_core::sqlite::set_aside_if_corrupt`]); a new one is made
    /// and re-indexed from the files.
    pub fn get(
        &self,
        name: &str,
        dir: &Path,
        notices: Option<&Notices>,
    ) -> Result<Arc<Mutex<Connection>>, String> {
        let mut map = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = map.get(name) {
            return Ok(c.clone());
        }
        companiond_core::sqlite::set_aside_if_corrupt(
            &dir.join(unit::TIME_INDEX),
            &format!("memory index of {name}"),
            notices,
        );
        let c = Arc::new(Mutex::new(open(dir)?));
        map.insert(name.to_string(), c.clone());
        Ok(c)
    }

    /// Close the connections of `names` (before their files move or are replaced).
    /// A connection in use closes when its user is done.
    pub fn close(&self, names: &[&str]) {
        let mut map = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        for n in names {
            map.remove(*n);
        }
    }

    /// Hand back what the open indexes hold beyond their data: each
    /// connection not in use drops its page cache (`PRAGMA shrink_memory`)
    /// and its memory map is made anew (SQLite unmaps and remaps when the
    /// map's size changes), so the pages the last minute's work touched stop
    /// counting in the process's memory. Every page read counted until the
    /// connection closed: an hour's chat grew the resident set by the size of
    /// what it indexed (the soak, docs/performance.md § Soak). The next
    /// search faults its pages in again from the kernel's cache (a minor
    /// fault each, well under a millisecond for the newest 2,000 vectors).
    pub fn release(&self) {
        let conns: Vec<_> = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for c in conns {
            let Ok(conn) = c.try_lock() else { continue };
            let _ = conn.execute_batch(&format!(
                "PRAGMA shrink_memory; PRAGMA mmap_size = 0; PRAGMA mmap_size = {MAP_BYTES}"
            ));
        }
    }

    /// Names with an open connection.
    pub fn names(&self) -> Vec<String> {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}

// ------------------------------------------------------------------ meta

pub fn meta_get(conn: &Connection, key: &str) -> Result<Option<String>, String> {
    conn.query_row("SELECT value FROM memory_meta WHERE key = ?1", [key], |r| {
        r.get(0)
    })
    .optional()
    .map_err(db_err)
}

pub fn meta_set(conn: &Connection, key: &str, value: &str) -> Result<(), String> {
    conn.execute(
        "INSERT INTO memory_meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )
    .map(|_| ())
    .map_err(db_err)
}

pub fn cursor(conn: &Connection) -> Result<i64, String> {
    Ok(meta_get(conn, META_CURSOR)?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// Helpers shared by the tests of the index's files.
#[cfg(test)]
mod testutil {
    use std::path::Path;

    use rusqlite::Connection;

    use super::sync_lines;

    /// `(added, removed)` of one [`sync_lines`].
    pub(super) fn synced(c: &mut Connection, d: &Path, now: i64) -> (usize, usize) {
        let r = sync_lines(c, d, now).unwrap();
        (r.added, r.removed)
    }

    pub(super) fn tmp() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("mem-index-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sha2::{Digest, Sha256};

    use super::testutil::{synced, tmp};
    use super::*;

    /// The assembled schema is, byte for byte, the text existing databases
    /// were created with (SQLite keeps each statement in `sqlite_master`).
    #[test]
    fn schema_text_is_unchanged() {
        assert_eq!(SCHEMA.len(), 1118);
        assert_eq!(
            hex::encode(Sha256::digest(SCHEMA.as_bytes())),
            "11529d65e8d0a23a8fb3e4f790d99d6b8cab24f956f1e271dec4a229c59ed698"
        );
    }

    /// A released index keeps its rows, its map and working searches; a
    /// connection in use is left alone.
    #[test]
    fn release_keeps_the_index_working() {
        let d = tmp();
        std::fs::write(
            d.join("recent.json"),
            json!([{"type": "human", "data": {"content": "My cat is called Miso"}}]).to_string(),
        )
        .unwrap();
        let handles = Handles::default();
        let c = handles.get("Mika", &d, None).unwrap();
        synced(&mut c.lock().unwrap(), &d, 1);
        {
            let _busy = c.lock().unwrap();
            handles.release();
        }
        handles.release();
        let conn = c.lock().unwrap();
        let map: i64 = conn
            .query_row("PRAGMA mmap_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(map, MAP_BYTES);
        let hits: i64 = conn
            .query_row(
                "SELECT count(*) FROM memory_lines_fts WHERE memory_lines_fts MATCH 'cat'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(hits, 1);
        drop(conn);
        let _ = std::fs::remove_dir_all(d);
    }
}

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

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use companiond_core::notices::Notices;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::stores::{self, str_of, Stores};
use crate::timefmt;
use crate::unit;

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
/// bytes up to there ([`Tail`]).
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

// ------------------------------------------------------------------ full sync stamps

/// The stamps (device, inode, length, times) of the files a full sync reads:
/// the history and the stores.
pub struct Sources {
    /// One string of every stamp, kept in the index after a full sync.
    pub key: String,
    /// Every stamp lies more than [`companiond_core::stamp::RACY`] before the
    /// moment given to [`Sources::of`], so a later change cannot leave it equal.
    pub settled: bool,
}

impl Sources {
    /// Stamp `dir`'s source files; take it *before* reading them, so a change
    /// meanwhile leaves a key that no longer matches.
    pub fn of(dir: &Path, at: std::time::SystemTime) -> Sources {
        use std::fmt::Write;
        let mut key = String::from(SOURCES_VERSION);
        let mut settled = true;
        for file in std::iter::once(unit::RECENT).chain(stores::FILES) {
            match companiond_core::stamp::stamp(&dir.join(file)) {
                Some(s) => {
                    settled &= s.settled(at);
                    let _ = write!(
                        key,
                        ";{file}:{}:{}:{}:{}:{}",
                        s.dev, s.ino, s.len, s.mtime_ns, s.ctime_ns
                    );
                }
                None => {
                    let _ = write!(key, ";{file}:-");
                }
            }
        }
        Sources { key, settled }
    }
}

/// The [`Sources`] key of the files the last full sync of `dir`'s index read,
/// kept beside the index in a device-local file ([`unit::INDEX_SOURCES`]) and not
/// in the database: the database is part of the character unit that cloud save
/// compares and copies, and a key naming this device's inodes would make a
/// freshly downloaded unit differ from its cloud copy.
pub fn synced_key(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join(unit::INDEX_SOURCES)).ok()
}

/// Without creating or changing anything: the number of lines awaiting
/// extraction when the index of `dir` was last fully synced from files whose
/// stamps are `sources`; `None` when it was not, or cannot be read.
pub fn synced_from(dir: &Path, sources: &Sources) -> Option<usize> {
    if synced_key(dir)? != sources.key {
        return None;
    }
    let conn = Connection::open_with_flags(
        dir.join(unit::TIME_INDEX),
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).ok()?;
    pending(&conn).ok()
}

/// Record that the index of `dir` was just fully synced from `sources`; `None`
/// (or stamps not settled) forgets it, so the next start syncs again.
pub fn set_synced_from(dir: &Path, sources: Option<&Sources>) -> Result<(), String> {
    let path = dir.join(unit::INDEX_SOURCES);
    let r = match sources.filter(|s| s.settled) {
        Some(sources) => companiond_core::store::atomic_write(&path, sources.key.as_bytes()),
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r,
        },
    };
    r.map_err(|e| format!("index sync stamps: {e}"))
}

pub fn cursor(conn: &Connection) -> Result<i64, String> {
    Ok(meta_get(conn, META_CURSOR)?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

// ------------------------------------------------------------------ text

/// Is `c` written without spaces between words (Chinese, Japanese, Korean)?
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF
        | 0xAC00..=0xD7AF | 0x20000..=0x2FA1F)
}

/// A light English stemmer (plural forms) for ASCII words; others unchanged.
pub fn stem(w: &str) -> String {
    let n = w.len();
    if !w.is_ascii() || n <= 3 {
        return w.to_string();
    }
    if n > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..n - 3]);
    }
    if w.ends_with("sses") {
        return w[..n - 2].to_string();
    }
    if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        return w[..n - 1].to_string();
    }
    w.to_string()
}

enum Tok {
    /// A lowercased word (not stemmed).
    Word(String),
    Cjk(char),
}

fn tokens(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if is_cjk(c) {
            if !word.is_empty() {
                out.push(Tok::Word(std::mem::take(&mut word)));
            }
            out.push(Tok::Cjk(c));
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            out.push(Tok::Word(std::mem::take(&mut word)));
        }
    }
    if !word.is_empty() {
        out.push(Tok::Word(word));
    }
    out
}

/// The text as indexed: lowercased, stemmed words and CJK characters as
/// separate tokens, space-separated (the FTS5 tokenizer only splits it).
pub fn fts_body(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for t in tokens(text) {
        if !out.is_empty() {
            out.push(' ');
        }
        match t {
            Tok::Word(w) => out.push_str(&stem(&w)),
            Tok::Cjk(c) => out.push(c),
        }
    }
    out
}

const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has",
    "have", "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "just", "me", "my", "no", "not", "of", "on", "or", "our", "please", "really", "remember",
    "she", "so", "some", "tell", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "to", "told", "too", "us", "very", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "yes", "you", "your",
];

/// Most terms of one query.
pub const MAX_TERMS: usize = 16;
/// Rows one BM25 search ranks at most: the rarest terms are kept while
/// their document frequencies add up to this (terms more common than that
/// carry little weight in BM25 anyway); when every term is more common, the
/// newest matches are returned instead (no ranking).
pub const POSTINGS_BUDGET: i64 = 2000;

/// A search term: a stemmed word, or one or two CJK characters (a phrase).
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Word(String),
    Cjk(Vec<char>),
}

impl Term {
    fn quoted(&self) -> String {
        match self {
            Term::Word(w) => format!("\"{w}\""),
            Term::Cjk(c) => format!(
                "\"{}\"",
                c.iter().map(char::to_string).collect::<Vec<_>>().join(" ")
            ),
        }
    }
}

/// The search terms of free text (stopwords and one-letter words dropped,
/// CJK runs as character bigrams), without repeats.
pub fn terms(text: &str) -> Vec<Term> {
    let mut out: Vec<Term> = Vec::new();
    let mut push = |t: Term, out: &mut Vec<Term>| {
        if !out.contains(&t) && out.len() < MAX_TERMS {
            out.push(t);
        }
    };
    let mut run: Vec<char> = Vec::new();
    let flush =
        |run: &mut Vec<char>, out: &mut Vec<Term>, push: &mut dyn FnMut(Term, &mut Vec<Term>)| {
            match run.len() {
                0 => {}
                1 => push(Term::Cjk(vec![run[0]]), out),
                _ => {
                    for w in run.windows(2) {
                        push(Term::Cjk(w.to_vec()), out);
                    }
                }
            }
            run.clear();
        };
    for t in tokens(text) {
        match t {
            Tok::Cjk(c) => run.push(c),
            Tok::Word(w) => {
                flush(&mut run, &mut out, &mut push);
                if w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()) {
                    push(Term::Word(stem(&w)), &mut out);
                }
            }
        }
    }
    flush(&mut run, &mut out, &mut push);
    out
}

/// An FTS5 query with every term of the text OR-ed; `None` when the text has
/// no searchable term.
pub fn fts_query(text: &str) -> Option<String> {
    let t = terms(text);
    (!t.is_empty()).then(|| t.iter().map(Term::quoted).collect::<Vec<_>>().join(" OR "))
}

/// How to run a text search.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// The text has no searchable term (list instead).
    NoTerms,
    /// No term occurs in the index: nothing can match.
    NoMatch,
    /// Rank the matches of this expression by BM25.
    Ranked(String),
    /// Every term is very common: the newest matches of this expression.
    Newest(String),
}

/// Rows matching `term` in the FTS table `fts`, counted up to `cap + 1`.
fn doc_freq(conn: &Connection, fts: &str, term: &str, cap: i64) -> Result<i64, String> {
    let sql = format!("SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ?1 LIMIT ?2)");
    conn.prepare_cached(&sql)
        .map_err(db_err)?
        .query_row(params![term, cap + 1], |r| r.get::<_, i64>(0))
        .map_err(db_err)
}

/// Plan a search of `text` in the FTS table `fts` (`memory_docs_fts` /
/// `memory_lines_fts`): terms that occur nowhere are dropped, then the
/// rarest are kept within [`POSTINGS_BUDGET`] (document frequencies are
/// counted only up to it, so planning is cheap whatever the index size).
pub fn plan(conn: &Connection, fts: &str, text: &str) -> Result<Plan, String> {
    let ts = terms(text);
    if ts.is_empty() {
        return Ok(Plan::NoTerms);
    }
    let mut scored: Vec<(i64, String)> = Vec::new();
    for t in &ts {
        let q = t.quoted();
        let df = doc_freq(conn, fts, &q, POSTINGS_BUDGET)?;
        if df > 0 {
            scored.push((df, q));
        }
    }
    if scored.is_empty() {
        return Ok(Plan::NoMatch);
    }
    scored.sort_by_key(|(df, _)| *df);
    let join = |v: &[(i64, String)]| {
        v.iter()
            .map(|(_, q)| q.as_str())
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    if scored[0].0 > POSTINGS_BUDGET {
        return Ok(Plan::Newest(join(&scored)));
    }
    let mut used = 0;
    let mut keep = 0;
    for (df, _) in &scored {
        if keep > 0 && used + df > POSTINGS_BUDGET {
            break;
        }
        used += df;
        keep += 1;
    }
    Ok(Plan::Ranked(join(&scored[..keep])))
}

pub(crate) fn line_ref(speaker: &str, text: &str) -> String {
    stores::content_hash(&format!("{speaker}\n{text}"))
}

// ------------------------------------------------------------------ lines

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
    let message = json!({"type": speaker, "data": {"content": text}}).to_string();
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

// ------------------------------------------------------------------ docs

/// A fact, reflection or persona entry as indexed.
#[derive(Clone, Debug, PartialEq)]
pub struct Doc {
    pub kind: &'static str,
    pub id: String,
    pub entity: String,
    pub text: String,
    pub ts: i64,
}

impl Doc {
    pub fn sig(&self) -> String {
        stores::content_hash(&format!("{}\n{}\n{}", self.entity, self.ts, self.text))
    }
}

/// The docs of the stores: active facts, reflections not denied or archived,
/// persona entries not suppressed.
pub fn docs_of(s: &Stores) -> Vec<Doc> {
    let mut out = Vec::new();
    for f in s.active_facts() {
        out.push(Doc {
            kind: "fact",
            id: str_of(f, "id").unwrap_or_default().to_string(),
            entity: str_of(f, "entity").unwrap_or("master").to_string(),
            text: str_of(f, "text").unwrap_or_default().to_string(),
            ts: stores::entry_time(f, &["created_at", "updated_at"]).unwrap_or(0),
        });
    }
    for r in s.reflections.objects() {
        let (Some(id), Some(text)) = (str_of(r, "id"), str_of(r, "text")) else {
            continue;
        };
        if matches!(str_of(r, "status"), Some("denied" | "archived")) {
            continue;
        }
        out.push(Doc {
            kind: "reflection",
            id: id.to_string(),
            entity: str_of(r, "entity").unwrap_or("master").to_string(),
            text: text.to_string(),
            ts: stores::entry_time(r, &["created_at"]).unwrap_or(0),
        });
    }
    for (entity, e) in s.persona_entries() {
        let (Some(id), Some(text)) = (str_of(e, "id"), str_of(e, "text")) else {
            continue;
        };
        if e.get("suppress").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        out.push(Doc {
            kind: "persona",
            id: id.to_string(),
            entity,
            text: text.to_string(),
            ts: stores::entry_time(e, &["created_at"]).unwrap_or(0),
        });
    }
    out
}

/// Insert or update one doc.
pub fn upsert_doc(conn: &Connection, d: &Doc) -> Result<(), String> {
    let sig = d.sig();
    let cur: Option<(i64, String)> = conn
        .query_row(
            "SELECT id, sig FROM memory_docs WHERE kind = ?1 AND ref = ?2",
            params![d.kind, d.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(db_err)?;
    match cur {
        Some((_, s)) if s == sig => Ok(()),
        Some((rowid, _)) => {
            conn.execute(
                "UPDATE memory_docs SET entity = ?2, text = ?3, ts = ?4, sig = ?5 WHERE id = ?1",
                params![rowid, d.entity, d.text, d.ts, sig],
            )
            .map_err(db_err)?;
            conn.execute("DELETE FROM memory_docs_fts WHERE rowid = ?1", [rowid])
                .map_err(db_err)?;
            conn.execute(
                "INSERT INTO memory_docs_fts(rowid, body) VALUES (?1, ?2)",
                params![rowid, fts_body(&d.text)],
            )
            .map_err(db_err)?;
            // Its vector is stale: embedded again in the background.
            conn.execute("DELETE FROM memory_vectors WHERE doc = ?1", [rowid])
                .map_err(db_err)?;
            Ok(())
        }
        None => {
            conn.execute(
                "INSERT INTO memory_docs(kind, ref, entity, text, ts, sig) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![d.kind, d.id, d.entity, d.text, d.ts, sig],
            )
            .map_err(db_err)?;
            let rowid = conn.last_insert_rowid();
            conn.execute(
                "INSERT INTO memory_docs_fts(rowid, body) VALUES (?1, ?2)",
                params![rowid, fts_body(&d.text)],
            )
            .map_err(db_err)?;
            Ok(())
        }
    }
}

/// Remove one doc (any kind when `kind` is `None`).
pub fn delete_doc(conn: &Connection, kind: Option<&str>, id: &str) -> Result<usize, String> {
    let rowids: Vec<i64> = {
        let mut st = conn
            .prepare("SELECT id FROM memory_docs WHERE ref = ?1 AND (?2 IS NULL OR kind = ?2)")
            .map_err(db_err)?;
        let rows = st
            .query_map(params![id, kind], |r| r.get(0))
            .map_err(db_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db_err)?
    };
    for r in &rowids {
        conn.execute("DELETE FROM memory_docs WHERE id = ?1", [r])
            .map_err(db_err)?;
        conn.execute("DELETE FROM memory_docs_fts WHERE rowid = ?1", [r])
            .map_err(db_err)?;
        conn.execute("DELETE FROM memory_vectors WHERE doc = ?1", [r])
            .map_err(db_err)?;
    }
    Ok(rowids.len())
}

/// Make the docs table equal to the stores; `(upserted, removed)`.
pub fn sync_docs(conn: &mut Connection, s: &Stores) -> Result<(usize, usize), String> {
    let want = docs_of(s);
    let tx = conn.transaction().map_err(db_err)?;
    let have: HashMap<(String, String), String> = {
        let mut st = tx
            .prepare("SELECT kind, ref, sig FROM memory_docs")
            .map_err(db_err)?;
        let rows = st
            .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
            .map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)?
    };
    let mut keep = std::collections::HashSet::new();
    let mut upserted = 0;
    for d in &want {
        let key = (d.kind.to_string(), d.id.clone());
        if have.get(&key) != Some(&d.sig()) {
            upsert_doc(&tx, d)?;
            upserted += 1;
        }
        keep.insert(key);
    }
    let mut removed = 0;
    for (kind, id) in have.keys().filter(|k| !keep.contains(*k)) {
        removed += delete_doc(&tx, Some(kind), id)?;
    }
    tx.commit().map_err(db_err)?;
    Ok((upserted, removed))
}

// ------------------------------------------------------------------ search

/// A search.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// Free text; empty = everything in the window, newest first.
    pub text: String,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub limit: usize,
    pub offset: usize,
}

/// One result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hit {
    /// `line`, `fact`, `reflection` or `persona`.
    pub kind: String,
    /// The entry id (a line's row id as text).
    pub id: String,
    /// The entity (docs) or the speaker (lines).
    pub who: String,
    pub text: String,
    pub ts: i64,
    /// BM25 (lower is better); 0 for listings.
    pub score: f64,
}

fn window(q: &Query) -> (i64, i64) {
    (q.since.unwrap_or(i64::MIN), q.until.unwrap_or(i64::MAX))
}

pub(crate) fn doc_hit(r: &rusqlite::Row) -> rusqlite::Result<Hit> {
    Ok(Hit {
        kind: r.get(0)?,
        id: r.get(1)?,
        who: r.get(2)?,
        text: r.get(3)?,
        ts: r.get(4)?,
        score: r.get(5)?,
    })
}

fn line_hit(r: &rusqlite::Row) -> rusqlite::Result<Hit> {
    Ok(Hit {
        kind: "line".into(),
        id: r.get::<_, i64>(0)?.to_string(),
        who: r.get(1)?,
        text: r.get(2)?,
        ts: r.get(3)?,
        score: r.get(4)?,
    })
}

/// A search run with a match expression; `ranked` = order by BM25.
type Runner<'a> = dyn FnMut(&str, bool) -> Result<Vec<Hit>, String> + 'a;

/// Run `f(expression, ranked)` as planned; `Ok(None)` when the text has no
/// searchable term.
fn with_plan(
    conn: &Connection,
    fts: &str,
    text: &str,
    f: &mut Runner<'_>,
) -> Result<Option<Vec<Hit>>, String> {
    match plan(conn, fts, text)? {
        Plan::NoTerms => Ok(None),
        Plan::NoMatch => Ok(Some(Vec::new())),
        Plan::Ranked(m) => f(&m, true).map(Some),
        Plan::Newest(m) => f(&m, false).map(Some),
    }
}

/// Search facts / reflections / persona entries (`kinds`, fixed names only):
/// BM25 order for text, newest first without. Text searches are driven by
/// the FTS table (`CROSS JOIN` keeps SQLite from looping over the rows of a
/// kind or a time range and re-running the match for each).
pub fn search_docs(conn: &Connection, q: &Query, kinds: &[&str]) -> Result<Vec<Hit>, String> {
    let kinds: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|k| matches!(*k, "fact" | "reflection" | "persona"))
        .collect();
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let list = kinds
        .iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(",");
    let (lo, hi) = window(q);
    let sql = |ranked: bool| {
        format!(
            "SELECT d.kind, d.ref, d.entity, d.text, d.ts, {} AS s
             FROM memory_docs_fts CROSS JOIN memory_docs d ON d.id = memory_docs_fts.rowid
             WHERE memory_docs_fts MATCH ?1 AND d.kind IN ({list}) AND d.ts BETWEEN ?2 AND ?3
             ORDER BY {} LIMIT ?4 OFFSET ?5",
            if ranked {
                "bm25(memory_docs_fts)"
            } else {
                "0.0"
            },
            if ranked {
                "s"
            } else {
                "memory_docs_fts.rowid DESC"
            },
        )
    };
    let mut run = |m: &str, ranked: bool| -> Result<Vec<Hit>, String> {
        let mut st = conn.prepare_cached(&sql(ranked)).map_err(db_err)?;
        let rows = st
            .query_map(params![m, lo, hi, q.limit as i64, q.offset as i64], doc_hit)
            .map_err(db_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
    };
    if let Some(hits) = with_plan(conn, "memory_docs_fts", &q.text, &mut run)? {
        return Ok(hits);
    }
    // Newest first: one ordered index range per kind, merged.
    let want = q.offset + q.limit;
    let mut all: Vec<Hit> = Vec::new();
    let mut st = conn
        .prepare_cached(
            "SELECT kind, ref, entity, text, ts, 0.0 FROM memory_docs
             WHERE kind = ?1 AND ts BETWEEN ?2 AND ?3 ORDER BY ts DESC, id DESC LIMIT ?4",
        )
        .map_err(db_err)?;
    for k in &kinds {
        let rows = st
            .query_map(params![k, lo, hi, want as i64], doc_hit)
            .map_err(db_err)?;
        for r in rows {
            all.push(r.map_err(db_err)?);
        }
    }
    all.sort_by_key(|h| std::cmp::Reverse(h.ts));
    Ok(all.into_iter().skip(q.offset).take(q.limit).collect())
}

/// Search the history lines: BM25 order for text, newest first without.
pub fn search_lines(conn: &Connection, q: &Query) -> Result<Vec<Hit>, String> {
    let (lo, hi) = window(q);
    // Line ids grow with time: the window narrows the FTS scan by rowid.
    let (rlo, rhi) = line_id_range(conn, q)?;
    let mut run = |m: &str, ranked: bool| -> Result<Vec<Hit>, String> {
        let sql = format!(
            "SELECT l.id, l.speaker, l.text, l.ts, {} AS s
             FROM memory_lines_fts CROSS JOIN memory_lines l ON l.id = memory_lines_fts.rowid
             WHERE memory_lines_fts MATCH ?1 AND memory_lines_fts.rowid BETWEEN ?2 AND ?3
               AND l.ts BETWEEN ?4 AND ?5
             ORDER BY {} LIMIT ?6 OFFSET ?7",
            if ranked {
                "bm25(memory_lines_fts)"
            } else {
                "0.0"
            },
            if ranked {
                "s"
            } else {
                "memory_lines_fts.rowid DESC"
            },
        );
        let mut st = conn.prepare_cached(&sql).map_err(db_err)?;
        let rows = st
            .query_map(
                params![m, rlo, rhi, lo, hi, q.limit as i64, q.offset as i64],
                line_hit,
            )
            .map_err(db_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
    };
    if let Some(hits) = with_plan(conn, "memory_lines_fts", &q.text, &mut run)? {
        return Ok(hits);
    }
    let mut st = conn
        .prepare_cached(
            "SELECT id, speaker, text, ts, 0.0 FROM memory_lines
             WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts DESC, id DESC LIMIT ?3 OFFSET ?4",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![lo, hi, q.limit as i64, q.offset as i64], line_hit)
        .map_err(db_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
}

/// Row ids of the lines inside the window (whole range without one).
fn line_id_range(conn: &Connection, q: &Query) -> Result<(i64, i64), String> {
    let lo = match q.since {
        None => i64::MIN,
        Some(t) => conn
            .query_row(
                "SELECT id FROM memory_lines WHERE ts >= ?1 ORDER BY ts, id LIMIT 1",
                [t],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map_err(db_err)?
            .unwrap_or(i64::MAX),
    };
    let hi = match q.until {
        None => i64::MAX,
        Some(t) => conn
            .query_row(
                "SELECT id FROM memory_lines WHERE ts <= ?1 ORDER BY ts DESC, id DESC LIMIT 1",
                [t],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map_err(db_err)?
            .unwrap_or(i64::MIN),
    };
    Ok((lo, hi))
}

/// How many docs of `kind` match (for paging totals).
pub fn count_docs(conn: &Connection, q: &Query, kind: &str) -> Result<usize, String> {
    let (lo, hi) = window(q);
    let mut n: i64 = 0;
    let mut count = |m: &str, _ranked: bool| -> Result<Vec<Hit>, String> {
        n = conn
            .query_row(
                "SELECT count(*) FROM memory_docs_fts CROSS JOIN memory_docs d ON d.id = memory_docs_fts.rowid
                 WHERE memory_docs_fts MATCH ?1 AND d.kind = ?2 AND d.ts BETWEEN ?3 AND ?4",
                params![m, kind, lo, hi],
                |r| r.get(0),
            )
            .map_err(db_err)?;
        Ok(Vec::new())
    };
    if with_plan(conn, "memory_docs_fts", &q.text, &mut count)?.is_some() {
        return Ok(n as usize);
    }
    conn.query_row(
        "SELECT count(*) FROM memory_docs WHERE kind = ?1 AND ts BETWEEN ?2 AND ?3",
        params![kind, lo, hi],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as usize)
    .map_err(db_err)
}

/// Reciprocal rank fusion of ranked lists (k = 60): ids by fused score.
pub fn rrf<'a>(lists: &[&'a [Hit]]) -> Vec<&'a Hit> {
    let mut score: HashMap<(&str, &str), (f64, &Hit)> = HashMap::new();
    for list in lists {
        for (rank, h) in list.iter().enumerate() {
            let e = score
                .entry((h.kind.as_str(), h.id.as_str()))
                .or_insert((0.0, h));
            e.0 += 1.0 / (60.0 + rank as f64 + 1.0);
        }
    }
    let mut v: Vec<(f64, &Hit)> = score.into_values().collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.ts.cmp(&a.1.ts)));
    v.into_iter().map(|(_, h)| h).collect()
}

#[cfg(test)]
mod tests {
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

    /// `(added, removed)` of one [`sync_lines`].
    fn synced(c: &mut Connection, d: &Path, now: i64) -> (usize, usize) {
        let r = sync_lines(c, d, now).unwrap();
        (r.added, r.removed)
    }

    fn tmp() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("mem-index-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).unwrap();
        d
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

    #[test]
    fn queries() {
        assert_eq!(
            fts_query("What is my cat's name?").as_deref(),
            Some("\"cat\" OR \"name\"")
        );
        assert_eq!(fts_query("  ?? the a").as_deref(), None);
        assert_eq!(
            fts_query("我喜欢猫").as_deref(),
            Some("\"我 喜\" OR \"喜 欢\" OR \"欢 猫\"")
        );
        assert_eq!(fts_query("AND OR NEAR").as_deref(), Some("\"near\""));
        assert_eq!(fts_body("我a猫"), "我 a 猫");
        assert_eq!(
            fts_body("The user's Cats, ladies & glasses!"),
            "the user s cat lady glass"
        );
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("paris"), "paris");
    }

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

    #[test]
    fn common_terms_are_pruned() {
        let d = tmp();
        let mut c = open(&d).unwrap();
        let tx = c.transaction().unwrap();
        for i in 0..5000 {
            let word = if i < 3 { "rare" } else { "other" };
            let doc = Doc {
                kind: "fact",
                id: format!("f{i}"),
                entity: "master".into(),
                text: format!("common words {word}"),
                ts: i,
            };
            upsert_doc(&tx, &doc).unwrap();
        }
        tx.commit().unwrap();
        let p = |t: &str| plan(&c, "memory_docs_fts", t).unwrap();
        let r = |m: &str| Plan::Ranked(m.into());
        assert_eq!(p("common rare"), r("\"rare\""));
        assert_eq!(p("common"), Plan::Newest("\"common\"".into()));
        assert_eq!(
            p("common others"),
            Plan::Newest("\"common\" OR \"other\"".into())
        );
        assert_eq!(p("absent"), Plan::NoMatch);
        assert_eq!(p("the"), Plan::NoTerms);
        let q = Query {
            text: "common rare".into(),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(search_docs(&c, &q, &["fact"]).unwrap().len(), 3);
        assert_eq!(count_docs(&c, &q, "fact").unwrap(), 3);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn docs_follow_the_stores() {
        let d = tmp();
        std::fs::write(
            d.join("facts.json"),
            json!([{"id": "f1", "text": "The user lives in Berlin", "entity": "master", "created_at": "2024-05-01T10:00:00"}]).to_string(),
        )
        .unwrap();
        let mut c = open(&d).unwrap();
        let s = Stores::load(&d, None).unwrap();
        assert_eq!(sync_docs(&mut c, &s).unwrap(), (1, 0));
        assert_eq!(sync_docs(&mut c, &s).unwrap(), (0, 0));
        let q = Query {
            text: "where does the user live".into(),
            limit: 5,
            ..Default::default()
        };
        let hits = search_docs(&c, &q, &["fact"]).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, "f1");
        assert_eq!(count_docs(&c, &q, "fact").unwrap(), 1);
        std::fs::write(d.join("facts.json"), "[]").unwrap();
        let s = Stores::load(&d, None).unwrap();
        assert_eq!(sync_docs(&mut c, &s).unwrap(), (0, 1));
        assert!(search_docs(&c, &q, &["fact"]).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(d);
    }
}

//! Searches of the docs and the history lines (BM25 for text, newest first
//! without), paging counts and reciprocal rank fusion.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::{db_err, plan, Plan};

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

//! Token usage of every model call, in SQLite (`<data>/state/token_usage.db`).
//!
//! Two tables: `token_usage` (one row per call, indexed by `ts`) and
//! `token_usage_daily` (per UTC day, model and slot: sums and counts), kept in
//! step in the same transaction as each insert. Statistics read the daily rows
//! (a handful per day, whatever the number of calls) and the last few calls
//! through the `ts` index, so `GET /api/token-usage` costs the same after 40
//! calls or 40,000. A database written before the daily table existed (or by a
//! binary that did not maintain it: `token_usage_meta.covered_rowid` differs
//! from the newest row) gets the table rebuilt from the calls once, in one
//! transaction, when it is opened.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::notices::Notices;
use crate::sqlite::{self, Schema, Step};

/// One recorded model call.
#[derive(Clone, Debug, Serialize)]
pub struct UsageRow {
    /// Unix seconds.
    pub ts: i64,
    pub slot: String,
    pub model: String,
    pub character: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub total_tokens: i64,
    /// Whether the numbers were estimated (the upstream reported none).
    pub estimated: bool,
}

impl UsageRow {
    /// A call of character `A` with `tokens` prompt tokens and one completion
    /// token: the row the usage tests of core and of the system family record.
    #[cfg(any(test, feature = "testkit"))]
    pub fn sample(ts: i64, model: &str, slot: &str, tokens: i64, estimated: bool) -> UsageRow {
        UsageRow {
            ts,
            slot: slot.into(),
            model: model.into(),
            character: "A".into(),
            prompt_tokens: tokens,
            completion_tokens: 1,
            total_tokens: tokens + 1,
            estimated,
        }
    }
}

/// The sums of one UTC day, model and slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DailyRow {
    /// Unix seconds of the day's 00:00 UTC.
    pub day: i64,
    pub model: String,
    pub slot: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub total_tokens: i64,
    pub calls: i64,
    pub estimated: i64,
}

const DAY: i64 = 86_400;

/// 00:00 UTC of the day holding `ts`.
pub fn day_of(ts: i64) -> i64 {
    ts - ts.rem_euclid(DAY)
}

/// The calls (the first release's whole database).
const CALLS: &str = "CREATE TABLE IF NOT EXISTS token_usage (
        ts INTEGER NOT NULL, slot TEXT NOT NULL, model TEXT NOT NULL, character TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL);
     CREATE INDEX IF NOT EXISTS token_usage_ts ON token_usage(ts);";

/// The schema of `token_usage.db`: 1 the calls, 2 the daily sums and the
/// rowid they cover (filled by [`ensure_daily`]).
pub const SCHEMA: Schema = Schema {
    name: "token_usage.db",
    steps: &[
        Step::Sql(CALLS),
        Step::Sql(
            "CREATE TABLE IF NOT EXISTS token_usage_daily (
            day INTEGER NOT NULL, model TEXT NOT NULL, slot TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
            total_tokens INTEGER NOT NULL, calls INTEGER NOT NULL, estimated INTEGER NOT NULL,
            PRIMARY KEY (day, model, slot)) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS token_usage_meta (
            id INTEGER PRIMARY KEY CHECK (id = 1), covered_rowid INTEGER NOT NULL);",
        ),
    ],
};

/// The daily table brought up to the rowid it covers; rebuilt when behind
/// (rows written by an older binary).
fn ensure_daily(c: &mut Connection) -> rusqlite::Result<()> {
    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let newest: i64 = tx.query_row("SELECT COALESCE(MAX(rowid), 0) FROM token_usage", [], |r| {
        r.get(0)
    })?;
    let covered: Option<i64> = tx
        .query_row(
            "SELECT covered_rowid FROM token_usage_meta WHERE id = 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if covered != Some(newest) {
        tx.execute_batch(
            "DELETE FROM token_usage_daily;
             INSERT INTO token_usage_daily
               SELECT ts - (((ts % 86400) + 86400) % 86400), model, slot,
                      SUM(prompt_tokens), SUM(completion_tokens), SUM(total_tokens),
                      COUNT(*), SUM(estimated != 0)
               FROM token_usage GROUP BY 1, 2, 3;",
        )?;
        tx.execute(
            "INSERT INTO token_usage_meta (id, covered_rowid) VALUES (1, ?1)
             ON CONFLICT(id) DO UPDATE SET covered_rowid = excluded.covered_rowid",
            [newest],
        )?;
    }
    tx.commit()
}

fn insert(tx: &rusqlite::Transaction<'_>, row: &UsageRow) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO token_usage VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            row.ts,
            row.slot,
            row.model,
            row.character,
            row.prompt_tokens,
            row.completion_tokens,
            row.total_tokens,
            row.estimated as i64
        ],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO token_usage_daily VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7)
         ON CONFLICT(day, model, slot) DO UPDATE SET
            prompt_tokens = prompt_tokens + excluded.prompt_tokens,
            completion_tokens = completion_tokens + excluded.completion_tokens,
            total_tokens = total_tokens + excluded.total_tokens,
            calls = calls + 1,
            estimated = estimated + excluded.estimated",
        params![
            day_of(row.ts),
            row.model,
            row.slot,
            row.prompt_tokens,
            row.completion_tokens,
            row.total_tokens,
            row.estimated as i64
        ],
    )?;
    tx.execute(
        "UPDATE token_usage_meta SET covered_rowid = ?1 WHERE id = 1",
        [id],
    )?;
    Ok(())
}

/// `$T { a, b, ... }` from the columns of `$row` in that order.
macro_rules! from_row {
    ($row:expr => $T:ident { $($field:ident),* $(,)? }) => {{
        let mut column = 0usize;
        let mut next = || {
            column += 1;
            column - 1
        };
        Ok($T { $($field: $row.get(next())?,)* })
    }};
}

fn usage_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UsageRow> {
    from_row!(r => UsageRow {
        ts, slot, model, character, prompt_tokens, completion_tokens, total_tokens, estimated,
    })
}

const ROW_COLUMNS: &str =
    "ts, slot, model, character, prompt_tokens, completion_tokens, total_tokens, estimated";

/// The recorder; the database is opened on first use.
#[derive(Clone)]
pub struct TokenUsage {
    path: PathBuf,
    conn: Arc<Mutex<Option<Connection>>>,
    notices: Option<Notices>,
}

impl TokenUsage {
    pub fn new(path: PathBuf) -> Self {
        TokenUsage {
            path,
            conn: Arc::default(),
            notices: None,
        }
    }

    /// Tell the user through `notices` when the database had to be set aside.
    pub fn with_notices(mut self, notices: Notices) -> Self {
        self.notices = Some(notices);
        self
    }

    fn with_conn<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<R>,
    ) -> Result<R, String> {
        let mut g = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            sqlite::set_aside_if_corrupt(&self.path, "token usage record", self.notices.as_ref());
            let mut c = Connection::open(&self.path).map_err(|e| e.to_string())?;
            c.busy_timeout(std::time::Duration::from_secs(5))
                .map_err(|e| e.to_string())?;
            c.execute_batch("PRAGMA journal_mode=WAL;")
                .map_err(|e| e.to_string())?;
            SCHEMA.migrate(&mut c).map_err(|e| e.to_string())?;
            ensure_daily(&mut c).map_err(|e| e.to_string())?;
            *g = Some(c);
        }
        match g.as_mut() {
            Some(c) => f(c).map_err(|e| e.to_string()),
            None => Err("token usage database unavailable".into()),
        }
    }

    /// Record a call (blocking; call from `spawn_blocking` or use [`TokenUsage::record_async`]).
    pub fn record(&self, row: &UsageRow) -> Result<(), String> {
        self.record_many(std::slice::from_ref(row))
    }

    /// Record several calls in one transaction (an import, a generator).
    pub fn record_many(&self, rows: &[UsageRow]) -> Result<(), String> {
        self.with_conn(|c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            for row in rows {
                insert(&tx, row)?;
            }
            tx.commit()
        })
    }

    pub async fn record_async(&self, row: UsageRow) {
        let me = self.clone();
        let r = tokio::task::spawn_blocking(move || me.record(&row)).await;
        if let Ok(Err(e)) | Err(e) = r.map_err(|e| e.to_string()) {
            tracing::warn!("cannot record token usage: {e}");
        }
    }

    /// Every row with `ts >= since` (oldest first).
    pub fn rows_since(&self, since: i64) -> Result<Vec<UsageRow>, String> {
        self.with_conn(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {ROW_COLUMNS} FROM token_usage WHERE ts >= ?1 ORDER BY ts, rowid"
            ))?;
            let rows = st.query_map([since], usage_row)?;
            rows.collect()
        })
    }

    /// The newest `limit` rows with `ts >= since`, oldest first (ties in
    /// recording order, as [`TokenUsage::rows_since`] lists them).
    pub fn newest_rows(&self, since: i64, limit: usize) -> Result<Vec<UsageRow>, String> {
        self.with_conn(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {ROW_COLUMNS} FROM token_usage WHERE ts >= ?1 \
                 ORDER BY ts DESC, rowid DESC LIMIT ?2"
            ))?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let mut rows: Vec<UsageRow> = st
                .query_map(params![since, limit], usage_row)?
                .collect::<rusqlite::Result<_>>()?;
            rows.reverse();
            Ok(rows)
        })
    }

    /// The daily sums of the days `from_day..=to_day` (00:00 UTC timestamps),
    /// by day, then model, then slot.
    pub fn daily(&self, from_day: i64, to_day: i64) -> Result<Vec<DailyRow>, String> {
        self.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT day, model, slot, prompt_tokens, completion_tokens, total_tokens, calls, estimated
                 FROM token_usage_daily WHERE day >= ?1 AND day <= ?2 ORDER BY day, model, slot",
            )?;
            let rows = st.query_map(params![from_day, to_day], |r| {
                from_row!(r => DailyRow {
                    day, model, slot, prompt_tokens, completion_tokens, total_tokens, calls, estimated,
                })
            })?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ts: i64, model: &str, slot: &str, t: i64, estimated: bool) -> UsageRow {
        UsageRow::sample(ts, model, slot, t, estimated)
    }

    #[test]
    fn every_schema_version_upgrades_with_its_calls() {
        crate::sqlite::testing::upgrades_from_every_version(
            &SCHEMA,
            Some(CALLS),
            |c, _| {
                c.execute(
                    "INSERT INTO token_usage VALUES (86400, 'conversation', 'm', 'A', 2, 3, 5, 0)",
                    [],
                )
                .unwrap();
            },
            |c, _| {
                let mut c = Connection::open(c.path().unwrap()).unwrap();
                ensure_daily(&mut c).unwrap();
                let (calls, total): (i64, i64) = c
                    .query_row(
                        "SELECT calls, total_tokens FROM token_usage_daily WHERE day = 86400",
                        [],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .unwrap();
                assert_eq!((calls, total), (1, 5));
            },
        );
    }

    /// The daily sums a full scan of the calls gives.
    fn recomputed(u: &TokenUsage) -> Vec<DailyRow> {
        let mut m: std::collections::BTreeMap<(i64, String, String), DailyRow> = Default::default();
        for r in u.rows_since(i64::MIN).unwrap() {
            let d = m
                .entry((day_of(r.ts), r.model.clone(), r.slot.clone()))
                .or_insert(DailyRow {
                    day: day_of(r.ts),
                    model: r.model.clone(),
                    slot: r.slot.clone(),
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    total_tokens: 0,
                    calls: 0,
                    estimated: 0,
                });
            d.prompt_tokens += r.prompt_tokens;
            d.completion_tokens += r.completion_tokens;
            d.total_tokens += r.total_tokens;
            d.calls += 1;
            d.estimated += r.estimated as i64;
        }
        m.into_values().collect()
    }

    #[test]
    fn daily_rows_follow_every_insert_and_old_databases_are_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/token_usage.db");
        // A database as the previous release wrote it: calls only.
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(CALLS).unwrap();
            for i in 0..500i64 {
                c.execute(
                    "INSERT INTO token_usage VALUES (?1, ?2, ?3, 'A', ?4, 1, ?5, ?6)",
                    params![
                        1_700_000_000 - i * 7_919 - 86_400 * 3 * (i % 2),
                        ["conversation", "emotion"][(i % 2) as usize],
                        format!("m{}", i % 3),
                        i,
                        i + 1,
                        i % 5 == 0
                    ],
                )
                .unwrap();
            }
        }
        let u = TokenUsage::new(path.clone());
        assert_eq!(u.daily(i64::MIN, i64::MAX).unwrap(), recomputed(&u));
        assert!(!u.daily(i64::MIN, i64::MAX).unwrap().is_empty());
        // New calls (negative timestamps included) update the sums.
        u.record(&row(1_700_000_000, "m9", "summary", 3, true))
            .unwrap();
        u.record_many(&[
            row(-5, "m1", "emotion", 2, false),
            row(0, "m1", "emotion", 2, false),
        ])
        .unwrap();
        assert_eq!(u.daily(i64::MIN, i64::MAX).unwrap(), recomputed(&u));
        // Rows written behind its back (an older binary) are noticed on the next open.
        drop(u);
        {
            let c = Connection::open(&path).unwrap();
            c.execute(
                "INSERT INTO token_usage VALUES (1, 'x', 'y', 'A', 1, 1, 2, 0)",
                [],
            )
            .unwrap();
        }
        let u = TokenUsage::new(path);
        assert_eq!(u.daily(i64::MIN, i64::MAX).unwrap(), recomputed(&u));
        let all = u.rows_since(i64::MIN).unwrap();
        let newest = u.newest_rows(i64::MIN, 3).unwrap();
        assert_eq!(newest.len(), 3);
        assert_eq!(
            newest.iter().map(|r| r.ts).collect::<Vec<_>>(),
            all[all.len() - 3..]
                .iter()
                .map(|r| r.ts)
                .collect::<Vec<_>>()
        );
    }
}

//! Token usage of every model call, in SQLite (`<data>/state/token_usage.db`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use serde::Serialize;

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

/// The recorder; the database is opened on first use.
#[derive(Clone)]
pub struct TokenUsage {
    path: PathBuf,
    conn: Arc<Mutex<Option<Connection>>>,
}

impl TokenUsage {
    pub fn new(path: PathBuf) -> Self {
        TokenUsage {
            path,
            conn: Arc::default(),
        }
    }

    fn with_conn<R>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, String> {
        let mut g = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            let c = Connection::open(&self.path).map_err(|e| e.to_string())?;
            c.execute_batch(
                "PRAGMA journal_mode=WAL;
                 CREATE TABLE IF NOT EXISTS token_usage (
                    ts INTEGER NOT NULL, slot TEXT NOT NULL, model TEXT NOT NULL, character TEXT NOT NULL,
                    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
                    total_tokens INTEGER NOT NULL, estimated INTEGER NOT NULL);
                 CREATE INDEX IF NOT EXISTS token_usage_ts ON token_usage(ts);",
            )
            .map_err(|e| e.to_string())?;
            *g = Some(c);
        }
        match g.as_ref() {
            Some(c) => f(c).map_err(|e| e.to_string()),
            None => Err("token usage database unavailable".into()),
        }
    }

    /// Record a call (blocking; call from `spawn_blocking` or use [`TokenUsage::record_async`]).
    pub fn record(&self, row: &UsageRow) -> Result<(), String> {
        self.with_conn(|c| {
            c.execute(
                "INSERT INTO token_usage VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                rusqlite::params![
                    row.ts,
                    row.slot,
                    row.model,
                    row.character,
                    row.prompt_tokens,
                    row.completion_tokens,
                    row.total_tokens,
                    row.estimated as i64
                ],
            )
            .map(|_| ())
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
            let mut st = c.prepare(
                "SELECT ts, slot, model, character, prompt_tokens, completion_tokens, total_tokens, estimated
                 FROM token_usage WHERE ts >= ?1 ORDER BY ts",
            )?;
            let rows = st.query_map([since], |r| {
                Ok(UsageRow {
                    ts: r.get(0)?,
                    slot: r.get(1)?,
                    model: r.get(2)?,
                    character: r.get(3)?,
                    prompt_tokens: r.get(4)?,
                    completion_tokens: r.get(5)?,
                    total_tokens: r.get(6)?,
                    estimated: r.get::<_, i64>(7)? != 0,
                })
            })?;
            rows.collect()
        })
    }
}

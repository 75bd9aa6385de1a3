//! The leaderboard's SQLite file (`<data>/state/game_scores/badminton_scores.db`):
//! schema and its upgrade, the counters kept by triggers, and the queries of a
//! submission and a page.

use std::path::PathBuf;
use std::time::Duration;

use companiond_core::sqlite::{Schema, SchemaError, Step};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::{Best, BoardRow, Page, PageQuery, Submission, Submitted, Totals};

/// Pixels per metre of the badminton court (12 px per foot).
const PX_PER_METRE: f64 = 12.0 * 3.28084;

/// Store a submission; its rank and whether it is the character's best.
pub fn insert(c: &mut Connection, sub: &Submission) -> rusqlite::Result<Submitted> {
    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute(
        "INSERT INTO badminton_scores (session_id, persona_name, score, streak, max_distance_px, \
         line_in_count, net_touch_count, zone_in_count, mode) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
        params![
            sub.session_id,
            sub.persona_name,
            sub.totals.score,
            sub.totals.streak,
            sub.totals.max_distance_px,
            sub.line_in_count,
            sub.net_touch_count,
            sub.zone_in_count,
            sub.mode
        ],
    )?;
    let id = tx.last_insert_rowid();
    let rank = rank_of(&tx, id)?;
    let (_, players) = counts(&tx)?;
    let best = best_of(&tx, "persona_name", &sub.persona_name)?;
    tx.commit()?;
    Ok(Submitted {
        rank,
        total_players: players,
        is_personal_best: best.map(|(bid, _, _)| bid == id).unwrap_or(false),
        score: sub.totals.score,
        mode: sub.mode.clone(),
    })
}

/// One page of the board.
pub fn page(c: &Connection, q: &PageQuery) -> rusqlite::Result<Page> {
    let (total_scores, players) = counts(c)?;
    let mut stmt = c.prepare(
        "SELECT persona_name, session_id, score, streak, max_distance_px, mode, created_at \
         FROM badminton_scores ORDER BY score DESC, streak DESC, max_distance_px DESC, \
         created_at ASC, id ASC LIMIT ?1 OFFSET ?2",
    )?;
    let rows = stmt.query_map(params![q.limit, q.offset], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, f64>(4)?,
            r.get::<_, String>(5)?,
            r.get::<_, String>(6)?,
        ))
    })?;
    let mut top = Vec::new();
    for (i, row) in rows.enumerate() {
        let (name, _sid, score, streak, dist, mode, created) = row?;
        top.push(BoardRow {
            rank: q.offset + i as i64 + 1,
            name,
            score,
            streak,
            max_distance_m: format!("{:.1}", dist / PX_PER_METRE),
            mode,
            date: created.chars().take(10).collect(),
        });
    }
    let your_best = match (&q.persona_name, &q.session_id) {
        (Some(p), _) => best_of(c, "persona_name", p)?,
        (None, Some(s)) => best_of(c, "session_id", s)?,
        _ => None,
    };
    let shown = top.len() as i64;
    Ok(Page {
        top,
        total_players: players,
        total_scores,
        limit: q.limit,
        offset: q.offset,
        has_more: q.offset + shown < total_scores,
        your_best: your_best.map(|(_, rank, score)| Best { rank, score }),
    })
}

/// One stored score, as [`import_scores`] takes it.
#[derive(Debug, Clone)]
pub struct ScoreRow {
    pub persona_name: String,
    pub session_id: String,
    pub mode: String,
    pub totals: Totals,
    /// `YYYY-MM-DD HH:MM:SS` (UTC), as SQLite's `CURRENT_TIMESTAMP` writes it.
    pub created_at: String,
}

/// Append scores to the board file at `path` in one transaction (blocking):
/// importing a board kept elsewhere, or filling one for a benchmark. Rows go
/// through the same schema, indexes and counters as a submitted round.
pub fn import_scores(path: &std::path::Path, rows: &[ScoreRow]) -> Result<(), String> {
    let mut c = open(&path.to_path_buf()).map_err(|e| e.to_string())?;
    let tx = c.transaction().map_err(|e| e.to_string())?;
    {
        let mut st = tx
            .prepare(
                "INSERT INTO badminton_scores (session_id, persona_name, score, streak, \
                 max_distance_px, mode, created_at) VALUES (?1,?2,?3,?4,?5,?6,?7)",
            )
            .map_err(|e| e.to_string())?;
        for r in rows {
            st.execute(params![
                r.session_id,
                r.persona_name,
                r.totals.score,
                r.totals.streak,
                r.totals.max_distance_px,
                r.mode,
                r.created_at
            ])
            .map_err(|e| e.to_string())?;
        }
    }
    tx.commit().map_err(|e| e.to_string())
}

pub fn open(path: &PathBuf) -> Result<Connection, SchemaError> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut c = Connection::open(path)?;
    c.busy_timeout(Duration::from_secs(5))?;
    c.execute_batch("PRAGMA journal_mode=WAL;")?;
    SCHEMA.migrate(&mut c)?;
    Ok(c)
}

/// The schema of the leaderboard: 1 the scores, 2 the board-order indexes
/// and the counters kept by triggers ([`board_counters`]).
pub const SCHEMA: Schema = Schema {
    name: "leaderboard.db",
    steps: &[Step::Sql(SCORES), Step::Code(board_counters)],
};

/// The scores (the first release's whole database).
const SCORES: &str = "CREATE TABLE IF NOT EXISTS badminton_scores (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            persona_name TEXT NOT NULL DEFAULT '',
            score INTEGER NOT NULL,
            streak INTEGER NOT NULL DEFAULT 0,
            max_distance_px REAL NOT NULL DEFAULT 0,
            line_in_count INTEGER NOT NULL DEFAULT 0,
            net_touch_count INTEGER NOT NULL DEFAULT 0,
            zone_in_count INTEGER NOT NULL DEFAULT 0,
            mode TEXT NOT NULL DEFAULT 'spectator',
            created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
         );";

/// The player key of a row: its character, else its session.
const PLAYER_KEY_NEW: &str =
    "CASE WHEN NEW.persona_name != '' THEN 'p:' || NEW.persona_name ELSE 's:' || NEW.session_id END";
const PLAYER_KEY_OLD: &str =
    "CASE WHEN OLD.persona_name != '' THEN 'p:' || OLD.persona_name ELSE 's:' || OLD.session_id END";

/// Indexes in board order (a page at any offset walks the index, never sorts the
/// table), per character and per session (a best row), and the counters a page
/// shows (`badminton_board`: scores and players; `badminton_players`: scores per
/// player), kept by triggers so that every writer of the file keeps them right.
/// A database of an earlier release gets them (counted anew) in the
/// transaction of its schema step.
fn board_counters(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let player_key_row = PLAYER_KEY_NEW.replace("NEW.", "");
    tx.execute_batch(&format!(
        "DROP INDEX IF EXISTS idx_badminton_scores_order;
         CREATE INDEX IF NOT EXISTS idx_badminton_scores_board ON badminton_scores
            (score DESC, streak DESC, max_distance_px DESC, created_at ASC, id ASC);
         CREATE INDEX IF NOT EXISTS idx_badminton_scores_persona ON badminton_scores
            (persona_name, score DESC, streak DESC, max_distance_px DESC, created_at ASC, id ASC);
         CREATE INDEX IF NOT EXISTS idx_badminton_scores_session ON badminton_scores
            (session_id, score DESC, streak DESC, max_distance_px DESC, created_at ASC, id ASC);
         DROP TABLE IF EXISTS badminton_players;
         DROP TABLE IF EXISTS badminton_board;
         CREATE TABLE badminton_players (key TEXT PRIMARY KEY, scores INTEGER NOT NULL) WITHOUT ROWID;
         CREATE TABLE badminton_board (id INTEGER PRIMARY KEY CHECK (id = 1),
            total_scores INTEGER NOT NULL, total_players INTEGER NOT NULL);
         INSERT INTO badminton_players (key, scores)
            SELECT {player_key_row}, COUNT(*) FROM badminton_scores GROUP BY 1;
         INSERT INTO badminton_board (id, total_scores, total_players) VALUES (1,
            (SELECT COUNT(*) FROM badminton_scores), (SELECT COUNT(*) FROM badminton_players));
         DROP TRIGGER IF EXISTS badminton_scores_ai;
         DROP TRIGGER IF EXISTS badminton_scores_ad;
         DROP TRIGGER IF EXISTS badminton_scores_au;
         CREATE TRIGGER badminton_scores_ai AFTER INSERT ON badminton_scores BEGIN
            {add}
         END;
         CREATE TRIGGER badminton_scores_ad AFTER DELETE ON badminton_scores BEGIN
            {remove}
         END;
         CREATE TRIGGER badminton_scores_au AFTER UPDATE OF persona_name, session_id ON badminton_scores BEGIN
            {remove}
            {add}
         END;",
        add = format!(
            "INSERT INTO badminton_players (key, scores) VALUES ({PLAYER_KEY_NEW}, 1)
                ON CONFLICT(key) DO UPDATE SET scores = scores + 1;
             UPDATE badminton_board SET total_scores = total_scores + 1,
                total_players = total_players
                    + (SELECT scores = 1 FROM badminton_players WHERE key = {PLAYER_KEY_NEW})
                WHERE id = 1;"
        ),
        remove = format!(
            "UPDATE badminton_players SET scores = scores - 1 WHERE key = {PLAYER_KEY_OLD};
             UPDATE badminton_board SET total_scores = total_scores - 1,
                total_players = total_players
                    - COALESCE((SELECT scores <= 0 FROM badminton_players WHERE key = {PLAYER_KEY_OLD}), 0)
                WHERE id = 1;
             DELETE FROM badminton_players WHERE key = {PLAYER_KEY_OLD} AND scores <= 0;"
        ),
    ))
}

/// 1 + the number of rows strictly ahead of row `id` in board order; each term
/// is a range of the board index.
fn rank_of(c: &Connection, id: i64) -> rusqlite::Result<i64> {
    let row: Option<(i64, i64, f64, String)> = c
        .query_row(
            "SELECT score, streak, max_distance_px, created_at FROM badminton_scores WHERE id = ?1",
            params![id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    let Some((score, streak, dist, created)) = row else {
        return Ok(1);
    };
    let mut st = c.prepare_cached(
        "SELECT 1 \
         + (SELECT COUNT(*) FROM badminton_scores WHERE score > ?1) \
         + (SELECT COUNT(*) FROM badminton_scores WHERE score = ?1 AND streak > ?2) \
         + (SELECT COUNT(*) FROM badminton_scores WHERE score = ?1 AND streak = ?2 \
              AND max_distance_px > ?3) \
         + (SELECT COUNT(*) FROM badminton_scores WHERE score = ?1 AND streak = ?2 \
              AND max_distance_px = ?3 AND (created_at < ?4 OR (created_at = ?4 AND id < ?5)))",
    )?;
    st.query_row(params![score, streak, dist, created, id], |r| r.get(0))
}

/// `(total_scores, total_players)` from the counters.
fn counts(c: &Connection) -> rusqlite::Result<(i64, i64)> {
    c.query_row(
        "SELECT total_scores, total_players FROM badminton_board WHERE id = 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map(|r| r.unwrap_or((0, 0)))
}

/// The best row of a character (`column` persona_name) or session: (id, rank, score).
fn best_of(c: &Connection, column: &str, value: &str) -> rusqlite::Result<Option<(i64, i64, i64)>> {
    let col = if column == "session_id" {
        "session_id"
    } else {
        "persona_name"
    };
    let row: Option<(i64, i64)> = c
        .query_row(
            &format!(
                "SELECT id, score FROM badminton_scores WHERE {col} = ?1 ORDER BY score DESC, \
                 streak DESC, max_distance_px DESC, created_at ASC, id ASC LIMIT 1"
            ),
            params![value],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    match row {
        Some((id, score)) => Ok(Some((id, rank_of(c, id)?, score))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD_SCHEMA: &str = "CREATE TABLE badminton_scores (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
            persona_name TEXT NOT NULL DEFAULT '', score INTEGER NOT NULL,
            streak INTEGER NOT NULL DEFAULT 0, max_distance_px REAL NOT NULL DEFAULT 0,
            line_in_count INTEGER NOT NULL DEFAULT 0, net_touch_count INTEGER NOT NULL DEFAULT 0,
            zone_in_count INTEGER NOT NULL DEFAULT 0, mode TEXT NOT NULL DEFAULT 'spectator',
            created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
         CREATE INDEX idx_badminton_scores_order
            ON badminton_scores (score DESC, streak DESC, max_distance_px DESC);";

    #[test]
    fn every_schema_version_upgrades_with_its_scores() {
        companiond_core::sqlite::testing::upgrades_from_every_version(
            &SCHEMA,
            Some(OLD_SCHEMA),
            |c, _| {
                for i in 0..5 {
                    insert(c, i);
                }
            },
            |c, _| check(c),
        );
    }

    /// The previous release's queries: full scans, the reference.
    fn reference(c: &Connection, id: i64) -> (i64, i64, i64) {
        let rank = c
            .query_row(
                "SELECT 1 + (SELECT COUNT(*) FROM badminton_scores o WHERE \
                o.score > r.score \
                OR (o.score = r.score AND o.streak > r.streak) \
                OR (o.score = r.score AND o.streak = r.streak AND o.max_distance_px > r.max_distance_px) \
                OR (o.score = r.score AND o.streak = r.streak AND o.max_distance_px = r.max_distance_px \
                    AND (o.created_at < r.created_at OR (o.created_at = r.created_at AND o.id < r.id)))) \
                FROM badminton_scores r WHERE r.id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        let (scores, players) = c
            .query_row(
                "SELECT COUNT(*), COUNT(DISTINCT CASE WHEN persona_name != '' THEN 'p:' || persona_name \
                 ELSE 's:' || session_id END) FROM badminton_scores",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        (rank, scores, players)
    }

    fn insert(c: &Connection, i: i64) {
        c.execute(
            "INSERT INTO badminton_scores (session_id, persona_name, score, streak, max_distance_px, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                format!("s{}", i % 13),
                if i % 4 == 0 { String::new() } else { format!("p{}", i % 7) },
                i % 5,
                i % 3,
                (i % 2) as f64 * 1.5,
                format!("2026-01-0{} 00:00:00", 1 + i % 3)
            ],
        )
        .unwrap();
    }

    fn check(c: &Connection) {
        let ids: Vec<i64> = c
            .prepare("SELECT id FROM badminton_scores")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for id in ids {
            let (rank, scores, players) = reference(c, id);
            assert_eq!(rank_of(c, id).unwrap(), rank, "id {id}");
            assert_eq!(counts(c).unwrap(), (scores, players));
        }
    }

    #[test]
    fn an_old_board_is_upgraded_and_counters_follow_every_change() {
        let dir = std::env::temp_dir().join(format!(
            "lb-{}-{}",
            std::process::id(),
            companiond_core::now_millis()
        ));
        let path = dir.join("badminton_scores.db");
        std::fs::create_dir_all(&dir).unwrap();
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(OLD_SCHEMA).unwrap();
            for i in 0..120 {
                insert(&c, i);
            }
        }
        let c = open(&path).unwrap();
        check(&c);
        for i in 120..160 {
            insert(&c, i);
        }
        c.execute("DELETE FROM badminton_scores WHERE id % 9 = 0", [])
            .unwrap();
        c.execute(
            "UPDATE badminton_scores SET persona_name = 'moved' WHERE id % 11 = 0",
            [],
        )
        .unwrap();
        check(&c);
        // Reopening keeps the counters (no second rebuild needed).
        drop(c);
        let c = open(&path).unwrap();
        check(&c);
        // The page query walks the board index (no sort of the table).
        let plan: Vec<String> = c
            .prepare(
                "EXPLAIN QUERY PLAN SELECT persona_name FROM badminton_scores ORDER BY score DESC, \
                 streak DESC, max_distance_px DESC, created_at ASC, id ASC LIMIT 10 OFFSET 20",
            )
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter()
                .any(|p| p.contains("idx_badminton_scores_board"))
                && !plan.iter().any(|p| p.contains("TEMP B-TREE")),
            "{plan:?}"
        );
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

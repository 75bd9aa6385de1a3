//! SQLite databases: a schema as numbered steps under `PRAGMA user_version`,
//! and the check of a database at open (docs/data.md § Databases).
//!
//! Written here rather than taken from `rusqlite_migration`: the whole rule is
//! the loop of [`Schema::migrate`], and companiond needs two things that crate
//! does not do — databases made before versions were kept (`user_version` 0
//! with the tables of that release in them, so every step must also apply to
//! those), and a database written by a newer release left untouched.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, Transaction, TransactionBehavior};

/// One step of a schema, run in one transaction that also sets the version.
pub enum Step {
    /// Statements run as one batch.
    Sql(&'static str),
    /// Code, for a step that reads what is there (a rebuild, a backfill).
    Code(fn(&Transaction<'_>) -> rusqlite::Result<()>),
}

/// A database's schema: `steps[k]` brings a database at version `k` to `k + 1`.
///
/// Version 0 is also what every database made before versions were kept
/// reads (SQLite's default): each step must apply to those too, so steps use
/// `IF NOT EXISTS` or look before they change.
pub struct Schema {
    /// The database, for messages.
    pub name: &'static str,
    pub steps: &'static [Step],
}

/// Why a database could not be brought to its schema.
#[derive(Debug)]
pub enum SchemaError {
    /// Written by a newer companiond: left as it is.
    Newer {
        found: i64,
        known: i64,
    },
    Sqlite(rusqlite::Error),
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaError::Newer { found, known } => write!(
                f,
                "the database is at schema version {found}, newer than this companiond knows ({known}); it was left as it is"
            ),
            SchemaError::Sqlite(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SchemaError {}

impl From<rusqlite::Error> for SchemaError {
    fn from(e: rusqlite::Error) -> Self {
        SchemaError::Sqlite(e)
    }
}

/// The `user_version` of an open database.
pub fn version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

impl Schema {
    /// The version a database has once every step ran.
    pub fn latest(&self) -> i64 {
        self.steps.len() as i64
    }

    /// Bring `conn` to the latest version, one step per transaction (a crash
    /// between steps leaves a database at a version, never between two). The
    /// version it was at.
    pub fn migrate(&self, conn: &mut Connection) -> Result<i64, SchemaError> {
        let found = version(conn)?;
        if found > self.latest() {
            return Err(SchemaError::Newer {
                found,
                known: self.latest(),
            });
        }
        for (k, step) in self.steps.iter().enumerate() {
            let k = k as i64;
            if k < found {
                continue;
            }
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Another connection may have run it meanwhile.
            if version(&tx)? > k {
                tx.commit()?;
                continue;
            }
            match step {
                Step::Sql(sql) => tx.execute_batch(sql)?,
                Step::Code(f) => f(&tx)?,
            }
            tx.pragma_update(None, "user_version", k + 1)?;
            tx.commit()?;
        }
        Ok(found)
    }
}

/// `PRAGMA quick_check` of an open database: `Err` with what SQLite found.
pub fn quick_check(conn: &Connection) -> Result<(), String> {
    match conn.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0)) {
        Ok(s) if s == "ok" => Ok(()),
        Ok(s) => Err(s),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether the file at `path` is a database that passes its check (a file
/// that is not a database at all fails it too).
pub fn check_file(path: &Path) -> Result<(), String> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    quick_check(&conn)
}

/// Move a database aside as `NAME.corrupt-<millis>` (its `-wal` and `-shm`
/// with it), so that a new one is made in its place and nothing of the old
/// one is lost; the new name.
pub fn move_aside(path: &Path) -> std::io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let aside = path.with_file_name(format!("{name}.corrupt-{}", crate::now_millis()));
    std::fs::rename(path, &aside)?;
    for suffix in ["-wal", "-shm"] {
        let side = path.with_file_name(format!("{name}{suffix}"));
        if side.exists() {
            let to = aside.with_file_name(format!(
                "{}{suffix}",
                aside
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ));
            let _ = std::fs::rename(&side, to);
        }
    }
    Ok(aside)
}

/// Check the database at `path` before it is opened for use: one that fails
/// `quick_check` (or is not a database) is moved aside ([`move_aside`]) and a
/// notice is queued, so the caller makes a new one. The aside name when it was
/// moved.
pub fn set_aside_if_corrupt(
    path: &Path,
    what: &str,
    notices: Option<&crate::notices::Notices>,
) -> Option<PathBuf> {
    if !path.exists() {
        return None;
    }
    let why = check_file(path).err()?;
    let aside = match move_aside(path) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(
                "{} failed its check ({why}) and cannot be moved aside: {e}",
                path.display()
            );
            return None;
        }
    };
    tracing::warn!(
        "{} failed its check ({why}); moved to {} and starting a new one",
        path.display(),
        aside.display()
    );
    if let Some(n) = notices {
        n.push(serde_json::json!({
            "kind": "database_recovered",
            "message": format!("The {what} was damaged; a copy was kept and a new one was started."),
            "backup_path": aside.to_string_lossy(),
        }));
    }
    Some(aside)
}

/// The test of a [`Schema`] that every older version upgrades.
#[cfg(any(test, feature = "testkit"))]
pub mod testing {
    use super::*;

    /// Bring a database to each version of `schema` in turn, filled by `fill`
    /// at that version (`fill(conn, v)`), then migrate it and hand it to
    /// `check` (with the version it was made at): every older version upgrades.
    pub fn upgrades_from_every_version(
        schema: &Schema,
        legacy: Option<&str>,
        fill: impl Fn(&Connection, i64),
        check: impl Fn(&Connection, i64),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for made_at in 0..=schema.latest() {
            let p = dir.path().join(format!("v{made_at}.db"));
            let mut c = Connection::open(&p).unwrap();
            if made_at == 0 {
                if let Some(sql) = legacy {
                    c.execute_batch(sql).unwrap();
                }
            }
            for (k, step) in schema.steps.iter().enumerate().take(made_at as usize) {
                let tx = c.transaction().unwrap();
                match step {
                    Step::Sql(sql) => tx.execute_batch(sql).unwrap(),
                    Step::Code(f) => f(&tx).unwrap(),
                }
                tx.pragma_update(None, "user_version", k as i64 + 1)
                    .unwrap();
                tx.commit().unwrap();
            }
            fill(&c, made_at);
            assert_eq!(schema.migrate(&mut c).unwrap(), made_at, "{}", schema.name);
            assert_eq!(version(&c).unwrap(), schema.latest(), "{}", schema.name);
            check(&c, made_at);
            // A second open changes nothing.
            assert_eq!(schema.migrate(&mut c).unwrap(), schema.latest());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::upgrades_from_every_version;
    use super::*;

    const TWO: Schema = Schema {
        name: "test",
        steps: &[
            Step::Sql("CREATE TABLE IF NOT EXISTS t (a INTEGER NOT NULL);"),
            Step::Code(|tx| {
                let has_b: bool = tx.query_row(
                    "SELECT COUNT(*) > 0 FROM pragma_table_info('t') WHERE name = 'b'",
                    [],
                    |r| r.get(0),
                )?;
                if !has_b {
                    tx.execute_batch("ALTER TABLE t ADD COLUMN b TEXT NOT NULL DEFAULT 'x';")?;
                }
                Ok(())
            }),
        ],
    };

    #[test]
    fn every_version_upgrades_and_keeps_its_rows() {
        upgrades_from_every_version(
            &TWO,
            Some("CREATE TABLE t (a INTEGER NOT NULL);"),
            |c, _| {
                c.execute("INSERT INTO t (a) VALUES (7)", []).unwrap();
            },
            |c, _| {
                let (a, b): (i64, String) = c
                    .query_row("SELECT a, b FROM t", [], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap();
                assert_eq!((a, b.as_str()), (7, "x"));
            },
        );
    }

    #[test]
    fn a_newer_database_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Connection::open(dir.path().join("n.db")).unwrap();
        c.pragma_update(None, "user_version", 9).unwrap();
        assert!(matches!(
            TWO.migrate(&mut c),
            Err(SchemaError::Newer { found: 9, known: 2 })
        ));
        assert_eq!(version(&c).unwrap(), 9);
    }

    #[test]
    fn a_damaged_file_is_moved_aside_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.db");
        std::fs::write(&p, b"not a database at all, but bytes").unwrap();
        let notices = crate::notices::Notices::default();
        let aside = set_aside_if_corrupt(&p, "test database", Some(&notices)).unwrap();
        assert!(!p.exists());
        assert_eq!(
            std::fs::read(&aside).unwrap(),
            b"not a database at all, but bytes"
        );
        assert!(aside.to_string_lossy().contains("x.db.corrupt-"));
        // A sound database stays.
        Connection::open(&p)
            .unwrap()
            .execute_batch("CREATE TABLE t (a);")
            .unwrap();
        assert_eq!(
            set_aside_if_corrupt(&p, "test database", Some(&notices)),
            None
        );
        assert!(p.exists());
    }
}

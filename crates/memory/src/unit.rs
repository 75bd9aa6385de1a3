//! The per-character memory directory `<data>/memory/<name>/` and its files.
//!
//! The file layout is the contract shared with cloud save: the flat files of
//! the character unit ([`UNIT_FILES`], docs/memory.md) live directly in the
//! directory; everything in [`LOCAL_ONLY`] stays on this device.

use std::io::Write;
use std::path::{Path, PathBuf};

use companiond_core::paths;
use companiond_core::sqlite::{Schema, Step};

/// The character-unit files, in the order cloud save lists them.
pub const UNIT_FILES: &[&str] = companiond_core::layout::CHARACTER_UNIT_FILES;

/// Files and folders of a memory directory that are never part of the unit.
pub const LOCAL_ONLY: &[&str] = &[
    "recent_meta.json",
    "cursors.json",
    "outbox.ndjson",
    "events.ndjson",
    "events_applied.json",
    "facts_pending_dedup.json",
    "reflection_archive",
    "persona_archive",
    "semantic_memory_legacy",
    "time_indexed.db-wal",
    "time_indexed.db-shm",
    "time_indexed.db-journal",
    INDEX_SOURCES,
];

/// Stamps of the files the time index was last fully synced from (device-local).
pub const INDEX_SOURCES: &str = "time_indexed.sources";

/// The recent history file.
pub const RECENT: &str = "recent.json";
/// The SQLite time index.
pub const TIME_INDEX: &str = "time_indexed.db";

/// Tables of `time_indexed.db`: the original and the compressed time-indexed history.
pub const TIME_INDEX_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS time_indexed_original (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    message TEXT NOT NULL,
    timestamp TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS time_indexed_compressed (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    message TEXT NOT NULL,
    timestamp TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS time_indexed_original_ts ON time_indexed_original(timestamp);
CREATE INDEX IF NOT EXISTS time_indexed_compressed_ts ON time_indexed_compressed(timestamp);
";

/// The schema of `time_indexed.db`: 1 the original application's tables
/// ([`TIME_INDEX_SCHEMA`]), 2 companiond's search tables ([`crate::index::SCHEMA`]),
/// 3 the archive of lines folded out of `recent.json` ([`crate::fold::SCHEMA`]).
/// The original reads the file without looking at `user_version`.
pub const TIME_INDEX_DB: Schema = Schema {
    name: "time_indexed.db",
    steps: &[
        Step::Sql(TIME_INDEX_SCHEMA),
        Step::Sql(crate::index::SCHEMA),
        Step::Sql(crate::fold::SCHEMA),
        Step::Code(crate::fold::mark_archived),
    ],
};

/// Initial content of a JSON unit file.
pub fn default_content(file: &str) -> Option<&'static [u8]> {
    match file {
        "recent.json"
        | "facts.json"
        | "facts_archive.json"
        | "persona_corrections.json"
        | "reflections.json"
        | "reflections_archive.json"
        | "surfaced.json" => Some(b"[]"),
        "settings.json" | "persona.json" => Some(b"{}"),
        _ => None,
    }
}

/// `<data>/memory`.
pub fn memory_root(data_dir: &Path) -> PathBuf {
    data_dir.join("memory")
}

/// `<data>/memory/<name>` for a name that came from a request: the name must be
/// a single plain path segment that stays under the memory root.
pub fn character_dir(data_dir: &Path, name: &str) -> Result<PathBuf, String> {
    let name = paths::safe_name(name).map_err(|e| e.to_string())?;
    paths::safe_join(&memory_root(data_dir), name).map_err(|e| e.to_string())
}

/// Create the missing unit files of `dir` (never replacing an existing one) and
/// return the paths it created. JSON files get an empty document; the time index
/// is a real SQLite database with its tables.
pub fn ensure_memory_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut created = Vec::new();
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        created.push(dir.to_path_buf());
    }
    for file in UNIT_FILES {
        let path = dir.join(file);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        let made = if *file == TIME_INDEX {
            create_time_index(&path)?
        } else {
            create_no_clobber(&path, default_content(file).unwrap_or(b"{}"))?
        };
        if made {
            created.push(path);
        }
    }
    Ok(created)
}

/// Write `bytes` to `path` only if nothing is there yet; atomic (temp file +
/// hard link, which fails when the target exists). Whether it created the file.
pub fn create_no_clobber(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    link_new(path, &format!(".{name}.{{}}.new"), |tmp| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })
}

/// Create the SQLite time index at `path` (in a temporary file first, then
/// linked into place without replacing anything).
pub fn create_time_index(path: &Path) -> std::io::Result<bool> {
    link_new(path, ".time_indexed.{}.db", |tmp| {
        {
            let mut conn = rusqlite::Connection::open(tmp).map_err(std::io::Error::other)?;
            // companiond's search tables too, so opening it later writes nothing.
            TIME_INDEX_DB
                .migrate(&mut conn)
                .map_err(std::io::Error::other)?;
        }
        if let Ok(f) = std::fs::File::open(tmp) {
            let _ = f.sync_all();
        }
        Ok(())
    })
}

/// Make a new file beside `path` with `make` (its name is `pattern` with `{}`
/// replaced by a unique id), then hard-link it to `path` unless something is
/// there already; the temporary name is always removed. Whether it created
/// `path`.
fn link_new(
    path: &Path,
    pattern: &str,
    make: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let tmp = dir.join(pattern.replace("{}", &uuid::Uuid::new_v4().simple().to_string()));
    let result = make(&tmp).and_then(|()| match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    });
    let _ = std::fs::remove_file(&tmp);
    result
}

/// Open the time index of `dir` and check it: it must be a readable SQLite
/// database with its tables (created when missing).
pub fn verify_time_index(dir: &Path) -> Result<(), String> {
    let path = dir.join(TIME_INDEX);
    let conn = rusqlite::Connection::open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| format!("{} is not a usable SQLite database: {e}", path.display()))?;
    if check != "ok" {
        return Err(format!(
            "{} failed its integrity check: {check}",
            path.display()
        ));
    }
    conn.execute_batch(TIME_INDEX_SCHEMA)
        .map_err(|e| format!("cannot prepare {}: {e}", path.display()))?;
    Ok(())
}

/// Legacy flat files of a memory root that belong to `name`, with the unit file
/// (or folder) each one becomes inside `memory/<name>/`.
pub fn legacy_flat_entries(name: &str) -> Vec<(String, &'static str)> {
    let mut v: Vec<(String, &'static str)> = UNIT_FILES
        .iter()
        .filter(|f| f.ends_with(".json"))
        .map(|f| {
            let stem = f.trim_end_matches(".json");
            (format!("{stem}_{name}.json"), *f)
        })
        .collect();
    v.push((format!("time_indexed_{name}"), TIME_INDEX));
    v.push((format!("time_indexed_{name}.db"), TIME_INDEX));
    v.push((format!("semantic_memory_{name}"), "semantic_memory_legacy"));
    v
}

/// Does `name` have memory storage in the runtime memory root (its directory or
/// any legacy flat file)?
pub fn memory_exists(data_dir: &Path, name: &str) -> bool {
    let root = memory_root(data_dir);
    if paths::safe_name(name).is_err() {
        return false;
    }
    if root.join(name).symlink_metadata().is_ok() {
        return true;
    }
    legacy_flat_entries(name)
        .iter()
        .any(|(flat, _)| root.join(flat).symlink_metadata().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_time_index_version_upgrades_with_its_rows() {
        // Version 0 is the original application's file: its two tables only.
        companiond_core::sqlite::testing::upgrades_from_every_version(
            &TIME_INDEX_DB,
            Some(TIME_INDEX_SCHEMA),
            |c, made_at| {
                c.execute(
                    "INSERT INTO time_indexed_original (session_id, message, timestamp) \
                     VALUES ('s', 'hello', '2026-01-01 00:00:00')",
                    [],
                )
                .unwrap();
                // A folded history (version 3): line 1 archived, line 2 in the file.
                if made_at == 3 {
                    c.execute_batch(
                        "INSERT INTO memory_lines(id, ref, speaker, text, ts) VALUES
                             (1, 'a', 'human', 'old', 1), (2, 'b', 'ai', 'new', 2);
                         INSERT INTO memory_archive(fold, line, raw, ts) VALUES (1, 1, '{}', 1);",
                    )
                    .unwrap();
                }
            },
            |c, made_at| {
                if made_at == 3 {
                    let live: Vec<i64> = c
                        .prepare(crate::fold::LIVE_LINES)
                        .unwrap()
                        .query_map([], |r| r.get(0))
                        .unwrap()
                        .collect::<Result<_, _>>()
                        .unwrap();
                    assert_eq!(live, [2], "only the line still in the file is live");
                    c.execute("DELETE FROM memory_lines", []).unwrap();
                }
                let n: i64 = c
                    .query_row("SELECT COUNT(*) FROM time_indexed_original", [], |r| {
                        r.get(0)
                    })
                    .unwrap();
                assert_eq!(n, 1);
                let lines: i64 = c
                    .query_row("SELECT COUNT(*) FROM memory_lines", [], |r| r.get(0))
                    .unwrap();
                assert_eq!(lines, 0);
            },
        );
    }

    #[test]
    fn ensure_creates_every_unit_file_once() {
        let d = tempfile_dir();
        let dir = d.join("memory").join("Mika");
        let created = ensure_memory_files(&dir).unwrap();
        assert_eq!(created.len(), UNIT_FILES.len() + 1);
        for f in UNIT_FILES {
            assert!(dir.join(f).is_file(), "{f}");
        }
        std::fs::write(dir.join("recent.json"), b"[1]").unwrap();
        assert!(ensure_memory_files(&dir).unwrap().is_empty());
        assert_eq!(std::fs::read(dir.join("recent.json")).unwrap(), b"[1]");
        verify_time_index(&dir).unwrap();
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
        let _ = std::fs::remove_dir_all(d);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("mem-unit-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

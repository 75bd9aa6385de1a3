//! Full sync stamps: which files (by device, inode, length and times) the
//! last full sync of an index read, kept in a device-local file beside it.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::stores;
use crate::unit;

use super::{pending, SOURCES_VERSION};

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

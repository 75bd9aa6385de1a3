//! Where the user library lives on disk: a base document plus an append-only
//! journal (see docs/jukebox.md, "Storage").
//!
//! * `<data>/jukebox/config.json` — the base: the user document of the first
//!   format plus `storage: {format, generation}`; written whole (atomically) only
//!   by a compaction or the migration.
//! * `<data>/jukebox/config.journal` — one header line
//!   `{"journal":1,"generation":g,"base":stamp,"bundle":stamp,"summary":{..}}`,
//!   then one line per committed change: `{"ops":[...],"summary":{..}}`, each
//!   appended and `fdatasync`ed (O(size of the change) bytes). A journal whose
//!   generation is not the base's is stale (a compaction was cut short) and
//!   ignored. A torn last line (a crash while appending) is ignored and cut off
//!   before the next append.
//! * `<data>/jukebox/config.v1-backup.json` — the first-format document as it was
//!   before the migration (kept).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::model::{JournalOp, Summary};

/// File identity used to notice a change on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub modified_ns: u128,
    pub len: u64,
    pub ino: u64,
}

pub fn stamp_of(p: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(p).ok()?;
    Some(stamp_meta(&m))
}

fn stamp_meta(m: &std::fs::Metadata) -> FileStamp {
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(m);
    #[cfg(not(unix))]
    let ino = 0;
    FileStamp {
        modified_ns: m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or(0),
        len: m.len(),
        ino,
    }
}

pub const JOURNAL_VERSION: u64 = 1;

/// The journal's first line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    pub journal: u64,
    pub generation: u64,
    /// The base document this journal continues (as written).
    pub base: Option<FileStamp>,
    /// The bundled library file the summary was computed with.
    pub bundle: Option<FileStamp>,
    pub summary: Option<SummaryRec>,
}

/// A persisted summary (the answer of GET /config/summary after a restart).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryRec {
    pub config_revision: String,
    pub song_count: usize,
    pub visible_song_count: usize,
    pub action_count: usize,
}

impl From<&Summary> for SummaryRec {
    fn from(s: &Summary) -> Self {
        SummaryRec {
            config_revision: s.config_revision.clone(),
            song_count: s.song_count,
            visible_song_count: s.visible_song_count,
            action_count: s.action_count,
        }
    }
}

impl From<SummaryRec> for Summary {
    fn from(s: SummaryRec) -> Self {
        Summary {
            config_revision: s.config_revision,
            song_count: s.song_count,
            visible_song_count: s.visible_song_count,
            action_count: s.action_count,
        }
    }
}

/// A journal read from disk.
pub struct ReadJournal {
    /// Committed changes, in order.
    pub lines: Vec<Vec<JournalOp>>,
    /// Bytes up to the end of the last complete line.
    pub valid_len: u64,
}

/// Why a journal could not be used.
pub enum JournalError {
    /// No journal, or one that belongs to another generation / no header.
    Absent,
    /// A complete line in the middle is not a journal record.
    Corrupt(String),
    Io(std::io::Error),
}

/// Read a whole journal; `Absent` unless its generation is `generation`.
pub fn read_journal(path: &Path, generation: u64) -> Result<ReadJournal, JournalError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => f.read_to_end(&mut bytes).map_err(JournalError::Io)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(JournalError::Absent),
        Err(e) => return Err(JournalError::Io(e)),
    };
    let mut pos = 0usize;
    let mut header: Option<Header> = None;
    let mut lines = Vec::new();
    while let Some(nl) = bytes[pos..].iter().position(|b| *b == b'\n') {
        let line = &bytes[pos..pos + nl];
        let next = pos + nl + 1;
        let complete_tail = next == bytes.len();
        match &header {
            None => {
                let h: Header = match serde_json::from_slice(line) {
                    Ok(h) => h,
                    Err(_) => return Err(JournalError::Absent),
                };
                if h.journal != JOURNAL_VERSION || h.generation != generation {
                    return Err(JournalError::Absent);
                }
                header = Some(h);
            }
            Some(_) => match parse_line(line) {
                Some(ops) => lines.push(ops),
                // The last line may have been written partly before a crash.
                None if complete_tail => break,
                None => {
                    return Err(JournalError::Corrupt(format!(
                        "line {} is not a journal record",
                        lines.len() + 2
                    )))
                }
            },
        }
        pos = next;
    }
    if header.is_none() {
        return Err(JournalError::Absent);
    }
    Ok(ReadJournal {
        lines,
        valid_len: pos as u64,
    })
}

fn parse_line(line: &[u8]) -> Option<Vec<JournalOp>> {
    let v: Value = serde_json::from_slice(line).ok()?;
    v.get("ops")?
        .as_array()?
        .iter()
        .map(JournalOp::from_json)
        .collect()
}

/// The summary of the last complete line (or the header) — read from the end
/// of the file only. `None` when the journal is not usable for that.
pub fn tail_summary(path: &Path) -> Option<(Header, SummaryRec)> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut first = String::new();
    {
        // The header is the first line (small).
        let mut buf = vec![0u8; 4096.min(len as usize)];
        f.read_exact(&mut buf).ok()?;
        let nl = buf.iter().position(|b| *b == b'\n')?;
        first.push_str(std::str::from_utf8(&buf[..nl]).ok()?);
    }
    let header: Header = serde_json::from_str(&first).ok()?;
    const TAIL: u64 = 256 * 1024;
    let start = len.saturating_sub(TAIL);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    // Complete lines only, last first; the header when there is no other.
    let end = tail.iter().rposition(|b| *b == b'\n')?;
    let mut lines: Vec<&[u8]> = tail[..end].split(|b| *b == b'\n').collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // possibly cut
    }
    for line in lines.iter().rev() {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if v.get("journal").is_some() {
            let s = header.summary.clone()?;
            return Some((header, s));
        }
        if v.get("ops").is_some() {
            let s: SummaryRec = serde_json::from_value(v.get("summary")?.clone()).ok()?;
            return Some((header, s));
        }
    }
    None
}

/// Write a new journal (header only), atomically.
pub fn write_journal(path: &Path, header: &Header) -> std::io::Result<Appender> {
    let mut line = serde_json::to_vec(header).map_err(std::io::Error::other)?;
    line.push(b'\n');
    companiond_core::store::atomic_write(path, &line)?;
    Appender::open(path, line.len() as u64)
}

/// Appends committed changes to a journal.
pub struct Appender {
    file: File,
    /// Bytes that are complete lines (anything after is cut before appending).
    pub len: u64,
}

impl Appender {
    pub fn open(path: &Path, valid_len: u64) -> std::io::Result<Appender> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Appender {
            file,
            len: valid_len,
        })
    }

    /// Append one line and make it durable.
    pub fn append(&mut self, ops: &[JournalOp], summary: &Summary) -> std::io::Result<()> {
        let ops: Vec<Value> = ops.iter().map(JournalOp::to_json).collect();
        let mut line =
            serde_json::to_vec(&json!({"ops": ops, "summary": SummaryRec::from(summary)}))
                .map_err(std::io::Error::other)?;
        line.push(b'\n');
        let end = self.file.seek(SeekFrom::End(0))?;
        if end != self.len {
            // A torn line from a crash (or a failed append): cut it off first.
            self.file.set_len(self.len)?;
        }
        self.file.seek(SeekFrom::Start(self.len))?;
        if let Err(e) = self
            .file
            .write_all(&line)
            .and_then(|_| self.file.sync_data())
        {
            let _ = self.file.set_len(self.len);
            companiond_core::disk::note(&e);
            return Err(e);
        }
        self.len += line.len() as u64;
        Ok(())
    }

    pub fn stamp(&self) -> Option<FileStamp> {
        self.file.metadata().ok().map(|m| stamp_meta(&m))
    }
}

/// Keep the first-format document before it is rewritten: a hard link (atomic,
/// no copy), else a copy written atomically. An existing backup is kept.
pub fn backup_v1(base: &Path, backup: &Path) -> std::io::Result<()> {
    if backup.exists() {
        return Ok(());
    }
    if std::fs::hard_link(base, backup).is_ok() {
        return sync_dir(backup);
    }
    let bytes = std::fs::read(base)?;
    companiond_core::store::atomic_write(backup, &bytes)
}

fn sync_dir(p: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    if let Some(dir) = p.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Paths of the storage files.
#[derive(Clone, Debug)]
pub struct Paths {
    pub base: PathBuf,
    pub journal: PathBuf,
    pub backup: PathBuf,
}

impl Paths {
    pub fn new(root: &Path) -> Paths {
        Paths {
            base: root.join("config.json"),
            journal: root.join("config.journal"),
            backup: root.join("config.v1-backup.json"),
        }
    }
}

//! Folding the recent history: `recent.json` is the working window, the
//! time index is the archive (docs/memory.md § Folding).
//!
//! Once a character's `recent.json` holds more than [`MAX_ENTRIES`] entries
//! or [`MAX_BYTES`] bytes, a background task (after a chat turn, or at
//! start-up) folds its oldest entries: at most the newest [`KEEP_ENTRIES`]
//! entries and [`KEEP_BYTES`] bytes stay (never fewer than [`MIN_KEEP`], the
//! chat's context), and the others
//!
//! 1. are summarised by the `summary` model slot, with the previous summary,
//!    into one summary entry (`{"type": "system", "source": "summary"}`) that
//!    stays at the head of the file (no model, or a failed call: no new
//!    summary; the previous one, if any, stays as it was);
//! 2. go to the archive: `memory_archive` in `time_indexed.db` keeps each
//!    folded entry's stored bytes in order, with the `memory_lines` row of
//!    its text (the row stays: search, recall and extraction still reach
//!    it; the index's diff leaves archived rows alone);
//! 3. leave `recent.json`.
//!
//! The archive rows and a note of the fold (`fold_pending`: where the folded
//! entries end in the old file and a CRC-32 of the bytes up to there) are
//! committed before the file is replaced; the next index sync ([`settle`])
//! drops the note when the file no longer starts with those bytes, and
//! undoes the archive rows when it still does (a kill before the file was
//! replaced). A fold is then done again from the file as it is, so an
//! interrupted fold loses no entry and archives none twice.
//!
//! The model is called outside every lock, once the chat has been quiet
//! ([`companiond_core::llm::LlmClient::wait_for_quiet_chat`]); the archive
//! commit and the file's replacement run under the rename lock (shared), the
//! history lock and the index connection, and only when the file still starts
//! with the entries that were summarised (an append only adds at the end;
//! anything else, e.g. a browser save, makes the fold wait for the next turn).

use std::path::Path;
use std::time::Duration;

use companiond_core::history::{Encoder, Entry, Speaker};
use companiond_core::llm::{CallOptions, ChatMessage};
use companiond_core::providers::Slot;
use companiond_core::AppState;
use rusqlite::{params, Connection};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::index::{self, db_err};
use crate::tasks::TaskKind;
use crate::{unit, MemoryRuntime};

/// A history with more entries than this is folded.
pub const MAX_ENTRIES: usize = 200;
/// A history of more bytes than this is folded.
pub const MAX_BYTES: usize = 512 * 1024;
/// Most entries a fold keeps (besides the summary).
pub const KEEP_ENTRIES: usize = 100;
/// Most bytes of entries a fold keeps, unless [`MIN_KEEP`] entries need more.
pub const KEEP_BYTES: usize = 256 * 1024;
/// Fewest entries a fold keeps: a chat turn's context.
pub const MIN_KEEP: usize = companiond_core::sessions::CONTEXT_MESSAGES;
/// Fewest bytes of one stored entry (`{"type":"ai","data":{"content":""}}`).
const MIN_ENTRY_BYTES: usize = 30;
/// The `source` of the summary entry at the head of a folded history.
pub const SUMMARY_SOURCE: &str = "summary";
/// Most characters of a summary kept.
const SUMMARY_MAX_CHARS: usize = 4000;
/// Most tokens asked of the summary model.
const SUMMARY_TOKENS: usize = 600;

/// Step 3 of the time index's schema ([`unit::TIME_INDEX_DB`]): the entries
/// folded out of `recent.json`, in the order they had there. `line` is the
/// `memory_lines` row of the entry's text (`NULL` for an entry that is not a
/// text line); `raw` the entry's stored JSON; `ts` the line's time (the fold's
/// for an entry without a line).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memory_archive (
    id INTEGER PRIMARY KEY,
    fold INTEGER NOT NULL,
    line INTEGER UNIQUE,
    raw TEXT NOT NULL,
    ts INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_archive_fold ON memory_archive(fold);
";

/// Step 4 of the time index's schema: `memory_lines.archived` marks the rows
/// whose entry is in the archive (set with the archive row, cleared when a
/// fold is undone), under a partial index of the rows that are not. The file's
/// lines are then found by reading the window's rows only: the sync after a
/// fold and the next fold cost what they cost on a new history, however many
/// lines the years archived (`cargo bench --bench soak`, docs/performance.md
/// § Soak: a scan of every row kept the whole index resident and growing).
pub fn mark_archived(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let has: bool = tx.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('memory_lines') WHERE name = 'archived'",
        [],
        |r| r.get(0),
    )?;
    if !has {
        tx.execute_batch(
            "ALTER TABLE memory_lines ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
             UPDATE memory_lines SET archived = 1 WHERE id IN
                 (SELECT line FROM memory_archive WHERE line IS NOT NULL);",
        )?;
    }
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS memory_lines_live ON memory_lines(id) WHERE archived = 0;",
    )
}

/// The rows of the history file's lines (not archived), oldest first: the
/// query the sync and the fold read the window with.
pub(crate) const LIVE_LINES: &str =
    "SELECT id, ref, ts FROM memory_lines WHERE archived = 0 ORDER BY id";

/// Meta key: a fold committed to the archive whose file write may not have
/// happened: `<fold>:<end>:<crc>`.
const META_PENDING: &str = "fold_pending";

/// Settle a fold cut short, given the history's bytes now: when the file
/// still starts with the entries it folded (the write did not happen), its
/// archive rows go; either way the note goes. Nothing when no fold is pending.
pub(crate) fn settle(conn: &mut Connection, bytes: &[u8]) -> Result<(), String> {
    let Some(note) = index::meta_get(conn, META_PENDING)? else {
        return Ok(());
    };
    let tx = conn.transaction().map_err(db_err)?;
    if let Some((fold, end, crc)) = parse_note(&note) {
        let unchanged = bytes.get(..end).is_some_and(|b| crc32fast::hash(b) == crc);
        if unchanged {
            tx.execute(
                "UPDATE memory_lines SET archived = 0 WHERE id IN
                 (SELECT line FROM memory_archive WHERE fold = ?1)",
                [fold],
            )
            .map_err(db_err)?;
            tx.execute("DELETE FROM memory_archive WHERE fold = ?1", [fold])
                .map_err(db_err)?;
        }
    }
    tx.execute("DELETE FROM memory_meta WHERE key = ?1", [META_PENDING])
        .map_err(db_err)?;
    tx.commit().map_err(db_err)
}

fn parse_note(s: &str) -> Option<(i64, usize, u32)> {
    let mut it = s.split(':');
    let fold = it.next()?.parse().ok()?;
    let end = it.next()?.parse().ok()?;
    let crc = it.next()?.parse().ok()?;
    Some((fold, end, crc))
}

/// What a history holds, as a fold sees it.
struct Layout<'a> {
    /// The entries (stored bytes).
    raws: Vec<&'a RawValue>,
    /// The summary entry at the head, if any: its text.
    summary: Option<String>,
}

impl<'a> Layout<'a> {
    fn of(bytes: &'a [u8]) -> Option<Layout<'a>> {
        if bytes.is_empty() {
            return None;
        }
        let raws: Vec<&RawValue> = serde_json::from_slice(bytes).ok()?;
        let summary = raws
            .first()
            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
            .and_then(|v| Entry::parse(&v))
            .filter(|e| e.speaker == Speaker::System && e.source.as_deref() == Some(SUMMARY_SOURCE))
            .map(|e| e.text().to_string());
        Some(Layout { raws, summary })
    }

    /// Index of the first entry after the summary.
    fn start(&self) -> usize {
        usize::from(self.summary.is_some())
    }

    /// How many entries after the summary to fold (0: within the bound).
    fn to_fold(&self, file_len: usize) -> usize {
        let body = &self.raws[self.start()..];
        if body.len() <= MAX_ENTRIES && file_len <= MAX_BYTES {
            return 0;
        }
        let mut kept = 0;
        let mut bytes = 0;
        for raw in body.iter().rev() {
            let len = raw.get().len() + 2;
            if kept >= MIN_KEEP && (kept >= KEEP_ENTRIES || bytes + len > KEEP_BYTES) {
                break;
            }
            kept += 1;
            bytes += len;
        }
        body.len() - kept
    }
}

/// The text of the summary entry heading the history at `path`, read from
/// the file's first line (the stored layout: one entry per line), so a turn
/// pays a few kilobytes whatever the history; `None` when there is none or
/// the file is in another layout.
pub fn head_summary(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    // A summary is at most SUMMARY_MAX_CHARS characters (4 bytes each, escaped).
    let mut buf = Vec::new();
    f.take((SUMMARY_MAX_CHARS * 8 + 256) as u64)
        .read_to_end(&mut buf)
        .ok()?;
    let rest = buf.strip_prefix(b"[\n")?;
    let line = &rest[..memchr::memchr(b'\n', rest)?];
    let line = line.strip_suffix(b",").unwrap_or(line);
    let v: Value = serde_json::from_slice(line).ok()?;
    Entry::parse(&v)
        .filter(|e| e.speaker == Speaker::System && e.source.as_deref() == Some(SUMMARY_SOURCE))
        .map(|e| e.text().to_string())
}

/// How a fold ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Folded {
    /// Entries moved from `recent.json` to the archive (0: nothing to fold).
    pub archived: usize,
    /// Whether a new summary entry heads the file.
    pub summarised: bool,
}

/// After a turn (or at start-up): fold `name`'s history in the background
/// when it passed the bound. One fold per character at a time; none while
/// the storage fence is up or the character is being renamed.
pub fn schedule(state: &AppState, name: &str) {
    crate::spawn_for(state, name, move |st, name| async move {
        if !companiond_core::fence::is_normal(st.data_dir()) {
            return;
        }
        let path = st.history.path(&name);
        let over = tokio::task::spawn_blocking(move || {
            // A file too small to hold more than MAX_ENTRIES entries is not read.
            let len = std::fs::metadata(&path)
                .map(|m| m.len() as usize)
                .unwrap_or(0);
            if len <= MAX_ENTRIES * MIN_ENTRY_BYTES {
                return Ok(false);
            }
            let bytes = index::read_history(&path)?;
            Ok::<_, String>(Layout::of(&bytes).is_some_and(|l| l.to_fold(bytes.len()) > 0))
        })
        .await;
        if !matches!(over, Ok(Ok(true))) {
            return;
        }
        let _ = start(&st, &name);
    });
}

/// Start a fold of `name` as its background task.
pub fn start(
    state: &AppState,
    name: &str,
) -> Result<tokio::sync::oneshot::Receiver<Result<Folded, String>>, crate::tasks::Refused> {
    let (_info, rx) = crate::spawn_task(
        state,
        name,
        TaskKind::Compression,
        |st, n, cancel| async move {
            let r = run(&st, &n, &cancel).await;
            match &r {
                Ok(f) if f.archived > 0 => tracing::info!(
                    character = %n,
                    archived = f.archived,
                    summarised = f.summarised,
                    "recent history folded"
                ),
                Ok(_) => {}
                Err(e) if cancel_seen(e) => {
                    tracing::debug!(character = %n, "fold of the recent history cancelled")
                }
                Err(e) => tracing::warn!(character = %n, "cannot fold the recent history: {e}"),
            }
            r
        },
    )?;
    Ok(rx)
}

/// Why a fold stopped when its task was cancelled (a rename, a cloud import).
const CANCELLED: &str = "cancelled";

fn cancel_seen(e: &str) -> bool {
    e == CANCELLED
}

/// Fold `name`'s history now if it passed the bound.
pub async fn run(
    state: &AppState,
    name: &str,
    cancel: &CancellationToken,
) -> Result<Folded, String> {
    let nothing = Folded {
        archived: 0,
        summarised: false,
    };
    let path = state.history.path(name);
    let p = path.clone();
    let bytes = tokio::task::spawn_blocking(move || index::read_history(&p))
        .await
        .map_err(|e| e.to_string())??;
    // What to fold, and where the folded entries end.
    let plan = {
        let Some(layout) = Layout::of(&bytes) else {
            return Ok(nothing);
        };
        let n = layout.to_fold(bytes.len());
        if n == 0 {
            return Ok(nothing);
        }
        let start = layout.start();
        let end = index::end_in(&bytes, layout.raws[start + n - 1]);
        let texts: Vec<(String, String)> = index::lines_of(&layout.raws[start..start + n]);
        (n, end, layout.summary, texts)
    };
    let (n, end, old_summary, texts) = plan;
    let crc = crc32fast::hash(&bytes[..end]);
    drop(bytes);
    let summary = summarise(state, name, old_summary.as_deref(), &texts, cancel).await;
    if cancel.is_cancelled() {
        return Err(CANCELLED.into());
    }
    // Cloud storage may have gone into maintenance while the model worked.
    if !companiond_core::fence::is_normal(state.data_dir()) {
        return Ok(nothing);
    }
    let summarised = summary.is_some();
    let head = summary.or(old_summary);

    // Commit: archive first, then the file, under the locks every writer takes.
    let rt = MemoryRuntime::of(state);
    let dir = unit::character_dir(state.data_dir(), name)?;
    // A rename holds this lock while it drains this task: give way to it.
    let _no_rename = tokio::select! {
        _ = cancel.cancelled() => return Err(CANCELLED.into()),
        g = rt.rename_lock.read() => g,
    };
    let lock = state.history.lock(name);
    let _g = tokio::select! {
        _ = cancel.cancelled() => return Err(CANCELLED.into()),
        g = lock.lock_owned() => g,
    };
    if !companiond_core::fence::is_normal(state.data_dir()) {
        return Ok(nothing);
    }
    let (n2, notices, rt2) = (name.to_string(), state.notices.clone(), rt.clone());
    let archived = tokio::task::spawn_blocking(move || -> Result<usize, String> {
        let conn = rt2.index.get(&n2, &dir, Some(&notices))?;
        let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
        commit(
            &mut conn,
            &dir,
            Commit {
                n,
                end,
                crc,
                head: head.as_deref(),
                now: companiond_core::now_millis(),
            },
        )
    })
    .await
    .map_err(|e| e.to_string())??;
    if archived > 0 {
        crate::vectors::changed(state, name);
    }
    Ok(Folded {
        archived,
        summarised: summarised && archived > 0,
    })
}

/// What [`commit`] folds.
struct Commit<'a> {
    /// Entries after the summary to fold.
    n: usize,
    /// Where they end in the file read before, and the CRC-32 of the bytes up to there.
    end: usize,
    crc: u32,
    /// The summary entry's text (none: no summary entry).
    head: Option<&'a str>,
    now: i64,
}

/// Archive the first `c.n` entries after the summary of `dir`'s history and
/// write the history without them (with the summary `c.head` at its head),
/// when it still starts as it did; how many entries were archived (0: the
/// history changed, nothing was done). Runs on the index connection, under
/// the history lock.
fn commit(conn: &mut Connection, dir: &Path, c: Commit<'_>) -> Result<usize, String> {
    let path = dir.join(unit::RECENT);
    // Every line of the file is indexed first (appends since, a pending fold).
    index::sync_lines(conn, dir, c.now)?;
    let bytes = index::read_history(&path)?;
    if bytes.get(..c.end).map(crc32fast::hash) != Some(c.crc) {
        return Ok(0);
    }
    let Some(layout) = Layout::of(&bytes) else {
        return Ok(0);
    };
    let start = layout.start();
    if layout.raws.len() < start + c.n {
        return Ok(0);
    }
    let folded = &layout.raws[start..start + c.n];
    archive(conn, folded, &bytes[..c.end], c.now)?;
    // The file without the folded entries; the kept ones keep their bytes.
    let mut enc = Encoder::with_capacity(bytes.len() - c.end + 256);
    let summary = c
        .head
        .map(|t| Entry::new(Speaker::System, t).from_source(SUMMARY_SOURCE));
    let written = (|| -> Result<(), String> {
        if let Some(s) = &summary {
            enc.entry(s).map_err(|e| e.to_string())?;
        }
        for raw in &layout.raws[start + c.n..] {
            let text = raw.get();
            if text.contains('\n') {
                // Another layout (indented): one line per entry.
                let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
                enc.entry(&v).map_err(|e| e.to_string())?;
            } else {
                enc.next_entry().extend_from_slice(text.as_bytes());
            }
        }
        companiond_core::store::atomic_write(&path, &enc.finish())
            .map_err(|e| format!("cannot write the history: {e}"))
    })();
    if let Err(e) = written {
        // Settled against the file as it is now: the archive rows go again
        // when it was not replaced (a failure after the rename keeps them);
        // unreadable, the note stays for the next sync.
        if let Ok(now) = index::read_history(&path) {
            settle(conn, &now)?;
        }
        return Err(e);
    }
    // The index follows the new file (the summary line; the note goes).
    index::sync_lines(conn, dir, c.now)?;
    Ok(folded.len())
}

/// Put `folded` (the first entries after the summary of a history whose
/// bytes up to their end are `prefix`) in the archive, with the note of a
/// pending fold; the fold's number.
fn archive(
    conn: &mut Connection,
    folded: &[&RawValue],
    prefix: &[u8],
    now: i64,
) -> Result<i64, String> {
    let tx = conn.transaction().map_err(db_err)?;
    let fold: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(fold), 0) + 1 FROM memory_archive",
            [],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    // The file's lines not archived yet, by content, oldest row first.
    let mut live: std::collections::HashMap<String, std::collections::VecDeque<(i64, i64)>> =
        std::collections::HashMap::new();
    {
        let mut st = tx.prepare(LIVE_LINES).map_err(db_err)?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(db_err)?;
        for row in rows {
            let (id, r, ts) = row.map_err(db_err)?;
            live.entry(r).or_default().push_back((id, ts));
        }
    }
    for raw in folded {
        let (line, ts) = match index::lines_of(std::slice::from_ref(raw)).pop() {
            Some((speaker, text)) => {
                let r = index::line_ref(&speaker, &text);
                match live.get_mut(&r).and_then(|q| q.pop_front()) {
                    Some((id, ts)) => (Some(id), ts),
                    // Not indexed (cannot happen after a sync): indexed now.
                    None => (
                        Some(index::insert_line_ref(&tx, &r, &speaker, &text, now)?),
                        now,
                    ),
                }
            }
            None => (None, now),
        };
        tx.execute(
            "INSERT INTO memory_archive(fold, line, raw, ts) VALUES (?1, ?2, ?3, ?4)",
            params![fold, line, raw.get(), ts],
        )
        .map_err(db_err)?;
        if let Some(id) = line {
            tx.execute("UPDATE memory_lines SET archived = 1 WHERE id = ?1", [id])
                .map_err(db_err)?;
        }
    }
    index::meta_set(
        &tx,
        META_PENDING,
        &format!("{fold}:{}:{}", prefix.len(), crc32fast::hash(prefix)),
    )?;
    tx.commit().map_err(db_err)?;
    Ok(fold)
}

/// The summary of `old` (the previous summary) and `lines` by the `summary`
/// slot; `None` when no model is configured, the call fails or answers nothing.
async fn summarise(
    state: &AppState,
    name: &str,
    old: Option<&str>,
    lines: &[(String, String)],
    cancel: &CancellationToken,
) -> Option<String> {
    state.llm.endpoint(Slot::Summary).await?;
    let (window, answer) = crate::extract::budget(state, Slot::Summary).await;
    let answer = answer.min(SUMMARY_TOKENS);
    let system = format!(
        "You keep the memory of the character {name}. Summarise the conversation below \
         (and the earlier summary, if given) in a few short paragraphs: who said what that \
         matters, facts about the user, promises, plans, feelings, open topics. Write in \
         the language of the conversation. Answer with the summary only."
    );
    // The newest folded lines that fit, with the earlier summary first.
    let mut room = window
        .saturating_sub(answer)
        .saturating_sub(companiond_core::context::estimate_tokens(&system) + 64);
    let mut picked = Vec::new();
    let earlier = old.map(|s| format!("Earlier summary:\n{s}\n\n"));
    if let Some(e) = &earlier {
        room = room.saturating_sub(companiond_core::context::estimate_tokens(e));
    }
    for (speaker, text) in lines.iter().rev() {
        let who = match speaker.as_str() {
            "human" => "User",
            "ai" => name,
            _ => "Note",
        };
        let line = format!("{who}: {text}");
        let cost = companiond_core::context::estimate_tokens(&line) + 4;
        if cost > room {
            break;
        }
        room -= cost;
        picked.push(line);
    }
    picked.reverse();
    if picked.is_empty() {
        return None;
    }
    let user = format!(
        "{}Conversation:\n{}",
        earlier.unwrap_or_default(),
        picked.join("\n")
    );
    let opts = CallOptions {
        character: name.to_string(),
        timeout: Duration::from_secs(120),
        temperature: Some(0.3),
        max_tokens: u32::try_from(answer).ok(),
        ..Default::default()
    };
    let messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
    // Chat first: a local server answers one request at a time.
    tokio::select! {
        _ = cancel.cancelled() => return None,
        _ = state.llm.wait_for_quiet_chat(Slot::Summary, companiond_core::llm::CHAT_QUIET) => {}
    }
    let reply = tokio::select! {
        _ = cancel.cancelled() => return None,
        r = state.llm.complete(Slot::Summary, &messages, &opts) => r,
    };
    match reply {
        Ok(c) => {
            let text = c.content.trim();
            if text.is_empty() {
                return None;
            }
            Some(text.chars().take(SUMMARY_MAX_CHARS).collect())
        }
        Err(e) => {
            tracing::info!(character = %name, "no summary of the folded history: {e}");
            None
        }
    }
}

/// One archived entry.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ArchivedEntry {
    /// Its place in the archive (page with `before`).
    pub id: i64,
    /// The fold that moved it.
    pub fold: i64,
    /// When it was first seen (ms since the epoch).
    pub ts: i64,
    /// The entry as it was stored in `recent.json`.
    #[schema(value_type = Object)]
    pub entry: Value,
}

/// A page of the archive, newest first.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ArchivePage {
    pub success: bool,
    pub character: String,
    /// Entries in the archive.
    pub total: usize,
    /// Newest first.
    pub items: Vec<ArchivedEntry>,
    /// `before` for the next (older) page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

/// The archived entries of `conn` older than `before` (all when `None`),
/// newest first, at most `limit`.
pub fn page(
    conn: &Connection,
    before: Option<i64>,
    limit: usize,
) -> Result<(usize, Vec<ArchivedEntry>, Option<i64>), String> {
    let total: i64 = conn
        .query_row("SELECT count(*) FROM memory_archive", [], |r| r.get(0))
        .map_err(db_err)?;
    let mut st = conn
        .prepare(
            "SELECT id, fold, ts, raw FROM memory_archive WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![before.unwrap_or(i64::MAX), limit as i64 + 1], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .map_err(db_err)?;
    let mut items = Vec::new();
    for row in rows {
        let (id, fold, ts, raw) = row.map_err(db_err)?;
        let entry = serde_json::from_str(&raw).unwrap_or(Value::String(raw));
        items.push(ArchivedEntry {
            id,
            fold,
            ts,
            entry,
        });
    }
    let more = items.len() > limit;
    items.truncate(limit);
    let next = if more {
        items.last().map(|e| e.id)
    } else {
        None
    };
    Ok((total as usize, items, next))
}

/// How many entries the archive of `conn` holds.
pub fn archived(conn: &Connection) -> Result<usize, String> {
    conn.query_row("SELECT count(*) FROM memory_archive", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n as usize)
    .map_err(db_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tmp() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("mem-fold-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn history(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| {
                let t = if i % 2 == 0 { "human" } else { "ai" };
                json!({"type": t, "data": {"content": format!("line {i} about topic{i}")}})
            })
            .collect()
    }

    fn lines(d: &Path) -> Vec<Value> {
        serde_json::from_slice(&std::fs::read(d.join(unit::RECENT)).unwrap()).unwrap()
    }

    fn plan(d: &Path) -> (usize, usize, u32) {
        let bytes = std::fs::read(d.join(unit::RECENT)).unwrap();
        let l = Layout::of(&bytes).unwrap();
        let n = l.to_fold(bytes.len());
        let end = index::end_in(&bytes, l.raws[l.start() + n - 1]);
        (n, end, crc32fast::hash(&bytes[..end]))
    }

    fn count(c: &Connection, sql: &str) -> i64 {
        c.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn the_bound() {
        let b = companiond_core::history::encode(&history(MAX_ENTRIES)).unwrap();
        assert_eq!(Layout::of(&b).unwrap().to_fold(b.len()), 0);
        let b = companiond_core::history::encode(&history(MAX_ENTRIES + 1)).unwrap();
        assert_eq!(
            Layout::of(&b).unwrap().to_fold(b.len()),
            MAX_ENTRIES + 1 - KEEP_ENTRIES
        );
        // Long lines: kept by bytes, but never fewer than a turn's context.
        let big: Vec<Value> = (0..60)
            .map(|i| json!({"type": "human", "data": {"content": format!("{i}{}", "x".repeat(20_000))}}))
            .collect();
        let b = companiond_core::history::encode(&big).unwrap();
        assert_eq!(Layout::of(&b).unwrap().to_fold(b.len()), 60 - MIN_KEEP);
    }

    /// A fold archives the oldest lines (the index keeps them, searchable),
    /// leaves the newest with the summary at the head; a fold cut short
    /// before the file write is undone by the next sync, and done again once.
    #[test]
    fn fold_archives_then_rewrites_and_an_interrupted_one_is_redone() {
        let d = tmp();
        let all = history(250);
        std::fs::write(
            d.join(unit::RECENT),
            companiond_core::history::encode(&all).unwrap(),
        )
        .unwrap();
        let mut c = index::open(&d).unwrap();
        index::sync_lines(&mut c, &d, 1000).unwrap();

        // Cut short: the archive is committed, the file is not written.
        let (n, end, crc) = plan(&d);
        assert_eq!(n, 150);
        {
            let bytes = std::fs::read(d.join(unit::RECENT)).unwrap();
            let l = Layout::of(&bytes).unwrap();
            archive(&mut c, &l.raws[..n], &bytes[..end], 2000).unwrap();
        }
        assert_eq!(archived(&c).unwrap(), 150);
        // The next sync (a restart, a turn) undoes it; the file is whole.
        index::sync_lines(&mut c, &d, 3000).unwrap();
        assert_eq!(archived(&c).unwrap(), 0);
        assert_eq!(count(&c, "SELECT count(*) FROM memory_lines"), 250);
        assert_eq!(lines(&d).len(), 250);

        let ts_before: i64 = count(&c, "SELECT ts FROM memory_lines WHERE text LIKE 'line 7 %'");
        // Done again, whole this time.
        let done = commit(
            &mut c,
            &d,
            Commit {
                n,
                end,
                crc,
                head: Some("They talked about lines."),
                now: 4000,
            },
        )
        .unwrap();
        assert_eq!(done, 150);
        let kept = lines(&d);
        assert_eq!(kept.len(), 101);
        assert_eq!(kept[0]["source"], SUMMARY_SOURCE);
        assert_eq!(kept[1], all[150]);
        assert_eq!(kept[100], all[249]);
        assert_eq!(archived(&c).unwrap(), 150);
        // Every line is still indexed (plus the summary), with its time.
        assert_eq!(count(&c, "SELECT count(*) FROM memory_lines"), 251);
        let q = index::Query {
            text: "topic7".into(),
            limit: 5,
            ..Default::default()
        };
        let hits = index::search_lines(&c, &q).unwrap();
        assert!(
            hits.iter()
                .any(|h| h.text == "line 7 about topic7" && h.ts == ts_before),
            "{hits:?}"
        );
        // Syncs after the fold keep the archive; a second fold of the same plan does nothing.
        index::sync_lines(&mut c, &d, 5000).unwrap();
        assert_eq!(count(&c, "SELECT count(*) FROM memory_lines"), 251);
        let again = commit(
            &mut c,
            &d,
            Commit {
                n,
                end,
                crc,
                head: None,
                now: 6000,
            },
        )
        .unwrap();
        assert_eq!(again, 0);
        assert_eq!(archived(&c).unwrap(), 150);
        // The archive pages newest first, with the stored entries.
        let (total, items, next) = page(&c, None, 100).unwrap();
        assert_eq!(total, 150);
        assert_eq!(items[0].entry, all[149]);
        let (_, rest, last) = page(&c, next, 100).unwrap();
        assert_eq!(rest.len(), 50);
        assert_eq!(rest[49].entry, all[0]);
        assert_eq!(last, None);
        // A second fold replaces the summary and keeps the earlier archive.
        let mut more = kept.clone();
        more.extend(history(150));
        std::fs::write(
            d.join(unit::RECENT),
            companiond_core::history::encode(&more).unwrap(),
        )
        .unwrap();
        let (n, end, crc) = plan(&d);
        assert_eq!(n, 150);
        commit(
            &mut c,
            &d,
            Commit {
                n,
                end,
                crc,
                head: Some("Second."),
                now: 7000,
            },
        )
        .unwrap();
        let kept = lines(&d);
        assert_eq!(kept.len(), 101);
        assert_eq!(kept[0]["data"]["content"], "Second.");
        assert_eq!(archived(&c).unwrap(), 300);
        assert_eq!(
            count(
                &c,
                "SELECT count(*) FROM memory_lines WHERE speaker = 'system'"
            ),
            1
        );
        let _ = std::fs::remove_dir_all(d);
    }
}

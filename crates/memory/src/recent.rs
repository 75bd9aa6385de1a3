//! The recent memory file: listing, reading with tokens, and the
//! compare-and-swap save (docs/memory.md).
//!
//! Tokens:
//! * `fingerprint` = lowercase hex SHA-256 of the file's bytes (of the empty
//!   string when the file does not exist);
//! * `identity_token` = lowercase hex SHA-256 of `"<absolute path>\0<file id>"`,
//!   where the file id is `<device>:<inode>` of the file (`absent` when it does
//!   not exist). Every atomic replacement creates a new file, so the identity
//!   changes whenever the file is replaced — by a save, a chat append, a cloud
//!   download or a rename — and stays stable across restarts otherwise.
//!
//! Every read-modify-write of a character's history holds the store lock of
//! `<data>/memory/<name>/recent.json` (the lock the chat session appends under).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use companiond_core::characters::{validate_name, NameRules};
use companiond_core::paths;
use companiond_core::snapshots::{self, Kind};
use companiond_core::stamp::Stamp;
use companiond_core::store::Staged;
use companiond_core::task::blocking;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::fence;
use crate::save_body::{self, EntryFields, Scalar, Shaped};
use crate::stored_json;
use crate::tasks::TaskKind;
use crate::theater::{self, ChatEntry};
use crate::unit;
use crate::MemoryRuntime;

/// Most entries in a saved history.
pub const MAX_ENTRIES: usize = 10_000;
/// Most characters in one message text.
pub const MAX_TEXT_CHARS: usize = 32_768;
/// Most text characters in one save request.
pub const MAX_TOTAL_CHARS: usize = 2_097_152;
/// Largest save request body (2,097,152 characters escaped as JSON plus the
/// envelope of 10,000 entries fit well below it).
pub const MAX_SAVE_BODY: usize = 40 * 1024 * 1024;

/// Content and tokens of a read.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"content": "[{\"role\":\"human\",\"text\":\"hi\"}]",
    "fingerprint": "3f2a…", "identity_token": "9c41…"}))]
pub struct RecentFile {
    /// The history as a JSON text (an array of chat entries).
    pub content: String,
    /// Changes whenever the content changes; send it back with a save.
    pub fingerprint: String,
    /// Names the file the content came from; send it back with a save.
    pub identity_token: String,
}

/// Result of a successful save.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"success": true, "need_refresh": true, "profile_name": "Mika",
    "fingerprint": "51be…", "identity_token": "9c41…"}))]
pub struct Saved {
    pub success: bool,
    pub need_refresh: bool,
    pub profile_name: String,
    pub fingerprint: String,
    pub identity_token: String,
}

/// A validated save request.
#[derive(Debug, Clone)]
pub struct SaveRequest {
    pub name: String,
    pub fingerprint: String,
    pub identity_token: String,
    pub chat: Vec<ChatEntry>,
}

/// The character name of a logical file name `recent_<name>.json`.
pub fn parse_filename(filename: &str) -> Result<String, MemoryError> {
    let bad = |why: &str| MemoryError::BadRequest(format!("invalid filename: {why}"));
    if filename.is_empty() {
        return Err(bad("it is empty"));
    }
    if filename.contains(['/', '\\', '\0']) || filename.contains("..") {
        return Err(bad("path separators and .. are not allowed"));
    }
    let name = filename
        .strip_prefix("recent_")
        .and_then(|r| r.strip_suffix(".json"))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad("it must look like recent_<character>.json"))?;
    match validate_name(name, NameRules::EXISTING) {
        Ok(n) if n == name => {}
        _ => return Err(bad("the character name in it is not valid")),
    }
    paths::safe_name(name).map_err(|e| bad(&e.to_string()))?;
    Ok(name.to_string())
}

/// Where a name's history is read from and written to.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub read: Option<PathBuf>,
    pub write: PathBuf,
}

pub(crate) fn real_file(p: &Path) -> bool {
    p.symlink_metadata().map(|m| m.is_file()).unwrap_or(false)
}

/// Resolution order: `memory/<n>/recent.json`,
/// `memory/recent_<n>.json`, then the same two under the bundled (read-only)
/// memory root. A bundled file is saved to `memory/<n>/recent.json`.
pub fn resolve(data_dir: &Path, bundle_dir: &Path, name: &str) -> Result<Resolved, MemoryError> {
    let runtime_root = unit::memory_root(data_dir);
    let bundle_root = bundle_dir.join("memory");
    let flat = format!("recent_{name}.json");
    let join = |root: &Path, rel: &str| {
        paths::safe_join(root, rel).map_err(|e| MemoryError::BadRequest(e.to_string()))
    };
    let runtime = join(&runtime_root, &format!("{name}/{}", unit::RECENT))?;
    let candidates = [
        (runtime.clone(), runtime.clone()),
        (join(&runtime_root, &flat)?, join(&runtime_root, &flat)?),
        (
            join(&bundle_root, &format!("{name}/{}", unit::RECENT))?,
            runtime.clone(),
        ),
        (join(&bundle_root, &flat)?, runtime.clone()),
    ];
    for (read, write) in candidates {
        if real_file(&read) {
            return Ok(Resolved {
                read: Some(read),
                write,
            });
        }
    }
    Ok(Resolved {
        read: None,
        write: runtime,
    })
}

/// Hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The identity token of `path` given its metadata (`None` = absent).
pub fn identity_token(path: &Path, meta: Option<&std::fs::Metadata>) -> String {
    let id = match meta {
        None => "absent".to_string(),
        Some(m) => file_id(m),
    };
    let mut h = Sha256::new();
    h.update(path.to_string_lossy().as_bytes());
    h.update([0u8]);
    h.update(id.as_bytes());
    hex::encode(h.finalize())
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}:{}", m.dev(), m.ino())
}

#[cfg(not(unix))]
fn file_id(m: &std::fs::Metadata) -> String {
    let created = m
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("created:{created}:{}", m.len())
}

/// Bytes and tokens of a file read through one handle (so they agree).
pub struct Snapshot {
    pub bytes: Option<Vec<u8>>,
    pub fingerprint: String,
    pub identity_token: String,
    /// The version read (`None` when absent).
    key: Option<Stamp>,
    /// Set when the tokens are the remembered ones of a version not read
    /// again: the CRC-32 the file must still have for them to hold. The save
    /// confirms it ([`confirm`]) beside its write, before putting the new
    /// version in place.
    unconfirmed: Option<u32>,
}

/// Read `path` (absent → no bytes) with its tokens.
pub fn snapshot(path: &Path) -> std::io::Result<Snapshot> {
    match std::fs::File::open(path) {
        Ok(mut f) => {
            let meta = f.metadata()?;
            let mut bytes = Vec::with_capacity(meta.len() as usize);
            f.read_to_end(&mut bytes)?;
            Ok(Snapshot {
                fingerprint: sha256_hex(&bytes),
                identity_token: identity_token(path, Some(&meta)),
                bytes: Some(bytes),
                key: Some(Stamp::of(&meta)),
                unconfirmed: None,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Snapshot {
            bytes: None,
            fingerprint: sha256_hex(b""),
            identity_token: identity_token(path, None),
            key: None,
            unconfirmed: None,
        }),
        Err(e) => Err(e),
    }
}

/// What a save needs to know of a history file it has seen before.
#[derive(Clone, Debug)]
struct Known {
    key: Stamp,
    /// CRC-32 of the bytes: file clocks tick coarsely, so a write in place
    /// within one tick that keeps the length would keep the [`Stamp`]. Other
    /// caches wait until a stamp is settled ([`Stamp::settled`]); a save often
    /// follows the write it checks by milliseconds, so the checksum (about ten
    /// times cheaper than SHA-256) stands in for that wait.
    crc: u32,
    fingerprint: String,
    /// May it hold theater messages (then a save reads and merges it)?
    theater: bool,
}

/// The fingerprints of the history files this process last read or wrote,
/// by path, so a save of a long history does not hash the current file with
/// SHA-256 again to compare tokens: its [`Stamp`] and a CRC-32 tell whether
/// it is the version seen. One entry per history file.
#[derive(Default)]
pub struct KnownFiles(std::sync::Mutex<std::collections::HashMap<PathBuf, Known>>);

impl KnownFiles {
    fn get(&self, path: &Path, key: &Stamp) -> Option<Known> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(path).filter(|k| &k.key == key).cloned()
    }

    fn remember(&self, path: &Path, key: Stamp, crc: u32, fingerprint: &str, theater: bool) {
        let known = Known {
            key,
            crc,
            fingerprint: fingerprint.to_string(),
            theater,
        };
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(path.to_path_buf(), known);
    }
}

/// The tokens of `path` as they are now, and its bytes when `need_bytes`
/// says a save must read them (given whether it may hold theater messages).
/// A file seen before in this version is not read at all: its remembered
/// tokens come back with the CRC-32 still to [`confirm`] (file clocks tick
/// coarsely, so the [`Stamp`] alone cannot tell an edit in place within one
/// tick that kept the length).
fn current(
    known: &KnownFiles,
    path: &Path,
    need_bytes: impl Fn(bool) -> bool,
) -> std::io::Result<Snapshot> {
    if let Ok(meta) = std::fs::metadata(path) {
        let seen = known
            .get(path, &Stamp::of(&meta))
            .filter(|k| !need_bytes(k.theater));
        if let Some(k) = seen {
            return Ok(Snapshot {
                bytes: None,
                fingerprint: k.fingerprint,
                identity_token: identity_token(path, Some(&meta)),
                key: Some(k.key),
                unconfirmed: Some(k.crc),
            });
        }
    }
    let snap = snapshot(path)?;
    if let (Some(bytes), Some(key)) = (&snap.bytes, &snap.key) {
        let theater = theater::may_hold_theater(bytes);
        let crc = crc32fast::hash(bytes);
        known.remember(path, *key, crc, &snap.fingerprint, theater);
    }
    Ok(snap)
}

/// Do the tokens of `snap` still hold for the file at `path`? Always for a
/// snapshot that was read; for remembered tokens, when the file still has the
/// remembered CRC-32.
fn confirm(snap: &Snapshot, path: &Path) -> std::io::Result<bool> {
    match snap.unconfirmed {
        None => Ok(true),
        Some(crc) => Ok(crc_of(path)? == crc),
    }
}

/// CRC-32 of the file at `path`, read in chunks.
fn crc_of(path: &Path) -> std::io::Result<u32> {
    let mut f = std::fs::File::open(path)?;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match f.read(&mut buf)? {
            0 => return Ok(crc.finalize()),
            n => crc.update(&buf[..n]),
        }
    }
}

/// Resolve `name`, creating the memory unit of a configured character that has
/// none yet (unless the write fence is up). `None` when nothing resolves.
fn resolve_or_init(
    state: &AppState,
    name: &str,
    configured: bool,
) -> Result<Option<(PathBuf, PathBuf)>, MemoryError> {
    let data = state.data_dir();
    let r = resolve(data, state.bundle_dir(), name)?;
    if let Some(read) = r.read {
        return Ok(Some((read, r.write)));
    }
    if configured && companiond_core::fence::is_normal(data) {
        let dir = unit::character_dir(data, name).map_err(MemoryError::BadRequest)?;
        unit::ensure_memory_files(&dir)
            .map_err(|e| MemoryError::Storage(format!("cannot create the memory files: {e}")))?;
        let p = dir.join(unit::RECENT);
        if real_file(&p) {
            return Ok(Some((p.clone(), p)));
        }
    }
    Ok(None)
}

/// `GET /api/memory/recent_file`.
pub async fn read(
    state: &AppState,
    rt: &Arc<MemoryRuntime>,
    filename: &str,
) -> Result<RecentFile, MemoryError> {
    let name = parse_filename(filename)?;
    let _no_rename = rt.rename_lock.read().await;
    let configured = state.characters.exists(&name);
    let st = state.clone();
    let rt = rt.clone();
    blocking(move || {
        let Some((path, _)) = resolve_or_init(&st, &name, configured)? else {
            return Err(MemoryError::NotFound(format!(
                "recent file recent_{name}.json not found"
            )));
        };
        let snap = current(&rt.known, &path, |_| true)
            .map_err(|e| MemoryError::Storage(format!("cannot read the recent file: {e}")))?;
        let Some(bytes) = snap.bytes else {
            return Err(MemoryError::NotFound(format!(
                "recent file recent_{name}.json not found"
            )));
        };
        Ok(RecentFile {
            // Valid UTF-8 (the usual case) is moved, not copied.
            content: String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            fingerprint: snap.fingerprint,
            identity_token: snap.identity_token,
        })
    })
    .await
}

/// Validate a save body (the raw request bytes) in this order: JSON,
/// filename, chat, token types → 400; missing tokens → 409. The body is read
/// in one pass that keeps only the fields a save uses ([`save_body`]).
pub fn parse_save_bytes(body: &[u8]) -> Result<SaveRequest, MemoryError> {
    let fields = save_body::parse(body)
        .map_err(|e| MemoryError::BadRequest(format!("the body is not valid JSON: {e}")))?;
    let Shaped::Is(fields) = fields else {
        return Err(MemoryError::BadRequest(
            "the body must be a JSON object".into(),
        ));
    };
    let filename = match &fields.filename {
        Some(Value::String(s)) => s,
        _ => {
            return Err(MemoryError::BadRequest(
                "filename (string) is required".into(),
            ))
        }
    };
    let name = parse_filename(filename)?;
    let chat = match fields.chat {
        Some(Shaped::Is(items)) => parse_chat(items)?,
        _ => return Err(MemoryError::BadRequest("chat (array) is required".into())),
    };
    let token = |key: &str, v: Option<Value>| match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(MemoryError::BadRequest(format!("{key} must be a string"))),
    };
    let fingerprint = token("fingerprint", fields.fingerprint)?;
    let identity = token("identity_token", fields.identity_token)?;
    let (Some(fingerprint), Some(identity_token)) = (fingerprint, identity) else {
        return Err(MemoryError::MissingTokens);
    };
    Ok(SaveRequest {
        name,
        fingerprint,
        identity_token,
        chat,
    })
}

/// Validate the chat entries and every limit ([`MAX_ENTRIES`],
/// [`MAX_TEXT_CHARS`], [`MAX_TOTAL_CHARS`]).
pub fn parse_chat(items: Vec<Shaped<EntryFields>>) -> Result<Vec<ChatEntry>, MemoryError> {
    if items.len() > MAX_ENTRIES {
        return Err(MemoryError::BadRequest(format!(
            "chat holds {} entries; at most {MAX_ENTRIES} are allowed",
            items.len()
        )));
    }
    let mut total = 0usize;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Shaped::Is(o) = item else {
            return Err(MemoryError::BadRequest(format!(
                "chat[{i}] must be an object"
            )));
        };
        let role = match o.role {
            Some(Scalar::Str(r)) if !r.trim().is_empty() => r,
            _ => {
                return Err(MemoryError::BadRequest(format!(
                    "chat[{i}].role (non-empty string) is required"
                )))
            }
        };
        let text = match o.text {
            None | Some(Scalar::Null) => String::new(),
            Some(Scalar::Str(t)) => t,
            Some(_) => {
                return Err(MemoryError::BadRequest(format!(
                    "chat[{i}].text must be a string"
                )))
            }
        };
        let chars = text.chars().count();
        if chars > MAX_TEXT_CHARS {
            return Err(MemoryError::BadRequest(format!(
                "chat[{i}].text has {chars} characters; at most {MAX_TEXT_CHARS} are allowed"
            )));
        }
        total += chars;
        if total > MAX_TOTAL_CHARS {
            return Err(MemoryError::BadRequest(format!(
                "the chat text exceeds {MAX_TOTAL_CHARS} characters in total"
            )));
        }
        let source_index = match o.source_index {
            Some(Scalar::U64(v)) => usize::try_from(v).ok(),
            _ => None,
        };
        let theater = matches!(o.theater, Some(Scalar::Bool(true)));
        out.push(ChatEntry {
            role,
            text,
            source_index,
            theater,
        });
    }
    Ok(out)
}

/// `POST /api/memory/recent_file/save`: compare-and-swap under the character's
/// history lock. The commit runs in its own task so a client that disconnects
/// cannot interrupt it half way.
pub async fn save(
    state: &AppState,
    rt: &Arc<MemoryRuntime>,
    req: SaveRequest,
) -> Result<Saved, MemoryError> {
    let target = format!("memory/{}/recent.json", req.name);
    fence::check(state.data_dir(), "save", &target)?;
    let st = state.clone();
    let rt = rt.clone();
    let task = tokio::spawn(async move {
        let _no_rename = rt.rename_lock.read().await;
        let lock = st.history.lock(&req.name);
        let _g = lock.lock_owned().await;
        let name = req.name.clone();
        let configured = st.characters.exists(&name);
        let st2 = st.clone();
        let known = rt.clone();
        let out = blocking(move || {
            let out = commit(&st2, &known.known, &req, configured, &target);
            // 10,000 entries are freed off the request's path.
            companiond_core::task::later(move || drop(req));
            out
        })
        .await;
        if out.is_ok() {
            rt.tasks.cancel(&name, Some(TaskKind::Review));
        }
        out
    });
    task.await
        .map_err(|e| MemoryError::Internal(format!("the save did not complete: {e}")))?
}

fn commit(
    state: &AppState,
    known: &KnownFiles,
    req: &SaveRequest,
    configured: bool,
    target: &str,
) -> Result<Saved, MemoryError> {
    fence::check(state.data_dir(), "save", target)?;
    let Some((read_path, write_path)) = resolve_or_init(state, &req.name, configured)? else {
        return Err(MemoryError::NotFound(format!(
            "recent file recent_{}.json not found",
            req.name
        )));
    };
    // The stored history is read and parsed only when it may hold theater
    // messages (they are the only stored entries a save keeps), and then
    // without building a tree of maps.
    let cur = current(known, &read_path, |theater| theater)
        .map_err(|e| MemoryError::Storage(format!("cannot read the recent file: {e}")))?;
    if cur.fingerprint != req.fingerprint || cur.identity_token != req.identity_token {
        return Err(MemoryError::Conflict {
            fingerprint: Some(cur.fingerprint),
            identity_token: Some(cur.identity_token),
        });
    }
    let stored = cur
        .bytes
        .as_deref()
        .filter(|b| theater::may_hold_theater(b))
        .and_then(companiond_core::history::line::parse_lines)
        .unwrap_or_default();
    let merged = theater::merge(&stored, &req.chat).map_err(|_| MemoryError::TheaterReadonly)?;
    let keeps_theater = merged.iter().any(|m| matches!(m, theater::Merged::Kept(_)));
    let owned = stored_json::encode_parts(&merged)
        .map_err(|e| MemoryError::Internal(format!("cannot serialise the history: {e}")))?;
    drop(merged);
    let parts: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    // While the new version is written and synced, a second thread confirms
    // that the file is still the version the tokens name, then computes the
    // new fingerprint (the disk, the check and the hash each take a few ms).
    let sums = || {
        let (mut sha, mut crc) = (Sha256::new(), crc32fast::Hasher::new());
        for part in &parts {
            sha.update(part);
            crc.update(part);
        }
        (hex::encode(sha.finalize()), crc.finalize())
    };
    let (staged, (confirmed, (fingerprint, crc))) = companiond_core::task::join(
        || Staged::write_parts(&write_path, &parts),
        || (confirm(&cur, &read_path), sums()),
    );
    let storage = |what: &str, e: std::io::Error| MemoryError::Storage(format!("{what}: {e}"));
    let staged = staged.map_err(|e| storage("cannot write the recent file", e))?;
    let confirmed = confirmed.map_err(|e| storage("cannot read the recent file", e))?;
    if !confirmed {
        // Edited in place since it was last seen: nothing is replaced, and
        // the conflict carries the tokens of what is there now.
        drop(staged);
        let now = current(known, &read_path, |_| true)
            .map_err(|e| storage("cannot read the recent file", e))?;
        return Err(MemoryError::Conflict {
            fingerprint: Some(now.fingerprint),
            identity_token: Some(now.identity_token),
        });
    }
    // The version replaced stays as a snapshot (a hard link: it is replaced
    // by rename, never written in place).
    let snap = (read_path == write_path && cur.key.is_some())
        .then(|| keep_before(state.data_dir(), &req.name, Kind::Save))
        .flatten();
    if let Err(e) = staged.publish() {
        if let Some(m) = snap {
            snapshots::discard(state.data_dir(), &req.name, &m.id);
        }
        return Err(storage("cannot write the recent file", e));
    }
    drop(stored);
    // Freeing megabytes is not the client's wait.
    drop(parts);
    companiond_core::task::later(move || drop((owned, cur)));
    let meta = std::fs::metadata(&write_path)
        .map_err(|e| storage("cannot read the recent file back", e))?;
    known.remember(
        &write_path,
        Stamp::of(&meta),
        crc,
        &fingerprint,
        keeps_theater,
    );
    Ok(Saved {
        success: true,
        need_refresh: true,
        profile_name: req.name.clone(),
        fingerprint,
        identity_token: identity_token(&write_path, Some(&meta)),
    })
}

/// Keep `name`'s recent history as a snapshot before it is replaced.
pub(crate) fn keep_before(data_dir: &Path, name: &str, kind: Kind) -> Option<snapshots::Meta> {
    snapshots::before_change(
        data_dir,
        &snapshots::Take {
            character: name,
            kind,
            files: &[companiond_core::history::FILE],
            profile: None,
            renamed_from: None,
            restored: None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filenames() {
        assert_eq!(parse_filename("recent_Mika.json").unwrap(), "Mika");
        assert_eq!(parse_filename("recent_a.b.json").unwrap(), "a.b");
        assert_eq!(parse_filename("recent_猫娘.json").unwrap(), "猫娘");
        for bad in [
            "",
            "recent_.json",
            "recent.json",
            "recent_a/b.json",
            "recent_a\\b.json",
            "recent_..json",
            "recent_...json",
            "recent_a..b.json",
            "../recent_a.json",
            "recent_a.txt",
            "settings_a.json",
            "recent_a:b.json",
            "recent_ a.json",
            "recent_CON.json",
            "recent_a\0.json",
        ] {
            assert!(parse_filename(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn save_body_order() {
        let ok = json!({"filename": "recent_a.json", "fingerprint": "f", "identity_token": "i", "chat": []});
        assert!(parse_save(&ok).is_ok());
        let mut b = ok.clone();
        b["filename"] = json!("x.json");
        assert!(matches!(parse_save(&b), Err(MemoryError::BadRequest(_))));
        let mut b = ok.clone();
        b["chat"] = json!({});
        assert!(matches!(parse_save(&b), Err(MemoryError::BadRequest(_))));
        let mut b = ok.clone();
        b["fingerprint"] = json!(1);
        assert!(matches!(parse_save(&b), Err(MemoryError::BadRequest(_))));
        let mut b = ok.clone();
        b["identity_token"] = Value::Null;
        assert!(matches!(parse_save(&b), Err(MemoryError::MissingTokens)));
        let mut b = ok;
        b.as_object_mut().unwrap().remove("fingerprint");
        b["chat"] = json!([{"role": "human"}]);
        assert!(matches!(parse_save(&b), Err(MemoryError::MissingTokens)));
    }

    /// A remembered version is used only while its [`Stamp`] matches the
    /// file, and its tokens hold only once its CRC-32 is confirmed: the
    /// checksum catches an edit in place that the file clock could not tell
    /// apart.
    #[test]
    fn remembered_fingerprints_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("recent.json");
        std::fs::write(&p, b"[1]").unwrap();
        let known = KnownFiles::default();
        let first = current(&known, &p, |_| false).unwrap();
        assert_eq!(first.fingerprint, sha256_hex(b"[1]"));
        assert!(first.bytes.is_some(), "not seen before: read");
        assert!(confirm(&first, &p).unwrap(), "read: nothing to confirm");
        let key = Stamp::of(&std::fs::metadata(&p).unwrap());
        // Seen: the remembered fingerprint is used, the file is not hashed.
        known.remember(&p, key, crc32fast::hash(b"[1]"), "remembered", false);
        let again = current(&known, &p, |_| false).unwrap();
        assert_eq!(
            (again.fingerprint.as_str(), &again.bytes),
            ("remembered", &None)
        );
        assert!(confirm(&again, &p).unwrap());
        // ... unless the save must read it (theater messages).
        assert_eq!(
            current(&known, &p, |_| true).unwrap().fingerprint,
            sha256_hex(b"[1]")
        );
        // The same key over other bytes (an edit within one clock tick): the
        // remembered tokens are not confirmed.
        std::fs::write(&p, b"[2]").unwrap();
        let key = Stamp::of(&std::fs::metadata(&p).unwrap());
        known.remember(&p, key, crc32fast::hash(b"[1]"), "remembered", false);
        let stale = current(&known, &p, |_| false).unwrap();
        assert_eq!(stale.fingerprint, "remembered");
        assert!(!confirm(&stale, &p).unwrap());
    }

    /// [`parse_save_bytes`] over a body given as a value.
    fn parse_save(body: &Value) -> Result<SaveRequest, MemoryError> {
        parse_save_bytes(&serde_json::to_vec(body).unwrap())
    }

    /// [`parse_chat`] over entries given as values.
    fn parse_chat(items: &[Value]) -> Result<Vec<ChatEntry>, MemoryError> {
        let bytes = serde_json::to_vec(items).unwrap();
        let parsed: Shaped<Vec<Shaped<EntryFields>>> = serde_json::from_slice(&bytes).unwrap();
        let Shaped::Is(items) = parsed else {
            panic!("an array")
        };
        super::parse_chat(items)
    }

    #[test]
    fn chat_limits() {
        let e = |t: String| json!({"role": "human", "text": t});
        assert!(parse_chat(&[e("x".repeat(MAX_TEXT_CHARS))]).is_ok());
        assert!(parse_chat(&[e("x".repeat(MAX_TEXT_CHARS + 1))]).is_err());
        // Characters, not bytes.
        assert!(parse_chat(&[e("猫".repeat(MAX_TEXT_CHARS))]).is_ok());
        let v: Vec<Value> = (0..MAX_ENTRIES).map(|_| json!({"role": "ai"})).collect();
        assert!(parse_chat(&v).is_ok());
        let v: Vec<Value> = (0..=MAX_ENTRIES).map(|_| json!({"role": "ai"})).collect();
        assert!(parse_chat(&v).is_err());
        let parsed = parse_chat(&[
            json!({"role": "ai", "text": "t", "source_index": 3, "theater": true, "x": 1}),
        ])
        .unwrap();
        assert_eq!(parsed[0].source_index, Some(3));
        assert!(parsed[0].theater);
        assert!(parse_chat(&[json!({"role": 1})]).is_err());
        assert!(parse_chat(&[json!({"role": "ai", "text": 5})]).is_err());
        assert!(parse_chat(&[json!("x")]).is_err());
    }
}

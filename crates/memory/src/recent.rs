//! The recent memory file: listing, reading with tokens, and the
//! compare-and-swap save (interface.md § Memory, reference § 4.1, 4.2, 4.6).
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
use companiond_core::stamp::{lstamp, stamp, Stamp};
use companiond_core::store::atomic_write;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::MemoryError;
use crate::fence;
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
#[derive(Debug, Clone, Serialize)]
pub struct RecentFile {
    pub content: String,
    pub fingerprint: String,
    pub identity_token: String,
}

/// Result of a successful save.
#[derive(Debug, Clone, Serialize)]
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

fn real_file(p: &Path) -> bool {
    p.symlink_metadata().map(|m| m.is_file()).unwrap_or(false)
}

/// Resolution order (reference § 4.6): `memory/<n>/recent.json`,
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
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Snapshot {
            bytes: None,
            fingerprint: sha256_hex(b""),
            identity_token: identity_token(path, None),
        }),
        Err(e) => Err(e),
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
    if configured && companiond_core::fence::mode(data) == "normal" {
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
pub async fn read(state: &AppState, filename: &str) -> Result<RecentFile, MemoryError> {
    let name = parse_filename(filename)?;
    let rt = MemoryRuntime::of(state);
    let _no_rename = rt.rename_lock.read().await;
    let configured = state.characters.exists(&name);
    let st = state.clone();
    blocking(move || {
        let Some((path, _)) = resolve_or_init(&st, &name, configured)? else {
            return Err(MemoryError::NotFound(format!(
                "recent file recent_{name}.json not found"
            )));
        };
        let snap = snapshot(&path)
            .map_err(|e| MemoryError::Storage(format!("cannot read the recent file: {e}")))?;
        let Some(bytes) = snap.bytes else {
            return Err(MemoryError::NotFound(format!(
                "recent file recent_{name}.json not found"
            )));
        };
        Ok(RecentFile {
            content: String::from_utf8_lossy(&bytes).into_owned(),
            fingerprint: snap.fingerprint,
            identity_token: snap.identity_token,
        })
    })
    .await
}

/// `GET /api/memory/recent_files`: sorted, deduplicated logical names from the
/// runtime and bundled memory roots (flat `recent_*.json` files and folders
/// holding a `recent.json`; symlinks are skipped). Configured characters get
/// their memory unit created first, so each of them is listed.
///
/// Costs one `lstat` per memory folder when nothing changed: see [`ListCache`].
pub async fn list(state: &AppState) -> Result<Vec<String>, MemoryError> {
    let rt = MemoryRuntime::of(state);
    let _no_rename = rt.rename_lock.read().await;
    let names = state.characters.names();
    let data = state.data_dir().to_path_buf();
    let bundle = state.bundle_dir().to_path_buf();
    let cache = state.ext::<ListCache>();
    blocking(move || {
        let computed_at = std::time::SystemTime::now();
        let mut c = cache.0.lock().unwrap_or_else(|e| e.into_inner());
        let runtime_root = unit::memory_root(&data);
        // Stamps of the character folders as this request leaves them.
        let mut folder_stamps: std::collections::HashMap<&str, Option<Stamp>> =
            std::collections::HashMap::with_capacity(names.len());
        if companiond_core::fence::mode(&data) == "normal" {
            for n in &names {
                // A folder whose stamp is the one it had when its unit was last
                // found complete still has every file (removing or replacing one
                // changes the folder's stamp): nothing to check or create.
                if paths::safe_name(n).is_ok() {
                    let now = lstamp(&runtime_root.join(n));
                    if now.is_some() && c.ensured.get(n.as_str()) == Some(&now) {
                        folder_stamps.insert(n, now);
                        continue;
                    }
                }
                if let Ok(dir) = unit::character_dir(&data, n) {
                    if let Err(e) = unit::ensure_memory_files(&dir) {
                        tracing::warn!("cannot create the memory files of {n}: {e}");
                        c.ensured.remove(n.as_str());
                        continue;
                    }
                    let after = lstamp(&dir);
                    // Only real folders (a symlink's own stamp does not follow
                    // its target) whose stamp is settled are remembered.
                    match after {
                        Some(s) if s.is_dir && s.settled(computed_at) => {
                            c.ensured.insert(n.clone(), after);
                        }
                        _ => {
                            c.ensured.remove(n.as_str());
                        }
                    }
                    folder_stamps.insert(n, after);
                }
            }
            let live: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
            c.ensured.retain(|k, _| live.contains(k.as_str()));
        }
        let mut out = std::collections::BTreeSet::new();
        for root in [runtime_root.clone(), bundle.join("memory")] {
            let root_stamp = stamp(&root);
            let entries = match c.roots.get(&root) {
                Some((s, entries)) if root_stamp.is_some() && *s == root_stamp => entries.clone(),
                _ => {
                    let Ok(rd) = std::fs::read_dir(&root) else {
                        c.roots.remove(&root);
                        continue;
                    };
                    let entries: Arc<Vec<(String, Kind)>> = Arc::new(
                        rd.flatten()
                            .filter_map(|entry| {
                                let ft = entry.file_type().ok()?;
                                let fname = entry.file_name().to_str()?.to_string();
                                let kind = if ft.is_file() {
                                    Kind::File
                                } else if ft.is_dir() {
                                    Kind::Dir
                                } else {
                                    return None;
                                };
                                Some((fname, kind))
                            })
                            .collect(),
                    );
                    if root_stamp.is_some_and(|s| s.settled(computed_at)) {
                        c.roots.insert(root.clone(), (root_stamp, entries.clone()));
                    } else {
                        c.roots.remove(&root);
                    }
                    entries
                }
            };
            for (fname, kind) in entries.iter() {
                let logical = match kind {
                    Kind::File => fname.clone(),
                    Kind::Dir => {
                        let dir = root.join(fname);
                        let ds = match folder_stamps.get(fname.as_str()) {
                            Some(s) if root == runtime_root => *s,
                            _ => lstamp(&dir),
                        };
                        let has = match c.folders.get(&dir) {
                            Some((s, has)) if ds.is_some() && *s == ds => *has,
                            _ => {
                                let has = real_file(&dir.join(unit::RECENT));
                                if ds.is_some_and(|s| s.is_dir && s.settled(computed_at)) {
                                    c.folders.insert(dir, (ds, has));
                                } else {
                                    c.folders.remove(&dir);
                                }
                                has
                            }
                        };
                        if !has {
                            continue;
                        }
                        format!("recent_{fname}.json")
                    }
                };
                if parse_filename(&logical).is_ok() {
                    out.insert(logical);
                }
            }
        }
        Ok(out.into_iter().collect())
    })
    .await
}

/// A memory root's entries: name and kind.
type RootEntries = Arc<Vec<(String, Kind)>>;

#[derive(Clone, Copy)]
enum Kind {
    File,
    Dir,
}

/// What [`list`] keeps between calls, each value with the stamp (device, inode,
/// times) of the folder it was derived from; values derived from folders changed
/// within [`companiond_core::stamp::RACY`] are not kept.
#[derive(Default)]
pub struct ListCache(std::sync::Mutex<ListState>);

#[derive(Default)]
struct ListState {
    /// Character → the stamp of its folder when its unit was last complete.
    ensured: std::collections::HashMap<String, Option<Stamp>>,
    /// Memory root → its entries (name, kind).
    roots: std::collections::HashMap<PathBuf, (Option<Stamp>, RootEntries)>,
    /// Folder → whether it holds a real `recent.json`.
    folders: std::collections::HashMap<PathBuf, (Option<Stamp>, bool)>,
}

#[cfg(test)]
mod list_cache_tests {
    use companiond_core::testkit::TestServer;

    /// Cached listings still notice a unit file removed on disk, a new folder
    /// and a removed `recent.json` of a folder that is not a character.
    #[tokio::test]
    async fn listing_follows_changes_on_disk() {
        let s = TestServer::start(&[crate::FAMILY]).await;
        let mem = s.data.join("memory");
        std::fs::create_dir_all(mem.join("Loose")).unwrap();
        std::fs::write(mem.join("Loose/recent.json"), "[]").unwrap();
        let files = || async {
            let (st, b) = s.get("/api/memory/recent_files").await;
            assert_eq!(st, 200, "{b}");
            b["files"].clone()
        };
        let both = serde_json::json!(["recent_Companion.json", "recent_Loose.json"]);
        assert_eq!(files().await, both);
        tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
        assert_eq!(files().await, both);
        assert_eq!(files().await, both);
        // A unit file removed on disk is created again by the next listing.
        std::fs::remove_file(mem.join("Companion/settings.json")).unwrap();
        assert_eq!(files().await, both);
        assert!(mem.join("Companion/settings.json").is_file());
        // A folder that is not a character loses its history.
        std::fs::remove_file(mem.join("Loose/recent.json")).unwrap();
        assert_eq!(files().await, serde_json::json!(["recent_Companion.json"]));
        std::fs::write(mem.join("recent_Flat.json"), "[]").unwrap();
        assert_eq!(
            files().await,
            serde_json::json!(["recent_Companion.json", "recent_Flat.json"])
        );
    }
}

/// Validate a save body (order of reference § 2.3: filename, chat, token
/// types → 400; missing tokens → 409).
pub fn parse_save(body: &Value) -> Result<SaveRequest, MemoryError> {
    let obj = body
        .as_object()
        .ok_or_else(|| MemoryError::BadRequest("the body must be a JSON object".into()))?;
    let filename = match obj.get("filename") {
        Some(Value::String(s)) => s,
        _ => {
            return Err(MemoryError::BadRequest(
                "filename (string) is required".into(),
            ))
        }
    };
    let name = parse_filename(filename)?;
    let chat = match obj.get("chat") {
        Some(Value::Array(a)) => parse_chat(a)?,
        _ => return Err(MemoryError::BadRequest("chat (array) is required".into())),
    };
    let token = |key: &str| match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(MemoryError::BadRequest(format!("{key} must be a string"))),
    };
    let fingerprint = token("fingerprint")?;
    let identity = token("identity_token")?;
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

/// Validate the chat entries and every limit of interface.md § Limits.
pub fn parse_chat(items: &[Value]) -> Result<Vec<ChatEntry>, MemoryError> {
    if items.len() > MAX_ENTRIES {
        return Err(MemoryError::BadRequest(format!(
            "chat holds {} entries; at most {MAX_ENTRIES} are allowed",
            items.len()
        )));
    }
    let mut total = 0usize;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Some(o) = item.as_object() else {
            return Err(MemoryError::BadRequest(format!(
                "chat[{i}] must be an object"
            )));
        };
        let role = match o.get("role") {
            Some(Value::String(r)) if !r.trim().is_empty() => r.clone(),
            _ => {
                return Err(MemoryError::BadRequest(format!(
                    "chat[{i}].role (non-empty string) is required"
                )))
            }
        };
        let text = match o.get("text") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(t)) => t.clone(),
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
        let source_index = o
            .get("source_index")
            .and_then(Value::as_u64)
            .and_then(|v| usize::try_from(v).ok());
        let theater = o.get("theater").and_then(Value::as_bool).unwrap_or(false);
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
        let out = blocking(move || commit(&st2, &req, configured, &target)).await;
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
    let cur = snapshot(&read_path)
        .map_err(|e| MemoryError::Storage(format!("cannot read the recent file: {e}")))?;
    if cur.fingerprint != req.fingerprint || cur.identity_token != req.identity_token {
        return Err(MemoryError::Conflict {
            fingerprint: Some(cur.fingerprint),
            identity_token: Some(cur.identity_token),
        });
    }
    // The stored history is parsed only when it may hold theater messages
    // (they are the only stored entries a save keeps), and then without
    // building a tree of maps.
    let current = cur
        .bytes
        .as_deref()
        .filter(|b| theater::may_hold_theater(b))
        .and_then(theater::parse_stored)
        .unwrap_or_default();
    let merged = theater::merge(&current, &req.chat).map_err(|_| MemoryError::TheaterReadonly)?;
    let bytes = serde_json::to_vec_pretty(&merged)
        .map_err(|e| MemoryError::Internal(format!("cannot serialise the history: {e}")))?;
    atomic_write(&write_path, &bytes)
        .map_err(|e| MemoryError::Storage(format!("cannot write the recent file: {e}")))?;
    let meta = std::fs::metadata(&write_path)
        .map_err(|e| MemoryError::Storage(format!("cannot read the recent file back: {e}")))?;
    Ok(Saved {
        success: true,
        need_refresh: true,
        profile_name: req.name.clone(),
        fingerprint: sha256_hex(&bytes),
        identity_token: identity_token(&write_path, Some(&meta)),
    })
}

/// Run blocking file work off the async runtime.
pub(crate) async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, MemoryError> + Send + 'static,
) -> Result<R, MemoryError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| MemoryError::Internal(format!("background work failed: {e}")))?
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

//! `GET /api/memory/recent_files`: the logical recent-history names of the
//! runtime and bundled memory roots (flat `recent_*.json` files and folders
//! holding a real `recent.json`; symlinks are skipped). Configured characters
//! get their memory unit completed first, so each of them is listed.
//!
//! Between calls the [`Cache`] keeps the serialized answer beside the entries
//! it was built from, and per folder what its stamp (device, inode, times)
//! told last time. A call with nothing changed costs one listing of each root
//! and one `fstatat` per folder relative to the root's descriptor; values
//! derived from folders changed within [`companiond_core::stamp::RACY`] are
//! not kept.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use axum::body::Bytes;
use companiond_core::paths;
use companiond_core::stamp::{lstamp, Stamp};
use companiond_core::AppState;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::recent::{parse_filename, real_file};
use crate::{unit, MemoryRuntime};

/// What [`list`] keeps between calls.
#[derive(Default)]
pub struct Cache(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    /// Character → the stamp of its folder when its unit was last complete.
    ensured: HashMap<String, Stamp>,
    /// Per root (runtime, bundled): folder → its stamp and whether it holds a
    /// real `recent.json`.
    folders: [HashMap<String, (Stamp, bool)>; 2],
    /// The last answer and the entries it lists.
    answer: Option<(Vec<Listed>, Bytes)>,
    /// Everything the last answer was derived from, kept only when nothing
    /// had to be created and every folder stamp was settled: the same again
    /// is the same answer, with no further look.
    seen: Option<Seen>,
}

/// The inputs of an answer: configured characters, the fence, both roots.
#[derive(PartialEq)]
struct Seen {
    names: Vec<String>,
    normal: bool,
    runtime: Option<Vec<Entry>>,
    bundled: Option<Vec<Entry>>,
}

/// One entry of a memory root that makes it into the answer.
#[derive(PartialEq, Eq)]
struct Listed {
    root: usize,
    name: String,
    folder: bool,
}

/// A file or folder of a memory root (a folder with its stamp).
#[derive(Clone, PartialEq)]
struct Entry {
    name: String,
    folder: Option<Option<Stamp>>,
}

/// The files and folders of `root` (symlinks and other kinds skipped), each
/// folder stamped relative to the open root; `None` when it cannot be listed.
fn entries(root: &Path) -> Option<Vec<Entry>> {
    let rd = std::fs::read_dir(root).ok()?;
    Some(
        rd.flatten()
            .filter_map(|e| {
                let kind = e.file_type().ok()?;
                let name = e.file_name().into_string().ok()?;
                let folder = if kind.is_file() {
                    None
                } else if kind.is_dir() {
                    // `DirEntry::metadata` does not follow symlinks and stats
                    // relative to the directory being listed.
                    Some(e.metadata().ok().map(|m| Stamp::of(&m)))
                } else {
                    return None;
                };
                Some(Entry { name, folder })
            })
            .collect(),
    )
}

/// The answer of `GET /api/memory/recent_files`.
#[derive(Serialize, ToSchema)]
#[schema(as = RecentFiles)]
#[schema(example = json!({"files": ["recent_Companion.json"]}))]
pub(crate) struct Files<'a> {
    /// Logical names `recent_<character>.json`, sorted, without repeats.
    #[schema(value_type = Vec<String>)]
    files: &'a BTreeSet<String>,
}

/// `GET /api/memory/recent_files`: `{"files": [...]}` serialized, sorted and
/// deduplicated.
pub async fn list(state: &AppState, rt: &MemoryRuntime) -> Result<Bytes, MemoryError> {
    let _no_rename = rt.rename_lock.read().await;
    let names = state.characters.names();
    let data = state.data_dir().to_path_buf();
    let bundle = state.bundle_dir().to_path_buf();
    let cache = rt.listing.clone();
    companiond_core::task::blocking(move || {
        let at = SystemTime::now();
        let mut kept = cache.0.lock().unwrap_or_else(|e| e.into_inner());
        let runtime_root = unit::memory_root(&data);
        let bundle_root = bundle.join("memory");
        let mut seen = Seen {
            names,
            normal: companiond_core::fence::is_normal(&data),
            runtime: entries(&runtime_root),
            bundled: entries(&bundle_root),
        };
        if let (Some(before), Some((_, bytes))) = (&kept.seen, &kept.answer) {
            if *before == seen {
                return Ok(bytes.clone());
            }
        }
        kept.seen = None;
        let touched =
            seen.normal && ensure_units(&mut kept, &data, &seen.names, seen.runtime.as_deref(), at);
        if touched {
            // Units were created or completed: list the root as they left it.
            seen.runtime = entries(&runtime_root);
        }
        let settled = !touched
            && [&seen.runtime, &seen.bundled]
                .into_iter()
                .flatten()
                .flatten()
                .all(|e| match e.folder {
                    None => true,
                    Some(stamp) => stamp.is_some_and(|s| s.is_dir && s.settled(at)),
                });
        let (runtime, bundled) = (seen.runtime.clone(), seen.bundled.clone());
        let mut listed = Vec::new();
        for (i, root, found) in [(0, runtime_root, runtime), (1, bundle_root, bundled)] {
            let Some(found) = found else {
                continue;
            };
            let folders = &mut kept.folders[i];
            if folders.len() > found.len() {
                let present: std::collections::HashSet<&str> =
                    found.iter().map(|e| e.name.as_str()).collect();
                folders.retain(|k, _| present.contains(k.as_str()));
            }
            for e in found {
                if let Some(stamp) = e.folder {
                    let has = match (folders.get(&e.name), stamp) {
                        (Some((kept_stamp, has)), Some(s)) if *kept_stamp == s => *has,
                        _ => {
                            let has = real_file(&root.join(&e.name).join(unit::RECENT));
                            match stamp {
                                Some(s) if s.is_dir && s.settled(at) => {
                                    folders.insert(e.name.clone(), (s, has));
                                }
                                _ => {
                                    folders.remove(&e.name);
                                }
                            }
                            has
                        }
                    };
                    if !has {
                        continue;
                    }
                }
                listed.push(Listed {
                    root: i,
                    folder: e.folder.is_some(),
                    name: e.name,
                });
            }
        }
        if settled {
            kept.seen = Some(seen);
        }
        if let Some((before, bytes)) = &kept.answer {
            if *before == listed {
                return Ok(bytes.clone());
            }
        }
        let mut files = BTreeSet::new();
        for l in &listed {
            let logical = if l.folder {
                format!("recent_{}.json", l.name)
            } else {
                l.name.clone()
            };
            if parse_filename(&logical).is_ok() {
                files.insert(logical);
            }
        }
        let bytes = Bytes::from(
            serde_json::to_vec(&Files { files: &files })
                .map_err(|e| MemoryError::Internal(format!("cannot encode the listing: {e}")))?,
        );
        // The answer is a function of the listed entries alone.
        kept.answer = Some((listed, bytes.clone()));
        Ok(bytes)
    })
    .await
}

/// Complete the memory unit of every configured character whose folder
/// changed since its unit was last found complete (removing or replacing a
/// file changes the folder's stamp); `true` when any unit was touched.
fn ensure_units(
    kept: &mut Kept,
    data: &Path,
    names: &[String],
    runtime: Option<&[Entry]>,
    at: SystemTime,
) -> bool {
    let folders: HashMap<&str, Stamp> = runtime
        .unwrap_or_default()
        .iter()
        .filter_map(|e| Some((e.name.as_str(), e.folder??)))
        .collect();
    let mut touched = false;
    for n in names {
        if paths::safe_name(n).is_ok() {
            if let Some(now) = folders.get(n.as_str()) {
                if kept.ensured.get(n.as_str()) == Some(now) {
                    continue;
                }
            }
        }
        let Ok(dir) = unit::character_dir(data, n) else {
            continue;
        };
        touched = true;
        if let Err(e) = unit::ensure_memory_files(&dir) {
            tracing::warn!("cannot create the memory files of {n}: {e}");
            kept.ensured.remove(n.as_str());
            continue;
        }
        // Only real folders (a symlink's own stamp does not follow its
        // target) whose stamp is settled are remembered.
        match lstamp(&dir) {
            Some(s) if s.is_dir && s.settled(at) => {
                kept.ensured.insert(n.clone(), s);
            }
            _ => {
                kept.ensured.remove(n.as_str());
            }
        }
    }
    if kept.ensured.len() > names.len() {
        let live: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
        kept.ensured.retain(|k, _| live.contains(k.as_str()));
    }
    touched
}

#[cfg(test)]
mod tests {
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

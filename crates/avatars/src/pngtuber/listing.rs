//! `GET /api/model/pngtuber/models` without re-reading every package: each
//! package's listing entry (or its "skip") is cached with the stamps of what
//! decided it — the package folder, its `model.json` and every sub-folder on
//! the way to the files it references (adding, removing or replacing a file
//! changes its directory's stamp). A request reads the store folder once (which
//! gives each package folder's stamp), stats each `model.json` and referenced
//! sub-folder, reads and validates only packages whose stamps changed, and
//! answers the previous serialised array when none did. Entries computed from
//! files changed within [`companiond_core::stamp::RACY`] are not kept.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use companiond_core::stamp::{all_settled, stamp, Stamp};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::package::{
    display_name, normalize, raw_config, read_model_json, relative_segments, validate, URL_PREFIX,
};

struct Entry {
    /// The package folder itself (files added, removed or renamed in it).
    pkg: Option<Stamp>,
    model: Option<Stamp>,
    /// Sub-folders on the way to the referenced files (relative to the store).
    deps: Vec<(OsString, Option<Stamp>)>,
    /// The serialised listing entry; `None` when the folder is skipped.
    json: Option<Arc<str>>,
}

/// Per-folder cache of the listing (one per package store), and the last
/// whole answer, reused while no package changed.
#[derive(Default)]
pub struct ListCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    answer: Option<Bytes>,
}

/// The sub-folders whose contents decide whether the files `model` references
/// exist: every folder on the way to each file below the package folder `pkg`
/// (a path relative to the store).
fn dependencies(model: &Map<String, Value>, pkg: &OsStr, folder: &str) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let own_prefix = format!("{URL_PREFIX}/{folder}/");
    for (k, v) in raw_config(model) {
        if !k.ends_with("_image") {
            continue;
        }
        let Some(s) = v.as_str().map(str::trim).filter(|s| !s.is_empty()) else {
            continue;
        };
        let s = s.replace('\\', "/");
        let rel = s.strip_prefix(own_prefix.as_str()).unwrap_or(&s);
        let Some(segs) = relative_segments(rel) else {
            continue;
        };
        let mut dir = pkg.to_os_string();
        for seg in segs.iter().take(segs.len().saturating_sub(1)) {
            dir.push("/");
            dir.push(seg);
            if !out.contains(&dir) {
                out.push(dir.clone());
            }
        }
    }
    out
}

/// One entry of `GET /models`: a valid package.
#[derive(Serialize, ToSchema)]
pub struct ListedPackage {
    pub name: String,
    pub folder: String,
    /// The folder again (the original application's field).
    pub filename: String,
    /// Always `user`.
    pub location: &'static str,
    /// Always `pngtuber`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Always `pngtuber`.
    pub model_type: &'static str,
    /// `/user_pngtuber/<folder>/model.json`.
    pub url: String,
    /// The normalised `pngtuber` block: every image key (`idle_image`,
    /// `talk_image`, ...) as a `/user_pngtuber/<folder>/...` URL or "",
    /// `layered_metadata`, `adapter`, `adapter_version` (layered only),
    /// `scale`, `offset_x`, `offset_y`, `mobile_scale`, `mobile_offset_x`,
    /// `mobile_offset_y` (as stored, or their defaults), `mirror`,
    /// `source_type`, `source_format`.
    #[schema(additional_properties)]
    pub pngtuber: Map<String, Value>,
    /// `simple_package` or the layered format it was converted from.
    pub source_format: String,
}

/// The listing entry of one package.
fn entry_of(model: &Map<String, Value>, folder: &str) -> ListedPackage {
    let name = display_name(model, folder);
    let source_format = model
        .get("source_format")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("simple_package")
        .to_string();
    ListedPackage {
        name,
        folder: folder.to_string(),
        filename: folder.to_string(),
        location: "user",
        kind: "pngtuber",
        model_type: "pngtuber",
        url: format!("{URL_PREFIX}/{folder}/model.json"),
        pngtuber: normalize(model, folder),
        source_format,
    }
}

/// Stamps of paths below the store folder, looked up relative to it when the
/// platform allows (`fstatat` on an open directory): a request stats thousands
/// of files, and each lookup then walks only the components below the store,
/// not the whole data-dir path.
struct Below<'a> {
    root: &'a Path,
    #[cfg(target_os = "linux")]
    dir: Option<std::fs::File>,
}

impl<'a> Below<'a> {
    fn open(root: &'a Path) -> Below<'a> {
        Below {
            root,
            #[cfg(target_os = "linux")]
            dir: std::fs::File::open(root).ok(),
        }
    }

    /// The stamp of `rel` (relative, `/`-separated), following symlinks like
    /// [`stamp`]; `None` when it does not exist.
    fn stamp(&self, rel: &OsStr) -> Option<Stamp> {
        #[cfg(target_os = "linux")]
        if let Some(dir) = &self.dir {
            return stamp_at(dir, rel);
        }
        stamp(&self.root.join(rel))
    }
}

/// `fstatat(dir, rel)` as a [`Stamp`] (the fields [`Stamp::of`] reads).
#[cfg(target_os = "linux")]
fn stamp_at(dir: &std::fs::File, rel: &OsStr) -> Option<Stamp> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(rel.as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `path` is NUL-terminated and outlives the call, the descriptor
    // is open for the call's duration, and `st` is only read after fstatat
    // reported that it filled it.
    let st = unsafe {
        if libc::fstatat(dir.as_raw_fd(), path.as_ptr(), st.as_mut_ptr(), 0) != 0 {
            return None;
        }
        st.assume_init()
    };
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some(Stamp {
        dev: st.st_dev,
        ino: st.st_ino,
        len: st.st_size as u64,
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        is_dir: st.st_mode & libc::S_IFMT == libc::S_IFDIR,
    })
}

impl ListCache {
    /// The JSON array of the valid packages under `root`, sorted by folder
    /// name (case-insensitive). Blocking. Costs one directory read and a stat
    /// of each package's `model.json` and referenced sub-folders (the package
    /// folders' own stamps come with the directory read) while nothing changed.
    pub fn list(&self, root: &Path) -> std::io::Result<Bytes> {
        let computed_at = SystemTime::now();
        let mut dirs: Vec<(String, OsString, Option<Stamp>)> = match std::fs::read_dir(root) {
            Ok(rd) => rd
                .flatten()
                .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') {
                        return None;
                    }
                    // Relative to the open directory (no path walk); a
                    // folder (not a symlink, filtered above) stats the same.
                    let pkg = e.metadata().ok().map(|m| Stamp::of(&m));
                    Some((name, e.file_name(), pkg))
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        dirs.sort_by_cached_key(|(n, _, _)| n.to_lowercase());
        let below = Below::open(root);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Inner { entries, answer } = &mut *inner;
        let mut changed = answer.is_none();
        // Entries computed from unsettled files are answered, never kept.
        let mut kept_all = true;
        let mut out: Vec<Arc<str>> = Vec::with_capacity(dirs.len());
        let mut cached_seen = 0usize;
        for (folder, raw, pkg_stamp) in &dirs {
            let mut model_rel = raw.clone();
            model_rel.push("/model.json");
            let model_stamp = below.stamp(&model_rel);
            let hit = entries.get(folder.as_str()).is_some_and(|e| {
                e.pkg == *pkg_stamp
                    && e.model == model_stamp
                    && e.deps.iter().all(|(p, s)| below.stamp(p) == *s)
            });
            if hit {
                cached_seen += 1;
                if let Some(j) = entries.get(folder.as_str()).and_then(|e| e.json.clone()) {
                    out.push(j);
                }
                continue;
            }
            changed = true;
            let (dir, model_path) = (root.join(raw), root.join(&model_rel));
            let stamps = (*pkg_stamp, model_stamp);
            match Self::compute(folder, raw, (&dir, &model_path), stamps, &below) {
                Some(e)
                    if all_settled(
                        [&e.pkg, &e.model]
                            .into_iter()
                            .chain(e.deps.iter().map(|(_, s)| s)),
                        computed_at,
                    ) =>
                {
                    if let Some(j) = e.json.clone() {
                        out.push(j);
                    }
                    entries.insert(folder.clone(), e);
                    cached_seen += 1;
                }
                Some(e) => {
                    entries.remove(folder.as_str());
                    kept_all = false;
                    if let Some(j) = e.json {
                        out.push(j);
                    }
                }
                None => {
                    entries.remove(folder.as_str());
                    kept_all = false;
                }
            }
        }
        if entries.len() > cached_seen {
            // Folders gone since the last call.
            let present: HashSet<&str> = dirs.iter().map(|(n, _, _)| n.as_str()).collect();
            entries.retain(|k, _| present.contains(k.as_str()));
            changed = true;
        }
        if !changed {
            if let Some(a) = answer {
                return Ok(a.clone());
            }
        }
        let mut body = Vec::with_capacity(out.iter().map(|e| e.len() + 1).sum::<usize>() + 2);
        body.push(b'[');
        for (i, e) in out.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(e.as_bytes());
        }
        body.push(b']');
        let body = Bytes::from(body);
        *answer = kept_all.then(|| body.clone());
        Ok(body)
    }

    /// Read and validate one package; `None` when it cannot be read (not cached).
    fn compute(
        folder: &str,
        raw: &OsStr,
        (dir, model_path): (&Path, &Path),
        (pkg_stamp, model_stamp): (Option<Stamp>, Option<Stamp>),
        below: &Below,
    ) -> Option<Entry> {
        // Stamps are taken before the reads, so a change racing with them shows
        // as a different stamp next time.
        let model = match read_model_json(model_path) {
            Ok(Some(m)) => m,
            Ok(None) => {
                return Some(Entry {
                    pkg: pkg_stamp,
                    model: model_stamp,
                    deps: Vec::new(),
                    json: None,
                })
            }
            Err(e) => {
                tracing::warn!("skipping PNGTuber package {folder}: {e}");
                return None;
            }
        };
        let deps: Vec<(OsString, Option<Stamp>)> = dependencies(&model, raw, folder)
            .into_iter()
            .map(|p| {
                let s = below.stamp(&p);
                (p, s)
            })
            .collect();
        let json = match validate(&model, dir, Some(folder)) {
            Ok(()) => serde_json::to_string(&entry_of(&model, folder))
                .ok()
                .map(Arc::from),
            Err(e) => {
                tracing::warn!("skipping invalid PNGTuber package {folder}: {e}");
                None
            }
        };
        Some(Entry {
            pkg: pkg_stamp,
            model: model_stamp,
            deps,
            json,
        })
    }
}

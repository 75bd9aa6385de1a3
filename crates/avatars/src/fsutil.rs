//! File-system helpers shared by the MMD and PNGTuber modules: streaming a body
//! to disk under a size limit, clean-up guards for partial files, the recursive
//! walk used by the listings and percent-decoding of URL paths.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::{Stream, StreamExt};

use companiond_core::staging::{StageError, Staging};

use crate::error::AvatarError;

/// Removes a file or folder when dropped, unless disarmed. Partial uploads,
/// temporary archives and staging folders are held by one of these so that any
/// failure, including a dropped request future (client gone), cleans up.
pub struct Cleanup {
    path: Option<PathBuf>,
}

impl Cleanup {
    pub fn new(path: PathBuf) -> Self {
        Cleanup { path: Some(path) }
    }
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or_else(|| Path::new(""))
    }
    /// Keep the file: the caller has moved it into place.
    pub fn disarm(&mut self) {
        self.path = None;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            remove_any(&p);
        }
    }
}

/// Remove a file, a symlink or a whole folder; errors are ignored (best effort).
pub fn remove_any(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(p);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(p);
        }
        Err(_) => {}
    }
}

/// A shared byte budget (the PNGTuber package limit across files).
pub struct Budget {
    pub used: u64,
    pub limit: u64,
}

/// Why streaming stopped.
pub enum StreamStop {
    Limit,
    Budget,
    Head(AvatarError),
    Aborted(String),
    Io(std::io::Error),
}

impl From<StageError> for StreamStop {
    fn from(e: StageError) -> Self {
        match e {
            StageError::TooLarge { .. } => StreamStop::Limit,
            StageError::Body(m) => StreamStop::Aborted(m),
            StageError::Io(e) => StreamStop::Io(e),
        }
    }
}

/// Stream `body` into a new file at `path` (created exclusively) through
/// core's [`Staging`], refusing more than `limit` bytes and, when given, more
/// than the shared `budget`. `check_head` sees the first `head_len` bytes (or
/// fewer when the file is shorter) as soon as they have arrived, so a renamed
/// file is refused before it is stored. On any failure the partial file is
/// removed. `durable` syncs the file before returning (files that are kept).
/// Returns the number of bytes written.
pub async fn stream_to_file<S, E>(
    body: &mut S,
    path: &Path,
    limit: u64,
    budget: Option<&mut Budget>,
    head_len: usize,
    check_head: &(dyn Fn(&[u8]) -> Result<(), AvatarError> + Sync),
    durable: bool,
) -> Result<u64, StreamStop>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    // An existing file is an error and left alone (it may be someone else's).
    let mut staging = Staging::create(path, limit, durable).map_err(StreamStop::Io)?;
    if let Err(stop) = feed(body, &mut staging, limit, budget, head_len, check_head).await {
        staging.discard().await;
        return Err(stop);
    }
    let staged = staging.finish().await.map_err(StreamStop::from)?;
    let size = staged.size;
    staged.file.keep();
    Ok(size)
}

/// Pull chunks from `body`, enforce the limits and the header check, and push
/// the chunks to the staged file.
async fn feed<S, E>(
    body: &mut S,
    staging: &mut Staging,
    limit: u64,
    mut budget: Option<&mut Budget>,
    head_len: usize,
    check_head: &(dyn Fn(&[u8]) -> Result<(), AvatarError> + Sync),
) -> Result<(), StreamStop>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut head: Vec<u8> = Vec::with_capacity(head_len);
    let mut head_checked = head_len == 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| StreamStop::Aborted(e.to_string()))?;
        if chunk.is_empty() {
            continue;
        }
        let n = chunk.len() as u64;
        if staging.received() + n > limit {
            return Err(StreamStop::Limit);
        }
        if let Some(b) = budget.as_deref_mut() {
            if b.used + n > b.limit {
                return Err(StreamStop::Budget);
            }
            b.used += n;
        }
        if !head_checked {
            let take = (head_len - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
            if head.len() >= head_len {
                check_head(&head).map_err(StreamStop::Head)?;
                head_checked = true;
            }
        }
        staging.push(chunk).await.map_err(StreamStop::from)?;
    }
    if !head_checked {
        check_head(&head).map_err(StreamStop::Head)?;
    }
    Ok(())
}

/// Decode `%XX` escapes of a URL path (invalid escapes stay as they are).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The path part of a URL or URL path: scheme and host dropped, query and
/// fragment cut, backslashes turned into slashes.
pub fn url_path(raw: &str) -> String {
    let mut s = raw.trim().replace('\\', "/");
    if let Some(i) = s.find("://") {
        let rest = &s[i + 3..];
        s = match rest.find('/') {
            Some(j) => rest[j..].to_string(),
            None => String::new(),
        };
    }
    if let Some(i) = s.find(['?', '#']) {
        s.truncate(i);
    }
    percent_decode(&s)
}

/// One file found by [`walk_files`].
pub struct Found {
    pub path: PathBuf,
    /// Relative path segments under the walked root.
    pub rel: Vec<String>,
    pub size: u64,
}

/// Most folders a listing walks into, and deepest level (pathological trees
/// cannot make a listing unbounded).
const WALK_MAX_ENTRIES: usize = 200_000;
const WALK_MAX_DEPTH: usize = 24;

/// Every regular file under `root` (symlinks are not followed, hidden names
/// starting with `.` are skipped), sorted by relative path. `skip_top` names
/// top-level folders to leave out. A missing root gives an empty list.
pub fn walk_files(root: &Path, skip_top: &[&str]) -> Vec<Found> {
    let mut out = Vec::new();
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(root.to_path_buf(), Vec::new())];
    let mut seen = 0usize;
    while let Some((dir, rel)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            seen += 1;
            if seen > WALK_MAX_ENTRIES {
                break;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if rel.is_empty() && skip_top.iter().any(|s| s.eq_ignore_ascii_case(&name)) {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let mut r = rel.clone();
            r.push(name);
            if ft.is_dir() {
                if r.len() < WALK_MAX_DEPTH {
                    stack.push((entry.path(), r));
                }
            } else if ft.is_file() {
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                out.push(Found {
                    path: entry.path(),
                    rel: r,
                    size,
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// Lower-case extension of a file name, without the dot.
pub fn ext_lower(name: &str) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// The name without its last extension.
pub fn stem(name: &str) -> &str {
    match name.rsplit_once('.') {
        Some((s, _)) if !s.is_empty() => s,
        _ => name,
    }
}

//! File-system helpers shared by the MMD and PNGTuber modules: streaming a body
//! to disk under a size limit, the recursive walk used by the listings and the
//! path part of URLs. (Clean-up guards for partial files are core's
//! [`Cleanup`](companiond_core::staging::Cleanup).)

use std::path::{Path, PathBuf};

use std::fmt::Display;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use companiond_core::paths::percent_decode_once;
use companiond_core::staging::{StageError, Staging};

use crate::error::AvatarError;

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
pub async fn stream_to_file(
    body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
    path: &Path,
    limit: u64,
    budget: Option<&mut Budget>,
    head_len: usize,
    check_head: &(dyn Fn(&[u8]) -> Result<(), AvatarError> + Sync),
    durable: bool,
) -> Result<u64, StreamStop> {
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
async fn feed(
    body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
    staging: &mut Staging,
    limit: u64,
    mut budget: Option<&mut Budget>,
    head_len: usize,
    check_head: &(dyn Fn(&[u8]) -> Result<(), AvatarError> + Sync),
) -> Result<(), StreamStop> {
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
    percent_decode_once(&s)
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

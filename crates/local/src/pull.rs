//! Downloading a curated model: into `<data>/models/<file>.part`, resumed
//! with an HTTP `Range` request when a part is there, the free space checked
//! before the first byte, the SHA-256 checked before the file is renamed into
//! place. A failed download keeps its part for the next try (a checksum
//! mismatch deletes it).

use std::io::Write;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::catalog::{self, CatalogModel};

/// Room kept free beside a download.
pub const SPARE: u64 = 64 << 20;

/// Why a pull failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullError {
    UnknownModel(String),
    NoSpace { need: u64, free: u64 },
    Network(String),
    Checksum { expected: String, got: String },
    Io(String),
    Busy,
}

impl PullError {
    pub fn code(&self) -> &'static str {
        match self {
            PullError::UnknownModel(_) => "unknown_model",
            PullError::NoSpace { .. } => "no_space",
            PullError::Network(_) => "network",
            PullError::Checksum { .. } => "checksum_mismatch",
            PullError::Io(_) => "io_error",
            PullError::Busy => "busy",
        }
    }
}

impl std::fmt::Display for PullError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PullError::UnknownModel(n) => write!(f, "no model named {n:?} in the catalog"),
            PullError::NoSpace { need, free } => write!(
                f,
                "not enough free disk space: the download needs {} MiB, {} MiB are free",
                need >> 20,
                free >> 20
            ),
            PullError::Network(e) => write!(
                f,
                "the download failed ({e}); what arrived is kept, pull again to resume"
            ),
            PullError::Checksum { expected, got } => write!(
                f,
                "the downloaded file is not the expected one (SHA-256 {got}, expected {expected}); it was deleted"
            ),
            PullError::Io(e) => write!(f, "cannot write the model file: {e}"),
            PullError::Busy => f.write_str("this model is already being downloaded"),
        }
    }
}

fn io(e: std::io::Error) -> PullError {
    if e.raw_os_error() == Some(28) {
        PullError::NoSpace { need: 0, free: 0 }
    } else {
        PullError::Io(e.to_string())
    }
}

/// Free bytes of the file system holding `dir`.
pub fn free_space(dir: &Path) -> Option<u64> {
    fs4::available_space(dir).ok()
}

/// SHA-256 of a file, in hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

/// Download `e` into `data_dir`'s models folder; `progress(received, total)`
/// is called as bytes arrive. Returns the file's path.
pub async fn pull(
    client: &reqwest::Client,
    data_dir: &Path,
    e: &CatalogModel,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> Result<PathBuf, PullError> {
    let dir = catalog::models_dir(data_dir);
    std::fs::create_dir_all(&dir).map_err(io)?;
    let dest = catalog::pulled_path(data_dir, e);
    if dest.exists() {
        progress(e.size, e.size);
        return Ok(dest);
    }
    let part = dir.join(format!("{}.part", e.file));
    let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    let mut req = client.get(&e.url);
    if have > 0 {
        req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let resp = req
        .send()
        .await
        .map_err(|x| PullError::Network(x.to_string()))?;
    let status = resp.status().as_u16();
    let (append, total) = match status {
        206 => (
            true,
            have + resp.content_length().unwrap_or(e.size.saturating_sub(have)),
        ),
        200 => (false, resp.content_length().unwrap_or(e.size)),
        // The part is already whole.
        416 if have > 0 => (true, have),
        s => return Err(PullError::Network(format!("the server answered HTTP {s}"))),
    };
    let start = if append { have } else { 0 };
    let need = total.saturating_sub(start) + SPARE;
    if let Some(free) = free_space(&dir) {
        if free < need {
            return Err(PullError::NoSpace { need, free });
        }
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(&part)
        .map_err(io)?;
    let mut got = start;
    progress(got, total);
    if status != 416 {
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|x| PullError::Network(x.to_string()))?;
            file.write_all(&chunk).map_err(|x| match io(x) {
                PullError::NoSpace { .. } => PullError::NoSpace {
                    need,
                    free: free_space(&dir).unwrap_or(0),
                },
                other => other,
            })?;
            got += chunk.len() as u64;
            progress(got, total);
        }
        if got < total {
            return Err(PullError::Network(format!(
                "the connection closed after {got} of {total} bytes"
            )));
        }
    }
    file.sync_all().map_err(io)?;
    drop(file);
    let p = part.clone();
    let got_sha = tokio::task::spawn_blocking(move || sha256_file(&p))
        .await
        .map_err(|x| PullError::Io(x.to_string()))?
        .map_err(io)?;
    if !e.sha256.is_empty() && !got_sha.eq_ignore_ascii_case(&e.sha256) {
        let _ = std::fs::remove_file(&part);
        return Err(PullError::Checksum {
            expected: e.sha256.clone(),
            got: got_sha,
        });
    }
    std::fs::rename(&part, &dest).map_err(io)?;
    Ok(dest)
}

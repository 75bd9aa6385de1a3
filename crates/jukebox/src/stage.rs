//! Streaming a request body part to a temporary file on disk, with its MD5
//! computed on the way and its size limit enforced on every chunk.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use md5::{Digest, Md5};
use tempfile::{NamedTempFile, TempPath};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::JukeboxError;
use crate::library::human_size;

/// Chunks in flight to each worker thread. Enough slack that the hasher and
/// the writer rarely stall the network side; bounds memory (chunks are at most a
/// few hundred KiB each: ≈ 45 MiB peak RSS measured for a 1 GiB upload).
const QUEUE: usize = 64;
/// Write buffer of the writer thread.
const WRITE_BUF: usize = 1 << 20;
/// The writer flushes to disk every this many bytes, so the final sync stays
/// short without stalling the pipeline often.
const SYNC_EVERY: u64 = 256 << 20;

/// A fully received, closed file: deleted on drop unless persisted.
#[derive(Debug)]
pub struct Staged {
    pub path: TempPath,
    pub md5: String,
    pub size: u64,
}

/// A file being received. Feed it with [`Stager::push`], then [`Stager::finish`]
/// or [`Stager::discard`]; dropping it also removes the partial file (soon).
pub struct Stager {
    tx: Option<(mpsc::Sender<Bytes>, mpsc::Sender<Bytes>)>,
    hasher: JoinHandle<String>,
    writer: JoinHandle<std::io::Result<(NamedTempFile, u64)>>,
    size: u64,
    limit: u64,
    label: String,
}

impl Stager {
    /// Start a staging file in `dir` (created when missing) named `.<prefix>-*.part`.
    pub fn start(
        dir: &Path,
        prefix: &str,
        limit: u64,
        label: &str,
    ) -> Result<Stager, JukeboxError> {
        Self::start_with(dir, prefix, limit, label, true)
    }

    /// Like [`Stager::start`]; without `hash` the MD5 is not computed (left empty).
    pub fn start_with(
        dir: &Path,
        prefix: &str,
        limit: u64,
        label: &str,
        hash: bool,
    ) -> Result<Stager, JukeboxError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| JukeboxError::io("cannot create the library folder", e))?;
        let file = tempfile::Builder::new()
            .prefix(&format!(".{prefix}-"))
            .suffix(".part")
            .tempfile_in(dir)
            .map_err(|e| JukeboxError::io("cannot create a temporary file", e))?;
        // MD5 is the slowest step and runs alone on its thread; writing (and
        // syncing) runs on another, both fed with the same reference-counted chunks.
        let (hash_tx, mut hash_rx) = mpsc::channel::<Bytes>(QUEUE);
        let (write_tx, mut write_rx) = mpsc::channel::<Bytes>(QUEUE);
        let hasher = tokio::task::spawn_blocking(move || {
            let mut md5 = Md5::new();
            while let Some(chunk) = hash_rx.blocking_recv() {
                if hash {
                    md5.update(&chunk);
                }
            }
            if hash {
                hex::encode(md5.finalize())
            } else {
                String::new()
            }
        });
        let writer = tokio::task::spawn_blocking(move || {
            let mut size = 0u64;
            let mut synced = 0u64;
            {
                let mut w = std::io::BufWriter::with_capacity(WRITE_BUF, file.as_file());
                while let Some(chunk) = write_rx.blocking_recv() {
                    w.write_all(&chunk)?;
                    size += chunk.len() as u64;
                    if size - synced >= SYNC_EVERY {
                        w.flush()?;
                        w.get_ref().sync_data()?;
                        synced = size;
                    }
                }
                w.flush()?;
            }
            file.as_file().sync_data()?;
            Ok((file, size))
        });
        Ok(Stager {
            tx: Some((hash_tx, write_tx)),
            hasher,
            writer,
            size: 0,
            limit,
            label: label.to_string(),
        })
    }

    /// Bytes received so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Append one chunk; refuses (413) as soon as the limit is passed.
    pub async fn push(&mut self, chunk: Bytes) -> Result<(), JukeboxError> {
        self.size += chunk.len() as u64;
        if self.size > self.limit {
            return Err(JukeboxError::TooLarge(format!(
                "{} is too large: more than {}",
                self.label,
                human_size(self.limit)
            )));
        }
        let Some((hash_tx, write_tx)) = &self.tx else {
            return Err(JukeboxError::Storage("staging file already closed".into()));
        };
        let sent = match write_tx.send(chunk.clone()).await {
            Ok(()) => hash_tx.send(chunk).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            // A worker stopped: report the writer's error.
            self.tx = None;
            return Err(match (&mut self.writer).await {
                Ok(Err(e)) => JukeboxError::io("cannot write the uploaded file", e),
                Ok(Ok(_)) => JukeboxError::Storage("the upload writer stopped early".into()),
                Err(e) => JukeboxError::io("the upload writer failed", e),
            });
        }
        Ok(())
    }

    /// Close the file and return it with its MD5.
    pub async fn finish(mut self) -> Result<Staged, JukeboxError> {
        self.tx = None;
        let (file, size) = match (&mut self.writer).await {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => return Err(JukeboxError::io("cannot write the uploaded file", e)),
            Err(e) => return Err(JukeboxError::io("the upload writer failed", e)),
        };
        let md5 = (&mut self.hasher)
            .await
            .map_err(|e| JukeboxError::io("the upload hasher failed", e))?;
        Ok(Staged {
            path: file.into_temp_path(),
            md5,
            size,
        })
    }

    /// Stop and remove the partial file before returning.
    pub async fn discard(mut self) {
        self.tx = None;
        let _ = (&mut self.writer).await;
        let _ = (&mut self.hasher).await;
    }
}

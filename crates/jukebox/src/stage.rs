//! Streaming a request body part to a temporary file on disk, with its MD5
//! computed on the way and its size limit enforced on every chunk.

use std::path::Path;

use bytes::Bytes;
use companiond_core::sink::FileSink;
use md5::{Digest, Md5};
use tempfile::{NamedTempFile, TempPath};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::JukeboxError;
use crate::library::human_size;

/// Chunks in flight to the hasher thread (the writer is the shared sink). Enough
/// slack that the hasher, the slowest step, never waits for the network side;
/// bounds memory (chunks are at most a few hundred KiB each: ≈ 30 MiB peak RSS
/// measured for a 1 GiB upload, client included).
const QUEUE: usize = 24;

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
    hash_tx: Option<mpsc::Sender<Bytes>>,
    hasher: JoinHandle<String>,
    sink: Option<FileSink>,
    file: NamedTempFile,
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
        // The shared sink writes on its own thread and starts writeback as it goes.
        let handle = file
            .as_file()
            .try_clone()
            .map_err(|e| JukeboxError::io("cannot open the temporary file", e))?;
        let sink = FileSink::with_queue(handle, true, QUEUE);
        Ok(Stager {
            hash_tx: Some(hash_tx),
            hasher,
            sink: Some(sink),
            file,
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
        let (Some(hash_tx), Some(sink)) = (&self.hash_tx, &mut self.sink) else {
            return Err(JukeboxError::Storage("staging file already closed".into()));
        };
        let sent = sink.send(chunk.clone()).await && hash_tx.send(chunk).await.is_ok();
        if !sent {
            // A worker stopped: report the writer's error.
            self.hash_tx = None;
            return Err(match self.sink.take() {
                Some(sink) => match sink.finish().await {
                    Err(e) => JukeboxError::io("cannot write the uploaded file", e),
                    Ok(_) => JukeboxError::Storage("the upload hasher stopped early".into()),
                },
                None => JukeboxError::Storage("staging file already closed".into()),
            });
        }
        Ok(())
    }

    /// Close the file and return it with its MD5.
    pub async fn finish(mut self) -> Result<Staged, JukeboxError> {
        self.hash_tx = None;
        let sink = self
            .sink
            .take()
            .ok_or_else(|| JukeboxError::Storage("staging file already closed".into()))?;
        let (_, size) = sink
            .finish()
            .await
            .map_err(|e| JukeboxError::io("cannot write the uploaded file", e))?;
        let md5 = (&mut self.hasher)
            .await
            .map_err(|e| JukeboxError::io("the upload hasher failed", e))?;
        Ok(Staged {
            path: self.file.into_temp_path(),
            md5,
            size,
        })
    }

    /// Stop and remove the partial file before returning.
    pub async fn discard(mut self) {
        self.hash_tx = None;
        if let Some(sink) = self.sink.take() {
            let _ = sink.finish().await;
        }
        let _ = (&mut self.hasher).await;
    }
}

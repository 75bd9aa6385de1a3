//! Pack-folder: uploaded files with relative paths streamed into packed.zip.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use companiond_core::paths::{check_file_name, clean_segments};
use companiond_core::text::human_size;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::JukeboxError;
use crate::library::Limits;
use companiond_core::text::shown_name;

use super::{entry_options, finish_zip, new_zip, zip_err};

enum PackMsg {
    Start(String),
    Data(Bytes),
}

/// A `packed.zip` being written from streamed parts.
pub struct Packer {
    tx: Option<mpsc::Sender<PackMsg>>,
    task: JoinHandle<Result<(File, u64), JukeboxError>>,
    names: HashSet<String>,
    current: u64,
    total: u64,
    limits: Limits,
}

/// The entry name for an uploaded relative path (400 when unsafe or empty).
pub fn pack_entry_name(raw: &str) -> Result<String, JukeboxError> {
    let segs = clean_segments(raw)
        .map_err(|e| JukeboxError::bad(format!("invalid file path {}: {e}", shown_name(raw))))?;
    if segs.is_empty() {
        return Err(JukeboxError::bad("a file has no name"));
    }
    for s in &segs {
        check_file_name(s).map_err(|p| {
            JukeboxError::bad(format!("invalid file path {}: {p}", shown_name(raw)))
        })?;
    }
    Ok(segs.join("/"))
}

impl Packer {
    pub fn start(tmp_dir: &Path, limits: Limits) -> Result<Packer, JukeboxError> {
        let mut w = new_zip(tmp_dir)?;
        let (tx, mut rx) = mpsc::channel::<PackMsg>(32);
        let task = tokio::task::spawn_blocking(move || {
            while let Some(msg) = rx.blocking_recv() {
                match msg {
                    PackMsg::Start(name) => {
                        let opts = entry_options(&name, 0).large_file(true);
                        w.start_file(name, opts)
                            .map_err(|e| zip_err("cannot write the archive", e))?;
                    }
                    PackMsg::Data(b) => w
                        .write_all(&b)
                        .map_err(|e| zip_err("cannot write the archive", e))?,
                }
            }
            finish_zip(w)
        });
        Ok(Packer {
            tx: Some(tx),
            task,
            names: HashSet::new(),
            current: 0,
            total: 0,
            limits,
        })
    }

    async fn send(&mut self, msg: PackMsg) -> Result<(), JukeboxError> {
        let Some(tx) = &self.tx else {
            return Err(JukeboxError::Storage(
                "the archive is already closed".into(),
            ));
        };
        if tx.send(msg).await.is_err() {
            self.tx = None;
            return Err(match (&mut self.task).await {
                Ok(Err(e)) => e,
                Ok(Ok(_)) => JukeboxError::Storage("the archive writer stopped early".into()),
                Err(e) => JukeboxError::io("the archive writer failed", e),
            });
        }
        Ok(())
    }

    /// Start the next file, named by its relative path.
    pub async fn begin(&mut self, raw_name: &str) -> Result<(), JukeboxError> {
        let name = pack_entry_name(raw_name)?;
        if !self.names.insert(name.clone()) {
            return Err(JukeboxError::bad(format!("the path {name} is given twice")));
        }
        self.current = 0;
        self.send(PackMsg::Start(name)).await
    }

    pub async fn push(&mut self, chunk: Bytes) -> Result<(), JukeboxError> {
        self.current += chunk.len() as u64;
        self.total += chunk.len() as u64;
        if self.current > self.limits.file {
            return Err(JukeboxError::TooLarge(format!(
                "a file is larger than {}",
                human_size(self.limits.file)
            )));
        }
        if self.total > self.limits.archive {
            return Err(JukeboxError::TooLarge(format!(
                "the files add up to more than {}",
                human_size(self.limits.archive)
            )));
        }
        self.send(PackMsg::Data(chunk)).await
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub async fn finish(mut self) -> Result<(File, u64), JukeboxError> {
        self.tx = None;
        (&mut self.task)
            .await
            .map_err(|e| JukeboxError::io("the archive writer failed", e))?
    }

    pub async fn discard(mut self) {
        self.tx = None;
        let _ = (&mut self.task).await;
    }
}

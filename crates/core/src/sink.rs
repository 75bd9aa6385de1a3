//! Writing a stream of chunks (a request body) to a file on a dedicated blocking
//! thread: the one file writer behind every streamed upload.
//!
//! * Chunks travel to the thread by reference (`Bytes`, no copy) through a bounded
//!   queue, so the network side and the disk side overlap and memory stays flat.
//! * Large chunks are written as they are; small ones are gathered into a 1 MiB
//!   buffer first (few, large writes).
//! * On Linux, writeback of what has been written is started every
//!   [`WRITEBACK_EVERY`] bytes (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which
//!   does not wait): the disk works while the rest of the body arrives, so the
//!   final `fsync` of a durable file is short instead of flushing the whole file
//!   at the end. Elsewhere the final `fsync` does all the work.

use std::fs::File;
use std::io::{self, Write};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Chunks in flight to the writer (hyper hands out chunks of at most a few
/// hundred KiB, so this bounds the queue to a few MiB).
pub const QUEUE: usize = 16;
/// Write buffer for small chunks.
const WRITE_BUFFER: usize = 1 << 20;
/// Chunks at least this large skip the write buffer (no extra copy).
const DIRECT_WRITE: usize = 64 << 10;
/// Writeback is started each time this many bytes have been written.
pub const WRITEBACK_EVERY: u64 = 8 << 20;

/// A file being written by its own thread. Feed it with [`FileSink::send`], then
/// call [`FileSink::finish`]; dropping it stops the thread after the queued chunks.
pub struct FileSink {
    tx: Option<mpsc::Sender<Bytes>>,
    task: JoinHandle<io::Result<(File, u64)>>,
}

impl FileSink {
    /// Start writing to `file` (positioned where writing starts, normally a new
    /// empty file). With `durable`, [`FileSink::finish`] syncs the file's data.
    pub fn spawn(file: File, durable: bool) -> FileSink {
        Self::with_queue(file, durable, QUEUE)
    }

    /// Like [`FileSink::spawn`] with a queue of `queue` chunks.
    pub fn with_queue(file: File, durable: bool, queue: usize) -> FileSink {
        let (tx, rx) = mpsc::channel::<Bytes>(queue.max(1));
        let task = tokio::task::spawn_blocking(move || write_all(file, rx, durable));
        FileSink { tx: Some(tx), task }
    }

    /// Queue one chunk. `false` when the writer has stopped (a write failed):
    /// [`FileSink::finish`] then returns its error.
    pub async fn send(&mut self, chunk: Bytes) -> bool {
        match &self.tx {
            Some(tx) => tx.send(chunk).await.is_ok(),
            None => false,
        }
    }

    /// Wait until everything queued is written (and synced when durable); the
    /// file and the number of bytes written.
    pub async fn finish(mut self) -> io::Result<(File, u64)> {
        self.tx = None;
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(io::Error::other(format!("the file writer failed: {e}"))),
        }
    }
}

fn write_all(file: File, mut rx: mpsc::Receiver<Bytes>, durable: bool) -> io::Result<(File, u64)> {
    let mut out = FileWriter::new(file);
    while let Some(chunk) = rx.blocking_recv() {
        out.write(&chunk)?;
    }
    out.finish(durable)
}

/// The blocking half of [`FileSink`], for code that already runs on a blocking
/// thread (archive extraction): buffered writes of small pieces, direct writes
/// of large ones, writeback started every [`WRITEBACK_EVERY`] bytes.
pub struct FileWriter {
    out: io::BufWriter<File>,
    written: u64,
    started: u64,
}

impl FileWriter {
    pub fn new(file: File) -> FileWriter {
        FileWriter {
            out: io::BufWriter::with_capacity(WRITE_BUFFER, file),
            written: 0,
            started: 0,
        }
    }

    /// Append `data`.
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if data.len() >= DIRECT_WRITE {
            self.out.flush()?;
            self.out.get_mut().write_all(data)?;
        } else {
            self.out.write_all(data)?;
        }
        self.written += data.len() as u64;
        if self.written - self.started >= WRITEBACK_EVERY {
            self.out.flush()?;
            start_writeback(
                self.out.get_ref(),
                self.started,
                self.written - self.started,
            );
            self.started = self.written;
        }
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flush (and with `durable`, sync the data); the file and the byte count.
    pub fn finish(mut self, durable: bool) -> io::Result<(File, u64)> {
        self.out.flush()?;
        let written = self.written;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        if durable {
            file.sync_data()?;
        }
        Ok((file, written))
    }
}

/// Ask the kernel to start writing `len` bytes at `offset` to disk, without
/// waiting. Best effort: errors are ignored (the final sync reports real ones).
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: the descriptor belongs to `file`, which outlives the call;
    // sync_file_range reads no memory of ours and only schedules writeback.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[tokio::test]
    async fn writes_every_chunk_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let file = File::create(&path).unwrap();
        let mut sink = FileSink::with_queue(file, true, 2);
        let mut expect = Vec::new();
        // Small chunks (buffered) and large ones (direct), crossing the writeback step.
        for i in 0..40u32 {
            let len = if i % 3 == 0 {
                700 * 1024
            } else {
                1000 + i as usize
            };
            let chunk: Vec<u8> = (0..len).map(|j| (j as u32 ^ i) as u8).collect();
            expect.extend_from_slice(&chunk);
            assert!(sink.send(Bytes::from(chunk)).await);
        }
        let (_f, n) = sink.finish().await.unwrap();
        assert_eq!(n, expect.len() as u64);
        let mut got = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut got).unwrap();
        assert!(got == expect, "content differs");
    }

    #[tokio::test]
    async fn reports_a_failed_write() {
        // A read-only handle cannot be written: the error comes back from finish.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro.bin");
        std::fs::write(&path, b"x").unwrap();
        let file = File::open(&path).unwrap();
        let mut sink = FileSink::with_queue(file, false, 1);
        for _ in 0..4 {
            if !sink.send(Bytes::from(vec![1u8; 100 * 1024])).await {
                break;
            }
        }
        assert!(sink.finish().await.is_err());
    }
}

//! Staging a streamed upload: a request body (or one multipart part) written to
//! a new file through the shared [`sink`](crate::sink), its size limit enforced
//! on every chunk, and optionally a [`Tap`] (a digest) fed the same chunks on a
//! thread of its own, so hashing and writing overlap and the file is never read
//! back. The staged file is removed when dropped unless the caller keeps it.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::sink::FileSink;

/// Chunks in flight to the writer and to the tap (chunks are at most a few
/// hundred KiB each: a few MiB per upload at most).
const QUEUE: usize = 24;

/// Something that sees every chunk of a staged upload, in order (a digest).
pub trait Tap: Send + 'static {
    type Output: Send + 'static;
    fn update(&mut self, data: &[u8]);
    fn finish(self) -> Self::Output;
}

/// No tap: only the bytes are staged.
pub struct NoTap;

impl Tap for NoTap {
    type Output = ();
    fn update(&mut self, _: &[u8]) {}
    fn finish(self) {}
}

/// Why staging stopped.
#[derive(Debug)]
pub enum StageError {
    /// More than the limit arrived (the partial file is removed).
    TooLarge { limit: u64 },
    /// The body could not be read (client gone, malformed part).
    Body(String),
    /// The file could not be created or written.
    Io(io::Error),
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StageError::TooLarge { limit } => write!(f, "more than {limit} bytes"),
            StageError::Body(m) => f.write_str(m),
            StageError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Removes a file or a whole folder when dropped, unless disarmed: partial
/// uploads, temporary archives and work folders are held by one of these so
/// that any failure, a dropped request future (client gone) included, cleans up.
#[derive(Debug)]
pub struct Cleanup {
    path: Option<PathBuf>,
}

impl Cleanup {
    pub fn new(path: PathBuf) -> Cleanup {
        Cleanup { path: Some(path) }
    }

    /// The guarded path (empty once disarmed).
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or_else(|| Path::new(""))
    }

    /// Keep what is there: the caller has moved it into place or took charge of
    /// it. The path, unless already disarmed.
    pub fn disarm(&mut self) -> Option<PathBuf> {
        self.path.take()
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

/// A file that is removed when dropped, unless kept or persisted.
#[derive(Debug)]
pub struct StagedFile {
    guard: Cleanup,
}

impl StagedFile {
    /// Take charge of `path`: it is removed when this value is dropped.
    pub fn new(path: PathBuf) -> StagedFile {
        StagedFile {
            guard: Cleanup::new(path),
        }
    }

    /// Nothing to remove (what is left behind once the file was handed on).
    fn none() -> StagedFile {
        StagedFile {
            guard: Cleanup { path: None },
        }
    }

    pub fn path(&self) -> &Path {
        self.guard.path()
    }

    /// Keep the file where it is; its path.
    pub fn keep(mut self) -> PathBuf {
        self.guard.disarm().unwrap_or_default()
    }

    /// Move the file to `target` unless something already exists there (the
    /// error then gives the file back with an `AlreadyExists` error).
    pub fn persist_noclobber(mut self, target: &Path) -> Result<(), (StagedFile, io::Error)> {
        let Some(path) = self.guard.disarm() else {
            return Err((self, io::Error::other("the staged file is gone")));
        };
        match std::fs::hard_link(&path, target) {
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
                Ok(())
            }
            Err(e) => Err((StagedFile::new(path), e)),
        }
    }
}

/// A fully received, closed (and, when durable, synced) file.
#[derive(Debug)]
pub struct Staged<O> {
    pub file: StagedFile,
    pub size: u64,
    /// What the tap made of the bytes (`()` without one).
    pub tap: O,
}

enum TapRun<T: Tap> {
    Inline(T),
    Thread(Option<mpsc::Sender<Bytes>>, Option<JoinHandle<T::Output>>),
}

/// A file being received. Feed it with [`Staging::push`] (or [`Staging::drain`]),
/// then [`Staging::finish`] or [`Staging::discard`]; dropping it also removes
/// the partial file.
pub struct Staging<T: Tap = NoTap> {
    file: StagedFile,
    sink: Option<FileSink>,
    tap: Option<TapRun<T>>,
    size: u64,
    limit: u64,
}

/// A random hidden name for a file or folder being received:
/// `.<prefix><suffix>.<temp token>.tmp`, the pattern of [`crate::store`]'s
/// temporary files, so what a crash leaves is removed by the start-up sweep
/// (`store::sweep_leftover_temps`), and never what this process is writing.
pub fn hidden_name(prefix: &str, suffix: &str) -> String {
    format!(".{prefix}{suffix}.{}.tmp", crate::store::temp_token())
}

fn create_new(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

impl Staging<NoTap> {
    /// Stage into a new file at `path` (created exclusively; an existing file is
    /// an error and left alone). With `durable`, the file is synced by `finish`.
    pub fn create(path: &Path, limit: u64, durable: bool) -> io::Result<Staging<NoTap>> {
        Staging::open(path, limit, durable, TapRun::Inline(NoTap))
    }

    /// Stage into `dir` (created when missing) under a [`hidden_name`] (`.<prefix>.part.<token>.tmp`).
    pub fn in_dir(dir: &Path, prefix: &str, limit: u64, durable: bool) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Staging::create(&dir.join(hidden_name(prefix, ".part")), limit, durable)
    }
}

impl<T: Tap> Staging<T> {
    /// Like [`Staging::create`], with `tap` fed every chunk on its own thread.
    pub fn create_tapped(path: &Path, limit: u64, durable: bool, tap: T) -> io::Result<Self> {
        let (tx, mut rx) = mpsc::channel::<Bytes>(QUEUE);
        let mut staging = Staging::open(path, limit, durable, TapRun::Thread(Some(tx), None))?;
        let handle = tokio::task::spawn_blocking(move || {
            let mut tap = tap;
            while let Some(chunk) = rx.blocking_recv() {
                tap.update(&chunk);
            }
            tap.finish()
        });
        if let Some(TapRun::Thread(_, slot)) = staging.tap.as_mut() {
            *slot = Some(handle);
        }
        Ok(staging)
    }

    fn open(path: &Path, limit: u64, durable: bool, tap: TapRun<T>) -> io::Result<Self> {
        let file = create_new(path)?;
        Ok(Staging {
            file: StagedFile::new(path.to_path_buf()),
            sink: Some(FileSink::with_queue(file, durable, QUEUE)),
            tap: Some(tap),
            size: 0,
            limit,
        })
    }

    /// Like [`Staging::in_dir`], with a tap.
    pub fn in_dir_tapped(
        dir: &Path,
        prefix: &str,
        limit: u64,
        durable: bool,
        tap: T,
    ) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Staging::create_tapped(&dir.join(hidden_name(prefix, ".part")), limit, durable, tap)
    }

    /// Where the bytes go.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.size
    }

    /// Append one chunk; refused as soon as the limit is passed.
    pub async fn push(&mut self, chunk: Bytes) -> Result<(), StageError> {
        self.size += chunk.len() as u64;
        if self.size > self.limit {
            return Err(StageError::TooLarge { limit: self.limit });
        }
        let Some(sink) = self.sink.as_mut() else {
            return Err(StageError::Io(io::Error::other(
                "the staged file is closed",
            )));
        };
        let tapped = match self.tap.as_mut() {
            Some(TapRun::Thread(Some(tx), _)) => tx.send(chunk.clone()).await.is_ok(),
            Some(TapRun::Inline(tap)) => {
                tap.update(&chunk);
                true
            }
            _ => false,
        };
        if !(tapped && sink.send(chunk).await) {
            // A worker stopped: report the writer's error.
            return Err(match self.sink.take() {
                Some(sink) => match sink.finish().await {
                    Err(e) => {
                        crate::disk::note(&e);
                        StageError::Io(e)
                    }
                    Ok(_) => StageError::Io(io::Error::other("the upload digest stopped early")),
                },
                None => StageError::Io(io::Error::other("the staged file is closed")),
            });
        }
        Ok(())
    }

    /// Push every chunk of `body`, then [`Staging::finish`]; on any error the
    /// partial file is removed before returning.
    pub async fn drain<S, E>(mut self, body: &mut S) -> Result<Staged<T::Output>, StageError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let streamed = loop {
            match body.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = self.push(chunk).await {
                        break Err(e);
                    }
                }
                Some(Err(e)) => break Err(StageError::Body(e.to_string())),
                None => break Ok(()),
            }
        };
        match streamed {
            Ok(()) => self.finish().await,
            Err(e) => {
                self.discard().await;
                Err(e)
            }
        }
    }

    /// Close (and sync) the file; the file, its size and the tap's output.
    pub async fn finish(mut self) -> Result<Staged<T::Output>, StageError> {
        let sink = self
            .sink
            .take()
            .ok_or_else(|| StageError::Io(io::Error::other("the staged file is closed")))?;
        let (_, size) = sink.finish().await.map_err(|e| {
            crate::disk::note(&e);
            StageError::Io(e)
        })?;
        let tap = match self.tap.take() {
            Some(TapRun::Inline(tap)) => tap.finish(),
            Some(TapRun::Thread(tx, Some(handle))) => {
                drop(tx);
                handle
                    .await
                    .map_err(|e| StageError::Io(io::Error::other(e.to_string())))?
            }
            _ => return Err(StageError::Io(io::Error::other("the tap is gone"))),
        };
        let file = std::mem::replace(&mut self.file, StagedFile::none());
        Ok(Staged { file, size, tap })
    }

    /// Stop and remove the partial file before returning.
    pub async fn discard(mut self) {
        if let Some(sink) = self.sink.take() {
            let _ = sink.finish().await;
        }
        if let Some(TapRun::Thread(tx, Some(handle))) = self.tap.take() {
            drop(tx);
            let _ = handle.await;
        }
        let file = std::mem::replace(&mut self.file, StagedFile::none());
        drop(file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts bytes and sums them (a stand-in digest).
    struct Sum(u64, u64);
    impl Tap for Sum {
        type Output = (u64, u64);
        fn update(&mut self, data: &[u8]) {
            self.0 += data.len() as u64;
            self.1 += data.iter().map(|b| *b as u64).sum::<u64>();
        }
        fn finish(self) -> (u64, u64) {
            (self.0, self.1)
        }
    }

    #[tokio::test]
    async fn stages_taps_persists_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut st =
            Staging::in_dir_tapped(dir.path(), "upload", 1 << 20, true, Sum(0, 0)).unwrap();
        st.push(Bytes::from_static(b"abc")).await.unwrap();
        st.push(Bytes::from(vec![1u8; 1000])).await.unwrap();
        assert_eq!(st.received(), 1003);
        let staged = st.finish().await.unwrap();
        assert_eq!((staged.size, staged.tap), (1003, (1003, 294 + 1000)));
        let target = dir.path().join("kept.bin");
        std::fs::write(&target, b"x").unwrap();
        let (file, e) = staged.file.persist_noclobber(&target).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let other = dir.path().join("other.bin");
        file.persist_noclobber(&other).unwrap();
        assert_eq!(std::fs::read(&other).unwrap().len(), 1003);
        // Over the limit: refused, and nothing is left behind.
        let mut st = Staging::in_dir(dir.path(), "upload", 10, false).unwrap();
        let err = st.push(Bytes::from(vec![0u8; 11])).await.unwrap_err();
        assert!(matches!(err, StageError::TooLarge { limit: 10 }));
        st.discard().await;
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["kept.bin", "other.bin"]);
    }

    #[tokio::test]
    async fn drain_stops_on_a_body_error_and_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.part");
        let st = Staging::create(&path, 1 << 20, false).unwrap();
        let mut body =
            futures::stream::iter(vec![Ok(Bytes::from_static(b"abc")), Err("client gone")]);
        let err = st.drain(&mut body).await.unwrap_err();
        assert!(matches!(err, StageError::Body(ref m) if m == "client gone"));
        assert!(!path.exists());
        // An existing file is not replaced (nor removed).
        std::fs::write(&path, b"mine").unwrap();
        assert!(Staging::create(&path, 1, false).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"mine");
    }
}

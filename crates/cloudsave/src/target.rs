//! The storage target behind one interface (`object_store`): a local directory
//! (the default `<data>/cloud`) or `s3://bucket/prefix` on any S3-compatible store.
//!
//! Key layout under the target's prefix (see docs/cloudsave.md):
//!
//! ```text
//! characters/<name>/meta.json                         written last: the unit exists iff it does
//! characters/<name>/payload/<payload_id>/profile.json
//! characters/<name>/payload/<payload_id>/memory/<file>
//! ```
//!
//! A payload is staged under a fresh `payload_id` that no meta record references;
//! publishing is the single PUT of `meta.json` naming it, so a reader (which always
//! starts from `meta.json`) never sees half a unit.

use std::collections::HashMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use companiond_core::stamp::{stamp, Stamp};

use bytes::Bytes;
use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::{Path, PathPart};
use object_store::{BackoffConfig, ObjectStore, PutPayload, RetryConfig, WriteMultipart};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::CloudSaveError;
use crate::unit::Meta;

/// Files at most this large are sent with one PUT; larger ones stream in parts.
const SINGLE_PUT_MAX: u64 = 8 * 1024 * 1024;
/// Part size of streamed uploads (S3 needs at least 5 MiB per part).
const PART_SIZE: usize = 8 * 1024 * 1024;
/// Largest meta record accepted from the target.
const MAX_META_BYTES: usize = 1024 * 1024;

/// What kind of target `--cloud` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    Directory(PathBuf),
    S3 { bucket: String, prefix: String },
}

impl TargetSpec {
    /// Parse `--cloud`: `s3://bucket[/prefix]` or a directory path.
    pub fn parse(raw: &str) -> Result<TargetSpec, String> {
        let raw = raw.trim();
        if let Some(rest) = raw
            .strip_prefix("s3://")
            .or_else(|| raw.strip_prefix("S3://"))
        {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("{raw:?} names no bucket"));
            }
            let prefix = prefix.trim_matches('/').to_string();
            if prefix.split('/').any(|p| p == ".." || p == ".") {
                return Err(format!("{raw:?} has an invalid prefix"));
            }
            return Ok(TargetSpec::S3 {
                bucket: bucket.to_string(),
                prefix,
            });
        }
        if raw.is_empty() {
            return Err("no cloud target configured".into());
        }
        Ok(TargetSpec::Directory(PathBuf::from(raw)))
    }

    /// `local_directory` or `s3` (the `sync_backend` value).
    pub fn kind(&self) -> &'static str {
        match self {
            TargetSpec::Directory(_) => "local_directory",
            TargetSpec::S3 { .. } => "s3",
        }
    }

    /// Human-readable location (`cloudsave_root`).
    pub fn display(&self) -> String {
        match self {
            TargetSpec::Directory(p) => p.to_string_lossy().into_owned(),
            TargetSpec::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}"),
            TargetSpec::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
        }
    }
}

/// An opened target.
#[derive(Clone)]
pub struct Target {
    pub store: Arc<dyn ObjectStore>,
    /// Key prefix of every object (empty for a directory target).
    pub root: Path,
    /// The same store as a directory (a directory target), for file stamps.
    local: Option<Arc<LocalFileSystem>>,
    /// Parsed meta records of a directory target, by file, with the stamp of
    /// the file they were read from (see [`Target::list_units`]).
    metas: Arc<Mutex<MetaCache>>,
}

/// Meta record file → (its stamp, the record; `None` when it is skipped).
type MetaCache = HashMap<PathBuf, (Stamp, Option<Arc<Meta>>)>;

fn unavailable(e: impl std::fmt::Display) -> CloudSaveError {
    CloudSaveError::ProviderUnavailable(e.to_string())
}

/// Map a store error: anything but "not found" means the target cannot be used.
pub fn store_err(e: object_store::Error) -> CloudSaveError {
    unavailable(e)
}

/// Build the store for `spec` (called lazily, on first use).
pub fn open(spec: &TargetSpec) -> Result<Target, CloudSaveError> {
    match spec {
        TargetSpec::Directory(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                unavailable(format!(
                    "cannot create the cloud directory {}: {e}",
                    dir.display()
                ))
            })?;
            let fs = Arc::new(
                LocalFileSystem::new_with_prefix(dir)
                    .map_err(unavailable)?
                    .with_automatic_cleanup(true),
            );
            Ok(Target {
                store: fs.clone(),
                root: Path::default(),
                local: Some(fs),
                metas: Arc::default(),
            })
        }
        TargetSpec::S3 { bucket, prefix } => {
            let endpoint = std::env::var("AWS_ENDPOINT_URL")
                .or_else(|_| std::env::var("AWS_ENDPOINT"))
                .unwrap_or_default();
            let mut b = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_retry(RetryConfig {
                    backoff: BackoffConfig {
                        init_backoff: Duration::from_millis(100),
                        max_backoff: Duration::from_secs(2),
                        base: 2.0,
                    },
                    max_retries: 2,
                    retry_timeout: Duration::from_secs(20),
                });
            if endpoint.trim().to_ascii_lowercase().starts_with("http://") {
                b = b.with_allow_http(true);
            }
            let s3 = b.build().map_err(unavailable)?;
            Ok(Target {
                store: Arc::new(s3),
                root: Path::from(prefix.as_str()),
                local: None,
                metas: Arc::default(),
            })
        }
    }
}

impl Target {
    fn key(&self, parts: &[&str]) -> Path {
        let mut p = self.root.clone();
        for part in parts {
            p = p.child(PathPart::from(*part));
        }
        p
    }

    /// `characters/` (the folder listed for units).
    pub fn characters_dir(&self) -> Path {
        self.key(&["characters"])
    }
    pub fn meta_key(&self, name: &str) -> Path {
        self.key(&["characters", name, "meta.json"])
    }
    pub fn payloads_dir(&self, name: &str) -> Path {
        self.key(&["characters", name, "payload"])
    }
    pub fn payload_dir(&self, name: &str, payload_id: &str) -> Path {
        self.key(&["characters", name, "payload", payload_id])
    }
    pub fn profile_key(&self, name: &str, payload_id: &str) -> Path {
        self.key(&["characters", name, "payload", payload_id, "profile.json"])
    }
    /// `file` must be one of the unit's managed file names.
    pub fn memory_key(&self, name: &str, payload_id: &str, file: &str) -> Path {
        self.key(&["characters", name, "payload", payload_id, "memory", file])
    }

    /// The meta record of `name`, `None` when there is no published unit.
    /// A record that does not parse is reported as corrupt.
    pub async fn read_meta(&self, name: &str) -> Result<Option<Meta>, CloudSaveError> {
        let key = self.meta_key(name);
        let bytes = match self.store.get(&key).await {
            Ok(r) => {
                if r.meta.size > MAX_META_BYTES {
                    return Err(CloudSaveError::PayloadCorrupt(format!(
                        "the meta record of {name:?} is too large"
                    )));
                }
                r.bytes().await.map_err(store_err)?
            }
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(store_err(e)),
        };
        serde_json::from_slice::<Meta>(&bytes)
            .map(Some)
            .map_err(|e| CloudSaveError::PayloadCorrupt(format!("meta record of {name:?}: {e}")))
    }

    /// Every published unit (a folder without `meta.json` is not a unit),
    /// sorted by name. Records that do not parse or do not match their folder
    /// are skipped.
    pub async fn list_units(&self) -> Result<Vec<Arc<Meta>>, CloudSaveError> {
        let mut out = match &self.local {
            Some(fs) => self.list_units_in_directory(fs.clone()).await?,
            None => self.list_units_in_store().await?,
        };
        out.sort_by(|a, b| a.character_name.cmp(&b.character_name));
        Ok(out)
    }

    /// The record of the folder `encoded` (None, with a warning, when it
    /// does not parse).
    fn parse_record(encoded: &str, bytes: &[u8]) -> Option<Meta> {
        serde_json::from_slice::<Meta>(bytes)
            .map_err(|e| tracing::warn!("cloud unit {encoded:?} has an unreadable meta: {e}"))
            .ok()
    }

    /// `meta` when the folder `encoded` is its own; else None, with a warning.
    fn own_record(encoded: &str, meta: Meta, own: bool) -> Option<Meta> {
        if !own {
            tracing::warn!(
                "cloud unit {encoded:?} names another character ({:?}); skipped",
                meta.character_name
            );
            return None;
        }
        Some(meta)
    }

    /// [`Self::list_units`] on an object store: one listing, one GET per unit.
    async fn list_units_in_store(&self) -> Result<Vec<Arc<Meta>>, CloudSaveError> {
        let dir = self.characters_dir();
        let listing = match self.store.list_with_delimiter(Some(&dir)).await {
            Ok(l) => l,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(store_err(e)),
        };
        let mut out = Vec::new();
        for prefix in listing.common_prefixes {
            let Some(encoded) = prefix.filename().map(str::to_string) else {
                continue;
            };
            let bytes = match self.store.get(&prefix.child("meta.json")).await {
                Ok(r) if r.meta.size <= MAX_META_BYTES => r.bytes().await.map_err(store_err)?,
                Ok(_) => continue,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(store_err(e)),
            };
            let Some(m) = Self::parse_record(&encoded, &bytes) else {
                continue;
            };
            let own = PathPart::from(m.character_name.as_str()).as_ref() == encoded;
            out.extend(Self::own_record(&encoded, m, own).map(Arc::new));
        }
        Ok(out)
    }

    /// [`Self::list_units`] on a directory, in one blocking task: one listing
    /// of the folder and one `stat` per record. Each record is parsed once and
    /// kept with the stamp of its file (device, inode, size, times): an
    /// unchanged file is not read again; records written within
    /// [`companiond_core::stamp::RACY`] are not kept.
    async fn list_units_in_directory(
        &self,
        fs: Arc<LocalFileSystem>,
    ) -> Result<Vec<Arc<Meta>>, CloudSaveError> {
        let dir = fs
            .path_to_filesystem(&self.characters_dir())
            .map_err(unavailable)?;
        let metas = self.metas.clone();
        let target = self.clone();
        companiond_core::task::blocking(move || {
            let computed_at = SystemTime::now();
            let listing = match std::fs::read_dir(&dir) {
                Ok(l) => l,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(unavailable(format!("{}: {e}", dir.display()))),
            };
            let mut out = Vec::new();
            let mut live = std::collections::HashSet::new();
            for entry in listing {
                let entry = entry.map_err(unavailable)?;
                // Folders (followed through symbolic links) are the units.
                let is_dir = match entry.file_type() {
                    Ok(t) if t.is_dir() => true,
                    Ok(t) if t.is_symlink() => entry.path().is_dir(),
                    _ => false,
                };
                if !is_dir {
                    continue;
                }
                let file = entry.path().join("meta.json");
                let Some(s) = stamp(&file) else {
                    continue;
                };
                let hit = {
                    let cache = metas.lock().unwrap_or_else(|e| e.into_inner());
                    match cache.get(&file) {
                        Some((old, meta)) if *old == s => Some(meta.clone()),
                        _ => None,
                    }
                };
                if let Some(meta) = hit {
                    out.extend(meta);
                    live.insert(file);
                    continue;
                }
                if s.len > MAX_META_BYTES as u64 {
                    continue;
                }
                let bytes = match std::fs::read(&file) {
                    Ok(b) => b,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(unavailable(format!("{}: {e}", file.display()))),
                };
                // The record belongs to the folder its name's key resolves to.
                let parsed = Self::accept_file(&target, &fs, &file, &bytes).map(Arc::new);
                // The stamp was taken before the read: a record replaced
                // meanwhile shows as another stamp next time.
                if s.settled(computed_at) && s.len == bytes.len() as u64 {
                    metas
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(file.clone(), (s, parsed.clone()));
                    live.insert(file);
                }
                out.extend(parsed);
            }
            metas
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|k, _| live.contains(k));
            Ok(out)
        })
        .await
    }

    /// A record read from `file` on a directory target, accepted when the key
    /// of the name it carries is that file.
    fn accept_file(
        target: &Target,
        fs: &LocalFileSystem,
        file: &FsPath,
        bytes: &[u8],
    ) -> Option<Meta> {
        let encoded = file
            .parent()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let m = Self::parse_record(&encoded, bytes)?;
        let own = fs
            .path_to_filesystem(&target.meta_key(&m.character_name))
            .is_ok_and(|p| p == file);
        Self::own_record(&encoded, m, own)
    }

    /// Upload a local file to `key`: one PUT when small, streamed parts otherwise.
    pub async fn put_file(&self, key: &Path, file: &FsPath) -> Result<(), CloudSaveError> {
        let unreadable =
            |e: std::io::Error| CloudSaveError::UploadFailed(format!("{}: {e}", file.display()));
        let size = tokio::fs::metadata(file).await.map_err(unreadable)?.len();
        if size <= SINGLE_PUT_MAX {
            let bytes = tokio::fs::read(file).await.map_err(unreadable)?;
            self.store
                .put(key, PutPayload::from(Bytes::from(bytes)))
                .await
                .map_err(store_err)?;
            return Ok(());
        }
        let upload = self.store.put_multipart(key).await.map_err(store_err)?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
        let streamed = async {
            let mut f = tokio::fs::File::open(file).await.map_err(unreadable)?;
            let mut buf = vec![0u8; 1024 * 1024];
            loop {
                let n = f.read(&mut buf).await.map_err(unreadable)?;
                if n == 0 {
                    return Ok(());
                }
                w.wait_for_capacity(4).await.map_err(store_err)?;
                w.write(&buf[..n]);
            }
        }
        .await;
        // A failed upload leaves no parts behind.
        if let Err(e) = streamed {
            let _ = w.abort().await;
            return Err(e);
        }
        w.finish().await.map_err(store_err)?;
        Ok(())
    }

    /// Download `key` into `dest` (streamed), refusing more than `max` bytes.
    /// Returns `Ok(false)` when the object does not exist.
    pub async fn get_to_file(
        &self,
        key: &Path,
        dest: &FsPath,
        max: u64,
    ) -> Result<bool, CloudSaveError> {
        let r = match self.store.get(key).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(store_err(e)),
        };
        if r.meta.size as u64 > max {
            return Err(CloudSaveError::PayloadCorrupt(format!(
                "{key} is larger than its meta record says"
            )));
        }
        let io =
            |e: std::io::Error| CloudSaveError::DownloadFailed(format!("{}: {e}", dest.display()));
        let mut out = tokio::fs::File::create(dest).await.map_err(io)?;
        let mut stream = r.into_stream();
        let mut written: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(store_err)?;
            written += chunk.len() as u64;
            if written > max {
                return Err(CloudSaveError::PayloadCorrupt(format!(
                    "{key} is larger than its meta record says"
                )));
            }
            out.write_all(&chunk).await.map_err(io)?;
        }
        out.flush().await.map_err(io)?;
        out.sync_all().await.map_err(io)?;
        Ok(true)
    }

    /// Delete every object under `dir` (best effort; errors are logged).
    pub async fn delete_under(&self, dir: &Path) {
        let keys: Vec<Path> = self
            .store
            .list(Some(dir))
            .filter_map(|r| async move { r.ok().map(|m| m.location) })
            .collect()
            .await;
        for k in keys {
            if let Err(e) = self.store.delete(&k).await {
                if !matches!(e, object_store::Error::NotFound { .. }) {
                    tracing::warn!("cannot delete cloud object {k}: {e}");
                }
            }
        }
    }

    /// Remove payloads of `name` other than `keep`: `previous` at once, any other
    /// only when older than `stale_after` (an upload that crashed before publishing).
    pub async fn collect_garbage(
        &self,
        name: &str,
        keep: &str,
        previous: Option<&str>,
        stale_after: Duration,
    ) {
        let dir = self.payloads_dir(name);
        let listing = match self.store.list_with_delimiter(Some(&dir)).await {
            Ok(l) => l,
            Err(_) => return,
        };
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        for p in listing.common_prefixes {
            let Some(id) = p.filename().map(str::to_string) else {
                continue;
            };
            if id == keep {
                continue;
            }
            let stale = if Some(id.as_str()) == previous {
                true
            } else {
                let newest = self
                    .store
                    .list(Some(&p))
                    .filter_map(|r| async move { r.ok().map(|m| m.last_modified.timestamp()) })
                    .fold(None, |acc: Option<i64>, t| async move {
                        Some(acc.map_or(t, |a| a.max(t)))
                    })
                    .await;
                newest.is_none_or(|t| now - t > stale_after.as_secs() as i64)
            };
            if stale {
                self.delete_under(&p).await;
            }
        }
    }
}

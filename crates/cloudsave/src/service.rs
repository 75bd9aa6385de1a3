//! The cloud-save operations (summary, detail, upload, download), independent of HTTP.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use companiond_core::characters::CharacterError;
use companiond_core::{paths, store, AppState};
use object_store::PutPayload;
use serde::Serialize;
use serde_json::{json, Value};

use crate::autocloud::{self, manifest_fingerprint, PlatformAutocloud};
use crate::error::CloudSaveError;
use crate::local;
use crate::localcache::LocalFacts;
use crate::summary::{self, Detail, Summary};
use crate::target::{self, Target, TargetSpec};
use crate::unit::{self, FileEntry, Meta};

/// How long a forced download waits for the chat session to close.
const TERMINATE_TIMEOUT: Duration = Duration::from_secs(5);
/// Unpublished payloads older than this are removed by the next upload.
const STALE_PAYLOAD: Duration = Duration::from_secs(3600);

/// Options of a download.
#[derive(Clone, Copy, Debug)]
pub struct DownloadOptions {
    pub overwrite: bool,
    pub backup_before_overwrite: bool,
    pub force: bool,
}

/// An answer document with its `success: true` flag first.
#[derive(Debug, Serialize)]
pub struct Succeeded<T> {
    pub success: bool,
    #[serde(flatten)]
    pub body: T,
}

impl<T> Succeeded<T> {
    pub fn new(body: T) -> Self {
        Succeeded {
            success: true,
            body,
        }
    }
}

/// `GET character/{name}`: the comparison and the sync fields.
#[derive(Debug, Serialize)]
pub struct DetailAnswer {
    #[serde(flatten)]
    pub detail: Detail,
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// `GET platform-autocloud-config`.
#[derive(Debug, Serialize)]
pub struct AutocloudAnswer {
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// `POST character/{name}/upload`.
#[derive(Debug, Serialize)]
pub struct Uploaded {
    pub character_name: String,
    /// The comparison after the upload (null when it could not be re-read).
    pub detail: Option<Succeeded<Detail>>,
    pub meta: Meta,
    pub sequence_number: u64,
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// `POST character/{name}/download`.
#[derive(Debug, Serialize)]
pub struct Downloaded {
    pub character_name: String,
    /// The comparison after the import (null when it could not be re-read).
    pub detail: Option<Succeeded<Detail>>,
    /// The kept backup of the replaced local files (null without one).
    pub backup_path: Option<String>,
    pub sequence_number: u64,
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// The family's state: the target (opened lazily, on first use) and the lock
/// that runs one upload/download at a time.
pub struct CloudSave {
    state: AppState,
    spec: Result<TargetSpec, String>,
    target: tokio::sync::Mutex<Option<Target>>,
    op_lock: tokio::sync::Mutex<()>,
    local_cache: Arc<crate::localcache::LocalCache>,
}

fn blocking_err(e: tokio::task::JoinError) -> String {
    format!("background task failed: {e}")
}

impl CloudSave {
    pub fn new(state: &AppState) -> CloudSave {
        CloudSave {
            state: state.clone(),
            spec: TargetSpec::parse(&state.opts.cloud),
            target: tokio::sync::Mutex::new(None),
            op_lock: tokio::sync::Mutex::new(()),
            local_cache: Default::default(),
        }
    }

    /// `local_directory` or `s3` (`unconfigured` when `--cloud` cannot be parsed).
    pub fn sync_backend(&self) -> &'static str {
        self.spec
            .as_ref()
            .map(TargetSpec::kind)
            .unwrap_or("unconfigured")
    }

    fn cloud_root_display(&self) -> String {
        match &self.spec {
            Ok(s) => s.display(),
            Err(_) => self.state.opts.cloud.clone(),
        }
    }

    /// The opened target; built on first use and kept once it works.
    async fn target(&self) -> Result<Target, CloudSaveError> {
        let mut slot = self.target.lock().await;
        if let Some(t) = slot.as_ref() {
            return Ok(t.clone());
        }
        let spec = self
            .spec
            .clone()
            .map_err(CloudSaveError::ProviderUnavailable)?;
        let t = tokio::task::spawn_blocking(move || target::open(&spec))
            .await
            .map_err(|e| CloudSaveError::ProviderUnavailable(blocking_err(e)))??;
        *slot = Some(t.clone());
        Ok(t)
    }

    fn staging_root(&self) -> PathBuf {
        self.state.data_dir().join("state").join("cloudsave_tmp")
    }

    fn workshop_dir(&self) -> Option<&Path> {
        self.state.opts.workshop_dir.as_deref()
    }

    // ------------------------------------------------------------ local side

    /// The facts of each of `names` that is a character, in one blocking task;
    /// unchanged units come from the cache. `every_character`: `names` is the
    /// whole registry.
    async fn local_facts(
        &self,
        names: Vec<String>,
        every_character: bool,
    ) -> BTreeMap<String, Arc<LocalFacts>> {
        let staging = self.staging_root();
        let cache = self.local_cache.clone();
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || cache.facts(&state, &names, every_character, &staging))
            .await
            .unwrap_or_default()
    }

    fn runtime_has_user_content(&self) -> bool {
        self.state
            .characters
            .names()
            .iter()
            .any(|n| !unit::present_files(&self.state.memory_dir(n)).is_empty())
    }

    // ------------------------------------------------------------ documents

    /// The `platform_autocloud` document. `units` is None when the target
    /// could not be read; `has_content` when already known.
    async fn platform_autocloud(
        &self,
        units: Option<&[Meta]>,
        has_content: Option<bool>,
    ) -> PlatformAutocloud {
        let local = local::read(&self.state.store).await;
        let runtime_has_user_content =
            has_content.unwrap_or_else(|| self.runtime_has_user_content());
        autocloud::platform_autocloud(autocloud::Inputs {
            backend: self.sync_backend(),
            units: units.unwrap_or(&[]),
            local,
            runtime_has_user_content,
            runtime_root: self.state.data_dir().to_string_lossy().into_owned(),
            cloudsave_root: self.cloud_root_display(),
        })
    }

    /// `GET platform-autocloud-config`: never fails; an unreachable target reads
    /// as "no snapshot" with `provider_available:false`.
    pub async fn autocloud_config(&self) -> AutocloudAnswer {
        let units = match self.target().await {
            Ok(t) => t.list_units().await.map_err(|e| e.message()),
            Err(e) => Err(e.message()),
        };
        let mut pa = self.platform_autocloud(units.as_deref().ok(), None).await;
        pa.provider_available = Some(units.is_ok());
        pa.provider_error = units.err();
        AutocloudAnswer {
            sync_backend: self.sync_backend(),
            platform_autocloud: pa,
        }
    }

    /// `GET summary`: every character on either side, by name.
    pub async fn summary(&self) -> Result<Summary, CloudSaveError> {
        let target = self.target().await?;
        let units = target.list_units().await?;
        let locals = self.local_facts(self.state.characters.names(), true).await;
        let has_content = locals.values().any(|l| !l.files.is_empty());
        let items = summary::items(&locals, &units, self.workshop_dir());
        Ok(Summary {
            provider_available: true,
            current_character_name: self.state.characters.current(),
            items,
            sync_backend: self.sync_backend(),
            platform_autocloud: self
                .platform_autocloud(Some(&units), Some(has_content))
                .await,
        })
    }

    async fn detail_with(&self, target: &Target, name: &str) -> Result<Detail, CloudSaveError> {
        let cloud = target.read_meta(name).await?;
        let local = self
            .local_facts(vec![name.to_string()], false)
            .await
            .remove(name);
        if local.is_none() && cloud.is_none() {
            return Err(CloudSaveError::CharacterNotFound);
        }
        let workshop = self.workshop_dir();
        let l = local.map(|f| summary::local_side(name, &f, workshop));
        let c = cloud.map(|m| summary::cloud_side(name, &m, workshop));
        Ok(Detail {
            provider_available: true,
            current_character_name: self.state.characters.current(),
            item: summary::item(name, l.as_ref(), c.as_ref()),
            local_summary: l,
            cloud_summary: c,
        })
    }

    /// `GET character/{name}` (name already validated).
    pub async fn detail(&self, name: &str) -> Result<DetailAnswer, CloudSaveError> {
        let target = self.target().await?;
        let detail = self.detail_with(&target, name).await?;
        let units = target.list_units().await.ok();
        Ok(DetailAnswer {
            detail,
            sync_backend: self.sync_backend(),
            platform_autocloud: self.platform_autocloud(units.as_deref(), None).await,
        })
    }

    // ------------------------------------------------------------ upload

    /// `POST character/{name}/upload` (name already validated).
    pub async fn upload(&self, name: &str, overwrite: bool) -> Result<Uploaded, CloudSaveError> {
        let Some(profile) = self.state.characters.profile(name) else {
            return Err(CloudSaveError::LocalNotFound);
        };
        let target = self.target().await?;
        let _op = self.op_lock.lock().await;
        let previous = match target.read_meta(name).await {
            Ok(m) => m.map(|m| Some(m.payload_id)),
            // A unit whose meta does not parse still exists (overwrite replaces it).
            Err(CloudSaveError::PayloadCorrupt(_)) => Some(None),
            Err(e) => return Err(e),
        };
        if previous.is_some() && !overwrite {
            return Err(CloudSaveError::CloudExists);
        }

        // Long-term memory's index is brought in step with the history first, so the
        // uploaded time index is exactly what a later download re-indexes to (a
        // download then leaves the unit equal to the cloud's, not "changed").
        if let Some(memory) = self.state.hooks.memory_service() {
            if let Err(e) = memory.reload(name.to_string()).await {
                tracing::warn!("memory of {name} not re-indexed before the upload: {e}");
            }
        }
        // A consistent local snapshot, taken under the fence.
        let fence = companiond_core::fence::raise(
            &self.state.store,
            "character_upload",
            &format!("memory/{name}"),
        )
        .await?;
        let (n, p) = (name.to_string(), profile.clone());
        let mem_dir = self.state.memory_dir(name);
        let staging = self.staging_root();
        let snap =
            tokio::task::spawn_blocking(move || unit::snapshot_local(&n, &p, &mem_dir, &staging))
                .await;
        fence.lower().await;
        let snap = match snap.map_err(|e| CloudSaveError::UploadFailed(blocking_err(e)))? {
            Ok(s) => s,
            Err(unit::SnapshotError::Unreadable(e)) => {
                return Err(CloudSaveError::LocalUnreadable(e))
            }
            Err(unit::SnapshotError::Io(e)) => return Err(CloudSaveError::UploadFailed(e)),
        };

        let (sequence_number, client_id) = local::next_sequence(&self.state.store)
            .await
            .map_err(CloudSaveError::UploadFailed)?;
        let payload_id = format!("{sequence_number}-{}", uuid::Uuid::new_v4().simple());

        // Stage the payload under a key no meta record references yet.
        let staged = async {
            target
                .put_file(&target.profile_key(name, &payload_id), &snap.profile_path)
                .await?;
            for (f, path) in &snap.paths {
                target
                    .put_file(&target.memory_key(name, &payload_id, f), path)
                    .await?;
            }
            Ok::<(), CloudSaveError>(())
        }
        .await;
        let payload_dir = target.payload_dir(name, &payload_id);
        if let Err(e) = staged {
            target.delete_under(&payload_dir).await;
            return Err(e);
        }

        // Publish: the meta record is written last, in one PUT.
        let (model_type, asset_source, asset_source_id) = unit::avatar_fields(&profile);
        let meta = Meta {
            schema_version: unit::META_SCHEMA,
            character_name: name.to_string(),
            payload_fingerprint: snap.fingerprint.clone(),
            updated_at_utc: companiond_core::now_rfc3339(),
            sequence_number,
            source_client_id: client_id,
            payload_id: payload_id.clone(),
            profile_sha256: snap.profile_entry.sha256.clone(),
            profile_size: snap.profile_entry.size,
            files: snap.files.clone(),
            display_name: unit::display_name(name, &profile),
            model_type,
            asset_source,
            asset_source_id,
        };
        let meta_bytes = serde_json::to_vec_pretty(&meta)
            .map_err(|e| CloudSaveError::UploadFailed(e.to_string()))?;
        if let Err(e) = target
            .store
            .put(
                &target.meta_key(name),
                PutPayload::from(Bytes::from(meta_bytes)),
            )
            .await
        {
            target.delete_under(&payload_dir).await;
            return Err(target::store_err(e));
        }
        drop(snap);
        target
            .collect_garbage(
                name,
                &payload_id,
                previous.flatten().as_deref(),
                STALE_PAYLOAD,
            )
            .await;

        let units = target.list_units().await.ok();
        if let Some(u) = &units {
            local::record_success(&self.state.store, true, manifest_fingerprint(u)).await;
        }
        // The operation succeeded; a failing re-read only leaves the detail empty.
        let detail = self.detail_with(&target, name).await.ok();
        Ok(Uploaded {
            character_name: name.to_string(),
            detail: detail.map(Succeeded::new),
            meta,
            sequence_number,
            sync_backend: self.sync_backend(),
            platform_autocloud: self.platform_autocloud(units.as_deref(), None).await,
        })
    }

    // ------------------------------------------------------------ download

    /// Fetch the payload of `meta` into a private folder and verify every member
    /// and the fingerprint. Nothing local is touched.
    async fn fetch_payload(
        &self,
        target: &Target,
        name: &str,
        meta: &Meta,
    ) -> Result<Fetched, CloudSaveError> {
        let corrupt = CloudSaveError::PayloadCorrupt;
        if meta.schema_version != unit::META_SCHEMA {
            return Err(corrupt(format!(
                "unsupported meta schema_version {}",
                meta.schema_version
            )));
        }
        if meta.character_name != name {
            return Err(corrupt(format!(
                "the meta record names {:?}",
                meta.character_name
            )));
        }
        if let Some(bad) = meta.files.keys().find(|f| !unit::is_managed(f)) {
            return Err(corrupt(format!(
                "{bad:?} is not a member of a character unit"
            )));
        }
        if paths::safe_name(&meta.payload_id).is_err() {
            return Err(corrupt("invalid payload id".into()));
        }
        let staging = self.staging_root();
        let dir = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&staging)?;
            tempfile::Builder::new()
                .prefix("download-")
                .tempdir_in(&staging)
        })
        .await
        .map_err(|e| CloudSaveError::DownloadFailed(blocking_err(e)))?
        .map_err(|e| CloudSaveError::DownloadFailed(e.to_string()))?;

        let profile_path = dir.path().join("profile.json");
        let expected = FileEntry {
            sha256: meta.profile_sha256.clone(),
            size: meta.profile_size,
        };
        if !target
            .get_to_file(
                &target.profile_key(name, &meta.payload_id),
                &profile_path,
                meta.profile_size,
            )
            .await?
        {
            return Err(corrupt("profile.json is missing".into()));
        }
        let mut checks = vec![(profile_path.clone(), expected, "profile.json".to_string())];
        let mut members = BTreeMap::new();
        for (f, entry) in &meta.files {
            let dst = dir.path().join(f);
            if !target
                .get_to_file(
                    &target.memory_key(name, &meta.payload_id, f),
                    &dst,
                    entry.size,
                )
                .await?
            {
                return Err(corrupt(format!("{f} is missing")));
            }
            checks.push((dst.clone(), entry.clone(), f.clone()));
            members.insert(f.clone(), dst);
        }
        let n = name.to_string();
        let files = meta.files.clone();
        let fp = meta.payload_fingerprint.clone();
        let profile = tokio::task::spawn_blocking(move || -> Result<Value, String> {
            for (path, entry, label) in &checks {
                unit::verify_file(path, entry, label)?;
            }
            let bytes = std::fs::read(&profile_path).map_err(|e| e.to_string())?;
            let profile: Value = serde_json::from_slice(&bytes)
                .map_err(|e| format!("profile.json is not JSON: {e}"))?;
            if !profile.is_object() {
                return Err("profile.json is not an object".into());
            }
            if unit::fingerprint(&n, &profile, &files) != fp {
                return Err("the payload fingerprint does not match".into());
            }
            Ok(profile)
        })
        .await
        .map_err(|e| CloudSaveError::DownloadFailed(blocking_err(e)))?
        .map_err(corrupt)?;
        Ok(Fetched {
            _dir: dir,
            profile,
            members,
        })
    }

    /// `POST character/{name}/download` (name already validated).
    pub async fn download(
        &self,
        name: &str,
        opts: DownloadOptions,
    ) -> Result<Downloaded, CloudSaveError> {
        let local_exists = self.state.characters.exists(name);
        if local_exists && !opts.overwrite {
            return Err(CloudSaveError::LocalExists);
        }
        let target = self.target().await?;
        let Some(meta) = target.read_meta(name).await? else {
            return Err(if local_exists {
                CloudSaveError::CloudNotFound
            } else {
                CloudSaveError::CharacterNotFound
            });
        };
        if self.state.sessions.is_active(name) && !opts.force {
            return Err(CloudSaveError::ActiveSession);
        }
        let _op = self.op_lock.lock().await;
        let fetched = self.fetch_payload(&target, name, &meta).await?;

        let fence = companiond_core::fence::raise(
            &self.state.store,
            "character_download",
            &format!("memory/{name}"),
        )
        .await?;
        let result = async {
            // The chat session closes (forced) and drops its context before import.
            if let Some(mgr) = self.state.sessions.get(name) {
                if mgr.is_active() && !opts.force {
                    return Err(CloudSaveError::ActiveSession);
                }
                if !mgr.terminate(TERMINATE_TIMEOUT).await {
                    return Err(CloudSaveError::SessionTerminateFailed(format!(
                        "{} connection(s) still open after {} s",
                        mgr.connection_count(),
                        TERMINATE_TIMEOUT.as_secs()
                    )));
                }
            }
            // In-flight memory work for the character is drained and its handles closed.
            if let Some(memory) = self.state.hooks.memory_service() {
                memory
                    .release(name.to_string())
                    .await
                    .map_err(CloudSaveError::MemoryReleaseFailed)?;
            }
            // Chat appends to recent.json wait until the import is complete.
            let recent = self.state.history.lock(name);
            let _guard = recent.lock().await;
            self.import(name, &meta, fetched, opts, local_exists).await
        }
        .await;
        fence.lower().await;
        let backup_path = result?;

        if let Some(mgr) = self.state.sessions.get(name) {
            mgr.notify(json!({"type": "reload_page", "code": "RELOAD_PAGE_CLOUDSAVE_CHARACTER", "character_name": name}));
        }
        let units = target.list_units().await.ok();
        if let Some(u) = &units {
            local::record_success(&self.state.store, false, manifest_fingerprint(u)).await;
        }
        // The operation succeeded; a failing re-read only leaves the detail empty.
        let detail = self.detail_with(&target, name).await.ok();
        Ok(Downloaded {
            character_name: name.to_string(),
            detail: detail.map(Succeeded::new),
            backup_path,
            sequence_number: meta.sequence_number,
            sync_backend: self.sync_backend(),
            platform_autocloud: self.platform_autocloud(units.as_deref(), None).await,
        })
    }

    /// Back up, apply, reload; on failure restore the backup. Returns the backup path.
    async fn import(
        &self,
        name: &str,
        meta: &Meta,
        fetched: Fetched,
        opts: DownloadOptions,
        local_exists: bool,
    ) -> Result<Option<String>, CloudSaveError> {
        let data = self.state.data_dir().to_path_buf();
        let mem_dir = self.state.memory_dir(name);
        let previous_profile = self.state.characters.profile(name);

        // 1. Backup of every local file the import touches.
        let (backup_dir, keep_backup) = if opts.backup_before_overwrite {
            (Some(data.join("cloudsave_backups")), true)
        } else {
            (None, false)
        };
        let staging = self.staging_root();
        let (n, md, pp, d) = (
            name.to_string(),
            mem_dir.clone(),
            previous_profile.clone(),
            data.clone(),
        );
        let backup = tokio::task::spawn_blocking(move || {
            Backup::take(
                &n,
                &md,
                pp.as_ref(),
                local_exists,
                &d,
                backup_dir.as_deref(),
                &staging,
            )
        })
        .await
        .map_err(|e| CloudSaveError::DownloadFailed(blocking_err(e)))?
        .map_err(|e| {
            CloudSaveError::DownloadFailed(format!("cannot back up the local files: {e}"))
        })?;
        let backup_path = keep_backup.then(|| backup.root.to_string_lossy().into_owned());

        // 2. Apply the files, 3. reload configuration and memory.
        let applied = self.apply_and_reload(name, meta, &fetched, &backup).await;
        let Err((message, profile_written)) = applied else {
            if !keep_backup {
                backup.discard();
            }
            return Ok(backup_path);
        };

        // Rollback: files, then the profile, then the registry.
        let b2 = backup.clone();
        let mut errors = Vec::new();
        match tokio::task::spawn_blocking(move || b2.restore()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(blocking_err(e)),
        }
        if profile_written {
            let (n, pp) = (name.to_string(), previous_profile.clone());
            let r = self
                .state
                .characters
                .mutate(move |doc| {
                    match pp {
                        Some(p) => {
                            doc.characters.insert(n, p);
                        }
                        None => {
                            doc.characters.shift_remove(&n);
                            if doc.current == n {
                                doc.current =
                                    doc.characters.keys().next().cloned().unwrap_or_default();
                            }
                        }
                    }
                    Ok(())
                })
                .await;
            if let Err(e) = r {
                errors.push(character_error_text(e));
            }
        }
        if let Err(e) = self.state.characters.reload().await {
            errors.push(format!("characters reload: {e}"));
        }
        if !local_exists && !self.state.characters.exists(name) {
            self.state.sessions.remove(name);
        }
        if !keep_backup {
            backup.discard();
        }
        Err(CloudSaveError::ReloadRolledBack {
            message,
            rolled_back: errors.is_empty(),
            rollback_error: errors.join("; "),
            backup_path,
        })
    }

    /// Returns `Err((message, profile_written))` on failure.
    async fn apply_and_reload(
        &self,
        name: &str,
        meta: &Meta,
        fetched: &Fetched,
        backup: &Backup,
    ) -> Result<(), (String, bool)> {
        let mem_dir = self.state.memory_dir(name);
        let members = fetched.members.clone();
        let b = backup.clone();
        let md = mem_dir.clone();
        tokio::task::spawn_blocking(move || apply_files(&md, &members, &b))
            .await
            .map_err(|e| (blocking_err(e), false))?
            .map_err(|e| (format!("cannot write the imported files: {e}"), false))?;

        let (n, profile) = (name.to_string(), fetched.profile.clone());
        self.state
            .characters
            .mutate(move |doc| {
                doc.characters.insert(n.clone(), profile);
                if doc.current.is_empty() {
                    doc.current = n;
                }
                Ok(())
            })
            .await
            .map_err(|e| (character_error_text(e), false))?;
        self.state
            .characters
            .reload()
            .await
            .map_err(|e| (format!("characters reload: {e}"), true))?;

        let files: Vec<String> = meta.files.keys().cloned().collect();
        let md = mem_dir.clone();
        tokio::task::spawn_blocking(move || {
            files
                .iter()
                .try_for_each(|f| unit::load_check(&md.join(f), f))
        })
        .await
        .map_err(|e| (blocking_err(e), true))?
        .map_err(|e| (format!("memory reload failed: {e}"), true))?;
        if let Some(memory) = self.state.hooks.memory_service() {
            memory
                .reload(name.to_string())
                .await
                .map_err(|e| (format!("memory reload failed: {e}"), true))?;
        }
        self.state.sessions.ensure(name);
        Ok(())
    }
}

/// A verified payload in a private folder.
struct Fetched {
    _dir: tempfile::TempDir,
    profile: Value,
    members: BTreeMap<String, PathBuf>,
}

fn character_error_text(e: CharacterError) -> String {
    match e {
        CharacterError::Storage(s) => s,
        CharacterError::Invalid(n) => n.message().to_string(),
        CharacterError::Exists(n) => format!("character {n:?} already exists"),
        CharacterError::NotFound(n) => format!("character {n:?} does not exist"),
        CharacterError::LastCharacter => "the last character cannot be deleted".into(),
    }
}

// ---------------------------------------------------------------- backup / apply

/// The operation backup: copies of every local file a download touches.
#[derive(Clone)]
struct Backup {
    root: PathBuf,
    mem_dir: PathBuf,
    mem_dir_existed: bool,
    /// File name in the memory folder → whether it existed (and was copied).
    targets: BTreeMap<String, bool>,
}

fn all_touched() -> impl Iterator<Item = &'static str> {
    unit::MANAGED_FILES
        .iter()
        .chain(unit::SQLITE_SIDECARS.iter())
        .copied()
}

fn timestamp_dir(base: &Path) -> std::io::Result<PathBuf> {
    let now = time::OffsetDateTime::now_utc();
    let ts = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}{:03}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.millisecond()
    );
    std::fs::create_dir_all(base)?;
    for i in 0..100 {
        let p = if i == 0 {
            base.join(&ts)
        } else {
            base.join(format!("{ts}-{i}"))
        };
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("cannot create a backup folder"))
}

impl Backup {
    /// Copy the files into `<base>/<ts>/` (or a private folder under `staging`
    /// when no backup is to be kept) and describe them in `_operation.json`.
    fn take(
        name: &str,
        mem_dir: &Path,
        previous_profile: Option<&Value>,
        character_existed: bool,
        data: &Path,
        base: Option<&Path>,
        staging: &Path,
    ) -> std::io::Result<Backup> {
        let root = match base {
            Some(b) => timestamp_dir(b)?,
            None => {
                std::fs::create_dir_all(staging)?;
                tempfile::Builder::new()
                    .prefix("rollback-")
                    .tempdir_in(staging)?
                    .keep()
            }
        };
        let mem_dir_existed = mem_dir.is_dir();
        let mut targets = BTreeMap::new();
        std::fs::create_dir_all(root.join("memory"))?;
        for f in all_touched() {
            let src = mem_dir.join(f);
            let exists = std::fs::symlink_metadata(&src).is_ok_and(|m| m.file_type().is_file());
            if exists {
                std::fs::copy(&src, root.join("memory").join(f))?;
            }
            targets.insert(f.to_string(), exists);
        }
        let chars = data.join("config").join("characters.json");
        if chars.is_file() {
            std::fs::create_dir_all(root.join("config"))?;
            std::fs::copy(&chars, root.join("config").join("characters.json"))?;
        }
        let op = json!({
            "schema_version": 1,
            "operation": "character_download",
            "character_name": name,
            "created_at_utc": companiond_core::now_rfc3339(),
            "character_existed": character_existed,
            "memory_dir_existed": mem_dir_existed,
            "previous_profile": previous_profile,
            "targets": targets.iter().map(|(f, had)| json!({
                "relative_path": format!("memory/{name}/{f}"),
                "had_backup": had,
                "is_dir": false,
            })).collect::<Vec<_>>(),
        });
        store::atomic_write_json(&root.join("_operation.json"), &op)?;
        Ok(Backup {
            root,
            mem_dir: mem_dir.to_path_buf(),
            mem_dir_existed,
            targets,
        })
    }

    /// Put every touched file back as it was (atomic per file).
    fn restore(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        for (f, had) in &self.targets {
            let dst = self.mem_dir.join(f);
            let r = if *had {
                atomic_copy(&self.root.join("memory").join(f), &dst)
            } else {
                match std::fs::remove_file(&dst) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                }
            };
            if let Err(e) = r {
                errors.push(format!("{f}: {e}"));
            }
        }
        if !self.mem_dir_existed {
            // Only an empty folder is removed.
            let _ = std::fs::remove_dir(&self.mem_dir);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("restore failed: {}", errors.join(", ")))
        }
    }

    fn discard(&self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Move each verified member into the memory folder (rename: atomic per file),
/// then delete managed files the unit does not have (and stale SQLite sidecars).
fn apply_files(
    mem_dir: &Path,
    members: &BTreeMap<String, PathBuf>,
    backup: &Backup,
) -> std::io::Result<()> {
    let remove = |p: PathBuf| match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    std::fs::create_dir_all(mem_dir)?;
    // The SQLite side files belong to the database being replaced or removed.
    let db_touched = members.contains_key(unit::SQLITE_FILE)
        || backup.targets.get(unit::SQLITE_FILE) == Some(&true);
    if db_touched {
        for side in unit::SQLITE_SIDECARS {
            remove(mem_dir.join(side))?;
        }
    }
    for (f, src) in members {
        let dst = mem_dir.join(f);
        // Same file system (both under the data dir): rename is atomic; else copy + rename.
        if std::fs::rename(src, &dst).is_err() {
            atomic_copy(src, &dst)?;
        }
    }
    for (f, had) in &backup.targets {
        if *had && !members.contains_key(f) && unit::is_managed(f) {
            remove(mem_dir.join(f))?;
        }
    }
    if let Ok(d) = std::fs::File::open(mem_dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Copy `src` over `dst` atomically (streamed into a temporary file beside
/// `dst`, fsync, rename).
fn atomic_copy(src: &Path, dst: &Path) -> std::io::Result<()> {
    let dir = dst.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(".restore-")
        .tempfile_in(dir)?;
    {
        let mut from = std::fs::File::open(src)?;
        let mut to = tmp.as_file();
        std::io::copy(&mut from, &mut to)?;
        to.sync_all()?;
    }
    tmp.persist(dst).map_err(|e| e.error)?;
    Ok(())
}

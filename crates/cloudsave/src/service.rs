//! The cloud-save operations (summary, detail, upload, download), independent of HTTP.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use companiond_core::characters::CharacterError;
use companiond_core::{paths, store, AppState};
use object_store::PutPayload;
use serde_json::{json, Value};

use crate::error::CloudSaveError;
use crate::local;
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

/// The family's state: the target (opened lazily, on first use) and the lock
/// that runs one upload/download at a time.
pub struct CloudSave {
    state: AppState,
    spec: Result<TargetSpec, String>,
    target: tokio::sync::Mutex<Option<Target>>,
    op_lock: tokio::sync::Mutex<()>,
    local_cache: std::sync::Arc<crate::localcache::LocalCache>,
}

/// What this device has of a character.
struct LocalInfo {
    profile: Value,
    fingerprint: Option<String>,
    updated_at: String,
    files: BTreeMap<String, u64>,
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

    fn workshop_status(&self, source: &str, id: &str) -> (String, String) {
        if source != "steam_workshop" && source != "workshop" {
            return (String::new(), String::new());
        }
        let Some(dir) = self.state.opts.workshop_dir.as_ref() else {
            return ("unknown".into(), String::new());
        };
        match paths::safe_name(id).ok().map(|n| dir.join(n)) {
            Some(p) if p.is_dir() => ("installed_and_subscribed".into(), "ready".into()),
            Some(_) => ("unavailable".into(), "downloadable".into()),
            None => ("unknown".into(), String::new()),
        }
    }

    // ------------------------------------------------------------ local side

    async fn local_info(&self, name: &str) -> Option<LocalInfo> {
        self.local_infos(&[name.to_string()]).await.remove(name)
    }

    /// What this device has of each of `names` (absent: not a character), in
    /// one blocking task; unchanged units come from the fingerprint cache.
    async fn local_infos(&self, names: &[String]) -> HashMap<String, LocalInfo> {
        let items: Vec<(String, Value, PathBuf)> = names
            .iter()
            .filter_map(|n| {
                let profile = self.state.characters.profile(n)?;
                Some((n.clone(), profile, self.state.memory_dir(n)))
            })
            .collect();
        let staging = self.staging_root();
        let cache = self.local_cache.clone();
        tokio::task::spawn_blocking(move || {
            items
                .into_iter()
                .map(|(name, profile, mem_dir)| {
                    let f = cache.facts(&name, &profile, &mem_dir, &staging);
                    let info = LocalInfo {
                        profile,
                        fingerprint: f.fingerprint,
                        updated_at: f.updated_at,
                        files: f.files,
                    };
                    (name, info)
                })
                .collect()
        })
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

    // ------------------------------------------------------------ bodies

    fn side_summary(
        &self,
        name: &str,
        local: Option<&LocalInfo>,
        cloud: Option<&Meta>,
    ) -> (Value, Value) {
        let local_v = local.map(|l| {
            let (model_type, source, source_id) = unit::avatar_fields(&l.profile);
            let (ws, state) = self.workshop_status(&source, &source_id);
            let asset_state = if !state.is_empty() {
                state
            } else if model_type.is_empty() {
                String::new()
            } else {
                "ready".into()
            };
            let mut warnings = Vec::new();
            if matches!(asset_state.as_str(), "downloadable" | "missing") {
                warnings.push("local_resource_missing_on_this_device");
            }
            json!({
                "character_name": name,
                "display_name": unit::display_name(name, &l.profile),
                "model_type": model_type,
                "asset_source": source,
                "asset_source_id": source_id,
                "asset_state": asset_state,
                "workshop_status": ws,
                "updated_at_utc": l.updated_at,
                "fingerprint": l.fingerprint.clone().unwrap_or_default(),
                "files": l.files,
                "warnings": warnings,
            })
        });
        let cloud_v = cloud.map(|m| {
            let (ws, state) = self.workshop_status(&m.asset_source, &m.asset_source_id);
            let asset_state = if !state.is_empty() {
                state
            } else if matches!(
                m.asset_source.as_str(),
                "local_imported" | "manual_external"
            ) {
                "import_required".into()
            } else if m.model_type.is_empty() {
                String::new()
            } else {
                "ready".into()
            };
            let mut warnings = Vec::new();
            if matches!(
                asset_state.as_str(),
                "import_required" | "downloadable" | "missing"
            ) {
                warnings.push("cloud_resource_may_be_missing_after_download");
            }
            let files: BTreeMap<&String, u64> = m.files.iter().map(|(k, v)| (k, v.size)).collect();
            json!({
                "character_name": name,
                "display_name": if m.display_name.is_empty() { name } else { &m.display_name },
                "model_type": m.model_type,
                "asset_source": m.asset_source,
                "asset_source_id": m.asset_source_id,
                "asset_state": asset_state,
                "workshop_status": ws,
                "updated_at_utc": m.updated_at_utc,
                "fingerprint": m.payload_fingerprint,
                "sequence_number": m.sequence_number,
                "source_client_id": m.source_client_id,
                "files": files,
                "warnings": warnings,
            })
        });
        (
            local_v.unwrap_or(Value::Null),
            cloud_v.unwrap_or(Value::Null),
        )
    }

    fn item(&self, name: &str, local: &Value, cloud: &Value) -> Value {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (le, ce) = (!local.is_null(), !cloud.is_null());
        let (lf, cf) = (s(local, "fingerprint"), s(cloud, "fingerprint"));
        let relation = match (le, ce) {
            (true, false) => "local_only",
            (false, true) => "cloud_only",
            _ if !lf.is_empty() && lf == cf => "matched",
            _ => "diverged",
        };
        let actions: Vec<&str> = match relation {
            "local_only" => vec!["upload"],
            "cloud_only" => vec!["download"],
            "diverged" => vec!["upload", "download"],
            _ => vec![],
        };
        let main = if le { local } else { cloud };
        let mut warnings: Vec<Value> = Vec::new();
        for w in main
            .get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
        let mut item = json!({
            "character_name": name,
            "display_name": if le { s(local, "display_name") } else { s(cloud, "display_name") },
            "relation_state": relation,
            "local_exists": le,
            "cloud_exists": ce,
            "model_type": s(main, "model_type"),
            "asset_source": s(main, "asset_source"),
            "asset_source_id": s(main, "asset_source_id"),
            "local_asset_source": s(local, "asset_source"),
            "local_asset_source_id": s(local, "asset_source_id"),
            "cloud_asset_source": s(cloud, "asset_source"),
            "cloud_asset_source_id": s(cloud, "asset_source_id"),
            "local_asset_state": s(local, "asset_state"),
            "cloud_asset_state": s(cloud, "asset_state"),
            "local_updated_at_utc": s(local, "updated_at_utc"),
            "cloud_updated_at_utc": s(cloud, "updated_at_utc"),
            "local_fingerprint": lf,
            "cloud_fingerprint": cf,
            "cloud_sequence_number": cloud.get("sequence_number").cloned().unwrap_or(Value::Null),
            "available_actions": actions,
            "warnings": warnings,
        });
        for scope in ["local", "cloud"] {
            let side = if scope == "local" { local } else { cloud };
            item[format!("{scope}_workshop_status")] = json!(s(side, "workshop_status"));
            item[format!("{scope}_workshop_title")] = json!("");
            item[format!("{scope}_workshop_author_name")] = json!("");
        }
        item
    }

    /// The `platform_autocloud` object (reference § 1.1 keys). `units` is None
    /// when the target could not be read.
    async fn platform_autocloud(&self, units: Option<&[Meta]>) -> Value {
        self.platform_autocloud_with(units, None).await
    }

    /// [`Self::platform_autocloud`] with `runtime_has_user_content` already known.
    async fn platform_autocloud_with(
        &self,
        units: Option<&[Meta]>,
        has_content: Option<bool>,
    ) -> Value {
        let ls = local::read(&self.state.store).await;
        let units = units.unwrap_or(&[]);
        let has_snapshot = !units.is_empty();
        let manifest_fp = manifest_fingerprint(units);
        let seq = units.iter().map(|m| m.sequence_number).max().unwrap_or(0);
        let exported = units
            .iter()
            .map(|m| m.updated_at_utc.clone())
            .max()
            .unwrap_or_default();
        let has_content = has_content.unwrap_or_else(|| self.runtime_has_user_content());
        let differs = has_snapshot && manifest_fp != ls.last_applied_manifest_fingerprint;
        let root = self.cloud_root_display();
        let platform = if cfg!(target_os = "windows") {
            ("Windows", "WinAppDataLocal")
        } else if cfg!(target_os = "macos") {
            ("macOS", "MacAppSupport")
        } else {
            ("Linux", "LinuxXdgDataHome")
        };
        json!({
            "backend": self.sync_backend(),
            "app_id": "",
            "has_snapshot": has_snapshot,
            "snapshot_sequence_number": seq,
            "snapshot_exported_at_utc": exported,
            "manifest_fingerprint": if has_snapshot { manifest_fp.clone() } else { String::new() },
            "last_applied_manifest_fingerprint": ls.last_applied_manifest_fingerprint,
            "startup_import_required": differs && !has_content,
            "manual_download_required": differs && has_content,
            "runtime_has_user_content": has_content,
            "last_successful_export_at": ls.last_successful_export_at,
            "last_successful_import_at": ls.last_successful_import_at,
            "source_launch": false,
            "steam_session_ready": false,
            "steam_launch_tracked": false,
            "steam_available": false,
            "steam_running": false,
            "steam_logged_on": false,
            "runtime_root": self.state.data_dir().to_string_lossy(),
            "cloudsave_root": root,
            "manifest_path": format!("{}/characters", root.trim_end_matches('/')),
            "manifest_exists": has_snapshot,
            "recommended_paths": {
                "cross_platform_strategy": "single_root_with_overrides",
                "primary_root": {"root": "WinAppDataLocal", "subdirectory": "companiond/cloud", "pattern": "*", "os": "All OSes", "recursive": true},
                "root_overrides": [
                    {"os": "macOS", "new_root": "MacAppSupport", "add_replace_path": "companiond/cloud", "replace_path": true},
                    {"os": "Linux", "new_root": "LinuxXdgDataHome", "add_replace_path": "companiond/cloud", "replace_path": true},
                ],
            },
            "current_platform_rule": {"platform": platform.0, "root": platform.1, "subdirectory": "companiond/cloud"},
        })
    }

    /// `GET platform-autocloud-config`: never fails; an unreachable target reads
    /// as "no snapshot" with `provider_available:false`.
    pub async fn autocloud_config(&self) -> Value {
        let units = match self.target().await {
            Ok(t) => t.list_units().await.map_err(|e| e.message()),
            Err(e) => Err(e.message()),
        };
        let mut pa = self.platform_autocloud(units.as_deref().ok()).await;
        pa["provider_available"] = json!(units.is_ok());
        if let Err(e) = &units {
            pa["provider_error"] = json!(e);
        }
        json!({"success": true, "sync_backend": self.sync_backend(), "platform_autocloud": pa})
    }

    /// `GET summary`.
    pub async fn summary(&self) -> Result<Value, CloudSaveError> {
        let target = self.target().await?;
        let units = target.list_units().await?;
        let local_names = self.state.characters.names();
        let mut locals = self.local_infos(&local_names).await;
        self.local_cache
            .retain(&local_names.iter().map(String::as_str).collect());
        let has_content = locals.values().any(|l| !l.files.is_empty());
        let cloud: HashMap<&str, &Meta> = units
            .iter()
            .rev()
            .map(|m| (m.character_name.as_str(), m))
            .collect();
        let mut names: BTreeSet<String> = local_names.into_iter().collect();
        names.extend(units.iter().map(|m| m.character_name.clone()));
        let mut items = Vec::with_capacity(names.len());
        for name in &names {
            let local = locals.remove(name.as_str());
            let cloud = cloud.get(name.as_str()).copied();
            let (l, c) = self.side_summary(name, local.as_ref(), cloud);
            items.push(self.item(name, &l, &c));
        }
        Ok(json!({
            "success": true,
            "provider_available": true,
            "current_character_name": self.state.characters.current(),
            "items": items,
            "sync_backend": self.sync_backend(),
            "platform_autocloud": self.platform_autocloud_with(Some(&units), Some(has_content)).await,
        }))
    }

    async fn detail_with(&self, target: &Target, name: &str) -> Result<Value, CloudSaveError> {
        let cloud = target.read_meta(name).await?;
        let local = self.local_info(name).await;
        if local.is_none() && cloud.is_none() {
            return Err(CloudSaveError::CharacterNotFound);
        }
        let (l, c) = self.side_summary(name, local.as_ref(), cloud.as_ref());
        Ok(json!({
            "success": true,
            "provider_available": true,
            "current_character_name": self.state.characters.current(),
            "item": self.item(name, &l, &c),
            "local_summary": l,
            "cloud_summary": c,
        }))
    }

    async fn with_sync_fields(&self, target: &Target, mut body: Value) -> Value {
        let units = target.list_units().await.ok();
        body["sync_backend"] = json!(self.sync_backend());
        body["platform_autocloud"] = self.platform_autocloud(units.as_deref()).await;
        body
    }

    /// `GET character/{name}` (name already validated).
    pub async fn detail(&self, name: &str) -> Result<Value, CloudSaveError> {
        let target = self.target().await?;
        let body = self.detail_with(&target, name).await?;
        Ok(self.with_sync_fields(&target, body).await)
    }

    // ------------------------------------------------------------ upload

    /// `POST character/{name}/upload` (name already validated).
    pub async fn upload(&self, name: &str, overwrite: bool) -> Result<Value, CloudSaveError> {
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
        let detail = self.detail_with(&target, name).await.unwrap_or(Value::Null);
        Ok(json!({
            "success": true,
            "character_name": name,
            "detail": detail,
            "meta": meta,
            "sequence_number": sequence_number,
            "sync_backend": self.sync_backend(),
            "platform_autocloud": self.platform_autocloud(units.as_deref()).await,
        }))
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
    ) -> Result<Value, CloudSaveError> {
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
        let detail = self.detail_with(&target, name).await.unwrap_or(Value::Null);
        Ok(json!({
            "success": true,
            "character_name": name,
            "detail": detail,
            "backup_path": backup_path,
            "sequence_number": meta.sequence_number,
            "sync_backend": self.sync_backend(),
            "platform_autocloud": self.platform_autocloud(units.as_deref()).await,
        }))
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

/// `sha256:` over the sorted (name, fingerprint, sequence) of every unit.
pub fn manifest_fingerprint(units: &[Meta]) -> String {
    let list: Vec<Value> = units
        .iter()
        .map(|m| json!([m.character_name, m.payload_fingerprint, m.sequence_number]))
        .collect();
    format!(
        "sha256:{}",
        unit::sha256_hex(unit::canonical_json(&Value::Array(list)).as_bytes())
    )
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

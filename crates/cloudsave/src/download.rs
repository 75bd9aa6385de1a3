//! `POST /api/cloudsave/character/{name}/download`: import a character unit.
//!
//! The payload is fetched into a private folder and verified (every member's
//! checksum and the fingerprint) before anything local changes. Then, under
//! the write fence, the chat session is closed (only with `force` when one is
//! active), the memory handles are released, every touched local file is
//! backed up, the unit applied and configuration and memory reloaded; a
//! failing reload restores the backup.

use companiond_core::frames::ServerFrame;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use companiond_core::characters::CharacterError;
use companiond_core::paths;
use companiond_core::task::blocking;
use serde_json::Value;

use crate::backup::{apply_files, Backup, StepFailed};
use crate::error::CloudSaveError;
use crate::family::{CloudSave, Transfer, Transferred};
use crate::target::Target;
use crate::unit::{self, FileEntry, Meta};

/// How long a forced download waits for the chat session to close.
const TERMINATE_TIMEOUT: Duration = Duration::from_secs(5);

/// Options of a download (the route's body; each absent one takes its default).
/// Another type than a boolean (null too) is `CLOUDSAVE_INVALID_PARAMETER`.
#[derive(Clone, Copy, Debug, serde::Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"overwrite": true, "backup_before_overwrite": true, "force": false}))]
pub struct DownloadOptions {
    /// Replace an existing local character.
    #[serde(default)]
    #[schema(default = false)]
    pub overwrite: bool,
    /// Keep a backup of the replaced files under `cloudsave_backups/`.
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub backup_before_overwrite: bool,
    /// Close an active chat session.
    #[serde(default)]
    #[schema(default = false)]
    pub force: bool,
}

fn yes() -> bool {
    true
}

impl CloudSave {
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
        let dir = blocking(move || {
            std::fs::create_dir_all(&staging)
                .and_then(|()| {
                    tempfile::Builder::new()
                        .prefix("download-")
                        .tempdir_in(&staging)
                })
                .map_err(|e| CloudSaveError::DownloadFailed(e.to_string()))
        })
        .await?;

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
        let profile = blocking(move || -> Result<Value, CloudSaveError> {
            for (path, entry, label) in &checks {
                unit::verify_file(path, entry, label).map_err(corrupt)?;
            }
            let bytes = std::fs::read(&profile_path).map_err(|e| corrupt(e.to_string()))?;
            let profile: Value = serde_json::from_slice(&bytes)
                .map_err(|e| corrupt(format!("profile.json is not JSON: {e}")))?;
            if !profile.is_object() {
                return Err(corrupt("profile.json is not an object".into()));
            }
            if unit::fingerprint(&n, &profile, &files) != fp {
                return Err(corrupt("the payload fingerprint does not match".into()));
            }
            Ok(profile)
        })
        .await?;
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
    ) -> Result<Transferred, CloudSaveError> {
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
            mgr.notify(ServerFrame::ReloadPage {
                code: "RELOAD_PAGE_CLOUDSAVE_CHARACTER",
                character_name: name.to_string(),
            });
        }
        let transfer = Transfer::Download { backup_path };
        Ok(self
            .transferred(&target, name, meta.sequence_number, transfer)
            .await)
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
        let previous_profile = self
            .state
            .characters
            .profile(name)
            .map(companiond_core::characters::Profile::into_value);

        // 0. The local character as it was, kept as a snapshot the memory
        // routes can restore (docs/data.md § Snapshots). The memory was
        // released: the time index is closed.
        let snap = if local_exists {
            let (d, n, pp) = (data.clone(), name.to_string(), previous_profile.clone());
            blocking(move || {
                let files = companiond_core::snapshots::all_files();
                Ok::<_, CloudSaveError>(companiond_core::snapshots::before_change(
                    &d,
                    &companiond_core::snapshots::Take {
                        character: &n,
                        kind: companiond_core::snapshots::Kind::Download,
                        files: &files,
                        profile: pp,
                        renamed_from: None,
                        restored: None,
                    },
                ))
            })
            .await?
        } else {
            None
        };

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
        let backup = blocking(move || {
            Backup::take(
                &n,
                &md,
                pp.as_ref(),
                local_exists,
                &d,
                backup_dir.as_deref(),
                &staging,
            )
            .map_err(|e| {
                CloudSaveError::DownloadFailed(format!("cannot back up the local files: {e}"))
            })
        })
        .await?;
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
        if let Some(m) = &snap {
            companiond_core::snapshots::discard(&data, name, &m.id);
        }
        let b2 = backup.clone();
        let mut errors = Vec::new();
        if let Err(StepFailed(e)) = blocking(move || b2.restore()).await {
            errors.push(e);
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
        blocking(move || {
            apply_files(&md, &members, &b)
                .map_err(|e| StepFailed(format!("cannot write the imported files: {e}")))
        })
        .await
        .map_err(|StepFailed(e)| (e, false))?;

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
        blocking(move || {
            files
                .iter()
                .try_for_each(|f| unit::load_check(&md.join(f), f))
                .map_err(|e| StepFailed(format!("memory reload failed: {e}")))
        })
        .await
        .map_err(|StepFailed(e)| (e, true))?;
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

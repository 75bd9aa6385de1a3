//! `POST /api/cloudsave/character/{name}/upload`: export a character unit.
//!
//! Under the write fence a consistent snapshot of the unit is taken (the
//! SQLite member through the backup API); the payload is staged under a fresh
//! payload id that no meta record names yet, and published by the single PUT
//! of the meta record. The previous payload and stale stages are collected
//! afterwards.

use std::time::Duration;

use bytes::Bytes;
use companiond_core::task::blocking;
use object_store::PutPayload;

use crate::error::CloudSaveError;
use crate::family::{CloudSave, Transfer, Transferred};
use crate::local_state;
use crate::target;
use crate::unit::{self, Meta};

/// Unpublished payloads older than this are removed by the next upload.
const STALE_PAYLOAD: Duration = Duration::from_secs(3600);

impl CloudSave {
    /// `POST character/{name}/upload` (name already validated); an existing
    /// cloud unit is replaced only with `overwrite`.
    pub async fn upload(&self, name: &str, overwrite: bool) -> Result<Transferred, CloudSaveError> {
        let Some(profile) = self
            .state
            .characters
            .profile(name)
            .map(companiond_core::characters::Profile::into_value)
        else {
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
        let snap = blocking(move || {
            unit::snapshot_local(&n, &p, &mem_dir, &staging).map_err(CloudSaveError::from)
        })
        .await;
        fence.lower().await;
        let snap = snap?;

        let (sequence_number, client_id) = local_state::next_sequence(&self.state.store)
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
        Ok(self
            .transferred(
                &target,
                name,
                sequence_number,
                Transfer::Upload {
                    meta: Box::new(meta),
                },
            )
            .await)
    }
}

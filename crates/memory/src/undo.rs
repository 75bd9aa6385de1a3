//! The snapshot routes' domain: list a character's snapshots, show one, and
//! restore one (itself undoable: the files it replaces are kept as a
//! `restore` snapshot first). The snapshot store is
//! `companiond_core::snapshots`; this module restores under the memory
//! family's locks (rename lock shared, background work drained, time index
//! closed, history and long-term stores locked), like a cloud-save download.

use std::sync::Arc;
use std::time::Duration;

use companiond_core::snapshots::{self, FileSummary, KeptFile, Kind, Meta, SnapshotError, Take};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::{fence, stores, unit, MemoryRuntime};

/// How long a restore waits for the character's background memory work.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

impl From<SnapshotError> for MemoryError {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::NotFound => MemoryError::NotFound("no such snapshot".into()),
            SnapshotError::BadName(n) => {
                MemoryError::BadRequest(format!("{n:?} is not a valid name"))
            }
            SnapshotError::Unreadable(e) => MemoryError::Invalid {
                code: "snapshot_unreadable",
                error: format!("the snapshot cannot be read: {e}"),
            },
            SnapshotError::Io(e) => MemoryError::Storage(format!("snapshot storage: {e}")),
        }
    }
}

/// One snapshot as listed.
#[derive(Serialize, ToSchema)]
pub struct SnapshotItem {
    /// Its id (`<milliseconds>-<kind>`), newest first in a listing.
    pub id: String,
    /// The change it was taken before.
    pub kind: Kind,
    /// When (RFC 3339, UTC).
    pub created_at: String,
    /// The files it keeps.
    pub files: Vec<KeptFile>,
    /// Their total size.
    pub bytes: u64,
    /// Whether it keeps the character's profile (rename, download, delete).
    pub has_profile: bool,
    /// For a rename: the name before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// For a restore: the snapshot that was restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored: Option<String>,
    /// For the trash of a deleted character: when it is removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl SnapshotItem {
    fn of(m: &Meta) -> SnapshotItem {
        SnapshotItem {
            id: m.id.clone(),
            kind: m.kind,
            created_at: m.created_at.clone(),
            bytes: m.bytes(),
            files: m.files.clone(),
            has_profile: m.profile.is_some(),
            renamed_from: m.renamed_from.clone(),
            restored: m.restored.clone(),
            expires_at: (m.kind == Kind::Delete)
                .then(|| rfc3339(m.created_ms + snapshots::TRASH_DAYS * 86_400_000)),
        }
    }
}

use companiond_core::rfc3339_ms as rfc3339;

/// `GET /api/memory/snapshots?character=`.
#[derive(Serialize, ToSchema)]
pub struct SnapshotList {
    pub success: bool,
    pub character: String,
    /// Whether the character is configured (its trash can be listed after
    /// it was deleted).
    pub configured: bool,
    pub snapshots: Vec<SnapshotItem>,
}

/// `GET /api/memory/snapshots/{character}/{id}`.
#[derive(Serialize, ToSchema)]
pub struct SnapshotShown {
    pub success: bool,
    pub character: String,
    pub snapshot: SnapshotItem,
    /// What each kept file holds (entry counts, oldest and newest dates).
    pub files: Vec<FileSummary>,
    /// The kept profile, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub profile: Option<Value>,
}

/// One deleted character in the trash.
#[derive(Serialize, ToSchema)]
pub struct TrashEntry {
    pub character: String,
    /// Whether a character of that name exists again.
    pub configured: bool,
    pub snapshot: SnapshotItem,
}

/// `GET /api/memory/trash`.
#[derive(Serialize, ToSchema)]
pub struct TrashList {
    pub success: bool,
    pub items: Vec<TrashEntry>,
}

/// The body of `POST /api/memory/snapshots/restore`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"character": "Companion", "id": "1764275096123-save"}))]
pub struct SnapshotRestoreBody {
    /// The character whose snapshot it is.
    #[schema(min_length = 1, max_length = 200)]
    pub character: String,
    /// The snapshot's id.
    #[schema(min_length = 1, max_length = 64)]
    pub id: String,
}

/// `POST /api/memory/snapshots/restore`.
#[derive(Serialize, ToSchema)]
pub struct SnapshotRestored {
    pub success: bool,
    /// The character restored (for a rename's snapshot, the name before it).
    pub character: String,
    pub restored: String,
    /// The snapshot of what the restore replaced: restore it to undo.
    pub undo: String,
    /// A rename's snapshot renamed the character back first.
    pub renamed_back: bool,
    /// A deleted character was configured again from the kept profile.
    pub recreated: bool,
}

fn checked_name(name: &str) -> Result<String, MemoryError> {
    let n = name.trim();
    if n.is_empty() || n.len() > 200 {
        return Err(MemoryError::BadRequest("character is required".into()));
    }
    companiond_core::paths::safe_name(n)
        .map_err(|_| MemoryError::BadRequest(format!("{n:?} is not a valid character name")))?;
    Ok(n.to_string())
}

/// The snapshots of `character`, newest first.
pub async fn list(state: &AppState, character: &str) -> Result<SnapshotList, MemoryError> {
    let c = checked_name(character)?;
    let d = state.data_dir().to_path_buf();
    let c2 = c.clone();
    let all = companiond_core::task::blocking(move || {
        snapshots::list(&d, &c2).map_err(MemoryError::from)
    })
    .await?;
    Ok(SnapshotList {
        success: true,
        configured: state.characters.exists(&c),
        snapshots: all.iter().map(SnapshotItem::of).collect(),
        character: c,
    })
}

/// One snapshot with what its files hold.
pub async fn show(
    state: &AppState,
    character: &str,
    id: &str,
) -> Result<SnapshotShown, MemoryError> {
    let c = checked_name(character)?;
    let (d, c2, id) = (state.data_dir().to_path_buf(), c.clone(), id.to_string());
    let (meta, files) = companiond_core::task::blocking(move || {
        let meta = snapshots::read(&d, &c2, &id)?;
        let files = snapshots::summarise(&d, &meta)?;
        Ok::<_, MemoryError>((meta, files))
    })
    .await?;
    Ok(SnapshotShown {
        success: true,
        character: c,
        snapshot: SnapshotItem::of(&meta),
        files,
        profile: meta.profile,
    })
}

/// The trash: every `delete` snapshot, newest first.
pub async fn trash(state: &AppState) -> Result<TrashList, MemoryError> {
    let d = state.data_dir().to_path_buf();
    let found = companiond_core::task::blocking(move || {
        let mut out = Vec::new();
        for c in snapshots::characters(&d) {
            out.extend(snapshots::list_kind(&d, &c, Kind::Delete));
        }
        out.sort_by_key(|m| std::cmp::Reverse(m.created_ms));
        Ok::<_, MemoryError>(out)
    })
    .await?;
    Ok(TrashList {
        success: true,
        items: found
            .iter()
            .map(|m| TrashEntry {
                character: m.character.clone(),
                configured: state.characters.exists(&m.character),
                snapshot: SnapshotItem::of(m),
            })
            .collect(),
    })
}

/// Restore snapshot `id` of `character`.
///
/// A rename's snapshot first renames the character back (the rename
/// transaction, when the old name is free); a deleted character is
/// configured again from the kept profile. The files the restore replaces are
/// kept first as a `restore` snapshot (refused when they cannot be: a
/// restore always has a way back), then each kept file is put back by an
/// atomic replacement, the kept profile too, and the time index is re-synced
/// from the restored files.
pub async fn restore(
    state: &AppState,
    rt: &Arc<MemoryRuntime>,
    character: &str,
    id: &str,
) -> Result<SnapshotRestored, MemoryError> {
    let c = checked_name(character)?;
    let data = state.data_dir().to_path_buf();
    fence::check(&data, "snapshot_restore", &format!("memory/{c}"))?;
    let (d, c2, id2) = (data.clone(), c.clone(), id.to_string());
    let meta = companiond_core::task::blocking(move || {
        snapshots::read(&d, &c2, &id2).map_err(MemoryError::from)
    })
    .await?;

    // A rename is undone by renaming back (its snapshots follow it).
    let mut target = c.clone();
    let mut renamed_back = false;
    if let (Kind::Rename, Some(old)) = (meta.kind, meta.renamed_from.as_deref()) {
        if old != c && state.characters.exists(&c) && !state.characters.exists(old) {
            crate::rename::rename(state, rt, &c, old).await?;
            renamed_back = true;
            target = old.to_string();
        }
    }
    let dir = unit::character_dir(&data, &target).map_err(MemoryError::BadRequest)?;

    // A deleted character comes back with its profile.
    let mut recreated = false;
    if !state.characters.exists(&target) {
        let Some(profile) = meta.profile.clone() else {
            return Err(MemoryError::NotFound(format!(
                "character {target:?} does not exist and the snapshot keeps no profile"
            )));
        };
        let n = target.clone();
        state
            .characters
            .mutate(move |doc| {
                doc.characters.insert(n.clone(), profile);
                if doc.current.is_empty() {
                    doc.current = n;
                }
                Ok(())
            })
            .await
            .map_err(|e| MemoryError::Storage(format!("cannot configure the character: {e:?}")))?;
        recreated = true;
    }

    let _no_rename = rt.rename_lock.read().await;
    let _drain = rt
        .tasks
        .drain(&[target.as_str()], DRAIN_TIMEOUT)
        .await
        .map_err(|_| {
            MemoryError::Busy(format!(
                "background memory work of {target:?} did not stop in time"
            ))
        })?;
    rt.index.close(&[target.as_str()]);
    let history = state.history.lock(&target).lock_owned().await;
    let stores_lock = state.store.lock_for(stores::lock_rel(&target));
    let stores_guard = stores_lock.lock().await;
    fence::check(&data, "snapshot_restore", &format!("memory/{target}"))?;

    let current_profile = state
        .characters
        .profile(&target)
        .map(companiond_core::characters::Profile::into_value);
    let (d, t, id2, m2) = (data.clone(), target.clone(), id.to_string(), meta.clone());
    let undo = companiond_core::task::blocking(move || {
        let names: Vec<&str> = m2.files.iter().map(|f| f.name.as_str()).collect();
        let undo = snapshots::take(
            &d,
            &Take {
                character: &t,
                kind: Kind::Restore,
                files: &names,
                profile: m2.profile.as_ref().and(current_profile),
                renamed_from: None,
                restored: Some(id2.clone()),
            },
        )?;
        // The snapshot lives in the folder of the character's name now.
        snapshots::put_back(&d, &t, &id2, &t)?;
        Ok::<_, MemoryError>(undo)
    })
    .await?;

    if let Some(profile) = meta.profile.clone().filter(|_| !recreated) {
        let n = target.clone();
        state
            .characters
            .mutate(move |doc| {
                doc.characters.insert(n, profile);
                Ok(())
            })
            .await
            .map_err(|e| MemoryError::Storage(format!("cannot restore the profile: {e:?}")))?;
    }
    drop((stores_guard, history));
    let created = tokio::task::spawn_blocking(move || crate::ensure_memory_files(&dir)).await;
    if !matches!(created, Ok(Ok(_))) {
        tracing::warn!("cannot complete the memory files of {target} after a restore");
    }
    drop(_no_rename);
    if let Err(e) = crate::longterm::resync(state, &target).await {
        tracing::warn!("cannot re-index the memory of {target} after a restore: {e}");
    }
    crate::vectors::changed(state, &target);
    let (d, t) = (data.clone(), target.clone());
    companiond_core::task::later(move || snapshots::prune(&d, &t));
    Ok(SnapshotRestored {
        success: true,
        character: target,
        restored: meta.id,
        undo: undo.id,
        renamed_back,
        recreated,
    })
}

//! The changes the routes make to the library: delete (user records) or
//! hide (built-in ones), visibility, names, default actions, bindings; each
//! returns a typed answer (its `Serialize` is the wire shape).

use std::sync::Arc;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::error::JukeboxError;
use crate::library::{Jukebox, Kind, Tx};
use crate::model::{Action, Library, Song};

/// A song or an action as answered after a change (`"song"` or `"action"`).
#[derive(Debug)]
pub enum Record {
    Song(Song),
    Action(Action),
}

impl Record {
    fn entry<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        match self {
            Record::Song(s) => m.serialize_entry("song", s),
            Record::Action(a) => m.serialize_entry("action", a),
        }
    }
}

impl Serialize for Record {
    /// `{success: true, song|action}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("success", &true)?;
        self.entry(&mut m)?;
        m.end()
    }
}

/// The answer of a visibility change: `{success, visible, song|action}`.
pub struct VisibilitySet {
    pub visible: bool,
    pub record: Record,
}

impl Serialize for VisibilitySet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("success", &true)?;
        m.serialize_entry("visible", &self.visible)?;
        self.record.entry(&mut m)?;
        m.end()
    }
}

/// The default action after a change to a song's bindings (`offset`: of a new binding).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = JukeboxDefaultAction)]
#[serde(rename_all = "camelCase")]
pub struct DefaultAction {
    pub success: bool,
    pub default_action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
}

impl DefaultAction {
    fn new(default_action: String, offset: Option<i64>) -> DefaultAction {
        DefaultAction {
            success: true,
            default_action,
            offset,
        }
    }
}

/// One deletion: a built-in record hidden or a user record deleted.
pub struct Deletion {
    pub kind: Kind,
    pub hidden: bool,
}

impl Serialize for Deletion {
    /// `{success, message, hidden: true}` or `{success, hidden: false, deleted: true}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("success", &true)?;
        if self.hidden {
            m.serialize_entry("message", &format!("built-in {} hidden", self.kind.word()))?;
            m.serialize_entry("hidden", &true)?;
        } else {
            m.serialize_entry("hidden", &false)?;
            m.serialize_entry("deleted", &true)?;
        }
        m.end()
    }
}

/// One item of a batch deletion: `{songId|actionId, name, error?}`.
pub struct BatchItem {
    pub id: String,
    pub name: String,
    pub error: Option<String>,
}

/// A batch deletion: what was deleted, hidden, or failed.
pub struct BatchDeletion {
    pub kind: Kind,
    pub requested: usize,
    pub deleted: Vec<BatchItem>,
    pub hidden: Vec<BatchItem>,
    pub failed: Vec<BatchItem>,
}

/// The items of one list of a batch deletion, keyed by the kind's id key.
struct Items<'a>(Kind, &'a [BatchItem]);

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.1.len()))?;
        for item in self.1 {
            let mut entry = serde_json::Map::new();
            entry.insert(self.0.id_key().to_string(), item.id.clone().into());
            entry.insert("name".to_string(), item.name.clone().into());
            if let Some(e) = &item.error {
                entry.insert("error".to_string(), e.clone().into());
            }
            seq.serialize_element(&entry)?;
        }
        seq.end()
    }
}

impl Serialize for BatchDeletion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let failed = self.failed.len();
        let mut m = s.serialize_map(Some(9))?;
        m.serialize_entry("success", &(failed == 0))?;
        m.serialize_entry(
            "partial",
            &(failed > 0 && (!self.deleted.is_empty() || !self.hidden.is_empty())),
        )?;
        m.serialize_entry("requestedCount", &self.requested)?;
        m.serialize_entry("deletedCount", &self.deleted.len())?;
        m.serialize_entry("hiddenCount", &self.hidden.len())?;
        m.serialize_entry("failedCount", &failed)?;
        m.serialize_entry("deleted", &Items(self.kind, &self.deleted))?;
        m.serialize_entry("hidden", &Items(self.kind, &self.hidden))?;
        m.serialize_entry("failed", &Items(self.kind, &self.failed))?;
        m.end()
    }
}

impl Jukebox {
    // ------------------------------------------------------------ operations

    /// Delete one song: a user song loses its file, bindings and index entry;
    /// a built-in one is hidden.
    pub async fn delete(
        self: &Arc<Self>,
        kind: Kind,
        id: String,
    ) -> Result<Deletion, JukeboxError> {
        let this = self.clone();
        self.mutate(move |lib, _, tx| {
            let hidden = this.delete_one(lib, kind, &id, tx)? == Deleted::Hidden;
            Ok(Deletion { kind, hidden })
        })
        .await
    }

    fn delete_one(
        &self,
        lib: &mut Library,
        kind: Kind,
        id: &str,
        tx: &mut Tx,
    ) -> Result<Deleted, JukeboxError> {
        let missing = || JukeboxError::not_found(format!("{} does not exist", kind.word()));
        let builtin = match kind {
            Kind::Song => lib.songs.get(id).map(|s| s.is_builtin),
            Kind::Action => lib.actions.get(id).map(|a| a.is_builtin),
        }
        .ok_or_else(missing)?;
        if builtin {
            match kind {
                Kind::Song => lib.song_mut(id).map(|s| s.visible = false),
                Kind::Action => lib.action_mut(id).map(|a| a.visible = false),
            };
            return Ok(Deleted::Hidden);
        }
        let file = match kind {
            Kind::Song => lib.remove_song(id).map(|s| s.audio),
            Kind::Action => lib.remove_action(id).map(|a| a.file),
        }
        .ok_or_else(missing)?;
        tx.remove_after.extend(self.user_path(&file));
        Ok(Deleted::Removed)
    }

    /// Batch delete: every id must exist (else 404 and nothing changes).
    pub async fn batch_delete(
        self: &Arc<Self>,
        kind: Kind,
        ids: Vec<String>,
    ) -> Result<BatchDeletion, JukeboxError> {
        let mut unique: Vec<String> = Vec::new();
        for id in ids {
            if !id.is_empty() && !unique.contains(&id) {
                unique.push(id);
            }
        }
        if unique.is_empty() {
            return Err(JukeboxError::bad(format!("no {} selected", kind.word())));
        }
        let this = self.clone();
        self.mutate(move |lib, _, tx| {
            let missing: Vec<String> = unique
                .iter()
                .filter(|id| match kind {
                    Kind::Song => !lib.songs.contains_key(id),
                    Kind::Action => !lib.actions.contains_key(id),
                })
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(JukeboxError::NotFoundIds {
                    message: format!("{} does not exist", kind.word()),
                    key: kind.ids_key(),
                    ids: missing,
                });
            }
            let mut out = BatchDeletion {
                kind,
                requested: unique.len(),
                deleted: Vec::new(),
                hidden: Vec::new(),
                failed: Vec::new(),
            };
            for id in &unique {
                let name = match kind {
                    Kind::Song => lib.songs.get(id).map(|s| s.name.clone()),
                    Kind::Action => lib.actions.get(id).map(|a| a.name.clone()),
                }
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| id.clone());
                let item = |error| BatchItem {
                    id: id.clone(),
                    name,
                    error,
                };
                match this.delete_one(lib, kind, id, tx) {
                    Ok(Deleted::Hidden) => out.hidden.push(item(None)),
                    Ok(Deleted::Removed) => out.deleted.push(item(None)),
                    Err(e) => out.failed.push(item(Some(e.message()))),
                }
            }
            Ok(out)
        })
        .await
    }

    pub async fn set_visibility(
        self: &Arc<Self>,
        kind: Kind,
        id: String,
        visible: bool,
    ) -> Result<VisibilitySet, JukeboxError> {
        self.mutate(move |lib, _, _| {
            let record = edit_record(
                lib,
                kind,
                &id,
                |s| s.visible = visible,
                |a| a.visible = visible,
            )?;
            Ok(VisibilitySet { visible, record })
        })
        .await
    }

    /// Change the given fields only (`None` = unchanged; an action has no artist).
    pub async fn set_metadata(
        self: &Arc<Self>,
        kind: Kind,
        id: String,
        name: Option<String>,
        artist: Option<String>,
    ) -> Result<Record, JukeboxError> {
        self.mutate(move |lib, _, _| {
            let name = name.as_ref();
            let song = |s: &mut Song| {
                if let Some(n) = name {
                    s.name.clone_from(n);
                }
                if let Some(a) = artist {
                    s.artist = a;
                }
            };
            edit_record(lib, kind, &id, song, |a| {
                if let Some(n) = name {
                    a.name.clone_from(n);
                }
            })
        })
        .await
    }

    /// Set (must be bound) or clear (empty) a song's default action.
    pub async fn set_default_action(
        self: &Arc<Self>,
        song_id: String,
        action_id: String,
    ) -> Result<DefaultAction, JukeboxError> {
        self.mutate(move |lib, _, _| {
            if !lib.songs.contains_key(&song_id) {
                return Err(JukeboxError::not_found("song does not exist"));
            }
            if !action_id.is_empty() {
                if !lib.actions.contains_key(&action_id) {
                    return Err(JukeboxError::not_found("action does not exist"));
                }
                if !lib.is_bound(&song_id, &action_id) {
                    return Err(JukeboxError::bad("this action is not bound to this song"));
                }
            }
            if let Some(s) = lib.song_mut(&song_id) {
                s.default_action = action_id.clone();
            }
            Ok(DefaultAction::new(action_id, None))
        })
        .await
    }

    pub async fn bind(
        self: &Arc<Self>,
        song_id: String,
        action_id: String,
        offset: i64,
    ) -> Result<DefaultAction, JukeboxError> {
        self.mutate(move |lib, _, _| {
            check_pair(lib, &song_id, &action_id)?;
            let default = lib
                .bind(&song_id, &action_id, offset)
                .ok_or_else(|| JukeboxError::not_found("song does not exist"))?;
            Ok(DefaultAction::new(default, Some(offset)))
        })
        .await
    }

    pub async fn unbind(
        self: &Arc<Self>,
        song_id: String,
        action_id: String,
    ) -> Result<DefaultAction, JukeboxError> {
        self.mutate(move |lib, _, _| {
            check_pair(lib, &song_id, &action_id)?;
            let default = lib
                .unbind(&song_id, &action_id)
                .ok_or_else(|| JukeboxError::not_found("binding does not exist"))?;
            Ok(DefaultAction::new(default, None))
        })
        .await
    }
}

#[derive(PartialEq)]
enum Deleted {
    Hidden,
    Removed,
}

/// Change the song or action `id` (whichever `kind` names) with `song` or
/// `action`; the changed record.
fn edit_record(
    lib: &mut Library,
    kind: Kind,
    id: &str,
    song: impl FnOnce(&mut Song),
    action: impl FnOnce(&mut Action),
) -> Result<Record, JukeboxError> {
    let missing = || JukeboxError::not_found(format!("{} does not exist", kind.word()));
    Ok(match kind {
        Kind::Song => {
            let s = lib.song_mut(id).ok_or_else(missing)?;
            song(s);
            Record::Song(s.clone())
        }
        Kind::Action => {
            let a = lib.action_mut(id).ok_or_else(missing)?;
            action(a);
            Record::Action(a.clone())
        }
    })
}

fn check_pair(lib: &Library, song_id: &str, action_id: &str) -> Result<(), JukeboxError> {
    if !lib.songs.contains_key(song_id) {
        return Err(JukeboxError::not_found("song does not exist"));
    }
    if !lib.actions.contains_key(action_id) {
        return Err(JukeboxError::not_found("action does not exist"));
    }
    Ok(())
}

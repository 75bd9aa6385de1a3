//! The wire shapes of the answers this family writes by hand (the config
//! streamed from cached parts, the records keyed `song`/`action`, the batch
//! items keyed `songId`/`actionId`), for the OpenAPI document
//! (docs/jukebox.md § OpenAPI). The family's tests compare each with a real
//! answer, so a change of the writer shows there.

#![allow(dead_code, clippy::large_enum_variant)] // shapes for the document: never built

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::model::{Action, Binding, Md5Index, Song};

/// `GET /api/jukebox/config`: the whole library (bundled and user records merged).
#[derive(ToSchema)]
#[schema(as = JukeboxConfig, example = json!({"version": "2", "songs": {"Song_1": {"id": "Song_1",
    "name": "Song 1", "artist": "", "audio": "songs/Song_1.mp3", "audioMd5": "9e10…",
    "audioFormat": "mp3", "visible": true, "uploadDate": "2026-11-25T20:00:00Z",
    "defaultAction": "", "isBuiltin": false}}, "actions": {}, "bindings": {},
    "md5Index": {"songs": {"9e10…": "Song_1"}, "actions": {}}, "configRevision": "3f9c0a…",
    "songCount": 1, "visibleSongCount": 1, "actionCount": 0}))]
pub struct Config {
    version: String,
    /// Songs by id, in library order.
    songs: HashMap<String, Song>,
    /// Actions by id, in library order.
    actions: HashMap<String, Action>,
    /// `song id -> action id -> binding`.
    bindings: HashMap<String, HashMap<String, Binding>>,
    #[schema(rename = "md5Index")]
    md5_index: Md5Index,
    #[schema(rename = "configRevision")]
    config_revision: String,
    #[schema(rename = "songCount")]
    song_count: usize,
    #[schema(rename = "visibleSongCount")]
    visible_song_count: usize,
    #[schema(rename = "actionCount")]
    action_count: usize,
}

/// A song after a change: `{success: true, song}`.
#[derive(Serialize, ToSchema)]
#[schema(as = JukeboxSongChanged)]
pub struct SongChanged {
    success: bool,
    song: Song,
}

/// An action after a change: `{success: true, action}`.
#[derive(Serialize, ToSchema)]
#[schema(as = JukeboxActionChanged)]
pub struct ActionChanged {
    success: bool,
    action: Action,
}

/// A visibility change of a song.
#[derive(ToSchema)]
#[schema(as = JukeboxSongVisibility)]
pub struct SongVisibility {
    success: bool,
    visible: bool,
    song: Song,
}

/// A visibility change of an action.
#[derive(ToSchema)]
#[schema(as = JukeboxActionVisibility)]
pub struct ActionVisibility {
    success: bool,
    visible: bool,
    action: Action,
}

/// One file of a multi-file upload that was not added.
#[derive(Serialize, ToSchema)]
#[schema(as = JukeboxUploadRefused)]
pub struct UploadRefused {
    /// Always `false`.
    success: bool,
    error: String,
}

/// One result of a multi-file song upload, in the order of the files.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = JukeboxSongUploadResult)]
pub enum SongUploadResult {
    Added(SongChanged),
    Refused(UploadRefused),
}

/// One result of a multi-file action upload, in the order of the files.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = JukeboxActionUploadResult)]
pub enum ActionUploadResult {
    Added(ActionChanged),
    Refused(UploadRefused),
}

/// The results of a multi-file song upload.
#[derive(Serialize, ToSchema)]
#[schema(as = JukeboxSongUploads)]
pub struct SongUploads {
    success: bool,
    results: Vec<SongUploadResult>,
}

/// The results of a multi-file action upload.
#[derive(Serialize, ToSchema)]
#[schema(as = JukeboxActionUploads)]
pub struct ActionUploads {
    success: bool,
    results: Vec<ActionUploadResult>,
}

/// The answer of a song upload: one file answers `{success, song}` (a refused
/// file fails with 400/409), several answer each file's result.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = JukeboxSongUpload)]
pub enum SongUpload {
    One(SongChanged),
    Many(SongUploads),
}

/// The answer of an action upload (as [`SongUpload`]).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = JukeboxActionUpload)]
pub enum ActionUpload {
    One(ActionChanged),
    Many(ActionUploads),
}

/// The answer of a single delete: a built-in record is hidden
/// (`{success, message, hidden: true}`), a user record deleted
/// (`{success, hidden: false, deleted: true}`).
#[derive(ToSchema)]
#[schema(as = JukeboxDeletion)]
pub struct Deletion {
    success: bool,
    message: Option<String>,
    hidden: bool,
    deleted: Option<bool>,
}

/// One song of a batch deletion.
#[derive(ToSchema)]
#[schema(as = JukeboxSongItem)]
pub struct SongItem {
    #[schema(rename = "songId")]
    song_id: String,
    name: String,
    /// Why it failed (in `failed` only).
    error: Option<String>,
}

/// One action of a batch deletion.
#[derive(ToSchema)]
#[schema(as = JukeboxActionItem)]
pub struct ActionItem {
    #[schema(rename = "actionId")]
    action_id: String,
    name: String,
    /// Why it failed (in `failed` only).
    error: Option<String>,
}

/// The answer of a batch deletion whose items are `$item` (the same shape for
/// songs and actions; only the items' id key differs).
macro_rules! batch_deletion {
    ($name:ident, $alias:ident, $item:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(ToSchema)]
        #[schema(as = $alias)]
        pub struct $name {
            /// `false` when any item failed.
            success: bool,
            /// Some items failed and others did not.
            partial: bool,
            #[schema(rename = "requestedCount")]
            requested_count: usize,
            #[schema(rename = "deletedCount")]
            deleted_count: usize,
            #[schema(rename = "hiddenCount")]
            hidden_count: usize,
            #[schema(rename = "failedCount")]
            failed_count: usize,
            deleted: Vec<$item>,
            hidden: Vec<$item>,
            failed: Vec<$item>,
        }
    };
}

batch_deletion!(
    SongBatchDeletion,
    JukeboxSongBatchDeletion,
    SongItem,
    "A batch deletion of songs: user songs deleted, built-in ones hidden."
);
batch_deletion!(
    ActionBatchDeletion,
    JukeboxActionBatchDeletion,
    ActionItem,
    "A batch deletion of actions: user actions deleted, built-in ones hidden."
);

// ------------------------------------------------------------------ request bodies
//
// The form routes read `application/x-www-form-urlencoded`, `multipart/form-data`
// or a JSON object with the same fields (`http::FormFields`); the document
// states the JSON form.

/// `POST /api/jukebox/songs/batch-delete`.
#[derive(ToSchema)]
#[schema(as = JukeboxSongIds, example = json!({"songIds": ["Song_1"]}))]
pub struct SongIds {
    /// At least one.
    #[schema(rename = "songIds", min_items = 1)]
    song_ids: Vec<String>,
}

/// `POST /api/jukebox/actions/batch-delete`.
#[derive(ToSchema)]
#[schema(as = JukeboxActionIds, example = json!({"actionIds": ["Dance_1"]}))]
pub struct ActionIds {
    /// At least one.
    #[schema(rename = "actionIds", min_items = 1)]
    action_ids: Vec<String>,
}

/// A visibility change.
#[derive(ToSchema)]
#[schema(as = JukeboxVisibilityBody, example = json!({"visible": false}))]
pub struct VisibilityBody {
    /// A boolean (forms: `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`).
    visible: bool,
}

/// A song's new name and/or artist.
#[derive(ToSchema)]
#[schema(as = JukeboxSongMetadata, example = json!({"name": "Evening song", "artist": "Someone"}))]
pub struct SongMetadata {
    /// Not blank, at most 256 characters, no control characters.
    #[schema(
        nullable = false,
        max_length = 256,
        pattern = "^(?=.*\\S)[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    name: Option<String>,
    /// At most 256 characters, no control characters (empty clears it).
    #[schema(
        nullable = false,
        max_length = 256,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    artist: Option<String>,
}

/// An action's new name.
#[derive(ToSchema)]
#[schema(as = JukeboxActionMetadata, example = json!({"name": "Spin"}))]
pub struct ActionMetadata {
    /// Not blank, at most 256 characters, no control characters.
    #[schema(max_length = 256, pattern = "^(?=.*\\S)[^\\x00-\\x1f\\x7f-\\x9f]*$")]
    name: String,
}

/// A song's default action (empty clears it).
#[derive(ToSchema)]
#[schema(as = JukeboxDefaultActionBody, example = json!({"action_id": "Dance_1"}))]
pub struct DefaultActionBody {
    action_id: String,
}

/// A binding to add.
#[derive(ToSchema)]
#[schema(as = JukeboxBind, example = json!({"songId": "Song_1", "actionId": "Dance_1", "offset": 0}))]
pub struct Bind {
    #[schema(rename = "songId")]
    song_id: String,
    #[schema(rename = "actionId")]
    action_id: String,
    /// Offset of the action against the song (default 0).
    #[schema(minimum = -2147483647, maximum = 2147483647)]
    offset: Option<i64>,
}

/// A binding to remove.
#[derive(ToSchema)]
#[schema(as = JukeboxUnbind, example = json!({"songId": "Song_1", "actionId": "Dance_1"}))]
pub struct Unbind {
    #[schema(rename = "songId")]
    song_id: String,
    #[schema(rename = "actionId")]
    action_id: String,
}

/// What to export (absent lists: everything).
#[derive(ToSchema)]
#[schema(as = JukeboxExport, example = json!({"songIds": ["Song_1"], "includeHidden": false}))]
pub struct Export {
    #[schema(rename = "songIds")]
    song_ids: Option<Vec<String>>,
    #[schema(rename = "actionIds")]
    action_ids: Option<Vec<String>>,
    /// Include hidden records (default true).
    #[schema(rename = "includeHidden")]
    include_hidden: Option<bool>,
}

// ------------------------------------------------------------------ path parameters

/// `{song_id}`.
#[derive(utoipa::IntoParams)]
pub struct SongId {
    /// A song's id (from `GET /api/jukebox/config`).
    #[param(example = "Song_1")]
    song_id: String,
}

/// `{action_id}`.
#[derive(utoipa::IntoParams)]
pub struct ActionId {
    /// An action's id (from `GET /api/jukebox/config`).
    #[param(example = "Dance_1")]
    action_id: String,
}

/// `{file_path}`.
#[derive(utoipa::IntoParams)]
pub struct FilePath {
    /// A record's `audio` or `file` (relative to the library root).
    #[param(example = "songs/Song_1.mp3")]
    file_path: String,
}

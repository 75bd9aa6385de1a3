//! Jukebox (`/api/jukebox`): the song and dance library.
//!
//! * [`model`]: records, the merged library, the persisted document, the revision;
//! * [`library`]: the service (in-memory library, lock, durable changes);
//! * [`operations`]: the changes the routes make, with typed answers;
//! * [`storage`]: base document + append-only journal, migration, compaction;
//! * [`view`]: the GET /config answer cached in serialised parts;
//! * [`upload`], [`md5sum`], [`tags`]: uploads staged with core's `staging` and
//!   hashed while they stream in, names from tags;
//! * [`archive`]: export, import and pack-folder ZIPs;
//! * [`http`]: thin handlers; [`error`]: the `{detail}` error enum.

mod archive;
mod error;
mod http;
mod library;
mod md5sum;
mod model;
mod operations;
mod schema;
mod storage;
mod tags;
mod upload;
mod view;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use companiond_core::api::Part;
use companiond_core::{Api, AppState};

pub use error::JukeboxError;
pub use library::{Jukebox, Kind, Limits, DEFAULT_IDLE_UNLOAD};

/// The routes of this family, each with its literal path, and what each
/// reads and answers (docs/jukebox.md § OpenAPI). Upload routes take bodies
/// of any size (the domain enforces its own limits while streaming).
pub fn api(state: &AppState) -> Api {
    use http::*;
    use schema as s;
    const UPLOAD: &[Part] = &[Part::file("files"), Part::text("metadata").optional()];
    let streamed = |mr: MethodRouter<AppState>| mr.layer(DefaultBodyLimit::disable());
    Api::new(state, "jukebox")
        .about("Jukebox: the song and dance library (bundled and user records), uploads, visibility and names, song–action bindings, export/import archives. Errors answer `{detail}`; form routes also take url-encoded or multipart forms with the same fields (docs/jukebox.md).")
        .get(
            "/api/jukebox/config",
            "Full jukebox config (bundled + user library)",
            get_config,
        )
        .id("get_config")
        .ok::<s::Config>()
        .fails::<JukeboxError>()
        .get(
            "/api/jukebox/config/summary",
            "Config revision and counts",
            get_summary,
        )
        .id("get_summary")
        .ok::<model::Summary>()
        .fails::<JukeboxError>()
        .route(
            Method::POST,
            "/api/jukebox/songs",
            "Upload songs (multipart files, metadata)",
            streamed(routing::post(upload_files)),
        )
        .id("upload_songs")
        .multipart(UPLOAD)
        .ok::<s::SongUpload>()
        .fails::<JukeboxError>()
        .fails::<error::UploadRefusals>()
        .post(
            "/api/jukebox/songs/batch-delete",
            "Delete user songs, hide built-in ones",
            batch_delete,
        )
        .id("batch_delete_songs")
        .json_body::<s::SongIds>()
        .ok::<s::SongBatchDeletion>()
        .fails::<JukeboxError>()
        .delete(
            "/api/jukebox/songs/{song_id}",
            "Delete a user song or hide a built-in one",
            delete,
        )
        .id("delete_song")
        .path::<s::SongId>()
        .ok::<s::Deletion>()
        .fails::<JukeboxError>()
        .put(
            "/api/jukebox/songs/{song_id}/visibility",
            "Show or hide a song",
            visibility,
        )
        .id("set_song_visibility")
        .path::<s::SongId>()
        .json_body::<s::VisibilityBody>()
        .ok::<s::SongVisibility>()
        .fails::<JukeboxError>()
        .put(
            "/api/jukebox/songs/{song_id}/metadata",
            "Rename a song or change its artist",
            metadata,
        )
        .id("set_song_metadata")
        .path::<s::SongId>()
        .json_body::<s::SongMetadata>()
        .ok::<s::SongChanged>()
        .fails::<JukeboxError>()
        .put(
            "/api/jukebox/songs/{song_id}/default-action",
            "Set or clear a song's default action",
            default_action,
        )
        .id("set_default_action")
        .path::<s::SongId>()
        .json_body::<s::DefaultActionBody>()
        .ok::<operations::DefaultAction>()
        .fails::<JukeboxError>()
        .route(
            Method::POST,
            "/api/jukebox/actions",
            "Upload actions (multipart files, metadata)",
            streamed(routing::post(upload_files)),
        )
        .id("upload_actions")
        .multipart(UPLOAD)
        .ok::<s::ActionUpload>()
        .fails::<JukeboxError>()
        .fails::<error::UploadRefusals>()
        .post(
            "/api/jukebox/actions/batch-delete",
            "Delete user actions, hide built-in ones",
            batch_delete,
        )
        .id("batch_delete_actions")
        .json_body::<s::ActionIds>()
        .ok::<s::ActionBatchDeletion>()
        .fails::<JukeboxError>()
        .delete(
            "/api/jukebox/actions/{action_id}",
            "Delete a user action or hide a built-in one",
            delete,
        )
        .id("delete_action")
        .path::<s::ActionId>()
        .ok::<s::Deletion>()
        .fails::<JukeboxError>()
        .put(
            "/api/jukebox/actions/{action_id}/visibility",
            "Show or hide an action",
            visibility,
        )
        .id("set_action_visibility")
        .path::<s::ActionId>()
        .json_body::<s::VisibilityBody>()
        .ok::<s::ActionVisibility>()
        .fails::<JukeboxError>()
        .put(
            "/api/jukebox/actions/{action_id}/metadata",
            "Rename an action",
            metadata,
        )
        .id("set_action_metadata")
        .path::<s::ActionId>()
        .json_body::<s::ActionMetadata>()
        .ok::<s::ActionChanged>()
        .fails::<JukeboxError>()
        .post("/api/jukebox/bind", "Bind an action to a song", bind)
        .id("bind")
        .json_body::<s::Bind>()
        .ok::<operations::DefaultAction>()
        .fails::<JukeboxError>()
        .delete("/api/jukebox/bind", "Unbind an action from a song", unbind)
        .id("unbind")
        .json_body::<s::Unbind>()
        .ok::<operations::DefaultAction>()
        .fails::<JukeboxError>()
        .post(
            "/api/jukebox/export",
            "Export songs and actions as jukebox_export.zip",
            export,
        )
        .id("export")
        .json_body::<s::Export>()
        .ok_file("application/zip")
        .fails::<JukeboxError>()
        .route(
            Method::POST,
            "/api/jukebox/import",
            "Import a jukebox_export.zip (multipart file)",
            streamed(routing::post(import)),
        )
        .id("import")
        .multipart(&[Part::file("file")])
        .ok::<archive::Imported>()
        .fails::<JukeboxError>()
        .get(
            "/api/jukebox/file/{*file_path}",
            "A library file (user folder, then bundled)",
            get_file,
        )
        .id("get_file")
        .path::<s::FilePath>()
        .ok_file("*/*")
        .fails::<JukeboxError>()
        .route(
            Method::POST,
            "/api/jukebox/pack-folder",
            "Pack uploaded relative paths into packed.zip",
            streamed(routing::post(pack_folder)),
        )
        .id("pack_folder")
        .multipart(&[Part::file("files")])
        .ok_file("application/zip")
        .fails::<JukeboxError>()
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work: provide the jukebox (default limits) to the handlers, sweep
/// leftovers, migrate a first-format library.
pub fn start(state: &AppState) {
    start_with(state, Limits::default(), DEFAULT_IDLE_UNLOAD);
}

/// [`start`] with other size limits and idle-unload time (tests use small
/// limits, benchmarks a short idle time). Sweeps the staging files a crash
/// left behind and migrates a first-format library on a blocking thread (the
/// server does not wait for it: requests meanwhile wait on the library's
/// lock). Otherwise the library is read at its first use, so a restart reads
/// nothing more and the summary comes from the journal's tail.
pub fn start_with(state: &AppState, limits: Limits, idle_unload: Duration) {
    let jukebox = Arc::new(Jukebox::new(
        state.data_dir(),
        state.bundle_dir(),
        state.store.clone(),
        limits,
    ));
    jukebox.set_idle_unload(idle_unload);
    jukebox.sweep_temp_files();
    state.provide(jukebox.clone());
    if jukebox.needs_migration() {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || jukebox.load_now());
            }
            Err(_) => {
                std::thread::spawn(move || jukebox.load_now());
            }
        }
    }
}

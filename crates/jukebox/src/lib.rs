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
mod storage;
mod tags;
mod upload;
mod view;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use companiond_core::{Api, AppState};

pub use error::JukeboxError;
pub use library::{Jukebox, Kind, Limits, DEFAULT_IDLE_UNLOAD};

/// The routes of this family, each with its literal path. Upload routes take
/// bodies of any size (the domain enforces its own limits while streaming).
pub fn api(state: &AppState) -> Api {
    use http::*;
    let streamed = |mr: MethodRouter<AppState>| mr.layer(DefaultBodyLimit::disable());
    Api::new(state, "jukebox")
        .get(
            "/api/jukebox/config",
            "Full jukebox config (bundled + user library)",
            get_config,
        )
        .get(
            "/api/jukebox/config/summary",
            "Config revision and counts",
            get_summary,
        )
        .route(
            Method::POST,
            "/api/jukebox/songs",
            "Upload songs (multipart files, metadata)",
            streamed(routing::post(upload_files)),
        )
        .post(
            "/api/jukebox/songs/batch-delete",
            "Delete user songs, hide built-in ones",
            batch_delete,
        )
        .delete(
            "/api/jukebox/songs/{song_id}",
            "Delete a user song or hide a built-in one",
            delete,
        )
        .put(
            "/api/jukebox/songs/{song_id}/visibility",
            "Show or hide a song",
            visibility,
        )
        .put(
            "/api/jukebox/songs/{song_id}/metadata",
            "Rename a song or change its artist",
            metadata,
        )
        .put(
            "/api/jukebox/songs/{song_id}/default-action",
            "Set or clear a song's default action",
            default_action,
        )
        .route(
            Method::POST,
            "/api/jukebox/actions",
            "Upload actions (multipart files, metadata)",
            streamed(routing::post(upload_files)),
        )
        .post(
            "/api/jukebox/actions/batch-delete",
            "Delete user actions, hide built-in ones",
            batch_delete,
        )
        .delete(
            "/api/jukebox/actions/{action_id}",
            "Delete a user action or hide a built-in one",
            delete,
        )
        .put(
            "/api/jukebox/actions/{action_id}/visibility",
            "Show or hide an action",
            visibility,
        )
        .put(
            "/api/jukebox/actions/{action_id}/metadata",
            "Rename an action",
            metadata,
        )
        .post("/api/jukebox/bind", "Bind an action to a song", bind)
        .delete("/api/jukebox/bind", "Unbind an action from a song", unbind)
        .post(
            "/api/jukebox/export",
            "Export songs and actions as jukebox_export.zip",
            export,
        )
        .route(
            Method::POST,
            "/api/jukebox/import",
            "Import a jukebox_export.zip (multipart file)",
            streamed(routing::post(import)),
        )
        .get(
            "/api/jukebox/file/{*file_path}",
            "A library file (user folder, then bundled)",
            get_file,
        )
        .route(
            Method::POST,
            "/api/jukebox/pack-folder",
            "Pack uploaded relative paths into packed.zip",
            streamed(routing::post(pack_folder)),
        )
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

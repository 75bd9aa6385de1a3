//! Jukebox (`/api/jukebox`): the song and dance library.
//!
//! * [`model`]: records, the merged library, the persisted document, the revision;
//! * [`library`]: the service (in-memory library, lock, durable changes) and its operations;
//! * [`storage`]: base document + append-only journal, migration, compaction;
//! * [`view`]: the GET /config answer cached in serialised parts;
//! * [`stage`], [`upload`], [`tags`]: streamed uploads with MD5, names from tags;
//! * [`archive`]: export, import and pack-folder ZIPs;
//! * [`http`]: thin handlers; [`error`]: the `{detail}` error enum.

pub mod archive;
pub mod error;
pub mod http;
pub mod library;
pub mod model;
pub mod stage;
pub mod storage;
pub mod tags;
pub mod upload;
pub mod view;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use axum::Extension;
use companiond_core::{Api, AppState};

pub use error::JukeboxError;
pub use library::{Jukebox, Limits};

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    api_with_limits(state, Limits::default())
}

/// The routes with custom size limits (tests use small ones).
pub fn api_with_limits(state: &AppState, limits: Limits) -> Api {
    api_with_options(state, limits, library::DEFAULT_IDLE_UNLOAD)
}

/// The routes with custom size limits and time after which an idle library
/// is dropped from memory (benchmarks use a short one).
pub fn api_with_options(state: &AppState, limits: Limits, idle_unload: Duration) -> Api {
    let j = Arc::new(Jukebox::new(
        state.data_dir(),
        state.bundle_dir(),
        state.store.clone(),
        limits,
    ));
    j.set_idle_unload(idle_unload);
    let ext =
        |mr: MethodRouter<AppState>| -> MethodRouter<AppState> { mr.layer(Extension(j.clone())) };
    let streamed = |mr: MethodRouter<AppState>| -> MethodRouter<AppState> {
        let mr: MethodRouter<AppState> = mr.layer(DefaultBodyLimit::disable());
        mr.layer(Extension(j.clone()))
    };
    use http::*;
    const P: &str = "/api/jukebox";
    let p = |s: &str| format!("{P}{s}");
    Api::new(state, "jukebox")
        .route(
            Method::GET,
            &p("/config"),
            "Full jukebox config (bundled + user library)",
            ext(routing::get(get_config)),
        )
        .route(
            Method::GET,
            &p("/config/summary"),
            "Config revision and counts",
            ext(routing::get(get_summary)),
        )
        .route(
            Method::POST,
            &p("/songs"),
            "Upload songs (multipart files, metadata)",
            streamed(routing::post(upload_songs)),
        )
        .route(
            Method::POST,
            &p("/songs/batch-delete"),
            "Delete user songs, hide built-in ones",
            ext(routing::post(batch_delete_songs)),
        )
        .route(
            Method::DELETE,
            &p("/songs/{song_id}"),
            "Delete a user song or hide a built-in one",
            ext(routing::delete(delete_song)),
        )
        .route(
            Method::PUT,
            &p("/songs/{song_id}/visibility"),
            "Show or hide a song",
            ext(routing::put(song_visibility)),
        )
        .route(
            Method::PUT,
            &p("/songs/{song_id}/metadata"),
            "Rename a song or change its artist",
            ext(routing::put(song_metadata)),
        )
        .route(
            Method::PUT,
            &p("/songs/{song_id}/default-action"),
            "Set or clear a song's default action",
            ext(routing::put(default_action)),
        )
        .route(
            Method::POST,
            &p("/actions"),
            "Upload actions (multipart files, metadata)",
            streamed(routing::post(upload_actions)),
        )
        .route(
            Method::POST,
            &p("/actions/batch-delete"),
            "Delete user actions, hide built-in ones",
            ext(routing::post(batch_delete_actions)),
        )
        .route(
            Method::DELETE,
            &p("/actions/{action_id}"),
            "Delete a user action or hide a built-in one",
            ext(routing::delete(delete_action)),
        )
        .route(
            Method::PUT,
            &p("/actions/{action_id}/visibility"),
            "Show or hide an action",
            ext(routing::put(action_visibility)),
        )
        .route(
            Method::PUT,
            &p("/actions/{action_id}/metadata"),
            "Rename an action",
            ext(routing::put(action_metadata)),
        )
        .route(
            Method::POST,
            &p("/bind"),
            "Bind an action to a song",
            ext(routing::post(bind)),
        )
        .route(
            Method::DELETE,
            &p("/bind"),
            "Unbind an action from a song",
            ext(routing::delete(unbind)),
        )
        .route(
            Method::POST,
            &p("/export"),
            "Export songs and actions as jukebox_export.zip",
            ext(routing::post(export)),
        )
        .route(
            Method::POST,
            &p("/import"),
            "Import a jukebox_export.zip (multipart file)",
            streamed(routing::post(import)),
        )
        .route(
            Method::GET,
            &p("/file/{*file_path}"),
            "A library file (user folder, then bundled)",
            ext(routing::get(get_file)),
        )
        .route(
            Method::POST,
            &p("/pack-folder"),
            "Pack uploaded relative paths into packed.zip",
            streamed(routing::post(pack_folder)),
        )
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}

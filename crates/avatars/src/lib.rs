//! Avatar models: MMD (`/api/model/mmd/…`) and PNGTuber (`/api/model/pngtuber/…`).
//!
//! [`api`] lists every route with its path; [`start`] builds the family state
//! (`Avatars`, reached by the handlers as `Ext<Avatars>`) and sweeps the
//! leftovers of interrupted uploads. The handlers (`http`) are thin: they
//! turn multipart fields into byte streams and JSON bodies into plain values
//! and call the domain modules (`mmd`, `zipimport`, [`pngtuber`]), which know
//! nothing of HTTP. Every failure is an [`AvatarError`], answered in the
//! `{success:false, error}` envelope with a status chosen by its variant.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{post, MethodRouter};
use companiond_core::api::Part;
use companiond_core::server::Family;
use companiond_core::{Api, AppState};

mod error;
mod fsutil;
mod http;
mod layout;
mod mmd;
pub mod pngtuber;
mod zipimport;
mod zipstream;

pub use error::AvatarError;

const MIB: u64 = 1024 * 1024;

/// Size and count limits of the uploads. The server uses [`Limits::default`]
/// (the limits the HTTP contract states); tests start the family with small
/// ones through [`start_with`].
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One `.pmx`/`.pmd` model or `.vmd` animation upload (500 MB).
    pub mmd_file_bytes: u64,
    /// The uploaded ZIP archive itself (2 GB, the uncompressed limit).
    pub zip_archive_bytes: u64,
    /// Entries of a model ZIP (10,000).
    pub zip_entries: usize,
    /// Uncompressed bytes of a model ZIP, counted while extracting (2 GB).
    pub zip_uncompressed_bytes: u64,
    /// One file of a PNGTuber package (50 MB).
    pub pngtuber_file_bytes: u64,
    /// A whole PNGTuber package (250 MB).
    pub pngtuber_package_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            mmd_file_bytes: 500 * MIB,
            zip_archive_bytes: 2048 * MIB,
            zip_entries: 10_000,
            zip_uncompressed_bytes: 2048 * MIB,
            pngtuber_file_bytes: 50 * MIB,
            pngtuber_package_bytes: 250 * MIB,
        }
    }
}

/// The family state: the MMD and PNGTuber stores, installed by [`start`].
pub(crate) struct Avatars {
    mmd: mmd::Mmd,
    pngtuber: pngtuber::Pngtuber,
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: Family = Family { api, start };

/// Start-up work: install the family state with the default limits and remove
/// what interrupted uploads left behind.
pub fn start(state: &AppState) {
    start_with(state, Limits::default());
}

/// [`start`] with explicit limits (tests use small ones).
pub fn start_with(state: &AppState, limits: Limits) {
    let avatars = Avatars {
        mmd: mmd::Mmd::new(
            state.data_dir(),
            state.bundle_dir(),
            state.opts.workshop_dir.clone(),
            limits,
            state.store.clone(),
        ),
        pngtuber: pngtuber::Pngtuber::new(state.data_dir(), limits, state.store.clone()),
    };
    avatars.mmd.clean_leftovers();
    avatars.pngtuber.clean_leftovers();
    state.provide(Arc::new(avatars));
}

/// `POST` of an upload: streamed and limited by the domain, so axum's body
/// limit is off.
fn streamed_post<H: Handler<T, AppState>, T: 'static>(h: H) -> MethodRouter<AppState> {
    post(h).layer(DefaultBodyLimit::disable())
}

/// The routes of this family (uploads through [`streamed_post`]), each with
/// what it reads and answers (`http::answers`, docs/avatars.md § OpenAPI).
pub fn api(state: &AppState) -> Api {
    use http::answers::*;
    const FILE: &[Part] = &[Part::file("file")];
    Api::new(state, "avatars")
        .about(
            "Avatar models: MMD models (.pmx/.pmd, or a ZIP with textures), .vmd animations, \
             emotion mappings, and PNGTuber packages. Every failure is \
             `{success:false, error, error_code}` with the status of its kind.",
        )
        .route(
            Method::POST,
            "/api/model/mmd/upload",
            "Upload a .pmx/.pmd model (streamed, at most 500 MB)",
            streamed_post(http::mmd::upload_model),
        )
        .id("upload_mmd_model")
        .multipart(FILE)
        .ok::<ModelUploadedAnswer>()
        .fails::<AvatarError>()
        .route(
            Method::POST,
            "/api/model/mmd/upload_animation",
            "Upload a .vmd animation into the user animation folder",
            streamed_post(http::mmd::upload_animation),
        )
        .id("upload_mmd_animation")
        .multipart(FILE)
        .ok::<AnimationUploadedAnswer>()
        .fails::<AvatarError>()
        .route(
            Method::POST,
            "/api/model/mmd/upload_zip",
            "Import a ZIP of a .pmx/.pmd model and its textures",
            streamed_post(http::mmd::upload_zip),
        )
        .id("import_mmd_zip")
        .multipart(FILE)
        .ok::<ZipImportedAnswer>()
        .fails::<AvatarError>()
        .get(
            "/api/model/mmd/models",
            "List project, user and workshop MMD models",
            http::mmd::models,
        )
        .id("list_mmd_models")
        .ok::<ModelList>()
        .fails_with(error::storage_failure())
        .get(
            "/api/model/mmd/animations",
            "List project and user .vmd animations",
            http::mmd::animations,
        )
        .id("list_mmd_animations")
        .ok::<AnimationList>()
        .fails_with(error::storage_failure())
        .get(
            "/api/model/mmd/animations/list",
            "List the deletable user animations",
            http::mmd::deletable_animations,
        )
        .id("list_user_mmd_animations")
        .ok::<UserAnimationList>()
        .fails_with(error::storage_failure())
        .get(
            "/api/model/mmd/config",
            "MMD URL prefixes",
            http::mmd::config,
        )
        .id("mmd_config")
        .ok::<MmdConfigAnswer>()
        .get(
            "/api/model/mmd/emotion_mapping",
            "Emotion mapping of one model",
            http::mmd::emotion_mapping,
        )
        .id("get_emotion_mapping")
        .query::<MappingQuery>()
        .ok::<MappingAnswer>()
        .fails::<AvatarError>()
        .post(
            "/api/model/mmd/emotion_mapping",
            "Store the emotion mapping of one model",
            http::mmd::save_emotion_mapping,
        )
        .id("save_emotion_mapping")
        .json_body::<SaveMapping>()
        .ok::<Message>()
        .fails::<AvatarError>()
        .delete(
            "/api/model/mmd/model",
            "Delete a user model (folder or lone file) and its emotion mapping",
            http::mmd::delete_model,
        )
        .id("delete_mmd_model")
        .query::<UrlParam>()
        .json_body::<UrlParam>()
        .ok::<ModelDeleted>()
        .fails::<AvatarError>()
        .delete(
            "/api/model/mmd/animation",
            "Delete a user .vmd animation",
            http::mmd::delete_animation,
        )
        .id("delete_mmd_animation")
        .query::<UrlParam>()
        .json_body::<UrlParam>()
        .ok::<Message>()
        .fails::<AvatarError>()
        .route(
            Method::POST,
            "/api/model/pngtuber/upload_model",
            "Upload a PNGTuber package (parts files, relative paths as file names)",
            streamed_post(http::pngtuber::upload),
        )
        .id("upload_pngtuber_package")
        .multipart(&[Part::file("files")])
        .ok::<PackageUploadedAnswer>()
        .fails::<AvatarError>()
        .get(
            "/api/model/pngtuber/models",
            "List the valid PNGTuber packages",
            http::pngtuber::models,
        )
        .id("list_pngtuber_packages")
        .ok::<PackageList>()
        .fails_with(error::storage_failure())
        .delete(
            "/api/model/pngtuber/model",
            "Delete a PNGTuber package by folder, url or name",
            http::pngtuber::delete,
        )
        .id("delete_pngtuber_package")
        .query::<PackageKey>()
        .json_body::<PackageKey>()
        .ok::<Message>()
        .fails::<AvatarError>()
}

//! Avatar models: MMD (`/api/model/mmd`) and PNGTuber (`/api/model/pngtuber`).
//!
//! The HTTP handlers ([`http`]) are thin: they turn multipart fields into byte
//! streams and JSON bodies into plain values and call the domain modules
//! ([`mmd`], [`zipimport`], [`pngtuber`]), which know nothing of HTTP. Every
//! failure is an [`error::AvatarError`], answered in the `{success:false, error}`
//! envelope.

use companiond_core::{Api, AppState};

pub mod error;
pub mod fsutil;
mod http;
pub mod mmd;
pub mod pngtuber;
pub mod zipimport;
mod zipstream;

pub use error::AvatarError;

const MIB: u64 = 1024 * 1024;

/// Size and count limits of the uploads (interface.md § Limits). The HTTP
/// routes use [`Limits::default`], the values of the spec; tests build the
/// routes with small limits through [`api_with_limits`].
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

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    api_with_limits(state, Limits::default())
}

/// The routes of this family with explicit limits (tests use small ones).
pub fn api_with_limits(state: &AppState, limits: Limits) -> Api {
    http::api(state, limits)
}

/// A size in the units of the spec ("500 MB" for 500 MiB).
pub(crate) fn human_size(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        if bytes >= 1024 * MIB && bytes.is_multiple_of(1024 * MIB) {
            format!("{} GB", bytes / (1024 * MIB))
        } else {
            format!("{} MB", bytes / MIB)
        }
    } else {
        format!("{bytes} bytes")
    }
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}

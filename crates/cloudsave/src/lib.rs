//! Cloud save (`/api/cloudsave`): a character unit (profile + managed memory
//! files + meta record) exported to and imported from a storage target — a
//! local directory (default `<data>/cloud`) or `s3://bucket/prefix`.
//!
//! * [`http`]: the five routes (thin handlers);
//! * [`service`]: summary, detail, upload, download;
//! * [`unit`]: the unit's files, fingerprint, snapshots and verification;
//! * [`target`]: the object store and its key layout;
//! * [`local`]: local state (client id, sequence numbers) and the write fence;
//! * [`error`]: the family's error enum and envelope.

pub mod autocloud;
pub mod error;
pub mod http;
pub mod local;
pub mod localcache;
pub mod service;
pub mod summary;
pub mod target;
pub mod unit;

use companiond_core::{Api, AppState};

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    http::api(state)
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}

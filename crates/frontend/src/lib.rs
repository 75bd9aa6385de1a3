//! The original application's web frontend on companiond (docs/frontend.md).
//!
//! * With `--frontend-dir DIR`: the original page paths, rendered from
//!   `DIR/templates` ([`pages`]); `DIR/static` wins over the bundle's at `/static/`
//!   (core's static route).
//! * Always: the routes the original pages call around the interface — the
//!   per-character routes under the original paths ([`characters`]), Live2D and VRM
//!   model lists and their user mounts ([`models`]), storage location
//!   ([`storage`]), `steam_language` and the features companiond does not have,
//!   answered in the shape the pages read as "unavailable" ([`extras`]).
//!
//! Mutations: the routes the original pages call *with* the CSRF token are CSRF-guarded
//! (`Api::guarded`); the ones they call without it (character edits, model binding,
//! beacons) are, like every mutation, refused by core's front door when they come from a
//! page of another site (docs/security.md § Cross-site writes).

pub mod characters;
pub mod extras;
pub mod models;
pub mod pages;
pub mod render;
pub mod storage;

use companiond_core::{Api, AppState};

/// Every route of the family.
pub fn api(state: &AppState) -> Api {
    let mut api = Api::new(state, "frontend")
        .merge(characters::api(state))
        .merge(models::api(state))
        .merge(storage::api(state))
        .merge(extras::api(state));
    if let Some(dir) = state.opts.frontend_dir.clone() {
        api = api.raw(pages::router(dir));
    }
    api
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}

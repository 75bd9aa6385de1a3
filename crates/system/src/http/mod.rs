//! Thin HTTP handlers, one file per resource: parse the request, call the domain
//! module, shape the answer. Family state arrives as `Ext<SystemState>`.

pub mod autostart;
pub mod bodies;
pub mod changelog;
pub mod desktop;
pub mod emotion;
pub mod files;
pub mod handoff;
pub mod platform;
pub mod proactive;
pub mod queries;
pub mod status;
pub mod translate;
pub mod tutorial;

use axum::response::Response;
use companiond_core::envelope::no_store;

/// Default largest JSON body of a system route.
pub(crate) const MAX_BODY: usize = 256 * 1024;

pub async fn add_no_store(r: Response) -> Response {
    no_store(r)
}

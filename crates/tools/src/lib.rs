//! Runtime tool registration (`/api/tools`).
//!
//! Local plugin processes register HTTP callbacks as tools; the registrations
//! live in each character's session manager (core), which offers them to the
//! model as function tools on every request and dispatches the model's calls
//! through `companiond_core::tools::ToolHub` (callback, timeout, eviction).
//! This crate owns the four routes: validation, role targeting and listing.
//!
//! * `http`: the four handlers (thin); `error`: the family's error and envelope;
//! * `validation`: the request bodies' schema;
//! * [`registry`]: role targeting and the operations over the session managers.

mod error;
mod http;
pub mod registry;
mod validation;

use companiond_core::{Api, AppState};

/// The four routes of this family.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "tools")
        .post(
            "/api/tools/register",
            "register (or replace) a runtime tool served by a loopback callback",
            http::register,
        )
        .post(
            "/api/tools/unregister",
            "unregister a runtime tool by name",
            http::unregister,
        )
        .post(
            "/api/tools/clear",
            "remove every runtime tool of a source",
            http::clear,
        )
        .get("/api/tools", "list runtime tools by role", http::list)
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family: none (registrations are runtime state).
pub fn start(_state: &AppState) {}

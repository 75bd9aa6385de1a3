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
use error::ToolsError;

/// The four routes of this family, with what they read and answer (docs/tools.md).
pub fn api(state: &AppState) -> Api {
    Api::new(state, "tools")
        .about(
            "Runtime tools: local plugins register loopback HTTP callbacks that the model may \
             call. Loopback peers only; errors answer `{detail}`.",
        )
        .post(
            "/api/tools/register",
            "register (or replace) a runtime tool served by a loopback callback",
            http::register,
        )
        .id("register")
        .json_body::<http::RegisterBody>()
        .ok::<http::Registered>()
        .fails::<ToolsError>()
        .post(
            "/api/tools/unregister",
            "unregister a runtime tool by name",
            http::unregister,
        )
        .id("unregister")
        .json_body::<http::UnregisterBody>()
        .ok::<http::Unregistered>()
        .fails::<ToolsError>()
        .post(
            "/api/tools/clear",
            "remove every runtime tool of a source",
            http::clear,
        )
        .id("clear")
        .json_body::<http::ClearBody>()
        .ok::<http::Cleared>()
        .fails::<ToolsError>()
        .get("/api/tools", "list runtime tools by role", http::list)
        .id("list")
        .query::<http::ListQuery>()
        .ok::<registry::ToolList>()
        .fails_with(ToolsError::unknown_role_answer())
        .fails_with(ToolsError::loopback_answer())
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family: none (registrations are runtime state).
pub fn start(_state: &AppState) {}

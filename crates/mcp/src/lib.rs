//! MCP both ways (docs/mcp.md).
//!
//! * Client: MCP servers configured in `config/mcp_servers.json` (the
//!   `mcpServers` shape; stdio child processes, Streamable HTTP endpoints and,
//!   as their fallback, the legacy HTTP+SSE transport)
//!   feed the runtime tool registry of core with `source` `mcp:<server>`; the
//!   model's calls come back here through `companiond_core::tools::ToolBackend`
//!   (installed for the prefix `mcp:` with `ToolHub::set_backend`), so core's
//!   chat turn and the tools family's `GET /api/tools` need nothing MCP-specific.
//! * Server: companiond's own MCP endpoint at `/mcp` (Streamable HTTP, off
//!   until turned on, bearer token), serving the memory through core's
//!   `MemoryRecall` hook and the history through `state.history`: families never
//!   import each other, so the memory family's search is reached only through
//!   that trait, which it installs at start.
//!
//! Modules: [`config`] (the files), `client` (supervisors, calls), `family`
//! (the family state `Mcp`, publication into the registries), `sse` (the
//! legacy HTTP+SSE client transport), `endpoint` (the `/mcp` server), `http`
//! (thin handlers), `error`.

pub mod client;
pub mod config;
mod endpoint;
mod error;
pub mod family;
mod http;
mod sse;

use std::sync::Arc;

use axum::http::Method;
use companiond_core::guards::Csrf;
use companiond_core::{Api, AppState};
use error::McpError;

pub use family::Mcp;

/// The routes of this family (docs/mcp.md).
pub fn api(state: &AppState) -> Api {
    let api = Api::new(state, "mcp")
        .about(
            "MCP: outside MCP servers whose tools the characters may call, and \
             companiond's own MCP endpoint at /mcp. Writes need the CSRF token.",
        )
        .get(
            "/api/mcp/servers",
            "list the MCP servers with their state, tools and last error",
            http::list,
        )
        .id("servers_list")
        .ok::<http::ServerList>()
        .guarded(
            Method::POST,
            "/api/mcp/servers",
            "add or replace an MCP server",
            Csrf::Success,
            http::put,
        )
        .id("servers_put")
        .json_body::<http::PutServerBody>()
        .ok::<http::Changed>()
        .fails::<McpError>()
        .guarded(
            Method::DELETE,
            "/api/mcp/servers/{name}",
            "remove an MCP server",
            Csrf::Success,
            http::remove,
        )
        .id("servers_remove")
        .path::<http::ServerName>()
        .ok::<http::Changed>()
        .fails::<McpError>()
        .guarded(
            Method::POST,
            "/api/mcp/servers/{name}/enable",
            "turn an MCP server on",
            Csrf::Success,
            http::enable,
        )
        .id("servers_enable")
        .path::<http::ServerName>()
        .ok::<http::Changed>()
        .fails::<McpError>()
        .guarded(
            Method::POST,
            "/api/mcp/servers/{name}/disable",
            "turn an MCP server off",
            Csrf::Success,
            http::disable,
        )
        .id("servers_disable")
        .path::<http::ServerName>()
        .ok::<http::Changed>()
        .fails::<McpError>();
    endpoint::api(api)
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Provide the family state, install the tool backend for `mcp:` sources,
/// start the configured servers and the characters watch.
pub fn start(state: &AppState) {
    let mcp = Mcp::new(state);
    state.provide(mcp.clone());
    state
        .tools
        .set_backend("mcp:", Arc::new(family::Backend(Arc::downgrade(&mcp))));
    endpoint::start(state);
    let weak = Arc::downgrade(&mcp);
    tokio::spawn(async move {
        if let Some(m) = weak.upgrade() {
            if let Err(e) = m.load().await {
                tracing::warn!("cannot load the MCP servers: {e}");
            }
        }
        loop {
            tokio::time::sleep(family::CHARACTER_POLL).await;
            match weak.upgrade() {
                Some(m) => m.refresh_characters(),
                None => break,
            }
        }
    });
}

//! companiond's own MCP server at `/mcp` (written next).

use companiond_core::{Api, AppState};

pub fn api(api: Api) -> Api {
    api
}

pub fn start(_state: &AppState) {}

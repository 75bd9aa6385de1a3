//! The thin handlers of `/api/mcp/*`: parse, call the family state, answer.

use axum::extract::Path;
use axum::Json;
use companiond_core::envelope::JsonBody;
use companiond_core::Ext;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::config::{ServerConfig, SERVERS_FILE};
use crate::error::McpError;
use crate::family::{Mcp, ServerView};

/// `GET /api/mcp/servers`.
#[derive(Serialize, ToSchema)]
pub struct ServerList {
    pub ok: bool,
    /// The settings file, relative to the data folder.
    pub file: String,
    pub servers: Vec<ServerView>,
}

/// `POST /api/mcp/servers`: add or replace a server.
#[derive(Deserialize, ToSchema)]
pub struct PutServerBody {
    /// 1-64 of `A-Z a-z 0-9 _ - .`; its tools get `source` `mcp:<name>`.
    pub name: String,
    /// The server's entry as in the file's `mcpServers`.
    pub server: ServerConfig,
}

/// The answer of a change.
#[derive(Serialize, ToSchema)]
pub struct Changed {
    pub ok: bool,
    pub name: String,
}

pub async fn list(Ext(mcp): Ext<Mcp>) -> Json<ServerList> {
    Json(ServerList {
        ok: true,
        file: SERVERS_FILE.into(),
        servers: mcp.list(),
    })
}

pub async fn put(
    Ext(mcp): Ext<Mcp>,
    JsonBody(body, ..): JsonBody<PutServerBody>,
) -> Result<Json<Changed>, McpError> {
    mcp.put(body.name.clone(), body.server).await?;
    Ok(Json(Changed {
        ok: true,
        name: body.name,
    }))
}

pub async fn remove(
    Ext(mcp): Ext<Mcp>,
    Path(ServerName { name }): Path<ServerName>,
) -> Result<Json<Changed>, McpError> {
    mcp.remove(&name).await?;
    Ok(Json(Changed { ok: true, name }))
}

pub async fn enable(
    Ext(mcp): Ext<Mcp>,
    Path(ServerName { name }): Path<ServerName>,
) -> Result<Json<Changed>, McpError> {
    mcp.set_enabled(&name, true).await?;
    Ok(Json(Changed { ok: true, name }))
}

pub async fn disable(
    Ext(mcp): Ext<Mcp>,
    Path(ServerName { name }): Path<ServerName>,
) -> Result<Json<Changed>, McpError> {
    mcp.set_enabled(&name, false).await?;
    Ok(Json(Changed { ok: true, name }))
}

/// `{name}` of the server routes.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ServerName {
    /// The server's name.
    pub name: String,
}

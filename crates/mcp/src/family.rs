//! The family state [`Mcp`]: the configured servers and their supervisors, the
//! publication of their tools into the characters' registries, and the
//! `ToolBackend` that runs the model's calls (docs/mcp.md).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use companiond_core::state::Inner;
use companiond_core::tools::{RegisteredTool, ToolBackend, ToolResult};
use companiond_core::AppState;
use futures::future::BoxFuture;
use serde::Serialize;
use utoipa::ToSchema;

use crate::client::{Publish, Server, Status};
use crate::config::{ServerConfig, ServersFile, SERVERS_FILE};
use crate::error::McpError;

/// The MCP family's state, provided at start.
pub struct Mcp {
    state: Weak<Inner>,
    servers: Mutex<BTreeMap<String, Arc<Server>>>,
    /// One publication at a time (the clash check reads what others published).
    publishing: Mutex<()>,
    /// Serializes configuration changes (file + supervisors).
    changing: tokio::sync::Mutex<()>,
    /// The characters the tools were last published to.
    published_to: Mutex<Vec<String>>,
}

/// One server as `GET /api/mcp/servers` lists it.
#[derive(Serialize, ToSchema)]
pub struct ServerView {
    pub name: String,
    /// `stdio`, `http` (Streamable HTTP) or `sse` (the legacy HTTP+SSE
    /// transport, configured or found by the probe).
    pub transport: String,
    pub enabled: bool,
    /// `mcp:<name>`, the `source` of its tools in `GET /api/tools`.
    pub source: String,
    /// The tools offered to the model.
    pub tools: Vec<String>,
    #[serde(flatten)]
    pub status: Status,
    /// The settings, `env` and `headers` values masked.
    pub config: ServerConfig,
}

impl Mcp {
    pub fn new(state: &AppState) -> Arc<Mcp> {
        Arc::new(Mcp {
            state: Arc::downgrade(&state.0),
            servers: Mutex::default(),
            publishing: Mutex::default(),
            changing: tokio::sync::Mutex::default(),
            published_to: Mutex::default(),
        })
    }

    fn state(&self) -> Option<AppState> {
        self.state.upgrade().map(AppState)
    }

    fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Every server, by name.
    pub fn list(&self) -> Vec<ServerView> {
        let servers: Vec<Arc<Server>> = self
            .servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        servers
            .iter()
            .map(|s| ServerView {
                name: s.name.clone(),
                transport: s.transport_name().into(),
                enabled: s.config.is_enabled(),
                source: s.source(),
                tools: s.offered_names(),
                status: s.status(),
                config: s.config.masked(),
            })
            .collect()
    }

    /// Read the servers file and start the enabled servers.
    pub async fn load(self: &Arc<Self>) -> Result<(), McpError> {
        let _g = self.changing.lock().await;
        let st = self.state().ok_or(McpError::Stopping)?;
        let file: ServersFile = st
            .store
            .read(SERVERS_FILE)
            .await
            .map_err(|e| McpError::Store(e.to_string()))?
            .unwrap_or_default();
        for (name, cfg) in file.mcp_servers {
            if self.server(&name).is_some() {
                continue; // a route already (re)started it
            }
            let server = Server::new(&name, cfg.clone());
            if let Err(e) = crate::config::validate_name(&name).and_then(|()| cfg.validate()) {
                server.note_error(&format!("not started: {e}"));
                self.insert(server);
                continue;
            }
            self.insert(server.clone());
            server.spawn(self.clone());
        }
        Ok(())
    }

    fn insert(&self, server: Arc<Server>) -> Option<Arc<Server>> {
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(server.name.clone(), server)
    }

    fn take(&self, name: &str) -> Option<Arc<Server>> {
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name)
    }

    /// Change the servers file with `f` and apply it to server `name`: the old
    /// supervisor is stopped and, if the server still exists, a new one started.
    async fn change(
        self: &Arc<Self>,
        name: &str,
        f: impl FnOnce(&mut ServersFile) -> Result<(), McpError> + Send + 'static,
    ) -> Result<(), McpError> {
        let _g = self.changing.lock().await;
        let st = self.state().ok_or(McpError::Stopping)?;
        let updated = st
            .store
            .try_update(SERVERS_FILE, move |cur: Option<ServersFile>| {
                let mut file = cur.unwrap_or_default();
                f(&mut file)?;
                Ok::<_, McpError>((file.clone(), file))
            })
            .await
            .map_err(|e| McpError::Store(e.to_string()))??;
        if let Some(old) = self.take(name) {
            old.shutdown().await;
            self.withdraw(&old);
        }
        if let Some(cfg) = updated.mcp_servers.get(name) {
            let server = Server::new(name, cfg.clone());
            self.insert(server.clone());
            server.spawn(self.clone());
        }
        Ok(())
    }

    /// Add or replace server `name`.
    pub async fn put(self: &Arc<Self>, name: String, cfg: ServerConfig) -> Result<(), McpError> {
        crate::config::validate_name(&name).map_err(McpError::Invalid)?;
        cfg.validate().map_err(McpError::Invalid)?;
        let key = name.clone();
        self.change(&name, move |file| {
            file.mcp_servers.insert(key, cfg);
            Ok(())
        })
        .await
    }

    /// Remove server `name`.
    pub async fn remove(self: &Arc<Self>, name: &str) -> Result<(), McpError> {
        let key = name.to_string();
        self.change(name, move |file| {
            file.mcp_servers
                .remove(&key)
                .map(|_| ())
                .ok_or(McpError::UnknownServer(key))
        })
        .await
    }

    /// Turn server `name` on or off (kept in the file as `enabled`).
    pub async fn set_enabled(self: &Arc<Self>, name: &str, enabled: bool) -> Result<(), McpError> {
        let key = name.to_string();
        self.change(name, move |file| {
            let cfg = file
                .mcp_servers
                .get_mut(&key)
                .ok_or(McpError::UnknownServer(key.clone()))?;
            cfg.enabled = Some(enabled);
            cfg.disabled = None;
            Ok(())
        })
        .await
    }

    /// Stop every server (companiond is stopping).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Server>> = {
            let mut m = self.servers.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *m).into_values().collect()
        };
        for s in all {
            s.shutdown().await;
        }
    }

    /// Publish every server's tools again when the characters changed (a new
    /// character gets the tools, a deleted one drops them).
    pub(crate) fn refresh_characters(&self) {
        let Some(st) = self.state() else { return };
        let names = st.characters.names();
        {
            let mut last = self.published_to.lock().unwrap_or_else(|e| e.into_inner());
            if *last == names {
                return;
            }
            *last = names;
        }
        let servers: Vec<Arc<Server>> = self
            .servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for s in servers {
            if s.peer().is_some() {
                self.publish(&s);
            }
        }
    }

    async fn call_tool(&self, tool: RegisteredTool, raw_arguments: String) -> ToolResult {
        let name = tool.source.strip_prefix("mcp:").unwrap_or_default();
        let (content, is_error) = match self.server(name) {
            Some(server) => server.call(&tool.name, &raw_arguments).await,
            None => (
                format!("tool error: the MCP server {name} is not configured"),
                true,
            ),
        };
        ToolResult { content, is_error }
    }
}

impl Publish for Mcp {
    fn publish(&self, server: &Server) {
        let Some(st) = self.state() else { return };
        let _g = self.publishing.lock().unwrap_or_else(|e| e.into_inner());
        let source = server.source();
        let tools = server
            .offered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut clashes = std::collections::BTreeSet::new();
        for role in st.characters.names() {
            let Some(mgr) = st.sessions.get(&role) else {
                continue;
            };
            mgr.clear_tools(Some(&source));
            let wanted = server
                .config
                .characters
                .as_ref()
                .is_none_or(|c| c.contains(&role));
            if !wanted {
                continue;
            }
            for tool in &tools {
                match mgr.tool(&tool.name) {
                    Some(other) if other.source != source => {
                        clashes.insert(format!("{} (held by {})", tool.name, other.source));
                    }
                    _ => mgr.register_tool(tool.clone()),
                }
            }
        }
        let clashes: Vec<String> = clashes.into_iter().collect();
        if !clashes.is_empty() {
            server.note_error(&format!(
                "tools not offered, their names are taken: {}",
                clashes.join(", ")
            ));
        }
        server
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clashes = clashes;
    }

    fn withdraw(&self, server: &Server) {
        let Some(st) = self.state() else { return };
        let _g = self.publishing.lock().unwrap_or_else(|e| e.into_inner());
        let source = server.source();
        for mgr in st.sessions.all() {
            mgr.clear_tools(Some(&source));
        }
    }
}

/// The model's calls of `mcp:` tools (installed with `ToolHub::set_backend`).
pub(crate) struct Backend(pub Weak<Mcp>);

impl ToolBackend for Backend {
    fn call(
        &self,
        tool: RegisteredTool,
        _call_id: String,
        raw_arguments: String,
    ) -> BoxFuture<'static, ToolResult> {
        let mcp = self.0.upgrade();
        Box::pin(async move {
            match mcp {
                Some(m) => m.call_tool(tool, raw_arguments).await,
                None => ToolResult {
                    content: "tool error: companiond is stopping".into(),
                    is_error: true,
                },
            }
        })
    }
}

/// How often the characters list is compared with the one the tools were published to.
pub(crate) const CHARACTER_POLL: Duration = Duration::from_secs(2);

//! The MCP servers file (`config/mcp_servers.json`, the widespread `mcpServers`
//! shape) and the `/mcp` endpoint settings (`config/mcp_endpoint.json`).
//! Both are read and written through `state.store` (atomic writes).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The servers file, relative to the data dir.
pub const SERVERS_FILE: &str = "config/mcp_servers.json";
/// The `/mcp` endpoint settings, relative to the data dir.
pub const ENDPOINT_FILE: &str = "config/mcp_endpoint.json";

/// Default call timeout (seconds).
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 30.0;
/// Default time a server has to start and answer `initialize` + `tools/list` (seconds).
pub const DEFAULT_STARTUP_SECONDS: f64 = 20.0;
/// Default cap of one tool result handed to the model (characters).
pub const DEFAULT_MAX_RESULT_CHARS: usize = 20_000;
/// Highest cap a server may ask for (characters).
pub const MAX_RESULT_CHARS: usize = 1_000_000;

/// `config/mcp_servers.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct ServersFile {
    /// Servers by name.
    #[serde(rename = "mcpServers", default)]
    pub mcp_servers: BTreeMap<String, ServerConfig>,
}

/// One MCP server: either a child process speaking stdio (`command`, `args`,
/// `env`, `cwd`) or an HTTP endpoint (`url`, `headers`): Streamable HTTP, or the
/// legacy HTTP+SSE transport (found by the probe, or `transport: "sse"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    /// Program to start (stdio transport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The child's environment, passed explicitly: companiond's own environment
    /// is not inherited (only `PATH`, `HOME`, `LANG`, `TMPDIR` and the like are).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory of the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// HTTP endpoint (`http`/`https`): Streamable HTTP, or the legacy HTTP+SSE
    /// stream URL (the one answering GET with the `endpoint` event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Extra HTTP headers (e.g. `Authorization`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Transport hint other applications write (`stdio`, `http`, `streamable-http`,
    /// `sse`); companiond decides by `command` / `url`, except that `sse` (when
    /// `transport` is absent) means the legacy HTTP+SSE transport.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `sse`: speak the legacy HTTP+SSE transport to `url` without the probe.
    /// `stdio`, `http` and `streamable-http` are accepted and change nothing
    /// (a `url` gets Streamable HTTP, with the SSE fallback on a 4xx).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// `false` keeps the server stopped (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The other applications' spelling of `enabled: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Only these tools are offered to the model (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Characters that get the tools (every character when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub characters: Option<Vec<String>>,
    /// Timeout of one `tools/call` (seconds, (0, 300], default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// Time to start and list the tools (seconds, (0, 300], default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_seconds: Option<f64>,
    /// Characters of one result at most (1 to 1 000 000, default 20 000); the
    /// rest is cut and the model told so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_chars: Option<usize>,
}

/// How a server is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A child process over standard input/output.
    Stdio,
    /// Streamable HTTP; on a 4xx to `initialize`, the legacy HTTP+SSE transport.
    Http,
    /// The legacy HTTP+SSE transport (MCP 2024-11-05) only: `transport: "sse"`.
    Sse,
}

/// The values `transport` accepts.
const TRANSPORTS: &[&str] = &["stdio", "http", "streamable-http", "sse"];

impl ServerConfig {
    pub fn transport(&self) -> Transport {
        if self.command.is_some() {
            Transport::Stdio
        } else if self.wants_sse() {
            Transport::Sse
        } else {
            Transport::Http
        }
    }
    /// `transport: "sse"`, or `type: "sse"` when `transport` is absent.
    fn wants_sse(&self) -> bool {
        self.transport
            .as_deref()
            .or(self.kind.as_deref())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("sse"))
    }
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true) && !self.disabled.unwrap_or(false)
    }
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS))
    }
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_secs_f64(
            self.startup_timeout_seconds
                .unwrap_or(DEFAULT_STARTUP_SECONDS),
        )
    }
    pub fn max_result_chars(&self) -> usize {
        self.max_result_chars.unwrap_or(DEFAULT_MAX_RESULT_CHARS)
    }
    /// Is `tool` allowed by the allowlist?
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }
    /// The same server with secrets (env and header values) masked, for listings.
    pub fn masked(&self) -> ServerConfig {
        let mask = |m: &BTreeMap<String, String>| {
            m.keys()
                .map(|k| (k.clone(), "********".to_string()))
                .collect()
        };
        ServerConfig {
            env: mask(&self.env),
            headers: mask(&self.headers),
            ..self.clone()
        }
    }

    /// Check a server's settings; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => return Err("give either command or url, not both".into()),
            (None, None) => {
                return Err("give command (stdio) or url (Streamable HTTP or SSE)".into())
            }
            (Some(c), None) if c.trim().is_empty() => return Err("command is empty".into()),
            (None, Some(u)) => {
                let parsed = url::Url::parse(u).map_err(|e| format!("url: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err("url must be http or https".into());
                }
            }
            _ => {}
        }
        if let Some(t) = &self.transport {
            if !TRANSPORTS.iter().any(|k| t.trim().eq_ignore_ascii_case(k)) {
                return Err(format!(
                    "transport must be one of {}",
                    TRANSPORTS.join(", ")
                ));
            }
        }
        if self.command.is_some() && self.wants_sse() {
            return Err("the sse transport needs url, not command".into());
        }
        for (field, v) in [
            ("timeoutSeconds", self.timeout_seconds),
            ("startupTimeoutSeconds", self.startup_timeout_seconds),
        ] {
            if let Some(v) = v {
                if !(v > 0.0 && v <= 300.0) {
                    return Err(format!("{field} must be > 0 and <= 300"));
                }
            }
        }
        if let Some(n) = self.max_result_chars {
            if n == 0 || n > MAX_RESULT_CHARS {
                return Err(format!("maxResultChars must be 1 to {MAX_RESULT_CHARS}"));
            }
        }
        if self
            .env
            .keys()
            .any(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err("env names must be non-empty, without '=' or NUL".into());
        }
        if self
            .env
            .values()
            .chain(self.args.iter())
            .any(|v| v.contains('\0'))
        {
            return Err("env values and args must not contain NUL".into());
        }
        Ok(())
    }
}

/// A server name: 1–64 of `A-Z a-z 0-9 _ - .`.
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err("server name must be 1-64 characters of A-Z a-z 0-9 _ - .".into())
    }
}

/// `config/mcp_endpoint.json`: companiond's own MCP server at `/mcp`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EndpointFile {
    #[serde(default)]
    pub enabled: bool,
    /// The bearer token clients must send (`Authorization: Bearer <token>`).
    #[serde(default)]
    pub token: String,
}

/// A new random token (32 bytes, hex).
pub fn new_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(v: serde_json::Value) -> ServerConfig {
        serde_json::from_value(v).expect("a server entry")
    }

    #[test]
    fn transport_follows_command_url_and_the_sse_hints() {
        use serde_json::json;
        let s = server(json!({"command": "python3"}));
        assert_eq!(s.transport(), Transport::Stdio);
        let s = server(json!({"url": "http://127.0.0.1:8000/mcp"}));
        assert_eq!(s.transport(), Transport::Http);
        let s = server(json!({"url": "http://127.0.0.1:8000/sse", "transport": "sse"}));
        assert_eq!(s.transport(), Transport::Sse);
        assert!(s.validate().is_ok());
        let s = server(json!({"url": "http://127.0.0.1:8000/sse", "type": "SSE"}));
        assert_eq!(s.transport(), Transport::Sse);
        // `transport` wins over the other clients' `type`.
        let s = server(json!({"url": "http://h/sse", "type": "sse", "transport": "http"}));
        assert_eq!(s.transport(), Transport::Http);
        let s = server(json!({"url": "http://h/mcp", "type": "streamable-http"}));
        assert_eq!(s.transport(), Transport::Http);
        let s = server(json!({"url": "http://h/mcp", "transport": "websocket"}));
        assert!(s.validate().is_err_and(|e| e.contains("transport must be")));
        let s = server(json!({"command": "x", "transport": "sse"}));
        assert!(s.validate().is_err_and(|e| e.contains("needs url")));
        // the field survives a round trip through the file
        let s = server(json!({"url": "http://h/sse", "transport": "sse"}));
        let v = serde_json::to_value(&s).expect("serializes");
        assert_eq!(v["transport"], "sse");
    }
}

//! Runtime tools: the per-character registrations the model sees, the callback
//! dispatch, and the eviction of plugins whose callback origin keeps failing.
//!
//! The registry lives in each character's session manager; the HTTP routes of
//! `/api/tools` (validation, roles, listing) are in the tools family.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Value};

use crate::llm::ToolSpec;

/// A registered tool.
#[derive(Clone, Debug, Serialize)]
pub struct RegisteredTool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub callback_url: String,
    pub source: String,
    #[serde(skip)]
    pub timeout: Duration,
}

impl RegisteredTool {
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// `scheme://host:port` of the callback (the eviction key).
    pub fn origin(&self) -> String {
        url::Url::parse(&self.callback_url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| self.callback_url.clone())
    }
}

/// Connection-level failures in a row before a plugin origin is evicted.
pub const EVICT_AFTER: u32 = 3;

/// What a dispatch produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// Text handed to the model as the tool message content.
    pub content: String,
    pub is_error: bool,
}

/// Why a callback failed, for eviction bookkeeping.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// Nothing answered (refused, reset, DNS): counts toward eviction.
    Connection,
    /// Connected but no reply in time: neither counts nor resets.
    Timeout,
    /// The origin answered (HTTP error, unreadable body): resets the count.
    Responded,
}

/// A family that serves registered tools itself instead of through an HTTP
/// callback (the MCP family: `source` `mcp:<server>`). Installed once at start
/// with [`ToolHub::set_backend`] for a source prefix; [`ToolHub::call`] then
/// hands every call of a tool whose `source` starts with that prefix to it.
pub trait ToolBackend: Send + Sync {
    /// Run `tool` with the model's raw arguments. Never fails: errors become
    /// model-visible tool errors (`is_error: true`, text starting `tool error:`).
    fn call(
        &self,
        tool: RegisteredTool,
        call_id: String,
        raw_arguments: String,
    ) -> BoxFuture<'static, ToolResult>;
}

/// Shared dispatcher state.
pub struct ToolHub {
    http: crate::net::LazyClient,
    failures: Mutex<HashMap<String, u32>>,
    backends: RwLock<Vec<(String, Arc<dyn ToolBackend>)>>,
}

impl ToolHub {
    pub fn new(http: crate::net::LazyClient) -> Self {
        ToolHub {
            http,
            failures: Mutex::default(),
            backends: RwLock::default(),
        }
    }

    /// Serve the tools whose `source` starts with `source_prefix` (e.g. `"mcp:"`)
    /// through `backend` (replaces an earlier backend of the same prefix).
    pub fn set_backend(&self, source_prefix: &str, backend: Arc<dyn ToolBackend>) {
        let mut b = self.backends.write().unwrap_or_else(|e| e.into_inner());
        b.retain(|(p, _)| p != source_prefix);
        b.push((source_prefix.to_string(), backend));
    }

    fn backend_for(&self, source: &str) -> Option<Arc<dyn ToolBackend>> {
        self.backends
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(p, _)| source.starts_with(p.as_str()))
            .map(|(_, b)| b.clone())
    }

    /// Current consecutive connection-failure count of an origin.
    pub fn failure_count(&self, origin: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(origin)
            .copied()
            .unwrap_or(0)
    }

    /// Call `tool` and apply an eviction it asks for to `registry` (the
    /// session registry): [`ToolHub::call`] followed by [`Eviction::apply`].
    pub async fn dispatch(
        &self,
        registry: &impl EvictOrigin,
        tool: &RegisteredTool,
        call_id: &str,
        raw_arguments: &str,
    ) -> ToolResult {
        let outcome = self.call(tool, call_id, raw_arguments).await;
        if let Some(eviction) = &outcome.evict {
            eviction.apply(registry);
        }
        outcome.result
    }

    /// Call `tool` with the model's raw arguments. Never fails: errors become
    /// model-visible tool errors. After [`EVICT_AFTER`] consecutive connection
    /// failures of a `plugin:` source the outcome asks the caller to evict the
    /// tool's origin from every role ([`Called::evict`]); the hub forgets the count.
    pub async fn call(&self, tool: &RegisteredTool, call_id: &str, raw_arguments: &str) -> Called {
        if let Some(backend) = self.backend_for(&tool.source) {
            let result = backend
                .call(tool.clone(), call_id.to_string(), raw_arguments.to_string())
                .await;
            return Called {
                result,
                evict: None,
            };
        }
        // Arguments that are not a JSON object are still delivered (reference behaviour):
        // other JSON values as {"value": v}, invalid JSON as {"_raw": text}.
        let arguments: Value = match serde_json::from_str::<Value>(raw_arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ if raw_arguments.trim().is_empty() => json!({}),
            Ok(other) => json!({ "value": other }),
            Err(_) => json!({ "_raw": raw_arguments }),
        };
        let body = json!({
            "name": tool.name,
            "arguments": arguments,
            "call_id": call_id,
            "raw_arguments": raw_arguments,
        });
        let origin = tool.origin();
        let sent = self
            .http
            .post(&tool.callback_url)
            .timeout(tool.timeout)
            .json(&body)
            .send()
            .await;
        let outcome = match sent {
            Err(e) => {
                let kind = if e.is_timeout() {
                    Failure::Timeout
                } else {
                    Failure::Connection
                };
                let what = if e.is_timeout() {
                    "timed out"
                } else {
                    "could not be reached"
                };
                Err((
                    kind,
                    format!("tool error: the callback for {} {what}", tool.name),
                ))
            }
            Ok(resp) => {
                let status = resp.status();
                match tokio::time::timeout(tool.timeout, resp.bytes()).await {
                    Err(_) => Err((
                        Failure::Timeout,
                        format!("tool error: the callback for {} timed out", tool.name),
                    )),
                    Ok(Err(e)) => Err((
                        Failure::Timeout,
                        format!("tool error: reading the callback reply failed: {e}"),
                    )),
                    Ok(Ok(bytes)) if !status.is_success() => {
                        let text: String =
                            String::from_utf8_lossy(&bytes).chars().take(500).collect();
                        Err((
                            Failure::Responded,
                            format!("tool error: HTTP {}: {text}", status.as_u16()),
                        ))
                    }
                    Ok(Ok(bytes)) => Ok(interpret_reply(&bytes)),
                }
            }
        };
        let mut evict = None;
        let result = match outcome {
            Ok(r) => {
                self.failures
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&origin);
                r
            }
            Err((kind, msg)) => {
                if kind == Failure::Connection && tool.source.starts_with("plugin:") {
                    let n = {
                        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
                        let n = f.entry(origin.clone()).or_insert(0);
                        *n += 1;
                        *n
                    };
                    if n >= EVICT_AFTER {
                        self.failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&origin);
                        evict = Some(Eviction {
                            origin: origin.clone(),
                            failures: n,
                        });
                    }
                } else if kind == Failure::Responded {
                    self.failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&origin);
                }
                ToolResult {
                    content: msg,
                    is_error: true,
                }
            }
        };
        Called { result, evict }
    }
}

/// What one tool call produced: the model-visible result, and the eviction the
/// caller must apply to the session registry, if any.
#[derive(Debug)]
pub struct Called {
    pub result: ToolResult,
    pub evict: Option<Eviction>,
}

/// A plugin origin that stopped answering: remove its tools from every role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// `scheme://host:port` of the failing callbacks.
    pub origin: String,
    /// Consecutive connection failures that led to it.
    pub failures: u32,
}

impl Eviction {
    /// Remove the origin's tools from `registry`; how many were removed.
    pub fn apply(&self, registry: &impl EvictOrigin) -> usize {
        let removed = registry.evict_origin(&self.origin);
        tracing::warn!(
            "evicted {removed} tool registrations of {} after {} connection failures",
            self.origin,
            self.failures
        );
        removed
    }
}

/// A registry of tools by role that can drop every tool of a callback origin
/// (the session registry implements it).
pub trait EvictOrigin {
    fn evict_origin(&self, origin: &str) -> usize;
}

fn interpret_reply(bytes: &[u8]) -> ToolResult {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => {
            let is_error = m.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            if is_error {
                let err = m
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("tool reported an error");
                return ToolResult {
                    content: format!("tool error: {err}"),
                    is_error: true,
                };
            }
            let content = match m.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => Value::Object(m).to_string(),
            };
            ToolResult {
                content,
                is_error: false,
            }
        }
        Ok(other) => ToolResult {
            content: other.to_string(),
            is_error: false,
        },
        Err(_) => ToolResult {
            content: String::from_utf8_lossy(bytes).into_owned(),
            is_error: false,
        },
    }
}

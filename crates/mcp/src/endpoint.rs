//! companiond's own MCP server at `/mcp` (Streamable HTTP, rmcp's
//! `StreamableHttpService`), for other agents that want to know what the
//! companion knows.
//!
//! Off until turned on (`POST /api/mcp/endpoint`); then every request needs
//! `Authorization: Bearer <token>` (the token of `config/mcp_endpoint.json`,
//! shown by `GET /api/mcp/endpoint`), and a request with an `Origin` header is
//! served only for a loopback origin (the CSRF rule: no web page of another
//! site can drive it). The `Host` rule is the front door's, as for every route.
//!
//! Tools: `list_characters`, `search_memory` (the memory family's search,
//! reached through core's `MemoryRecall` hook, which that family installs at
//! start: families never import each other), `memory_context` (the persona and
//! the facts relevant to a text, the same hook), `add_fact` (the hook's
//! `add_fact`) and `recent_history` (`state.history`). Resources: each
//! character's persona and facts (the hook's `knowledge`).

use std::sync::{Arc, RwLock, Weak};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{Detail, JsonBody};
use companiond_core::guards::Csrf;
use companiond_core::history::Speaker;
use companiond_core::state::Inner;
use companiond_core::{Api, AppState, Ext};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use crate::config::{new_token, EndpointFile, ENDPOINT_FILE};
use crate::error::McpError;

/// The path of the endpoint.
pub const PATH: &str = "/mcp";
/// Lines of `recent_history` at most.
const HISTORY_MAX: usize = 100;

type Service = StreamableHttpService<Companion, LocalSessionManager>;

/// The endpoint's state, provided at start.
pub struct Endpoint {
    settings: RwLock<EndpointFile>,
    service: Service,
    changing: tokio::sync::Mutex<()>,
}

/// `GET /api/mcp/endpoint` and the answer of `POST /api/mcp/endpoint`.
#[derive(Serialize, ToSchema)]
pub struct EndpointView {
    pub ok: bool,
    pub enabled: bool,
    /// The path another agent connects to (`http://127.0.0.1:<port>/mcp`).
    pub path: String,
    /// The bearer token (`Authorization: Bearer <token>`); empty until first enabled.
    pub token: String,
}

/// `POST /api/mcp/endpoint`.
#[derive(Deserialize, ToSchema)]
pub struct EndpointBody {
    /// Turn the endpoint on or off (unchanged when absent).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Make a new token (the old one stops working at once).
    #[serde(default)]
    pub rotate_token: bool,
}

impl Endpoint {
    fn view(&self) -> EndpointView {
        let s = self.settings.read().unwrap_or_else(|e| e.into_inner());
        EndpointView {
            ok: true,
            enabled: s.enabled,
            path: PATH.into(),
            token: s.token.clone(),
        }
    }
}

pub fn api(api: Api) -> Api {
    api.get(
        "/api/mcp/endpoint",
        "companiond's own MCP endpoint: on or off, and its bearer token",
        get_endpoint,
    )
    .id("endpoint_get")
    .ok::<EndpointView>()
    .guarded(
        Method::POST,
        "/api/mcp/endpoint",
        "turn companiond's own MCP endpoint on or off, or make a new token",
        Csrf::Success,
        set_endpoint,
    )
    .id("endpoint_set")
    .json_body::<EndpointBody>()
    .ok::<EndpointView>()
    .fails::<McpError>()
    .route(
        Method::POST,
        PATH,
        "MCP over Streamable HTTP (JSON-RPC; GET and DELETE as the MCP transport says); bearer token",
        axum::routing::any(serve_mcp),
    )
    .id("endpoint")
}

/// Provide the endpoint state (settings read in the background).
pub fn start(state: &AppState) {
    let weak = Arc::downgrade(&state.0);
    let mut config = StreamableHttpServerConfig::default();
    // The front door applies the Host rule (with --allowed-host names); the
    // Origin rule is checked in `serve_mcp`.
    config.allowed_hosts = Vec::new();
    let config = config.disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || {
            Ok(Companion {
                state: weak.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let ep = Arc::new(Endpoint {
        settings: RwLock::default(),
        service,
        changing: tokio::sync::Mutex::default(),
    });
    state.provide(ep.clone());
    let st = state.clone();
    tokio::spawn(async move {
        match st.store.read::<EndpointFile>(ENDPOINT_FILE).await {
            Ok(Some(f)) => *ep.settings.write().unwrap_or_else(|e| e.into_inner()) = f,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("cannot read {ENDPOINT_FILE}: {e}; the MCP endpoint stays off")
            }
        }
    });
}

async fn get_endpoint(Ext(ep): Ext<Endpoint>) -> Json<EndpointView> {
    Json(ep.view())
}

async fn set_endpoint(
    State(st): State<AppState>,
    Ext(ep): Ext<Endpoint>,
    JsonBody(body, ..): JsonBody<EndpointBody>,
) -> Result<Json<EndpointView>, McpError> {
    let _g = ep.changing.lock().await;
    let mut next = ep
        .settings
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(on) = body.enabled {
        next.enabled = on;
    }
    if body.rotate_token || (next.enabled && next.token.is_empty()) {
        next.token = new_token();
    }
    st.store
        .write(ENDPOINT_FILE, next.clone())
        .await
        .map_err(|e| McpError::Store(e.to_string()))?;
    *ep.settings.write().unwrap_or_else(|e| e.into_inner()) = next;
    Ok(Json(ep.view()))
}

/// The gate of `/mcp` (off → 404, foreign Origin → 403, wrong token → 401),
/// then the MCP transport.
async fn serve_mcp(State(st): State<AppState>, Ext(ep): Ext<Endpoint>, req: Request) -> Response {
    let (enabled, token) = {
        let s = ep.settings.read().unwrap_or_else(|e| e.into_inner());
        (s.enabled, s.token.clone())
    };
    if !enabled || token.is_empty() {
        return Detail::new("the MCP endpoint is off (POST /api/mcp/endpoint turns it on)")
            .status(StatusCode::NOT_FOUND);
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| st.host_policy().origin_allowed(o));
        if !ok {
            return Detail::new("requests from a web page of another site are refused")
                .status(StatusCode::FORBIDDEN);
        }
    }
    if !bearer_matches(req.headers(), &token) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(json!({"detail": "a valid bearer token is required"})),
        )
            .into_response();
    }
    ep.service.handle(req).await.map(axum::body::Body::new)
}

fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
    else {
        return false;
    };
    given.trim().as_bytes().ct_eq(token.as_bytes()).into()
}

/// The MCP server handler (one per session).
#[derive(Clone)]
pub struct Companion {
    state: Weak<Inner>,
}

/// The tools `tools/list` offers with their argument schemas: JSON Schema
/// documents, so data kept as the JSON file they are (a test checks it parses
/// and agrees with [`HISTORY_MAX`]).
const TOOLS: &str = include_str!("tools.json");

fn text_result(text: String, is_error: bool) -> CallToolResponse {
    let content = vec![ContentBlock::text(text)];
    CallToolResponse::Complete(if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    })
}

impl Companion {
    async fn run(
        &self,
        name: &str,
        args: serde_json::Map<String, Value>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(st) = self.state.upgrade().map(AppState) else {
            return Ok(text_result("companiond is stopping".into(), true));
        };
        let character = match args.get("character") {
            None | Some(Value::Null) => st.characters.current(),
            Some(Value::String(c)) => c.clone(),
            Some(_) => {
                return Err(ErrorData::invalid_params(
                    "character must be a string",
                    None,
                ))
            }
        };
        if name != "list_characters" && !st.characters.exists(&character) {
            return Ok(text_result(format!("no character named {character}"), true));
        }
        match name {
            "list_characters" => Ok(text_result(
                json!({"characters": st.characters.names(), "current": st.characters.current()})
                    .to_string(),
                false,
            )),
            "search_memory" => {
                let Some(recall) = st.hooks.memory_recall() else {
                    return Ok(text_result("the memory is not available".into(), true));
                };
                let Some(tool) = recall.tools(&character).into_iter().next() else {
                    return Ok(text_result("the memory offers no search".into(), true));
                };
                let mut rest = args.clone();
                rest.remove("character");
                let raw = Value::Object(rest).to_string();
                match recall.call(character, tool.name, raw).await {
                    Some(r) => Ok(text_result(r.content, r.is_error)),
                    None => Ok(text_result("the memory search did not answer".into(), true)),
                }
            }
            "memory_context" => {
                let text = args
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let Some(recall) = st.hooks.memory_recall() else {
                    return Ok(text_result("the memory is not available".into(), true));
                };
                let found = recall.context(character, text).await;
                Ok(text_result(
                    found.unwrap_or_else(|| "(nothing recalled)".into()),
                    false,
                ))
            }
            "add_fact" => {
                let Some(text) = args.get("text").and_then(Value::as_str) else {
                    return Err(ErrorData::invalid_params(
                        "text (a string) is required",
                        None,
                    ));
                };
                let importance = args.get("importance").and_then(Value::as_i64).unwrap_or(5);
                let Some(recall) = st.hooks.memory_recall() else {
                    return Ok(text_result("the memory is not available".into(), true));
                };
                match recall
                    .add_fact(character, text.to_string(), importance)
                    .await
                {
                    Ok(fact) => Ok(text_result(fact.to_string(), false)),
                    Err(e) => Ok(text_result(e, true)),
                }
            }
            "recent_history" => {
                let limit = args
                    .get("limit")
                    .and_then(Value::as_u64)
                    .unwrap_or(20)
                    .clamp(1, HISTORY_MAX as u64) as usize;
                let lines: Vec<Value> = st
                    .history
                    .tail(&character, limit)
                    .await
                    .into_iter()
                    .map(|e| {
                        let who = match e.speaker {
                            Speaker::Human => "user",
                            Speaker::Ai => "character",
                            Speaker::System => "system",
                        };
                        json!({"speaker": who, "text": e.text()})
                    })
                    .collect();
                Ok(text_result(
                    json!({"character": character, "lines": lines}).to_string(),
                    false,
                ))
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

/// `companiond://character/<name>/<persona|facts>` (the name percent-encoded).
fn resource_uri(character: &str, what: &str) -> String {
    let name = companiond_core::paths::percent_encode_segment(character);
    format!("companiond://character/{name}/{what}")
}

/// The character and the part a resource URI names.
fn parse_resource_uri(uri: &str) -> Option<(String, &str)> {
    let rest = uri.strip_prefix("companiond://character/")?;
    let (name, what) = rest.rsplit_once('/')?;
    let decoded = companiond_core::paths::percent_decode_once(name);
    matches!(what, "persona" | "facts").then_some((decoded, what))
}

impl Companion {
    fn resources(&self) -> Value {
        let names = self
            .state
            .upgrade()
            .map(|i| AppState(i).characters.names())
            .unwrap_or_default();
        let mut out = Vec::new();
        for n in names {
            out.push(json!({
                "uri": resource_uri(&n, "persona"), "name": format!("{n}-persona"),
                "title": format!("{n}: persona"), "mimeType": "application/json",
                "description": format!("The stable traits {n} keeps about its user and itself.")
            }));
            out.push(json!({
                "uri": resource_uri(&n, "facts"), "name": format!("{n}-facts"),
                "title": format!("{n}: facts"), "mimeType": "application/json",
                "description": format!("The facts {n} remembers (active ones).")
            }));
        }
        json!({"resources": out})
    }

    async fn read(&self, uri: &str) -> Result<ReadResourceResponse, ErrorData> {
        let Some((character, what)) = parse_resource_uri(uri) else {
            return Err(ErrorData::invalid_params(
                format!("unknown resource {uri}"),
                None,
            ));
        };
        let Some(st) = self.state.upgrade().map(AppState) else {
            return Err(ErrorData::internal_error("companiond is stopping", None));
        };
        if !st.characters.exists(&character) {
            return Err(ErrorData::invalid_params(
                format!("no character named {character}"),
                None,
            ));
        }
        let Some(recall) = st.hooks.memory_recall() else {
            return Err(ErrorData::internal_error(
                "the memory is not available",
                None,
            ));
        };
        let known = recall
            .knowledge(character)
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        let text = known.get(what).cloned().unwrap_or(Value::Null).to_string();
        let result: ReadResourceResult = serde_json::from_value(json!({
            "contents": [{"uri": uri, "mimeType": "application/json", "text": text}]
        }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ReadResourceResponse::Complete(result))
    }
}

impl rmcp::ServerHandler for Companion {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "companiond", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "The memory of a desktop companion character: search what it knows about its user, read its recent chat."
        }))
        .unwrap_or_default()
    }

    fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl std::future::Future<Output = Result<ListToolsResult, ErrorData>> + Send + '_ {
        std::future::ready(
            serde_json::from_str(TOOLS).map_err(|e| ErrorData::internal_error(e.to_string(), None)),
        )
    }

    fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl std::future::Future<Output = Result<ListResourcesResult, ErrorData>> + Send + '_ {
        std::future::ready(
            serde_json::from_value(self.resources())
                .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
        )
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read(&request.uri).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        self.run(&request.name, args).await
    }
}

#[cfg(test)]
mod uri_tests {
    use super::*;

    #[test]
    fn the_tool_list_parses_and_agrees_with_the_limits() {
        let list: ListToolsResult = serde_json::from_str(TOOLS).unwrap();
        let names: Vec<&str> = list.tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "list_characters",
                "search_memory",
                "memory_context",
                "add_fact",
                "recent_history"
            ]
        );
        let history = &list.tools[4].input_schema;
        assert_eq!(
            history["properties"]["limit"]["maximum"],
            serde_json::json!(HISTORY_MAX)
        );
    }

    #[test]
    fn resource_uris_round_trip() {
        for name in ["Mika", "Mika Chan", "a+b", "100% 猫/娘", "x&y=z", " "] {
            for what in ["persona", "facts"] {
                let uri = resource_uri(name, what);
                assert_eq!(
                    parse_resource_uri(&uri),
                    Some((name.to_string(), what)),
                    "{uri}"
                );
            }
        }
        assert_eq!(
            resource_uri("Mika Chan", "facts"),
            "companiond://character/Mika%20Chan/facts"
        );
        assert_eq!(
            parse_resource_uri("companiond://character/Mika%20Chan/persona"),
            Some(("Mika Chan".to_string(), "persona"))
        );
        assert_eq!(
            parse_resource_uri("companiond://character/Mika/other"),
            None
        );
    }
}

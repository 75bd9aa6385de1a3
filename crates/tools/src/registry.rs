//! The runtime tool registry as seen by the `/api/tools` routes: role
//! targeting and the register / unregister / clear / list operations over the
//! per-character session managers of core.
//!
//! Nothing here knows about HTTP. Registrations live only in the session
//! managers (runtime state): nothing is written to the data directory.

use std::sync::Arc;

use companiond_core::sessions::SessionManager;
use companiond_core::tools::RegisteredTool;
use companiond_core::AppState;
use serde::Serialize;

use crate::error::ToolsError;
use crate::validation::Registration;

/// One failed target role: `{role, error}`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct FailedRole {
    pub role: String,
    pub error: String,
}

/// The per-role result of a mutation.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Roles where the mutation took effect.
    pub affected_roles: Vec<String>,
    pub failed_roles: Vec<FailedRole>,
    /// How many registrations were added, replaced or removed.
    pub changed: usize,
}

// ------------------------------------------------------------------ roles

/// Resolved target managers and the roles that could not be reached.
pub struct Targets {
    pub found: Vec<(String, Arc<SessionManager>)>,
    pub failed: Vec<FailedRole>,
}

/// The session managers a request targets: one named role (404 when no such
/// character), or every character that exists now when `role` is `None`.
/// A character whose manager cannot be obtained any more (deleted meanwhile)
/// is reported as a failed role.
pub fn resolve_targets(st: &AppState, role: Option<&str>) -> Result<Targets, ToolsError> {
    let names = match role {
        Some(r) => {
            if !role_exists(st, r) {
                return Err(ToolsError::UnknownRole(r.to_string()));
            }
            vec![r.to_string()]
        }
        None => st.characters.names(),
    };
    let mut found = Vec::with_capacity(names.len());
    let mut failed = Vec::new();
    for name in names {
        match manager(st, &name) {
            Some(m) => found.push((name, m)),
            None => failed.push(FailedRole {
                error: format!("RoleGone: character {name:?} no longer exists"),
                role: name,
            }),
        }
    }
    Ok(Targets { found, failed })
}

/// Does `role` name a character (or a live session manager)?
pub fn role_exists(st: &AppState, role: &str) -> bool {
    st.characters.exists(role) || st.sessions.get(role).is_some()
}

/// The manager of an existing character; created when the character exists but
/// its manager was not made yet (every character has one).
fn manager(st: &AppState, name: &str) -> Option<Arc<SessionManager>> {
    st.sessions
        .get(name)
        .or_else(|| st.characters.exists(name).then(|| st.sessions.ensure(name)))
}

// ------------------------------------------------------------------ operations

/// Apply `change` to the manager of every target role; it returns how many
/// registrations it changed there. `affected_roles` lists the roles where it
/// changed at least one.
fn apply(
    st: &AppState,
    role: Option<&str>,
    mut change: impl FnMut(&SessionManager) -> usize,
) -> Result<Outcome, ToolsError> {
    let Targets { found, failed } = resolve_targets(st, role)?;
    let mut out = Outcome {
        failed_roles: failed,
        ..Outcome::default()
    };
    for (role, mgr) in found {
        let n = change(&mgr);
        if n > 0 {
            out.changed += n;
            out.affected_roles.push(role);
        }
    }
    Ok(out)
}

/// Register (or replace by name) in every target role. The next model request
/// of each target session offers the new definition.
pub fn register(st: &AppState, reg: &Registration) -> Result<Outcome, ToolsError> {
    apply(st, reg.role.as_deref(), |mgr| {
        mgr.register_tool(reg.tool.clone());
        1
    })
}

/// Remove the tool `name` from every target role; `affected_roles` lists the
/// roles where it existed.
pub fn unregister(st: &AppState, name: &str, role: Option<&str>) -> Result<Outcome, ToolsError> {
    apply(st, role, |mgr| usize::from(mgr.unregister_tool(name)))
}

/// Remove every tool registered with `source` from the target roles;
/// `affected_roles` lists the roles that lost at least one tool.
pub fn clear(st: &AppState, source: &str, role: Option<&str>) -> Result<Outcome, ToolsError> {
    apply(st, role, |mgr| mgr.clear_tools(Some(source)))
}

/// A listed tool: `{name, description, source, callback_url, is_remote}`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, utoipa::ToSchema)]
#[schema(example = json!({"name": "get_weather", "description": "Weather of a city",
    "source": "weather-plugin", "callback_url": "http://127.0.0.1:9100/call", "is_remote": true}))]
pub struct ToolEntry {
    pub name: String,
    pub description: String,
    pub source: String,
    pub callback_url: String,
    pub is_remote: bool,
}

impl From<&RegisteredTool> for ToolEntry {
    fn from(t: &RegisteredTool) -> Self {
        ToolEntry {
            name: t.name.clone(),
            description: t.description.clone(),
            source: t.source.clone(),
            callback_url: t.callback_url.clone(),
            // Every tool registered over HTTP is served by its callback.
            is_remote: true,
        }
    }
}

/// The tools of one role, or of every character (in character order).
pub fn list(
    st: &AppState,
    role: Option<&str>,
) -> Result<Vec<(String, Vec<ToolEntry>)>, ToolsError> {
    Ok(resolve_targets(st, role)?
        .found
        .into_iter()
        .map(|(name, mgr)| {
            let tools = mgr.with_tools(|t| t.map(ToolEntry::from).collect());
            (name, tools)
        })
        .collect())
}

/// A listed tool, borrowed (serialised like [`ToolEntry`]).
#[derive(Serialize)]
struct ToolEntryRef<'a> {
    name: &'a str,
    description: &'a str,
    source: &'a str,
    callback_url: &'a str,
    is_remote: bool,
}

/// The serialised entry of the tool at one position of the previous role's list:
/// a tool registered for every role is serialised once, not once per role.
struct Memo {
    name: String,
    description: String,
    source: String,
    callback_url: String,
    json: Vec<u8>,
}

impl Memo {
    fn matches(&self, t: &RegisteredTool) -> bool {
        self.name == t.name
            && self.source == t.source
            && self.callback_url == t.callback_url
            && self.description == t.description
    }
}

/// `GET /api/tools`: the tools of each targeted character, in character order.
/// [`list_body`] writes this document straight to bytes.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"ok": true, "tools_by_role": {"Mika": [{"name": "get_weather",
    "description": "Weather of a city", "source": "weather-plugin",
    "callback_url": "http://127.0.0.1:9100/call", "is_remote": true}]}}))]
pub struct ToolList {
    pub ok: bool,
    /// Character name to its tools.
    pub tools_by_role: std::collections::BTreeMap<String, Vec<ToolEntry>>,
}

/// `{"ok":true,"tools_by_role":{...}}` written straight to bytes (the same
/// document as [`list`] gives, without building it as a JSON value).
pub fn list_body(st: &AppState, role: Option<&str>) -> Result<Vec<u8>, ToolsError> {
    let targets = resolve_targets(st, role)?.found;
    let mut out: Vec<u8> = Vec::with_capacity(64 + targets.len() * 64);
    out.extend_from_slice(br#"{"ok":true,"tools_by_role":{"#);
    let mut memo: Vec<Memo> = Vec::new();
    for (i, (name, mgr)) in targets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // Serialising a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, name);
        out.extend_from_slice(b":[");
        mgr.with_tools(|tools| {
            for (k, t) in tools.enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                if memo.get(k).is_some_and(|m| m.matches(t)) {
                    if let Some(m) = memo.get(k) {
                        out.extend_from_slice(&m.json);
                    }
                    continue;
                }
                let mut json = Vec::new();
                let _ = serde_json::to_writer(
                    &mut json,
                    &ToolEntryRef {
                        name: &t.name,
                        description: &t.description,
                        source: &t.source,
                        callback_url: &t.callback_url,
                        // Every tool registered over HTTP is served by its callback.
                        is_remote: true,
                    },
                );
                out.extend_from_slice(&json);
                let m = Memo {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    source: t.source.clone(),
                    callback_url: t.callback_url.clone(),
                    json,
                };
                match memo.get_mut(k) {
                    Some(slot) => *slot = m,
                    None => memo.push(m),
                }
            }
        });
        out.push(b']');
    }
    out.extend_from_slice(b"}}");
    Ok(out)
}

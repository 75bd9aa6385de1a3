//! The character a request body names.

use companiond_core::AppState;
use serde_json::{Map, Value};

use crate::error::{SysResult, SystemError};

/// `persona_name`, else its older spelling `lanlan_name`, trimmed; `None` when
/// both are missing or blank.
pub fn named_in(body: &Map<String, Value>) -> Option<String> {
    ["persona_name", "lanlan_name"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The named character, else the current one; 400 `missing_persona_name` when
/// neither is set.
pub fn named_or_current(st: &AppState, body: &Map<String, Value>) -> SysResult<String> {
    named_in(body)
        .or_else(|| Some(st.characters.current()).filter(|c| !c.trim().is_empty()))
        .ok_or_else(|| SystemError::MissingPersonaName("persona_name missing".into()))
}

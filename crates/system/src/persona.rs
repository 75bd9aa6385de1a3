//! The character a request body names.

use companiond_core::envelope::loose;
use companiond_core::AppState;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::{SysResult, SystemError};

/// The character a body names (flattened into the body types): `persona_name`,
/// else its older spelling `lanlan_name`, the first that is text. A value of
/// another type counts as absent.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PersonaName {
    /// The character (`lanlan_name` is the older spelling).
    #[serde(default, deserialize_with = "loose::or_none")]
    persona_name: Option<String>,
    /// The older spelling of `persona_name` (read when that is not text).
    #[serde(default, deserialize_with = "loose::or_none")]
    lanlan_name: Option<String>,
}

/// `persona_name`, else `lanlan_name`, trimmed; `None` when both are absent or
/// the first given is blank (every body naming a character reads it so).
pub fn first_named(persona_name: Option<&str>, lanlan_name: Option<&str>) -> Option<String> {
    persona_name
        .or(lanlan_name)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

impl PersonaName {
    /// `persona_name: name`.
    pub fn of(name: &str) -> Self {
        PersonaName {
            persona_name: Some(name.to_string()),
            lanlan_name: None,
        }
    }

    /// The name, trimmed; `None` when both are missing or the first text is blank.
    pub fn named(&self) -> Option<String> {
        first_named(self.persona_name.as_deref(), self.lanlan_name.as_deref())
    }

    /// The named character, else the current one; 400 `missing_persona_name`
    /// when neither is set.
    pub fn or_current(&self, st: &AppState) -> SysResult<String> {
        self.named()
            .or_else(|| Some(st.characters.current()).filter(|c| !c.trim().is_empty()))
            .ok_or_else(|| SystemError::MissingPersonaName("persona_name missing".into()))
    }
}

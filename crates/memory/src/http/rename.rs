//! The character rename transaction (`update_character_name` and the
//! canonical `characters/profile/{old_name}/rename`).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path as UrlPath, State};
use axum::Json;
use companiond_core::envelope::{loose, BodyOf};
use companiond_core::{AppState, Ext};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::{rename, MemoryRuntime};

use super::Answer;

/// A name of a rename body: anything but a non-blank text (absent, null,
/// another type) is `empty`.
fn name_field(v: Option<String>, key: &str) -> Result<String, MemoryError> {
    match v {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(MemoryError::Invalid {
            code: "empty",
            error: format!("{key} (non-empty string) is required"),
        }),
    }
}

/// The body of `POST /api/memory/update_character_name`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"old_name": "Companion", "new_name": "Hana"}))]
pub(crate) struct RenameAliasBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1)]
    old_name: Option<String>,
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1)]
    new_name: Option<String>,
}

/// The body of `POST /api/characters/profile/{old_name}/rename`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"new_name": "Hana"}))]
pub(crate) struct RenameBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1)]
    new_name: Option<String>,
}

/// `POST /api/memory/update_character_name` (`{old_name, new_name}`).
pub(crate) async fn rename_alias(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    BodyOf(body): BodyOf<RenameAliasBody>,
) -> Answer<companiond_core::rename::Renamed> {
    let old = name_field(body.old_name, "old_name")?;
    let new = name_field(body.new_name, "new_name")?;
    rename::rename(&st, &rt, &old, &new).await.map(Json)
}

/// `POST /api/characters/profile/{old_name}/rename` (`{new_name}`).
pub(crate) async fn rename_canonical(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    old: Result<UrlPath<String>, PathRejection>,
    BodyOf(body): BodyOf<RenameBody>,
) -> Answer<companiond_core::rename::Renamed> {
    let UrlPath(old) =
        old.map_err(|e| MemoryError::BadRequest(format!("invalid old_name: {e}")))?;
    let new = name_field(body.new_name, "new_name")?;
    rename::rename(&st, &rt, &old, &new).await.map(Json)
}

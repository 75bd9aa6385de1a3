//! Thin HTTP handlers over the domain modules: parse and check the input,
//! call the domain, answer its typed result. The routes are listed in
//! [`crate::api`].
//!
//! One file per route group; this module holds what they share (the answer
//! type, body limit, parameter checks, the character query) and the
//! family's rejection of queries and bodies that do not parse.

use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::MemoryError;

mod edits;
mod extraction;
mod legacy;
mod listings;
mod recent;
mod rename;
mod search;
mod snapshots;
mod toggles;
mod window;

pub(crate) use edits::{correct, forget, CorrectBody, ForgetBody};
pub(crate) use extraction::{
    extract_now, extraction_status, ExtractBody, Extracted, ExtractionStatus,
};
pub(crate) use legacy::{legacy_purge, legacy_scan, PurgeBody};
pub(crate) use listings::{
    archive, facts_list, persona_get, reflections_list, ArchiveQuery, ListQuery, PersonaAnswer,
};
pub(crate) use recent::{recent_file, recent_files, recent_save, RecentFileQuery};
pub(crate) use rename::{rename_alias, rename_canonical, RenameAliasBody, RenameBody};
pub(crate) use search::{search, SearchAnswer, SearchQuery};
pub(crate) use snapshots::{snapshot_restore, snapshot_show, snapshots_list, trash};
pub(crate) use toggles::{
    toggle_get, toggle_post, Powerful, Review, ToggleBody, ToggleSaved, ToggleState,
};

/// A handler's answer: the typed value as JSON, or the family's error envelope.
type Answer<T> = Result<Json<T>, MemoryError>;

/// Largest body of a memory route read through
/// [`BodyOf`](companiond_core::envelope::BodyOf) (as axum's default).
const MAX_BODY: usize = 2 * 1024 * 1024;

fn bad(msg: impl Into<String>) -> MemoryError {
    MemoryError::BadRequest(msg.into())
}

// Every memory query that does not parse is a 400 in the family's envelope.
companiond_core::query_rejected!(
    MemoryError,
    MemoryError::BadRequest =>

    RecentFileQuery,
    ListQuery,
    CharacterQuery,
    SearchQuery,
    ArchiveQuery
);

/// The character of a query (required, non-empty).
fn character_param(character: &str) -> Result<String, MemoryError> {
    match character.trim() {
        "" => Err(bad("query parameter character is required")),
        c => Ok(c.to_string()),
    }
}

/// The query of `GET /api/memory/persona`.
#[derive(Deserialize, IntoParams)]
pub(crate) struct CharacterQuery {
    /// The character (not blank).
    #[param(example = "Companion")]
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    character: String,
}

/// A text field of a long-term body, trimmed: absent, null, another type or
/// blank is `required`; longer than `max` characters refused.
fn body_str(v: Option<String>, key: &str, max: usize) -> Result<String, MemoryError> {
    match v.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() && s.chars().count() <= max => Ok(s.to_string()),
        Some(s) if !s.is_empty() => Err(bad(format!("{key} is longer than {max} characters"))),
        _ => Err(bad(format!("{key} (non-empty string) is required"))),
    }
}

// Every memory body that does not parse is a 400 in the family's envelope.
companiond_core::body_rejected!(MemoryError, limit = MAX_BODY, MemoryError::body =>
    RenameAliasBody, RenameBody, ToggleBody, PurgeBody, ForgetBody, CorrectBody, ExtractBody);

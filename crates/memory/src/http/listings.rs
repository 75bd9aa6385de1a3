//! Long-term listings: facts, reflections, persona entries and the archive
//! of lines folded out of `recent.json`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{lenient, no_store, QueryOf};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::MemoryError;
use crate::longterm::{self, Kind, ListRequest};
use crate::stores;

use super::window::{time_bound, Window};
use super::{bad, character_param, CharacterQuery};

/// The query of the facts and reflections listings.
#[derive(Deserialize, IntoParams)]
pub(crate) struct ListQuery {
    /// The character (not blank).
    #[param(example = "Companion")]
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    character: String,
    /// Free text (at most 1,000 characters); empty = the whole window, newest first.
    q: Option<String>,
    /// Window start: a date (`YYYY-MM-DD`), an ISO date-time or seconds since the epoch.
    #[param(schema_with = time_bound)]
    #[serde(default, deserialize_with = "lenient::text")]
    since: Option<String>,
    /// Window end (same forms; a date includes its whole day).
    #[param(schema_with = time_bound)]
    #[serde(default, deserialize_with = "lenient::text")]
    until: Option<String>,
    #[param(minimum = 0, maximum = 100000, default = 0, value_type = Option<u32>)]
    #[serde(default, deserialize_with = "lenient::int")]
    offset: Option<i64>,
    #[param(minimum = 1, maximum = 200, default = 50, value_type = Option<u32>)]
    #[serde(default, deserialize_with = "lenient::int")]
    limit: Option<i64>,
    /// List the archive (superseded and forgotten-by-correction entries).
    #[param(default = false, value_type = Option<bool>)]
    #[serde(default, deserialize_with = "lenient::text")]
    archived: Option<String>,
}

/// Facts or reflections of a character, paged.
async fn list_kind(st: &AppState, kind: Kind, q: ListQuery) -> Response {
    let r: Result<longterm::Listing, MemoryError> = async {
        let name = character_param(&q.character)?;
        let archived = match q.archived.as_deref() {
            None | Some("false" | "0") => false,
            Some("true" | "1") => true,
            Some(_) => return Err(bad("archived must be true or false")),
        };
        let query = Window {
            q: q.q.as_deref(),
            since: q.since.as_deref(),
            until: q.until.as_deref(),
            offset: q.offset,
            limit: q.limit,
        }
        .query(200)?;
        longterm::list(
            st,
            &name,
            ListRequest {
                kind,
                query,
                archived,
            },
        )
        .await
    }
    .await;
    no_store(r.map(Json))
}

/// `GET /api/memory/facts`.
pub(crate) async fn facts_list(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<ListQuery>,
) -> Response {
    list_kind(&st, Kind::Fact, q).await
}

/// `GET /api/memory/reflections`.
pub(crate) async fn reflections_list(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<ListQuery>,
) -> Response {
    list_kind(&st, Kind::Reflection, q).await
}

/// The answer of `GET /api/memory/persona`.
#[derive(Serialize, ToSchema)]
pub(crate) struct PersonaAnswer {
    success: bool,
    character: String,
    /// The persona document as stored (sections by entity, each with its
    /// `facts`; the original application's shape).
    #[schema(value_type = Object)]
    persona: stores::Obj,
}

/// `GET /api/memory/persona?character=`.
pub(crate) async fn persona_get(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<CharacterQuery>,
) -> Response {
    let r: Result<PersonaAnswer, MemoryError> = async {
        let name = character_param(&q.character)?;
        let s = longterm::load(&st, &name).await?;
        Ok(PersonaAnswer {
            success: true,
            character: name,
            persona: s.persona,
        })
    }
    .await;
    no_store(r.map(Json))
}

/// The query of `GET /api/memory/archive`.
#[derive(Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
pub(crate) struct ArchiveQuery {
    /// The character (not blank).
    #[param(example = "Companion")]
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    character: String,
    /// Only entries older than this one (`next_before` of the previous page).
    #[param(minimum = 1)]
    before: Option<i64>,
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<u32>,
}

/// Most entries of one archive page.
const ARCHIVE_MAX_LIMIT: u32 = 200;

/// `GET /api/memory/archive`: the entries folded out of `recent.json`,
/// newest first, read-only.
pub(crate) async fn archive(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<ArchiveQuery>,
) -> Response {
    let r: Result<crate::fold::ArchivePage, MemoryError> = async {
        let name = character_param(&q.character)?;
        if q.before.is_some_and(|b| b < 1) {
            return Err(bad("before must be a positive integer"));
        }
        let limit = q.limit.unwrap_or(50);
        if !(1..=ARCHIVE_MAX_LIMIT).contains(&limit) {
            return Err(bad(format!(
                "limit must be an integer from 1 to {ARCHIVE_MAX_LIMIT}"
            )));
        }
        longterm::character(&st, &name)?;
        let before = q.before;
        let (total, items, next_before) = longterm::with_index(&st, &name, move |conn, _| {
            crate::fold::page(conn, before, limit as usize)
        })
        .await
        .map_err(MemoryError::Storage)?;
        Ok(crate::fold::ArchivePage {
            success: true,
            character: name,
            total,
            items,
            next_before,
        })
    }
    .await;
    no_store(r.map(Json))
}

//! Long-term search over facts, reflections, persona entries and lines.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{lenient, no_store, QueryOf};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::MemoryError;
use crate::longterm::{self, HitAnswer};

use super::window::{time_bound, Window};
use super::{bad, character_param};

/// The query of `GET /api/memory/search`.
#[derive(Deserialize, IntoParams)]
pub(crate) struct SearchQuery {
    /// The character (not blank).
    #[param(example = "Companion")]
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    character: String,
    /// Free text (at most 1,000 characters).
    #[param(example = "tea")]
    q: Option<String>,
    /// Window start: a date (`YYYY-MM-DD`), an ISO date-time or seconds since the epoch.
    #[param(schema_with = time_bound)]
    #[serde(default, deserialize_with = "lenient::text")]
    since: Option<String>,
    /// Window end (same forms).
    #[param(schema_with = time_bound)]
    #[serde(default, deserialize_with = "lenient::text")]
    until: Option<String>,
    #[param(minimum = 0, maximum = 100000, default = 0, value_type = Option<u32>)]
    #[serde(default, deserialize_with = "lenient::int")]
    offset: Option<i64>,
    #[param(minimum = 1, maximum = 100, default = 50, value_type = Option<u32>)]
    #[serde(default, deserialize_with = "lenient::int")]
    limit: Option<i64>,
    /// Comma-separated kinds: `fact`, `reflection`, `persona`, `line` (plurals too).
    #[param(
        default = "fact,reflection",
        pattern = "^[ ,]*(facts?|reflections?|persona|lines?) *(,[ ,]*(facts?|reflections?|persona|lines?) *)*[ ,]*$"
    )]
    kinds: Option<String>,
}

/// The answer of `GET /api/memory/search`.
#[derive(Serialize, ToSchema)]
pub(crate) struct SearchAnswer {
    success: bool,
    character: String,
    q: String,
    /// The kinds searched, normalised (`fact`, `reflection`, `persona`, `line`).
    kinds: Vec<&'static str>,
    offset: usize,
    limit: usize,
    /// Hits ranked best first.
    items: Vec<HitAnswer>,
}

/// `GET /api/memory/search`.
pub(crate) async fn search(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<SearchQuery>,
) -> Response {
    let r: Result<SearchAnswer, MemoryError> = async {
        let name = character_param(&q.character)?;
        let query = Window {
            q: q.q.as_deref(),
            since: q.since.as_deref(),
            until: q.until.as_deref(),
            offset: q.offset,
            limit: q.limit,
        }
        .query(100)?;
        let mut kinds: Vec<&'static str> = Vec::new();
        for k in q
            .kinds
            .as_deref()
            .unwrap_or("fact,reflection")
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            let k: &'static str = match k {
                "fact" | "facts" => "fact",
                "reflection" | "reflections" => "reflection",
                "persona" => "persona",
                "line" | "lines" => "line",
                other => {
                    return Err(bad(format!(
                        "unknown kind {other:?} (fact, reflection, persona, line)"
                    )))
                }
            };
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        if kinds.is_empty() {
            return Err(bad("kinds is empty"));
        }
        longterm::character(&st, &name)?;
        let (offset, limit, text) = (query.offset, query.limit, query.text.clone());
        let hits = longterm::search(&st, &name, query, kinds.clone())
            .await
            .map_err(MemoryError::Storage)?;
        Ok(SearchAnswer {
            success: true,
            character: name,
            q: text,
            kinds,
            offset,
            limit,
            items: hits.iter().map(longterm::hit_answer).collect(),
        })
    }
    .await;
    no_store(r.map(Json))
}

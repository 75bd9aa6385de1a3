//! The recent chat history: the list of `recent_*.json` files, one file
//! read, and the compare-and-swap save.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, QueryOf};
use companiond_core::{AppState, Ext};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::MemoryError;
use crate::recent::{RecentFile, Saved};
use crate::{listing, recent, MemoryRuntime};

use super::Answer;

/// `GET /api/memory/recent_files` (the answer is kept serialized).
pub(crate) async fn recent_files(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
) -> Response {
    no_store(
        listing::list(&st, &rt)
            .await
            .map(|body| ([(header::CONTENT_TYPE, "application/json")], body)),
    )
}

/// The query of `GET /api/memory/recent_file`.
#[derive(Deserialize, IntoParams)]
pub(crate) struct RecentFileQuery {
    /// Logical file name `recent_<character>.json` (from `recent_files`).
    #[param(
        example = "recent_Companion.json",
        required = true,
        pattern = "^recent_.+\\.json$"
    )]
    filename: Option<String>,
}

/// `GET /api/memory/recent_file?filename=recent_<name>.json`.
pub(crate) async fn recent_file(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    QueryOf(q): QueryOf<RecentFileQuery>,
) -> Response {
    let Some(filename) = q.filename else {
        return MemoryError::BadRequest("query parameter filename is required".into())
            .into_response();
    };
    let r: Answer<RecentFile> = recent::read(&st, &rt, &filename).await.map(Json);
    no_store(r)
}

/// `POST /api/memory/recent_file/save`.
pub(crate) async fn recent_save(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<Saved> {
    let body = body.map_err(|e| MemoryError::BadRequest(format!("unreadable body: {e}")))?;
    let req = recent::parse_save_bytes(&body);
    // Megabytes of body are freed off the request's path.
    companiond_core::task::later(move || drop(body));
    recent::save(&st, &rt, req?).await.map(Json)
}

//! Memory snapshots (list, show, restore) and the trash of deleted characters.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path as UrlPath, State};
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{no_store, JsonBody, QueryOf};
use companiond_core::{AppState, Ext};

use crate::{undo, MemoryRuntime};

use super::{bad, character_param, Answer, CharacterQuery};

/// `GET /api/memory/snapshots?character=`: a character's snapshots, newest first.
pub(crate) async fn snapshots_list(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<CharacterQuery>,
) -> Response {
    let r = async {
        let name = character_param(&q.character)?;
        undo::list(&st, &name).await
    }
    .await;
    no_store(r.map(Json))
}

/// `GET /api/memory/snapshots/{character}/{id}`: what one snapshot holds.
pub(crate) async fn snapshot_show(
    State(st): State<AppState>,
    p: Result<UrlPath<(String, String)>, PathRejection>,
) -> Response {
    let r = async {
        let UrlPath((name, id)) = p.map_err(|e| bad(format!("invalid path: {e}")))?;
        undo::show(&st, &name, &id).await
    }
    .await;
    no_store(r.map(Json))
}

/// `GET /api/memory/trash`: deleted characters kept in the trash.
pub(crate) async fn trash(State(st): State<AppState>) -> Response {
    no_store(undo::trash(&st).await.map(Json))
}

/// `POST /api/memory/snapshots/restore` (`{character, id}`).
pub(crate) async fn snapshot_restore(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    JsonBody(body, _): JsonBody<undo::SnapshotRestoreBody>,
) -> Answer<undo::SnapshotRestored> {
    undo::restore(&st, &rt, &body.character, &body.id)
        .await
        .map(Json)
}

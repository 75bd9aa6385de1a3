//! Legacy memory roots: scan and purge.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{loose, no_store, BodyOf};
use companiond_core::AppState;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::legacy;

use super::Answer;

/// `GET /api/memory/legacy/scan`.
pub(crate) async fn legacy_scan(State(st): State<AppState>) -> Response {
    let data = st.data_dir().to_path_buf();
    let roots = st.opts.legacy_memory_roots.clone();
    let names = st.characters.names();
    let r: Answer<legacy::Scan> =
        companiond_core::task::blocking(move || Ok(legacy::scan(&data, &roots, &names)))
            .await
            .map(Json);
    no_store(r)
}

/// The body of `POST /api/memory/legacy/purge`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"paths": ["/home/me/Documents/Companion/memory/Old"]}))]
pub(crate) struct PurgeBody {
    /// Absolute paths of entries listed by `legacy/scan` (each is checked
    /// again; an entry that is not text is reported in `errors`). Anything but
    /// a non-empty array is a 400.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = Vec<String>, required = true, min_items = 1)]
    paths: Option<Vec<Value>>,
}

/// `POST /api/memory/legacy/purge` (`{paths}`).
pub(crate) async fn legacy_purge(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<PurgeBody>,
) -> Answer<legacy::Purge> {
    let paths = legacy::purge_paths(body.paths)?;
    let data = st.data_dir().to_path_buf();
    let roots = st.opts.legacy_memory_roots.clone();
    companiond_core::task::blocking(move || legacy::purge(&data, &roots, &paths))
        .await
        .map(Json)
}

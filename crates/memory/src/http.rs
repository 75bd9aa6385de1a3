//! Thin HTTP handlers over the domain modules.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path as UrlPath, RawQuery, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::{Api, AppState};
use serde_json::{json, Value};

use crate::error::MemoryError;
use crate::toggles::{self, Toggle};
use crate::{legacy, recent, rename, MemoryRuntime};

fn respond<T: serde::Serialize>(r: Result<T, MemoryError>) -> Response {
    match r {
        Ok(v) => ok_json(v),
        Err(e) => e.into_response(),
    }
}

/// A JSON body; malformed, empty or oversized → 400.
fn json_body(body: Result<Bytes, BytesRejection>) -> Result<Value, MemoryError> {
    let bytes = body.map_err(|e| MemoryError::BadRequest(format!("unreadable body: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| MemoryError::BadRequest(format!("the body is not valid JSON: {e}")))
}

async fn recent_files(State(st): State<AppState>) -> Response {
    no_store(respond(
        recent::list(&st).await.map(|files| json!({"files": files})),
    ))
}

async fn recent_file(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let filename = q.as_deref().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "filename")
            .map(|(_, v)| v.into_owned())
    });
    let Some(filename) = filename else {
        return MemoryError::BadRequest("query parameter filename is required".into())
            .into_response();
    };
    no_store(respond(recent::read(&st, &filename).await))
}

async fn recent_save(State(st): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let r = async {
        let v = json_body(body)?;
        let req = recent::parse_save(&v)?;
        recent::save(&st, &MemoryRuntime::of(&st), req).await
    }
    .await;
    respond(r)
}

fn name_field(v: &Value, key: &str) -> Result<String, MemoryError> {
    match v.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(MemoryError::Invalid {
            code: "empty",
            error: format!("{key} (non-empty string) is required"),
        }),
    }
}

async fn rename_alias(State(st): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let r = async {
        let v = json_body(body)?;
        let old = name_field(&v, "old_name")?;
        let new = name_field(&v, "new_name")?;
        rename::rename(&st, &old, &new).await
    }
    .await;
    respond(r)
}

async fn rename_canonical(
    State(st): State<AppState>,
    old: Result<UrlPath<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let r = async {
        let UrlPath(old) =
            old.map_err(|e| MemoryError::BadRequest(format!("invalid old_name: {e}")))?;
        let v = json_body(body)?;
        let new = name_field(&v, "new_name")?;
        rename::rename(&st, &old, &new).await
    }
    .await;
    respond(r)
}

async fn toggle_get(st: AppState, t: Toggle) -> Response {
    match toggles::read(&st, t).await {
        Ok(enabled) => no_store(ok_json(json!({"enabled": enabled}))),
        Err(e) => no_store(e.into_response()),
    }
}

async fn toggle_post(st: AppState, t: Toggle, body: Result<Bytes, BytesRejection>) -> Response {
    let r = async {
        let bytes = body.map_err(|e| MemoryError::BadRequest(format!("unreadable body: {e}")))?;
        let enabled = toggles::parse_body(&bytes)?;
        toggles::write(&st, t, enabled).await
    }
    .await;
    respond(r.map(|enabled| json!({"success": true, "enabled": enabled})))
}

async fn review_get(State(st): State<AppState>) -> Response {
    toggle_get(st, Toggle::Review).await
}
async fn review_post(State(st): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    toggle_post(st, Toggle::Review, body).await
}
async fn powerful_get(State(st): State<AppState>) -> Response {
    toggle_get(st, Toggle::Powerful).await
}
async fn powerful_post(
    State(st): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    toggle_post(st, Toggle::Powerful, body).await
}

async fn legacy_scan(State(st): State<AppState>) -> Response {
    let data = st.data_dir().to_path_buf();
    let roots = st.opts.legacy_memory_roots.clone();
    let names = st.characters.names();
    let r = tokio::task::spawn_blocking(move || legacy::scan(&data, &roots, &names))
        .await
        .map_err(|e| MemoryError::Internal(format!("the legacy scan failed: {e}")));
    no_store(respond(r))
}

async fn legacy_purge(State(st): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let r = async {
        let v = json_body(body)?;
        let paths = legacy::parse_purge(&v)?;
        let data = st.data_dir().to_path_buf();
        let roots = st.opts.legacy_memory_roots.clone();
        tokio::task::spawn_blocking(move || legacy::purge(&data, &roots, &paths))
            .await
            .map_err(|e| MemoryError::Internal(format!("the legacy purge failed: {e}")))?
    }
    .await;
    respond(r)
}

pub(crate) fn api(state: &AppState) -> Api {
    Api::new(state, "memory")
        .get(
            "/api/memory/recent_files",
            "logical recent-history file names (recent_<character>.json)",
            recent_files,
        )
        .get(
            "/api/memory/recent_file",
            "one recent-history file: content, fingerprint, identity_token",
            recent_file,
        )
        .route(
            Method::POST,
            "/api/memory/recent_file/save",
            "replace a character's recent history (compare-and-swap on the read tokens)",
            post(recent_save).layer(DefaultBodyLimit::max(recent::MAX_SAVE_BODY)),
        )
        .post(
            "/api/memory/update_character_name",
            "rename a character (alias of /api/characters/profile/{old_name}/rename)",
            rename_alias,
        )
        .post(
            "/api/characters/profile/{old_name}/rename",
            "rename a character: configuration, memory storage and chat session together",
            rename_canonical,
        )
        .get(
            "/api/memory/review_config",
            "automatic recent-memory review toggle",
            review_get,
        )
        .post(
            "/api/memory/review_config",
            "update the automatic recent-memory review toggle",
            review_post,
        )
        .get(
            "/api/memory/powerful_memory_config",
            "powerful-memory toggle",
            powerful_get,
        )
        .post(
            "/api/memory/powerful_memory_config",
            "update the powerful-memory toggle (runs the switch-off migration)",
            powerful_post,
        )
        .get(
            "/api/memory/legacy/scan",
            "scan the legacy memory roots without changing them",
            legacy_scan,
        )
        .post(
            "/api/memory/legacy/purge",
            "delete selected entries below recognized legacy memory roots",
            legacy_purge,
        )
}

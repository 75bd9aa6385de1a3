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
use crate::index::Query;
use crate::longterm::{self, Correction, Kind, ListRequest};
use crate::toggles::{self, Toggle};
use crate::{extract, fence, legacy, recent, rename, stores, timefmt, MemoryRuntime};
use companiond_core::guards::Csrf;
use std::collections::HashMap;

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

// ------------------------------------------------------------------ long-term memory

/// Longest free-text query.
const MAX_QUERY_CHARS: usize = 1000;
/// Longest corrected text.
const MAX_TEXT_CHARS: usize = 2000;

fn params(q: Option<String>) -> HashMap<String, String> {
    let mut m = HashMap::new();
    if let Some(q) = q {
        for (k, v) in url::form_urlencoded::parse(q.as_bytes()) {
            m.entry(k.into_owned()).or_insert_with(|| v.into_owned());
        }
    }
    m
}

fn bad(msg: impl Into<String>) -> MemoryError {
    MemoryError::BadRequest(msg.into())
}

fn character_param(m: &HashMap<String, String>) -> Result<String, MemoryError> {
    match m.get("character").map(|s| s.trim()) {
        Some(c) if !c.is_empty() => Ok(c.to_string()),
        _ => Err(bad("query parameter character is required")),
    }
}

fn int_param(
    m: &HashMap<String, String>,
    key: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, MemoryError> {
    let Some(v) = m.get(key) else {
        return Ok(default);
    };
    match v.trim().parse::<usize>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(bad(format!(
            "{key} must be an integer from {} to {}",
            range.start(),
            range.end()
        ))),
    }
}

/// `q`, `since`, `until`, `offset`, `limit` (the window is checked and ordered).
fn query_params(m: &HashMap<String, String>, max_limit: usize) -> Result<Query, MemoryError> {
    let text = m.get("q").cloned().unwrap_or_default();
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(bad(format!(
            "q is longer than {MAX_QUERY_CHARS} characters"
        )));
    }
    let time = |k: &str, end: bool| -> Result<Option<i64>, MemoryError> {
        match m.get(k).map(|s| s.trim()) {
            None | Some("") => Ok(None),
            Some(s) => timefmt::bound(s, end).map(Some).ok_or_else(|| {
                bad(format!(
                    "{k} must be a date (YYYY-MM-DD), an ISO date-time or seconds since the epoch"
                ))
            }),
        }
    };
    let since = time("since", false)?;
    let until = time("until", true)?;
    if let (Some(a), Some(b)) = (since, until) {
        if a > b {
            return Err(bad("since is after until"));
        }
    }
    Ok(Query {
        text,
        since,
        until,
        offset: int_param(m, "offset", 0, 0..=100_000)?,
        limit: int_param(m, "limit", 50.min(max_limit), 1..=max_limit)?,
    })
}

async fn list_kind(st: AppState, kind: Kind, q: Option<String>) -> Response {
    let r = async {
        let m = params(q);
        let name = character_param(&m)?;
        let archived = match m.get("archived").map(|s| s.trim()) {
            None | Some("" | "false" | "0") => false,
            Some("true" | "1") => true,
            Some(_) => return Err(bad("archived must be true or false")),
        };
        let query = query_params(&m, 200)?;
        longterm::list(
            &st,
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
    no_store(respond(r))
}

async fn facts_list(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    list_kind(st, Kind::Fact, q).await
}

async fn reflections_list(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    list_kind(st, Kind::Reflection, q).await
}

async fn persona_get(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let r = async {
        let m = params(q);
        let name = character_param(&m)?;
        let s = longterm::load(&st, &name).await?;
        Ok(json!({"success": true, "character": name, "persona": s.persona}))
    }
    .await;
    no_store(respond(r))
}

async fn search(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let r = async {
        let m = params(q);
        let name = character_param(&m)?;
        let query = query_params(&m, 100)?;
        let mut kinds: Vec<&'static str> = Vec::new();
        for k in m
            .get("kinds")
            .map(String::as_str)
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
        let items: Vec<Value> = hits.iter().map(longterm::hit_json).collect();
        Ok(json!({
            "success": true, "character": name, "q": text, "kinds": kinds,
            "offset": offset, "limit": limit, "items": items,
        }))
    }
    .await;
    no_store(respond(r))
}

fn body_object(
    body: Result<Bytes, BytesRejection>,
) -> Result<serde_json::Map<String, Value>, MemoryError> {
    match json_body(body)? {
        Value::Object(m) => Ok(m),
        _ => Err(bad("the body must be a JSON object")),
    }
}

fn body_str(
    m: &serde_json::Map<String, Value>,
    key: &str,
    max: usize,
) -> Result<String, MemoryError> {
    match m.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= max => {
            Ok(s.trim().to_string())
        }
        Some(Value::String(s)) if !s.trim().is_empty() => {
            Err(bad(format!("{key} is longer than {max} characters")))
        }
        _ => Err(bad(format!("{key} (non-empty string) is required"))),
    }
}

async fn forget(State(st): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let r = async {
        let m = body_object(body)?;
        let name = body_str(&m, "character", 200)?;
        let id = body_str(&m, "id", 200)?;
        longterm::forget(&st, &name, id).await
    }
    .await;
    respond(r)
}

async fn correct(State(st): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let r = async {
        let m = body_object(body)?;
        let name = body_str(&m, "character", 200)?;
        let id = body_str(&m, "id", 200)?;
        let text = body_str(&m, "text", MAX_TEXT_CHARS)?;
        let importance = match m.get("importance") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_i64() {
                Some(n @ 1..=10) => Some(n),
                _ => return Err(bad("importance must be an integer from 1 to 10")),
            },
        };
        let entity = match m.get("entity") {
            None | Some(Value::Null) => None,
            Some(Value::String(e)) if stores::ENTITIES.contains(&e.as_str()) => Some(e.clone()),
            Some(_) => return Err(bad("entity must be master, neko or relationship")),
        };
        longterm::correct(
            &st,
            &name,
            Correction {
                id,
                text,
                importance,
                entity,
            },
        )
        .await
    }
    .await;
    respond(r)
}

async fn extract_now(State(st): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let r = async {
        let m = body_object(body)?;
        let name = body_str(&m, "character", 200)?;
        fence::check(st.data_dir(), "extract", &format!("memory/{name}"))?;
        let o = extract::run_now(&st, &name).await?;
        let mut v = json!({"success": true, "character": name});
        if let (Some(obj), Ok(Value::Object(extra))) = (v.as_object_mut(), serde_json::to_value(o))
        {
            obj.extend(extra);
        }
        Ok(v)
    }
    .await;
    respond(r)
}

fn longterm_api(api: Api) -> Api {
    api.get(
        "/api/memory/facts",
        "facts of a character (query: character, q, since, until, offset, limit, archived)",
        facts_list,
    )
    .get(
        "/api/memory/reflections",
        "reflections of a character (query: character, q, since, until, offset, limit, archived)",
        reflections_list,
    )
    .get(
        "/api/memory/persona",
        "the persona of a character (stable traits kept from facts)",
        persona_get,
    )
    .get(
        "/api/memory/search",
        "search a character's memory (query: character, q, since, until, offset, limit, kinds)",
        search,
    )
    .guarded(
        Method::POST,
        "/api/memory/correct",
        "correct a fact, reflection or persona entry ({character, id, text, importance?, entity?})",
        Csrf::Success,
        correct,
    )
    .guarded(
        Method::POST,
        "/api/memory/forget",
        "forget a fact, reflection or persona entry everywhere ({character, id})",
        Csrf::Success,
        forget,
    )
    .guarded(
        Method::POST,
        "/api/memory/extract",
        "extract long-term memory from the unread history now ({character})",
        Csrf::Success,
        extract_now,
    )
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
        .merge(longterm_api(Api::new(state, "memory")))
}

//! Thin HTTP handlers over the domain modules: parse and check the input,
//! call the domain, answer its typed result. The routes are listed in
//! [`crate::api`].

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path as UrlPath, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{lenient, loose, no_store, BodyOf, JsonBody, QueryOf};
use companiond_core::{AppState, Ext};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::error::MemoryError;
use crate::index::Query;
use crate::longterm::{self, Correction, HitAnswer, Kind, ListRequest};
use crate::recent::{RecentFile, Saved};
use crate::toggles::{self, Toggle};
use crate::{
    extract, fence, legacy, listing, recent, rename, stores, timefmt, undo, MemoryRuntime,
};

/// A handler's answer: the typed value as JSON, or the family's error envelope.
type Answer<T> = Result<Json<T>, MemoryError>;

/// Largest body of a memory route read through [`BodyOf`] (as axum's default).
const MAX_BODY: usize = 2 * 1024 * 1024;

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

/// The body of `POST /api/memory/recent_file/save`: the fields the one-pass
/// reader ([`crate::save_body`]) keeps; any other field is skipped.
#[derive(ToSchema)]
#[schema(example = json!({"filename": "recent_Companion.json",
    "fingerprint": "3f2a…", "identity_token": "9c41…",
    "chat": [{"role": "human", "text": "hi"}, {"role": "ai", "text": "hello"}]}))]
// Not the parser: a save carries megabytes of chat, read in one pass (two
// threads for a large body) that keeps only these fields (`save_body`), and
// `recent` validates them in a fixed order; this type documents that shape.
#[allow(dead_code)]
pub(crate) struct SaveBody {
    /// Logical file name `recent_<character>.json`.
    #[schema(pattern = "^recent_.+\\.json$")]
    filename: String,
    /// The whole new history (at most 10,000 entries, 2,097,152 text characters).
    #[schema(max_items = 10000)]
    chat: Vec<SaveEntry>,
    /// `fingerprint` of the read this edit started from.
    fingerprint: String,
    /// `identity_token` of the read this edit started from.
    identity_token: String,
}

/// One chat entry of a save (other fields are skipped).
#[derive(ToSchema)]
#[allow(dead_code)] // documents what `save_body` reads (see `SaveBody`)
pub(crate) struct SaveEntry {
    /// `human`, `ai`, `system`, ... (non-empty).
    #[schema(min_length = 1)]
    role: String,
    /// At most 32,768 characters; absent or null = empty.
    #[schema(max_length = 32768)]
    text: Option<String>,
    /// Position of a read-only theater message in the read (keeps its place).
    source_index: Option<u64>,
    /// A theater memory message (read-only).
    theater: Option<bool>,
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
) -> Answer<rename::Renamed> {
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
) -> Answer<rename::Renamed> {
    let UrlPath(old) =
        old.map_err(|e| MemoryError::BadRequest(format!("invalid old_name: {e}")))?;
    let new = name_field(body.new_name, "new_name")?;
    rename::rename(&st, &rt, &old, &new).await.map(Json)
}

/// The toggle a toggle route is about (`toggle_get::<Review>`).
pub(crate) trait ToggleRoute {
    const TOGGLE: Toggle;
}

/// `/api/memory/review_config`.
pub(crate) struct Review;
impl ToggleRoute for Review {
    const TOGGLE: Toggle = Toggle::Review;
}

/// `/api/memory/powerful_memory_config`.
pub(crate) struct Powerful;
impl ToggleRoute for Powerful {
    const TOGGLE: Toggle = Toggle::Powerful;
}

/// A toggle's state.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"enabled": true}))]
pub(crate) struct ToggleState {
    enabled: bool,
}

/// A toggle's saved state.
#[derive(Serialize, ToSchema)]
pub(crate) struct ToggleSaved {
    success: bool,
    enabled: bool,
}

/// The body of a toggle's `POST`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"enabled": false}))]
pub(crate) struct ToggleBody {
    enabled: bool,
}

/// `GET` of a toggle: `{enabled}`, or 503 `{error, code?}`.
pub(crate) async fn toggle_get<T: ToggleRoute>(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
) -> Response {
    no_store(
        toggles::read(&st, &rt, T::TOGGLE)
            .await
            .map(|enabled| Json(ToggleState { enabled })),
    )
}

/// `POST` of a toggle (`{enabled}`): `{success, enabled}`.
pub(crate) async fn toggle_post<T: ToggleRoute>(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    BodyOf(body): BodyOf<ToggleBody>,
) -> Answer<ToggleSaved> {
    let enabled = toggles::write(&st, &rt, T::TOGGLE, body.enabled).await?;
    Ok(Json(ToggleSaved {
        success: true,
        enabled,
    }))
}

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

// ------------------------------------------------------------------ long-term memory

/// Longest free-text query.
const MAX_QUERY_CHARS: usize = 1000;
/// Longest corrected text.
const MAX_TEXT_CHARS: usize = 2000;

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

/// An integer within `range`, `default` when absent.
fn int_param(
    v: Option<i64>,
    key: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, MemoryError> {
    let Some(v) = v else {
        return Ok(default);
    };
    match usize::try_from(v) {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(bad(format!(
            "{key} must be an integer from {} to {}",
            range.start(),
            range.end()
        ))),
    }
}

/// The search window of a listing or a search: `q`, `since`, `until`,
/// `offset`, `limit` (checked and ordered).
struct Window<'a> {
    q: Option<&'a str>,
    since: Option<&'a str>,
    until: Option<&'a str>,
    offset: Option<i64>,
    limit: Option<i64>,
}

impl Window<'_> {
    fn query(&self, max_limit: usize) -> Result<Query, MemoryError> {
        let text = self.q.unwrap_or_default().to_string();
        if text.chars().count() > MAX_QUERY_CHARS {
            return Err(bad(format!(
                "q is longer than {MAX_QUERY_CHARS} characters"
            )));
        }
        let time = |k: &str, v: Option<&str>, end: bool| -> Result<Option<i64>, MemoryError> {
            match v {
                None => Ok(None),
                Some(s) => timefmt::bound(s, end).map(Some).ok_or_else(|| {
                    bad(format!(
                        "{k} must be a date (YYYY-MM-DD), an ISO date-time or seconds since the epoch"
                    ))
                }),
            }
        };
        let since = time("since", self.since, false)?;
        let until = time("until", self.until, true)?;
        if let (Some(a), Some(b)) = (since, until) {
            if a > b {
                return Err(bad("since is after until"));
            }
        }
        Ok(Query {
            text,
            since,
            until,
            offset: int_param(self.offset, "offset", 0, 0..=100_000)?,
            limit: int_param(self.limit, "limit", 50.min(max_limit), 1..=max_limit)?,
        })
    }
}

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

/// The query of `GET /api/memory/persona`.
#[derive(Deserialize, IntoParams)]
pub(crate) struct CharacterQuery {
    /// The character (not blank).
    #[param(example = "Companion")]
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    character: String,
}

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

/// The schema of a window bound (`timefmt::bound`): a date, an RFC 3339
/// date-time, or seconds since the epoch (digits, an optional fraction); blank
/// is no bound.
fn time_bound() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{AnyOfBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
    let string = || ObjectBuilder::new().schema_type(Type::String);
    AnyOfBuilder::new()
        .item(string().format(Some(SchemaFormat::KnownFormat(KnownFormat::Date))))
        .item(string().format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))))
        .item(string().pattern(Some("^[0-9]{1,11}(\\.[0-9]{1,6})?$")))
        .item(string().pattern(Some("^ *$")))
        .build()
        .into()
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

/// A text field of a long-term body, trimmed: absent, null, another type or
/// blank is `required`; longer than `max` characters refused.
fn body_str(v: Option<String>, key: &str, max: usize) -> Result<String, MemoryError> {
    match v.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() && s.chars().count() <= max => Ok(s.to_string()),
        Some(s) if !s.is_empty() => Err(bad(format!("{key} is longer than {max} characters"))),
        _ => Err(bad(format!("{key} (non-empty string) is required"))),
    }
}

/// The body of `POST /api/memory/forget`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"character": "Companion", "id": "fact_1732540000000_ab12"}))]
pub(crate) struct ForgetBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    character: Option<String>,
    /// Id of a fact, reflection or persona entry.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    id: Option<String>,
}

/// The body of `POST /api/memory/correct`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"character": "Companion",
    "id": "fact_1732540000000_ab12", "text": "Likes green tea", "importance": 7}))]
pub(crate) struct CorrectBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    character: Option<String>,
    /// Id of a fact, reflection or persona entry.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    id: Option<String>,
    /// The corrected text.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 2000)]
    text: Option<String>,
    /// New importance of a fact.
    #[schema(minimum = 1, maximum = 10)]
    importance: Option<i64>,
    /// Whom the entry is about.
    entity: Option<Entity>,
}

/// Whom a memory entry is about.
#[derive(Deserialize, ToSchema)]
#[schema(as = MemoryEntity)]
#[allow(non_camel_case_types)]
pub(crate) enum Entity {
    master,
    neko,
    relationship,
}

impl Entity {
    fn name(&self) -> &'static str {
        match self {
            Entity::master => "master",
            Entity::neko => "neko",
            Entity::relationship => "relationship",
        }
    }
}

/// The body of `POST /api/memory/extract`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"character": "Companion"}))]
pub(crate) struct ExtractBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    character: Option<String>,
}

// Every memory body that does not parse is a 400 in the family's envelope.
companiond_core::body_rejected!(MemoryError, limit = MAX_BODY, MemoryError::body =>
    RenameAliasBody, RenameBody, ToggleBody, PurgeBody, ForgetBody, CorrectBody, ExtractBody);

/// The answer of `POST /api/memory/extract`: what the extraction did.
#[derive(Serialize, ToSchema)]
pub(crate) struct Extracted {
    success: bool,
    character: String,
    #[serde(flatten)]
    outcome: extract::Outcome,
}

/// `POST /api/memory/forget` (`{character, id}`).
pub(crate) async fn forget(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<ForgetBody>,
) -> Answer<longterm::Forgotten> {
    let name = body_str(body.character, "character", 200)?;
    let id = body_str(body.id, "id", 200)?;
    longterm::forget(&st, &name, id).await.map(Json)
}

/// `POST /api/memory/correct` (`{character, id, text, importance?, entity?}`).
pub(crate) async fn correct(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<CorrectBody>,
) -> Answer<longterm::Corrected> {
    let name = body_str(body.character, "character", 200)?;
    let correction = Correction {
        id: body_str(body.id, "id", 200)?,
        text: body_str(body.text, "text", MAX_TEXT_CHARS)?,
        importance: match body.importance {
            None => None,
            Some(n @ 1..=10) => Some(n),
            Some(_) => return Err(bad("importance must be an integer from 1 to 10")),
        },
        entity: body.entity.map(|e| e.name().to_string()),
    };
    longterm::correct(&st, &name, correction).await.map(Json)
}

/// `POST /api/memory/extract` (`{character}`): `{success, character}` and the
/// extraction's outcome.
pub(crate) async fn extract_now(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<ExtractBody>,
) -> Answer<Extracted> {
    let name = body_str(body.character, "character", 200)?;
    fence::check(st.data_dir(), "extract", &format!("memory/{name}"))?;
    let outcome = extract::run_now(&st, &name).await?;
    Ok(Json(Extracted {
        success: true,
        character: name,
        outcome,
    }))
}

/// The answer of `GET /api/memory/extraction`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ExtractionStatus {
    success: bool,
    character: String,
    /// Whether the background extraction may run (both memory switches on).
    enabled: bool,
    /// Why it may not (`null` when enabled).
    disabled_reason: Option<String>,
    /// An extraction of this character runs right now.
    running: bool,
    #[serde(flatten)]
    health: extract::Health,
}

/// `GET /api/memory/extraction?character=`: how the character's background
/// extraction fares (failures, back-off, last error and success).
pub(crate) async fn extraction_status(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    QueryOf(q): QueryOf<CharacterQuery>,
) -> Response {
    let r = async {
        let name = character_param(&q.character)?;
        longterm::character(&st, &name)?;
        let disabled_reason = extract::allowed(&st).await.err();
        Ok::<_, MemoryError>(ExtractionStatus {
            success: true,
            enabled: disabled_reason.is_none(),
            disabled_reason,
            running: rt
                .tasks
                .is_running(&name, crate::tasks::TaskKind::Extraction),
            health: rt.extract.health(&name),
            character: name,
        })
    }
    .await;
    no_store(r.map(Json))
}

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

//! `/api/game/logs`, `/api/game/logs/view`, `/api/game/logs/enable`: the game
//! diagnostic logs.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::Ext;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::body::{first_sent, first_text, BodyCharacterOptional, BodySessionRequired, Field};
use super::extract::Body;
use super::input::game_type_of;
use super::queries::*;
use crate::error::{Failure, Reason};
use crate::games::logs::{NewEntry, ReadQuery, DEFAULT_LIMIT, MAX_LIMIT};
use crate::games::Games;
use crate::text::truncate_chars;
use companiond_core::envelope::QueryOf;

/// The read of a query: integers only (else HTTP 400 `invalid_query`); a negative
/// cursor is 0 and the limit is clamped to 1..=[`MAX_LIMIT`], before any conversion.
fn read_query(q: LogsQuery) -> Result<ReadQuery, Failure> {
    let since = q.since.map(|s| s.max(0).unsigned_abs());
    let limit = q
        .limit
        .map(|l| {
            usize::try_from(l.max(1))
                .unwrap_or(MAX_LIMIT)
                .min(MAX_LIMIT)
        })
        .unwrap_or(DEFAULT_LIMIT);
    let game_type = match q.game_type {
        Some(g) => Some(game_type_of(&g)?),
        None => None,
    };
    Ok(ReadQuery {
        session_id: q.session_id,
        game_type,
        since,
        limit,
    })
}

/// `GET /api/game/logs`: a session's entries since a cursor, or the session list.
pub async fn read(Ext(games): Ext<Games>, QueryOf(q): QueryOf<LogsQuery>) -> Response {
    match read_query(q) {
        Ok(q) => no_store(ok_json(games.logs.read(&q))),
        Err(f) => f.into_response(),
    }
}

/// `GET /api/game/logs/view`: the same as an HTML page. A query it cannot
/// read is HTTP 400 in the family envelope (never a 200 that is no page).
pub async fn view(Ext(games): Ext<Games>, QueryOf(q): QueryOf<LogsQuery>) -> Response {
    match read_query(q) {
        Ok(q) => no_store(
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                games.logs.view(&q),
            )
                .into_response(),
        ),
        Err(f) => {
            let mut r = f.into_response();
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r
        }
    }
}

/// `POST /api/game/logs`: the entry's sequence number in its log.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "seq": 4, "session_id": "s1", "game_type": "soccer"}))]
pub struct Appended {
    ok: bool,
    seq: u64,
    session_id: String,
    game_type: String,
}

/// `POST /api/game/logs/enable`: the log's latest sequence number.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "session_id": "s1", "game_type": "soccer", "seq": 1}))]
pub struct Enabled {
    ok: bool,
    session_id: String,
    game_type: String,
    seq: u64,
}

/// The session, game type and character a log body names.
#[derive(Deserialize, ToSchema)]
pub struct LogIds {
    #[serde(flatten)]
    session: BodySessionRequired,
    /// The game (default `game`; also `gameType`), as in `{game_type}`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    game_type: Field,
    /// Another spelling of `game_type`.
    #[serde(default, rename = "gameType")]
    #[schema(value_type = Option<String>)]
    game_type_camel: Field,
    /// The character (default: none).
    #[serde(flatten)]
    character: BodyCharacterOptional,
}

impl LogIds {
    /// The session (`missing_session_id` without one), the game type (default
    /// `game`) and the character (default empty), read in that order.
    fn read(&self) -> Result<(String, String, String), Failure> {
        let session = self
            .session
            .id()?
            .ok_or_else(|| Failure::new(Reason::MissingSessionId))?;
        let game = match first_text(&[
            (&self.game_type, "game_type"),
            (&self.game_type_camel, "gameType"),
        ])? {
            Some(g) => game_type_of(&g)?,
            None => "game".to_string(),
        };
        let persona = self.character.given()?.unwrap_or_default();
        Ok((session, game, persona))
    }
}

/// `POST /api/game/logs/enable`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"session_id": "s1", "game_type": "soccer", "reason": "manual"}))]
pub struct LogEnableBody {
    #[serde(flatten)]
    ids: LogIds,
    /// Why (default `manual`, at most 64 characters kept).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    reason: Field,
}

/// Body keys that are not log details.
const RESERVED: &[&str] = &[
    "session_id",
    "sessionId",
    "game_type",
    "gameType",
    "persona_name",
    "personaName",
    "level",
    "category",
    "event",
    "type",
    "source",
    "message",
    "details",
    "sensitive_possible",
    "sensitivePossible",
    "_csrf_token",
];

/// `POST /api/game/logs`: one entry of an enabled log. The keys beside the
/// reserved ones become the entry's `details` when `details` is no object.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"session_id": "s1", "game_type": "soccer",
    "level": "info", "event": "goal", "message": "scored"}))]
pub struct LogEntryBody {
    // Every key the fields below do not name, as sent and in order. Declared
    // before the flattened `ids`, it also sees the keys those read (serde
    // lends the entries to a flattened map and hands a flattened struct its
    // own): the original's details are the body less `RESERVED`, and
    // `lanlan_name`, which names the character, is not reserved.
    /// Any other key: part of `details` when `details` is no object.
    #[serde(flatten)]
    sent: Map<String, Value>,
    #[serde(flatten)]
    ids: LogIds,
    /// Default `info`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    level: Field,
    /// Default `frontend`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    category: Field,
    /// Default `client_event` (also `type`).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    event: Field,
    /// Another spelling of `event`.
    #[serde(default, rename = "type")]
    #[schema(value_type = Option<String>)]
    kind: Field,
    /// Default `frontend`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    source: Field,
    /// Text, or any JSON (kept as its text).
    #[schema(value_type = Option<Value>)]
    #[serde(default)]
    message: Field,
    /// `true`, or the text `true|1|yes|on` (also `sensitivePossible`).
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    sensitive_possible: Field,
    /// Another spelling of `sensitive_possible`.
    #[serde(default, rename = "sensitivePossible")]
    #[schema(value_type = Option<bool>)]
    sensitive_possible_camel: Field,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    details: Field,
}

impl LogEntryBody {
    /// The entry: each text is its first spelling that is text, trimmed and
    /// cut, else its default; other types are ignored.
    fn entry(&self) -> NewEntry {
        let text = |spellings: &[&Field], default: &str, max: usize| {
            spellings
                .iter()
                .find_map(|f| f.as_str())
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| truncate_chars(v, max))
                .unwrap_or_else(|| default.to_string())
        };
        let message = match self.message.get() {
            None => String::new(),
            Some(Value::String(m)) => m.clone(),
            Some(other) => other.to_string(),
        };
        let details = match self.details.as_object() {
            Some(d) => Value::Object(d.clone()),
            None => Value::Object(
                self.sent
                    .iter()
                    .filter(|(k, _)| !RESERVED.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
        };
        let sensitive = first_sent(&[&self.sensitive_possible, &self.sensitive_possible_camel])
            .is_some_and(|v| match v {
                Value::Bool(x) => *x,
                Value::String(x) => {
                    matches!(x.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on")
                }
                _ => false,
            });
        NewEntry {
            level: text(&[&self.level], "info", 24),
            category: text(&[&self.category], "frontend", 64),
            event: text(&[&self.event, &self.kind], "client_event", 96),
            source: text(&[&self.source], "frontend", 96),
            message,
            sensitive_possible: sensitive,
            details,
        }
    }
}

/// `POST /api/game/logs`: append an entry to an enabled log.
pub async fn append(
    Ext(games): Ext<Games>,
    Body(b): Body<LogEntryBody>,
) -> Result<Json<Appended>, Failure> {
    let (session, game, persona) = b.ids.read()?;
    match games.logs.ingest(&game, &session, &persona, b.entry()) {
        Some(seq) => Ok(Json(Appended {
            ok: true,
            seq,
            session_id: session,
            game_type: game,
        })),
        None => Err(Failure::new(Reason::LogNotActive)
            .with("seq", Value::Null)
            .with("session_id", session)
            .with("game_type", game)),
    }
}

/// `POST /api/game/logs/enable`: start (or keep) a session's log.
pub async fn enable(
    Ext(games): Ext<Games>,
    Body(b): Body<LogEnableBody>,
) -> Result<Json<Enabled>, Failure> {
    let (session, game, persona) = b.ids.read()?;
    let reason = b
        .reason
        .text("reason")?
        .map(|r| truncate_chars(&r, 64))
        .unwrap_or_else(|| "manual".into());
    let seq = games.logs.enable(&game, &session, &persona, &reason);
    Ok(Json(Enabled {
        ok: true,
        session_id: session,
        game_type: game,
        seq,
    }))
}

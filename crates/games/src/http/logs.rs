//! `/api/game/logs`, `/api/game/logs/view`, `/api/game/logs/enable`: the game
//! diagnostic logs.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::Ext;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::extract::JsonObject;
use super::input::{game_type_of, opt_str, persona_of, session_of};
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

/// The session, game type (default `game`) and character a log body names.
fn log_ids(b: &Map<String, Value>) -> Result<(String, String, String), Failure> {
    let session = session_of(b)?.ok_or_else(|| Failure::new(Reason::MissingSessionId))?;
    let game = match opt_str(b, &["game_type", "gameType"])? {
        Some(g) => game_type_of(&g)?,
        None => "game".to_string(),
    };
    let persona = persona_of(b)?.unwrap_or_default();
    Ok((session, game, persona))
}

/// `POST /api/game/logs`: append an entry to an enabled log.
pub async fn append(
    Ext(games): Ext<Games>,
    JsonObject(b): JsonObject,
) -> Result<Json<Appended>, Failure> {
    let (session, game, persona) = log_ids(&b)?;
    match games
        .logs
        .ingest(&game, &session, &persona, NewEntry::from_body(&b))
    {
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
    JsonObject(b): JsonObject,
) -> Result<Json<Enabled>, Failure> {
    let (session, game, persona) = log_ids(&b)?;
    let reason = opt_str(&b, &["reason"])?
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

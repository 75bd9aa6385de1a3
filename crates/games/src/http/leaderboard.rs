//! `/api/game/{game_type}/leaderboard`: the badminton leaderboard (other game
//! types read an empty page and cannot submit).

use axum::body::Body;
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use companiond_core::envelope::no_store;
use companiond_core::Ext;

use super::input::{body_map, game_type_of, parse_query, query_int, query_text};
use crate::error::{respond, Failure, Outcome, Reason};
use crate::games::kind::GameKind;
use crate::games::leaderboard::{empty_page, PageQuery, MAX_OFFSET, MAX_PAGE};
use crate::games::Games;
use crate::text::truncate_chars;

/// `GET /api/game/{game_type}/leaderboard`: a page (`limit` default 10, `offset`).
pub async fn page(
    Ext(games): Ext<Games>,
    Path(gt): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let r: Outcome = async {
        let game_type = game_type_of(&gt)?;
        let q = parse_query(raw.as_deref());
        let limit = query_int(&q, "limit")?.unwrap_or(10).clamp(0, MAX_PAGE);
        let offset = query_int(&q, "offset")?.unwrap_or(0).clamp(0, MAX_OFFSET);
        if !GameKind::of(&game_type).has_leaderboard() {
            return Ok(empty_page(limit, offset));
        }
        games
            .board
            .page(PageQuery {
                persona_name: query_text(&q, "persona_name").map(|p| truncate_chars(&p, 80)),
                session_id: query_text(&q, "session_id").map(|s| truncate_chars(&s, 120)),
                limit,
                offset,
            })
            .await
    }
    .await;
    no_store(respond(r))
}

/// `POST /api/game/{game_type}/leaderboard`: submit a round's score, accepted
/// only when it matches the server's record of the round.
pub async fn submit(Ext(games): Ext<Games>, Path(gt): Path<String>, body: Body) -> Response {
    let r: Outcome = async {
        let game_type = game_type_of(&gt)?;
        if !GameKind::of(&game_type).has_leaderboard() {
            return Err(Failure::new(Reason::UnsupportedGameType).with("game_type", game_type));
        }
        let b = body_map(body).await?;
        let sub = games.board.validate(&b)?;
        games.board.submit(sub).await
    }
    .await;
    respond(r)
}

//! `/api/game/{game_type}/leaderboard`: the badminton leaderboard (other game
//! types read an empty page and cannot submit).

use axum::response::Response;
use companiond_core::envelope::no_store;
use companiond_core::Ext;

use super::extract::{GameType, JsonObject};
use super::queries::*;
use crate::error::{Failure, Reason};
use crate::games::kind::GameKind;
use crate::games::leaderboard::{empty_page, Page, PageQuery, Submitted, MAX_OFFSET, MAX_PAGE};
use crate::games::Games;
use crate::text::truncate_chars;
use axum::Json;
use companiond_core::envelope::QueryOf;
use serde::Serialize;
use utoipa::ToSchema;

/// `GET /api/game/{game_type}/leaderboard`: a page (`limit` default 10, `offset`).
pub async fn page(
    Ext(games): Ext<Games>,
    game_type: Result<GameType, Failure>,
    QueryOf(q): QueryOf<LeaderboardQuery>,
) -> Response {
    let answer = async {
        let GameType(game_type) = game_type?;
        let limit = q.limit.unwrap_or(10).clamp(0, MAX_PAGE);
        let offset = q.offset.unwrap_or(0).clamp(0, MAX_OFFSET);
        if !GameKind::of(&game_type).has_leaderboard() {
            return Ok(Json(BoardPage::of(empty_page(limit, offset))));
        }
        games
            .board
            .page(PageQuery {
                persona_name: q.persona_name.map(|p| truncate_chars(&p, 80)),
                session_id: q.session_id.map(|s| truncate_chars(&s, 120)),
                limit,
                offset,
            })
            .await
            .map(|p| Json(BoardPage::of(p)))
            .map_err(Failure::from)
    };
    no_store(answer.await)
}

/// `POST /api/game/{game_type}/leaderboard`: submit a round's score, accepted
/// only when it matches the server's record of the round.
pub async fn submit(
    Ext(games): Ext<Games>,
    GameType(game_type): GameType,
    body: Result<JsonObject, Failure>,
) -> Result<Json<BoardSubmitted>, Failure> {
    if !GameKind::of(&game_type).has_leaderboard() {
        return Err(Failure::new(Reason::UnsupportedGameType).with("game_type", game_type));
    }
    let JsonObject(b) = body?;
    let sub = games.board.validate(&b)?;
    Ok(Json(BoardSubmitted {
        ok: true,
        submitted: games.board.submit(sub).await?,
    }))
}

/// `GET /api/game/{game_type}/leaderboard`: `{ok, ...the page}`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "top": [{"rank": 1, "name": "Mika", "score": 12,
    "streak": 4, "max_distance_m": "3.1", "mode": "classic", "date": "2026-11-25"}],
    "total_players": 1, "total_scores": 1, "limit": 10, "offset": 0, "has_more": false,
    "your_best": {"rank": 1, "score": 12}}))]
pub struct BoardPage {
    ok: bool,
    #[serde(flatten)]
    page: Page,
}

impl BoardPage {
    fn of(page: Page) -> BoardPage {
        BoardPage { ok: true, page }
    }
}

/// `POST /api/game/{game_type}/leaderboard`: `{ok, ...the stored submission}`.
#[derive(Serialize, ToSchema)]
pub struct BoardSubmitted {
    ok: bool,
    #[serde(flatten)]
    submitted: Submitted,
}

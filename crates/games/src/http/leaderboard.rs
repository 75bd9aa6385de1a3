//! `/api/game/{game_type}/leaderboard`: the badminton leaderboard (other game
//! types read an empty page and cannot submit).

use axum::response::Response;
use companiond_core::envelope::no_store;
use companiond_core::Ext;

use super::body::Field;
use super::extract::{Body, GameType};
use super::queries::*;
use crate::error::{Failure, Reason};
use crate::games::kind::GameKind;
use crate::games::leaderboard::{
    count_from, empty_page, normalize_mode, totals_from, BoardError, Figure, Page, PageQuery,
    Submission, Submitted, MAX_OFFSET, MAX_PAGE,
};
use crate::games::Games;
use crate::text::truncate_chars;
use axum::Json;
use companiond_core::envelope::QueryOf;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    body: Result<Body<LeaderboardSubmitBody>, Failure>,
) -> Result<Json<BoardSubmitted>, Failure> {
    if !GameKind::of(&game_type).has_leaderboard() {
        return Err(Failure::new(Reason::UnsupportedGameType).with("game_type", game_type));
    }
    let Body(b) = body?;
    let sub = games.board.validate(b.claim()?)?;
    Ok(Json(BoardSubmitted {
        ok: true,
        submitted: games.board.submit(sub).await?,
    }))
}

/// `POST /api/game/{game_type}/leaderboard` (badminton): the round's totals,
/// top-level or inside `finalScore`, must match the server's record. Every
/// JSON object is judged by that check: a missing or mistyped field is
/// `invalid_session` (with why), never `invalid_body`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Mika", "session_id": "s1", "mode": "spectator",
    "finalScore": {"score": 12, "streak": 4, "max_distance_px": 310.5}}))]
pub struct LeaderboardSubmitBody {
    /// The character (also `lanlan_name`; at most 80 characters kept).
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    persona_name: Field,
    /// Another spelling of `persona_name`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    lanlan_name: Field,
    /// At most 120 characters kept.
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    session_id: Field,
    /// `spectator` (default) or `duel`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    mode: Field,
    /// The score (also `totalScore`, `total_score`, `player`; a number or its text).
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    score: Field,
    #[serde(default, rename = "totalScore")]
    #[schema(value_type = Option<f64>)]
    total_score_camel: Field,
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    total_score: Field,
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    player: Field,
    /// The best streak (also `best_streak`, `bestStreak`, `final_streak`, `finalStreak`).
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    streak: Field,
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    best_streak: Field,
    #[serde(default, rename = "bestStreak")]
    #[schema(value_type = Option<f64>)]
    best_streak_camel: Field,
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    final_streak: Field,
    #[serde(default, rename = "finalStreak")]
    #[schema(value_type = Option<f64>)]
    final_streak_camel: Field,
    /// The longest distance in pixels (also `maxDistancePx`, `max_distance`,
    /// `maxDistance`, `final_distance`, `finalDistance`).
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    max_distance_px: Field,
    #[serde(default, rename = "maxDistancePx")]
    #[schema(value_type = Option<f64>)]
    max_distance_px_camel: Field,
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    max_distance: Field,
    #[serde(default, rename = "maxDistance")]
    #[schema(value_type = Option<f64>)]
    max_distance_camel: Field,
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    final_distance: Field,
    #[serde(default, rename = "finalDistance")]
    #[schema(value_type = Option<f64>)]
    final_distance_camel: Field,
    /// The totals under the same spellings (read when absent at the top level),
    /// or the score itself.
    #[serde(default, rename = "finalScore")]
    #[schema(value_type = Option<Object>)]
    final_score: Field,
    /// Also `lineInCount`.
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    line_in_count: Field,
    #[serde(default, rename = "lineInCount")]
    #[schema(value_type = Option<f64>)]
    line_in_count_camel: Field,
    /// Also `netTouchCount`.
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    net_touch_count: Field,
    #[serde(default, rename = "netTouchCount")]
    #[schema(value_type = Option<f64>)]
    net_touch_count_camel: Field,
    /// Also `zoneInCount`.
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    zone_in_count: Field,
    #[serde(default, rename = "zoneInCount")]
    #[schema(value_type = Option<f64>)]
    zone_in_count_camel: Field,
}

impl LeaderboardSubmitBody {
    /// A figure at the top level: its first spelling that is not `null`
    /// (in the order of [`Figure::keys`]).
    fn figure(&self, f: Figure) -> Option<&Value> {
        let spellings: &[&Field] = match f {
            Figure::Score => &[
                &self.score,
                &self.total_score_camel,
                &self.total_score,
                &self.player,
            ],
            Figure::Streak => &[
                &self.streak,
                &self.best_streak,
                &self.best_streak_camel,
                &self.final_streak,
                &self.final_streak_camel,
            ],
            Figure::Distance => &[
                &self.max_distance_px,
                &self.max_distance_px_camel,
                &self.max_distance,
                &self.max_distance_camel,
                &self.final_distance,
                &self.final_distance_camel,
            ],
            Figure::LineIn => &[&self.line_in_count, &self.line_in_count_camel],
            Figure::NetTouch => &[&self.net_touch_count, &self.net_touch_count_camel],
            Figure::ZoneIn => &[&self.zone_in_count, &self.zone_in_count_camel],
        };
        spellings.iter().find_map(|f| f.get())
    }

    /// What the submission claims, read in the original's order: the names
    /// (a non-text one refused), the totals (no score, or a total that is no
    /// number, refused), then the names' presence.
    fn claim(&self) -> Result<Submission, BoardError> {
        let invalid = |msg: String| BoardError::InvalidSession(Some(msg));
        let text = |f: &Field, k: &str| {
            f.trimmed()
                .map(|t| t.map(str::to_string))
                .map_err(|_| invalid(format!("{k} must be a string")))
        };
        let persona = text(&self.persona_name, "persona_name")?
            .or(text(&self.lanlan_name, "lanlan_name")?)
            .map(|p| truncate_chars(&p, 80));
        let session = text(&self.session_id, "session_id")?.map(|s| truncate_chars(&s, 120));
        let mode = text(&self.mode, "mode")?;
        let top = |f: Figure| self.figure(f);
        let final_score = self.final_score.sent();
        let totals = totals_from(top, final_score)
            .map_err(invalid)?
            .ok_or_else(|| invalid("the round's totals (score) are required".into()))?;
        let (Some(persona_name), Some(session_id)) = (persona, session) else {
            return Err(invalid("persona_name and session_id are required".into()));
        };
        Ok(Submission {
            persona_name,
            session_id,
            mode: normalize_mode(mode.as_deref()),
            totals,
            line_in_count: count_from(top, final_score, Figure::LineIn),
            net_touch_count: count_from(top, final_score, Figure::NetTouch),
            zone_in_count: count_from(top, final_score, Figure::ZoneIn),
        })
    }
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

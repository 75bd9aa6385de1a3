//! The query strings of the games and icebreaker routes: each type is the
//! route's parser (`QueryOf<T>`) and its OpenAPI parameters (`Api::query::<T>()`).
//! Values are read as the pages send them ([`lenient`]: trimmed, blank =
//! absent); a query that does not parse is `{ok:false, reason:"invalid_query"}`.

use companiond_core::envelope::lenient;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::{Failure, Reason};

/// The character of a read (`persona_name`, alias `lanlan_name`; else the current one).
#[derive(Deserialize, IntoParams)]
pub struct PersonaQuery {
    /// The character (default: the current one).
    #[param(example = "Mika")]
    pub persona_name: Option<String>,
    /// Alias of `persona_name`.
    pub lanlan_name: Option<String>,
}

/// The icebreaker state and game-character reads: `persona_name`, else the current one.
#[derive(Deserialize, IntoParams)]
pub struct PersonaNameQuery {
    /// The character (default: the current one).
    #[param(example = "Mika")]
    #[serde(default, deserialize_with = "lenient::text")]
    pub persona_name: Option<String>,
}

/// `GET /api/game/logs` and `/api/game/logs/view`.
#[derive(Deserialize, IntoParams)]
pub struct LogsQuery {
    /// The session to read; without it, the list of sessions.
    #[serde(default, deserialize_with = "lenient::text")]
    pub session_id: Option<String>,
    /// Only logs of this game type (blank: every game).
    #[param(pattern = "^ *([A-Za-z0-9_-]{1,64})? *$")]
    #[serde(default, deserialize_with = "lenient::text")]
    pub game_type: Option<String>,
    /// Entries after this sequence number (a negative cursor reads from 0).
    #[serde(default, deserialize_with = "lenient::int")]
    pub since: Option<i64>,
    /// At most this many entries (clamped to 1..=1000).
    #[param(default = 300)]
    #[serde(default, deserialize_with = "lenient::int")]
    pub limit: Option<i64>,
}

/// `GET /api/game/{game_type}/leaderboard`.
#[derive(Deserialize, IntoParams)]
pub struct LeaderboardQuery {
    /// Rows of the page (clamped to 0..=100).
    #[param(default = 10)]
    #[serde(default, deserialize_with = "lenient::int")]
    pub limit: Option<i64>,
    /// Rows skipped (clamped to 0..=100000).
    #[param(default = 0)]
    #[serde(default, deserialize_with = "lenient::int")]
    pub offset: Option<i64>,
    /// Whose best to report in `your_best`.
    #[serde(default, deserialize_with = "lenient::text")]
    pub persona_name: Option<String>,
    /// Else the best of this round's session.
    #[serde(default, deserialize_with = "lenient::text")]
    pub session_id: Option<String>,
}

companiond_core::query_rejected!(
    Failure,
    |m| Failure::new(Reason::InvalidQuery).with("error", m) =>
    PersonaQuery, PersonaNameQuery, LogsQuery, LeaderboardQuery
);

//! What differs between the mini-games: badminton rounds have a mode and a
//! score session for the leaderboard; soccer rounds keep a diagnostic log from
//! their start and have the passive-player classifier; both have quick lines.
//! Any other game type gets the common behaviour only.

use super::leaderboard::normalize_mode;
use crate::text::truncate_chars;

/// The game types with rules of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GameKind {
    Badminton,
    Soccer,
    Other,
}

impl GameKind {
    /// The kind of a normalised game type.
    pub fn of(game_type: &str) -> GameKind {
        match game_type {
            "badminton" => GameKind::Badminton,
            "soccer" => GameKind::Soccer,
            _ => GameKind::Other,
        }
    }

    /// The mode a route keeps: badminton's is `spectator` or `duel` (always set);
    /// another game keeps the requested word, lower-cased, at most 32 characters.
    pub fn route_mode(self, requested: Option<&str>) -> Option<String> {
        match self {
            GameKind::Badminton => Some(normalize_mode(requested)),
            _ => requested.map(|m| truncate_chars(&m.to_ascii_lowercase(), 32)),
        }
    }

    /// Soccer rounds keep a diagnostic log from their start.
    pub fn logs_from_start(self) -> bool {
        self == GameKind::Soccer
    }

    /// A finished badminton round becomes a score session the leaderboard accepts.
    pub fn records_score_session(self) -> bool {
        self == GameKind::Badminton
    }

    /// Only badminton has a leaderboard (other game types answer an empty page).
    pub fn has_leaderboard(self) -> bool {
        self == GameKind::Badminton
    }

    /// Soccer and badminton have pre-generated reaction lines.
    pub fn has_quick_lines(self) -> bool {
        matches!(self, GameKind::Badminton | GameKind::Soccer)
    }

    /// Only soccer has the passive-player classifier.
    pub fn has_passive_guard(self) -> bool {
        self == GameKind::Soccer
    }
}

//! The HTTP handlers of both families, one module per resource. Each handler
//! reads and checks its input ([`input`]), calls the domain ([`crate::games`],
//! [`crate::icebreaker`]) and turns the typed result into the wire answer.

pub mod dialogue;
pub mod game_routes;
pub mod icebreaker;
mod input;
pub mod leaderboard;
pub mod logs;

use crate::error::{Failure, Reason};
use crate::games::ICEBREAKER_GAME_TYPE;

/// Refuse the icebreaker's game type on a game route: it has its own routes (HTTP 400).
fn refuse_icebreaker(game_type: &str, route: &str) -> Result<(), Failure> {
    if game_type.trim().eq_ignore_ascii_case(ICEBREAKER_GAME_TYPE) {
        return Err(Failure::new(Reason::NotAGameRoute)
            .with("route", route)
            .with(
                "error",
                "new_user_icebreaker is the onboarding flow; use /api/icebreaker",
            ));
    }
    Ok(())
}

//! Mini-games (`/api/game`) and onboarding (`/api/icebreaker`).

use companiond_core::{Api, AppState};

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "games")
}

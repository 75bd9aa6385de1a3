//! Jukebox (`/api/jukebox`): the song and dance library.

use companiond_core::{Api, AppState};

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "jukebox")
}

//! Avatar models: MMD (`/api/model/mmd`) and PNGTuber (`/api/model/pngtuber`).

use companiond_core::{Api, AppState};

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "avatars")
}

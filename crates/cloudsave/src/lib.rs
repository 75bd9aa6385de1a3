//! Cloud save (`/api/cloudsave`).

use companiond_core::{Api, AppState};

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "cloudsave")
}

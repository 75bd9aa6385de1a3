//! Runtime tool registration (`/api/tools`).

use companiond_core::{Api, AppState};

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "tools")
}

//! System helpers (`/api`): status, notices, and the other helpers of interface.md § System.

use axum::extract::State;
use axum::http::Method;
use axum::response::Response;
use companiond_core::envelope::{no_store, ok_json, JsonBody};
use companiond_core::guards::Csrf;
use companiond_core::{Api, AppState};
use serde::Deserialize;
use serde_json::json;

async fn status(State(st): State<AppState>) -> Response {
    let storage = st.storage_status();
    let status = if !st.is_ready() {
        "starting"
    } else if storage.selection_required
        || storage.migration_pending
        || storage.recovery_required
        || !storage.blocking_reason.trim().is_empty()
    {
        "migration_required"
    } else {
        "ready"
    };
    no_store(ok_json(json!({
        "ok": true,
        "status": status,
        "ready": status == "ready",
        "storage": storage,
    })))
}

async fn pending_notices(State(st): State<AppState>) -> Response {
    let (notices, cursor) = st.notices.peek();
    no_store(ok_json(json!({"notices": notices, "cursor": cursor})))
}

#[derive(Deserialize)]
struct AckBody {
    #[serde(default)]
    cursor: u64,
}

async fn ack(State(st): State<AppState>, JsonBody(b, ..): JsonBody<AckBody>) -> Response {
    let drained = st.notices.ack(b.cursor);
    let (_, cursor) = st.notices.peek();
    ok_json(json!({"success": true, "acknowledged": drained, "cursor": cursor}))
}

/// The system routes.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "system")
        .get(
            "/api/system/status",
            "bootstrap status snapshot (no-store)",
            status,
        )
        .get(
            "/api/pending-notices",
            "peek queued notices",
            pending_notices,
        )
        .guarded(
            Method::POST,
            "/api/pending-notices/ack",
            "acknowledge notices up to a cursor",
            Csrf::Success,
            ack,
        )
}

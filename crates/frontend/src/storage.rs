//! Storage location (`/api/storage/location/...`, docs/frontend.md).
//!
//! companiond has one storage location, the data dir (`--data-dir`): it is the
//! current, recommended and anchor root; the flags come from the same checks as
//! `/api/system/status` (corrupt core documents, a migration marker, an unwritable
//! data dir). Relocating storage is not supported: the mutations answer 409
//! `{ok:false, error_code:"storage_relocation_unsupported", error}`.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::state::StorageStatus;
use companiond_core::AppState;
use serde_json::{json, Value};

pub(crate) async fn flags(st: &AppState) -> StorageStatus {
    let data = st.data_dir().to_path_buf();
    let overlay = st.storage_status();
    tokio::task::spawn_blocking(move || {
        companiond_core::storage_status::storage_flags(&data, overlay)
    })
    .await
    .unwrap_or_default()
}

fn cache(r: Value, value: &'static str) -> Response {
    ([(header::CACHE_CONTROL, value)], Json(r)).into_response()
}

/// The bootstrap document.
pub async fn bootstrap_body(st: &AppState) -> Value {
    let s = flags(st).await;
    let root = st.data_dir().to_string_lossy().into_owned();
    let cloud = &st.opts.cloud;
    let blocking = if s.migration_pending {
        "migration_pending"
    } else if s.recovery_required {
        "recovery_required"
    } else if s.selection_required {
        "selection_required"
    } else {
        ""
    };
    json!({
        "ok": true,
        "current_root": root, "recommended_root": root, "anchor_root": root,
        "cloudsave_root": cloud, "last_known_good_root": root,
        "legacy_sources": [],
        "selection_required": s.selection_required,
        "migration_pending": s.migration_pending,
        "recovery_required": s.recovery_required,
        "legacy_cleanup_pending": s.legacy_cleanup_pending,
        "blocking_reason": blocking,
        "last_error_summary": s.last_error_summary,
        "stage": "stage3_web_restart",
        "poll_interval_ms": 1200,
        "migration": {"status": "", "source_root": "", "target_root": "", "last_error": ""},
    })
}

pub(crate) async fn bootstrap(
    axum::extract::State(st): axum::extract::State<AppState>,
) -> Response {
    cache(bootstrap_body(&st).await, "no-cache")
}

pub(crate) async fn status(axum::extract::State(st): axum::extract::State<AppState>) -> Response {
    let b = bootstrap_body(&st).await;
    let blocking = b["blocking_reason"].as_str().unwrap_or("").to_string();
    let lifecycle = match blocking.as_str() {
        "" => "ready",
        "migration_pending" => "maintenance",
        other => other,
    };
    cache(
        json!({
            "ok": true,
            "ready": blocking.is_empty(),
            "status": lifecycle,
            "lifecycle_state": lifecycle,
            "migration_stage": "",
            "maintenance_message": "",
            "poll_interval_ms": 1200,
            "effective_root": b["current_root"],
            "last_error_summary": b["last_error_summary"],
            "blocking_reason": blocking,
            "completion_notice": {"completed": false, "retained_root_exists": false},
            "storage": {
                "selection_required": b["selection_required"],
                "migration_pending": b["migration_pending"],
                "recovery_required": b["recovery_required"],
                "legacy_cleanup_pending": b["legacy_cleanup_pending"],
                "stage": b["stage"],
            },
            "migration": b["migration"],
        }),
        "no-store",
    )
}

pub(crate) async fn diagnostics(
    axum::extract::State(st): axum::extract::State<AppState>,
) -> Response {
    let b = bootstrap_body(&st).await;
    cache(json!({"ok": true, "bootstrap": b}), "no-store")
}

pub(crate) async fn retained_source() -> Response {
    cache(
        json!({"ok": true, "retained_root": "", "retained_root_exists": false}),
        "no-store",
    )
}

/// Relocating storage: 409, not supported.
pub(crate) async fn unsupported() -> crate::error::FrontendError {
    crate::error::FrontendError::RelocationUnsupported
}

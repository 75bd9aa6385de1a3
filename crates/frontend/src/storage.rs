//! Storage location (`/api/storage/location/...`, docs/frontend.md).
//!
//! companiond has one storage location, the data dir (`--data-dir`): it is the
//! current, recommended and anchor root; the flags come from the same checks as
//! `/api/system/status` (corrupt core documents, a migration marker, an unwritable
//! data dir). Relocating storage is not supported: the mutations answer 409
//! `{success:false, ok:false, error, error_code:"storage_relocation_unsupported"}`.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::state::StorageStatus;
use companiond_core::AppState;
use serde::Serialize;
use utoipa::ToSchema;

pub(crate) async fn flags(st: &AppState) -> StorageStatus {
    let data = st.data_dir().to_path_buf();
    let overlay = st.storage_status();
    tokio::task::spawn_blocking(move || {
        companiond_core::storage_status::storage_flags(&data, overlay)
    })
    .await
    .unwrap_or_default()
}

fn cache(r: impl Serialize, value: &'static str) -> Response {
    ([(header::CACHE_CONTROL, value)], Json(r)).into_response()
}

/// The storage location: every root is the data dir; the flags say whether
/// it needs attention (`blocking_reason` names the first that does).
#[derive(Clone, Serialize, ToSchema)]
#[schema(example = json!({"ok": true, "current_root": "/home/u/.local/share/companiond",
    "recommended_root": "/home/u/.local/share/companiond", "anchor_root": "/home/u/.local/share/companiond",
    "cloudsave_root": "/home/u/.local/share/companiond/cloudsave",
    "last_known_good_root": "/home/u/.local/share/companiond", "legacy_sources": [],
    "selection_required": false, "migration_pending": false, "recovery_required": false,
    "legacy_cleanup_pending": false, "blocking_reason": "", "last_error_summary": "",
    "stage": "stage3_web_restart", "poll_interval_ms": 1200,
    "migration": {"status": "", "source_root": "", "target_root": "", "last_error": ""}}))]
pub struct Bootstrap {
    ok: bool,
    current_root: String,
    recommended_root: String,
    anchor_root: String,
    /// `--cloud`: a directory or `s3://bucket/prefix`.
    cloudsave_root: String,
    last_known_good_root: String,
    legacy_sources: Vec<String>,
    selection_required: bool,
    migration_pending: bool,
    recovery_required: bool,
    legacy_cleanup_pending: bool,
    /// `migration_pending`, `recovery_required`, `selection_required` or empty.
    blocking_reason: &'static str,
    last_error_summary: String,
    stage: &'static str,
    poll_interval_ms: u32,
    migration: Migration,
}

/// No migration runs in companiond: every field is empty.
#[derive(Clone, Serialize, ToSchema)]
pub struct Migration {
    status: &'static str,
    source_root: &'static str,
    target_root: &'static str,
    last_error: &'static str,
}

/// The storage lifecycle status.
#[derive(Serialize, ToSchema)]
pub(crate) struct LocationStatus {
    ok: bool,
    ready: bool,
    /// `ready`, `maintenance` (a migration is pending) or the blocking reason.
    status: &'static str,
    lifecycle_state: &'static str,
    migration_stage: &'static str,
    maintenance_message: &'static str,
    poll_interval_ms: u32,
    effective_root: String,
    last_error_summary: String,
    blocking_reason: &'static str,
    completion_notice: CompletionNotice,
    storage: StorageFlags,
    migration: Migration,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct CompletionNotice {
    completed: bool,
    retained_root_exists: bool,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct StorageFlags {
    selection_required: bool,
    migration_pending: bool,
    recovery_required: bool,
    legacy_cleanup_pending: bool,
    stage: &'static str,
}

/// Storage diagnostics: the bootstrap document.
#[derive(Serialize, ToSchema)]
pub(crate) struct Diagnostics {
    ok: bool,
    bootstrap: Bootstrap,
}

/// The retained previous storage root (none).
#[derive(Serialize, ToSchema)]
pub(crate) struct RetainedSource {
    ok: bool,
    retained_root: &'static str,
    retained_root_exists: bool,
}

/// The bootstrap document.
pub async fn bootstrap_body(st: &AppState) -> Bootstrap {
    let s = flags(st).await;
    let root = st.data_dir().to_string_lossy().into_owned();
    let blocking = if s.migration_pending {
        "migration_pending"
    } else if s.recovery_required {
        "recovery_required"
    } else if s.selection_required {
        "selection_required"
    } else {
        ""
    };
    Bootstrap {
        ok: true,
        current_root: root.clone(),
        recommended_root: root.clone(),
        anchor_root: root.clone(),
        cloudsave_root: st.opts.cloud.clone(),
        last_known_good_root: root,
        legacy_sources: Vec::new(),
        selection_required: s.selection_required,
        migration_pending: s.migration_pending,
        recovery_required: s.recovery_required,
        legacy_cleanup_pending: s.legacy_cleanup_pending,
        blocking_reason: blocking,
        last_error_summary: s.last_error_summary,
        stage: "stage3_web_restart",
        poll_interval_ms: 1200,
        migration: Migration {
            status: "",
            source_root: "",
            target_root: "",
            last_error: "",
        },
    }
}

pub(crate) async fn bootstrap(
    axum::extract::State(st): axum::extract::State<AppState>,
) -> Response {
    cache(bootstrap_body(&st).await, "no-cache")
}

pub(crate) async fn status(axum::extract::State(st): axum::extract::State<AppState>) -> Response {
    let b = bootstrap_body(&st).await;
    let lifecycle = match b.blocking_reason {
        "" => "ready",
        "migration_pending" => "maintenance",
        other => other,
    };
    cache(
        LocationStatus {
            ok: true,
            ready: b.blocking_reason.is_empty(),
            status: lifecycle,
            lifecycle_state: lifecycle,
            migration_stage: "",
            maintenance_message: "",
            poll_interval_ms: 1200,
            effective_root: b.current_root,
            last_error_summary: b.last_error_summary,
            blocking_reason: b.blocking_reason,
            completion_notice: CompletionNotice {
                completed: false,
                retained_root_exists: false,
            },
            storage: StorageFlags {
                selection_required: b.selection_required,
                migration_pending: b.migration_pending,
                recovery_required: b.recovery_required,
                legacy_cleanup_pending: b.legacy_cleanup_pending,
                stage: b.stage,
            },
            migration: b.migration,
        },
        "no-store",
    )
}

pub(crate) async fn diagnostics(
    axum::extract::State(st): axum::extract::State<AppState>,
) -> Response {
    let bootstrap = bootstrap_body(&st).await;
    cache(
        Diagnostics {
            ok: true,
            bootstrap,
        },
        "no-store",
    )
}

pub(crate) async fn retained_source() -> Response {
    cache(
        RetainedSource {
            ok: true,
            retained_root: "",
            retained_root_exists: false,
        },
        "no-store",
    )
}

/// Relocating storage: 409, not supported.
pub(crate) async fn unsupported() -> crate::error::FrontendError {
    crate::error::FrontendError::RelocationUnsupported
}

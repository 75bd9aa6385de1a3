//! `GET /healthz`, `GET /readyz`, `GET /metrics`: what a launcher or a monitor
//! reads (docs/operations.md). Loopback peers only (judged by the TCP peer,
//! like `/api/tools`), behind the Host rules of every request.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::api::{Api, ErrorDoc};
use super::envelope::EnvelopeKind;
use super::guards::LoopbackPeer;
use crate::metrics::{free_space, metrics};
use crate::state::AppState;

/// `/readyz` answers 503 below this much free space on the data dir's disk.
pub const MIN_FREE_BYTES: u64 = 64 << 20;

/// `GET /healthz`.
#[derive(Serialize, ToSchema)]
pub struct Alive {
    /// Always `"alive"`: the process answers.
    status: &'static str,
}

/// `GET /readyz`: 200 when every check passes, else 503 with the same body.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    /// Equal to `ready` (the `{success, error}` envelope of the 503).
    success: bool,
    /// Which checks failed, when not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// All three checks pass.
    ready: bool,
    /// Start-up is done (the listening line was printed).
    started: bool,
    /// A file could be created and removed in the data dir just now.
    writable: bool,
    /// Free bytes on the data dir's file system (absent when unknown).
    free_bytes: Option<u64>,
    /// The threshold `free_bytes` must reach.
    min_free_bytes: u64,
}

async fn healthz(_: LoopbackPeer) -> Response {
    super::envelope::ok_json(Alive { status: "alive" })
}

async fn readyz(_: LoopbackPeer, State(st): State<AppState>) -> Response {
    let dir = st.data_dir().to_path_buf();
    let (writable, free_bytes) = tokio::task::spawn_blocking(move || {
        // Named like the store's temporary files, so a crash here leaves
        // nothing the next start does not sweep.
        let probe = dir.join(format!(".readyz.{}.tmp", crate::store::temp_token()));
        let writable = std::fs::write(&probe, b"").is_ok() && std::fs::remove_file(&probe).is_ok();
        (writable, free_space(&dir))
    })
    .await
    .unwrap_or((false, None));
    let started = st.is_ready();
    let enough = free_bytes.is_some_and(|f| f >= MIN_FREE_BYTES);
    let ready = started && writable && enough;
    let failed: Vec<&str> = [
        (!started).then_some("start-up is not done"),
        (!writable).then_some("the data directory is not writable"),
        (!enough).then_some("the data directory's disk is (nearly) full"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let body = Readiness {
        success: ready,
        error: (!ready).then(|| format!("not ready: {}", failed.join("; "))),
        ready,
        started,
        writable,
        free_bytes,
        min_free_bytes: MIN_FREE_BYTES,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, super::envelope::ok_json(body)).into_response()
}

async fn metrics_text(_: LoopbackPeer, State(st): State<AppState>) -> Response {
    let dir = st.data_dir().to_path_buf();
    let text = tokio::task::spawn_blocking(move || metrics().encode(&dir))
        .await
        .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The health routes.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "health")
        .about("Liveness, readiness and Prometheus metrics for launchers and monitors (loopback clients only).")
        .get("/healthz", "the process is alive", healthz)
        .ok::<Alive>()
        .get("/readyz", "start-up done, data dir writable, free space", readyz)
        .ok::<Readiness>()
        .fails_with(ErrorDoc::new(
            503,
            EnvelopeKind::Success,
            "not ready: the body is the same Readiness, `error` names the failed checks",
        ))
        .get("/metrics", "Prometheus metrics (OpenMetrics text)", metrics_text)
        .ok_as::<String>("application/openmetrics-text")
}

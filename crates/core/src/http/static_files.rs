//! Static files: `/static/` from the bundle (after `--frontend-dir`'s `static/` when given), `/user_mmd/` and `/user_pngtuber/`
//! from the data dir, `/workshop/` from the workshop dir (when configured). Every path goes through [`crate::paths::safe_existing`].

use std::path::PathBuf;

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower::ServiceExt;
use tower_http::services::ServeFile;

use crate::paths::safe_existing;
use crate::state::AppState;

/// Data-dir folder of user MMD files (`/user_mmd/...`).
pub const USER_MMD: &str = "user_mmd";
/// Data-dir folder of PNGTuber packages (`/user_pngtuber/<folder>/...`).
pub const USER_PNGTUBER: &str = "user_pngtuber";

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

/// Serve `rel` under `root` with the media type from its extension.
pub async fn serve_contained(root: PathBuf, rel: &str, req: Request) -> Response {
    let Ok(path) = safe_existing(&root, rel) else {
        return not_found();
    };
    if !path.is_file() {
        return not_found();
    }
    match ServeFile::new(path).oneshot(req).await {
        Ok(r) => r.into_response(),
        Err(_) => not_found(),
    }
}

async fn bundle_static(
    State(st): State<AppState>,
    UrlPath(rel): UrlPath<String>,
    req: Request,
) -> Response {
    // With --frontend-dir, the original frontend's own static/ wins; what it lacks
    // (bundled models, MMD project files) still comes from the bundle (docs/frontend.md).
    if let Some(front) = &st.opts.frontend_dir {
        let root = front.join("static");
        if safe_existing(&root, &rel).is_ok_and(|p| p.is_file()) {
            return serve_contained(root, &rel, req).await;
        }
    }
    serve_contained(st.bundle_dir().join("static"), &rel, req).await
}

/// The request of a `/{folder}/{*path}` route of a data-dir folder.
type DataDirFile = (State<AppState>, UrlPath<String>, Request);

/// A file of the data dir's `folder` (the user MMD files, the PNGTuber packages).
async fn from_data_dir(folder: &str, (State(st), UrlPath(rel), req): DataDirFile) -> Response {
    serve_contained(st.data_dir().join(folder), &rel, req).await
}

async fn user_mmd(st: State<AppState>, rel: UrlPath<String>, req: Request) -> Response {
    from_data_dir(USER_MMD, (st, rel, req)).await
}

async fn user_pngtuber(st: State<AppState>, rel: UrlPath<String>, req: Request) -> Response {
    from_data_dir(USER_PNGTUBER, (st, rel, req)).await
}

async fn workshop(
    State(st): State<AppState>,
    UrlPath(rel): UrlPath<String>,
    req: Request,
) -> Response {
    match st.opts.workshop_dir.clone() {
        Some(root) => serve_contained(root, &rel, req).await,
        None => not_found(),
    }
}

/// The static routes (not part of the OpenAPI listing).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/static/{*path}", get(bundle_static))
        .route("/user_mmd/{*path}", get(user_mmd))
        .route("/user_pngtuber/{*path}", get(user_pngtuber))
        .route("/workshop/{*path}", get(workshop))
}

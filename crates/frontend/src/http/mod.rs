//! Thin HTTP handlers of the family's model routes: Live2D listings and
//! model files ([`live2d`]), VRM listings, uploads and deletion ([`vrm`]), and
//! the user mounts the pages load models from. The models themselves are
//! found in [`crate::models`].

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, MethodRouter};
use companiond_core::envelope::SuccessError;
use companiond_core::static_files::serve_contained;
use companiond_core::AppState;

pub(crate) mod live2d;
pub(crate) mod vrm;

/// `200 {success:false, error, ...}`: the original's answer for a model it cannot read.
fn not_read(body: SuccessError) -> Response {
    body.status(StatusCode::OK)
}

/// `GET /user_live2d/{*path}`, `/user_vrm/{*path}`: a file below
/// `<data>/<dir>`, served by core's contained static-file route.
pub(crate) fn user_files(dir: &'static str) -> MethodRouter<AppState> {
    get(
        move |State(st): State<AppState>, UrlPath(rel): UrlPath<String>, req: Request| async move {
            serve_contained(st.data_dir().join(dir), &rel, req).await
        },
    )
}

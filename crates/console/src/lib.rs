//! The built-in web console (docs/console.md).
//!
//! Plain HTML, CSS and JavaScript of our own under `crates/console/web/`, embedded
//! in the binary with `rust-embed`, in debug builds too (`debug-embed`, see
//! the crate's Cargo.toml).
//! Served at `/console/` always, and at `/` unless `--frontend-dir` gives `/` to the
//! original main page (crates/frontend).
//! The console speaks only the public HTTP interface and the chat WebSocket.

use axum::extract::Path as UrlPath;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use companiond_core::{Api, AppState};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "web/"]
struct Assets;

/// The console's routes (pages, not operations: they are not in `/openapi.json`).
pub fn api(state: &AppState) -> Api {
    let mut router = Router::new();
    // With --frontend-dir, `/` is the original main page (crates/frontend).
    if state.opts.frontend_dir.is_none() {
        router = router.route("/", get(|| async { asset("index.html") }));
    }
    Api::new(state, "console").raw(
        router
            .route(
                "/console",
                get(|| async { Redirect::permanent("/console/") }),
            )
            .route("/console/", get(|| async { asset("index.html") }))
            .route(
                "/console/{*path}",
                get(|UrlPath(path): UrlPath<String>| async move { asset(&path) }),
            ),
    )
}

/// One embedded file, or 404. Names come from the embedded table only, so a
/// request path can never reach the file system.
fn asset(path: &str) -> Response {
    let path = if path.is_empty() { "index.html" } else { path };
    match Assets::get(path) {
        Some(file) => {
            let mime = file.metadata.mimetype().to_string();
            (
                [
                    (header::CONTENT_TYPE, mime),
                    (header::CACHE_CONTROL, "no-cache".to_string()),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
                ],
                file.data.into_owned(),
            )
                .into_response()
        }
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}

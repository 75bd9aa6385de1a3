//! `/api/get_window_title`, `/api/screenshot` and `/api/screenshot/interactive`.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::guards::{token_matches, LoopbackPeer};
use companiond_core::task::blocking;
use companiond_core::AppState;
use serde::Serialize;
use utoipa::ToSchema;

use crate::desktop;
use crate::error::{SysResult, SystemError};

/// `GET /api/get_window_title`: `success:false` with a null title when the
/// title cannot be read (no window system, no tool).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "window_title": "Editor"}))]
pub struct WindowTitle {
    success: bool,
    window_title: Option<String>,
}

/// A capture as a data URL.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "data": "data:image/jpeg;base64,...", "size": 52011}))]
pub struct Screenshot {
    success: bool,
    /// `data:image/jpeg;base64,...` (or PNG).
    data: String,
    /// Bytes of the image.
    size: usize,
    /// Present (true) for an interactive capture.
    #[serde(skip_serializing_if = "Option::is_none")]
    interactive: Option<bool>,
}

/// `POST /api/screenshot/interactive` when the user cancelled the selection.
#[derive(Serialize, ToSchema)]
pub struct CaptureCanceled {
    success: bool,
    canceled: bool,
}

/// The answer of `POST /api/screenshot/interactive`: the capture or a cancel.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum RegionCapture {
    Captured(Screenshot),
    Canceled(CaptureCanceled),
}

/// `GET /api/get_window_title`.
pub async fn window_title() -> Json<WindowTitle> {
    let title = blocking(|| Ok::<_, SystemError>(desktop::window_title()))
        .await
        .ok()
        .flatten();
    Json(WindowTitle {
        success: title.is_some(),
        window_title: title,
    })
}

fn loopback_only(peer: Result<LoopbackPeer, Response>) -> SysResult<()> {
    match peer {
        Ok(_) => Ok(()),
        Err(_) => Err(SystemError::LoopbackOnly(
            "only available from localhost".into(),
        )),
    }
}

/// A failure of a capture route: its envelope, never cached.
fn no_store_error(e: SystemError) -> Response {
    no_store(e.into_response())
}

/// `POST /api/screenshot` (loopback peers only; every answer no-store).
pub async fn screenshot(peer: Result<LoopbackPeer, Response>) -> Result<Response, Response> {
    loopback_only(peer).map_err(no_store_error)?;
    let c = blocking(desktop::screenshot)
        .await
        .map_err(no_store_error)?;
    Ok(no_store(ok_json(Screenshot {
        success: true,
        data: c.data_url,
        size: c.size,
        interactive: None,
    })))
}

/// `POST /api/screenshot/interactive`: loopback peers only; the CSRF token is
/// checked when the request names an origin (every answer no-store).
pub async fn screenshot_interactive(
    State(st): State<AppState>,
    peer: Result<LoopbackPeer, Response>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    loopback_only(peer).map_err(no_store_error)?;
    if headers.contains_key(header::ORIGIN) || headers.contains_key(header::REFERER) {
        let token_ok = headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| token_matches(st.csrf_token(), t));
        if !token_ok || st.host_policy().has_foreign_origin(&headers) {
            return Err(no_store_error(SystemError::CsrfValidationFailed(
                "CSRF validation failed".into(),
            )));
        }
    }
    let capture = blocking(desktop::interactive)
        .await
        .map_err(no_store_error)?;
    Ok(no_store(ok_json(match capture {
        Some(c) => RegionCapture::Captured(Screenshot {
            success: true,
            data: c.data_url,
            size: c.size,
            interactive: Some(true),
        }),
        None => RegionCapture::Canceled(CaptureCanceled {
            success: false,
            canceled: true,
        }),
    })))
}

//! `/api/file-exists`, `/api/find-first-image`, `/api/meme/proxy-image` and
//! `/api/platform/proxy-image`.

use axum::body::Body;
use axum::extract::State;
use companiond_core::envelope::QueryOf;

use super::queries::*;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::task::blocking;
use companiond_core::{AppState, Ext};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::error::{SysResult, SystemError};
use crate::files;
use crate::state::SystemState;

/// `GET /api/file-exists`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"exists": true}))]
pub struct FileExists {
    exists: bool,
}

/// `GET /api/find-first-image`: the first preview image, or `success:false`
/// with `error_code: not_found` (status 200) when the folder has none.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum FirstImage {
    Found(FoundImage),
    Missing(NoImage),
}

/// A preview image found.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "imagePath": "static/models/a/preview.png",
    "url": "/static/models/a/preview.png"}))]
pub struct FoundImage {
    success: bool,
    /// The image's path as shown to the user.
    #[serde(rename = "imagePath")]
    image_path: String,
    /// Where the page loads it from.
    url: String,
}

/// No preview image under 1 MiB in the folder.
#[derive(Serialize, ToSchema)]
pub struct NoImage {
    success: bool,
    /// Always `not_found`.
    error_code: &'static str,
    error: &'static str,
}

/// `GET /api/file-exists?path=`.
pub async fn file_exists(
    State(st): State<AppState>,
    QueryOf(q): QueryOf<FileExistsQuery>,
) -> Result<Json<FileExists>, Response> {
    let path = q.path;
    let bundle = st.bundle_dir().to_path_buf();
    let exists = blocking(move || files::file_exists(&path, &bundle))
        .await
        .map_err(|e| e.with_fields(json!({"exists": false})))?;
    Ok(Json(FileExists { exists }))
}

/// `GET /api/find-first-image?folder=`.
pub async fn find_first_image(
    Ext(sys): Ext<SystemState>,
    QueryOf(q): QueryOf<FirstImageQuery>,
) -> SysResult<Json<FirstImage>> {
    let folder = q.folder;
    let roots = sys.roots.clone();
    let found = blocking(move || files::find_first_image(&roots, &folder)).await?;
    Ok(Json(match found {
        Some(loc) => FirstImage::Found(FoundImage {
            success: true,
            image_path: loc.display_path(),
            url: loc.url(),
        }),
        None => FirstImage::Missing(NoImage {
            success: false,
            error_code: "not_found",
            error: "no preview image smaller than 1 MiB was found",
        }),
    }))
}

/// `GET /api/meme/proxy-image?url=`: the image bytes, cached for a day.
pub async fn meme_proxy(
    Ext(sys): Ext<SystemState>,
    QueryOf(q): QueryOf<MemeUrlQuery>,
) -> SysResult<Response> {
    if q.url.is_empty() {
        return Err(SystemError::MissingUrl("query url is required".into()));
    }
    let url = q.url;
    let img = sys.meme.fetch(&url).await?;
    let mut resp = (StatusCode::OK, img.body).into_response();
    let h = resp.headers_mut();
    if let Ok(ct) = HeaderValue::from_str(&img.content_type) {
        h.insert(header::CONTENT_TYPE, ct);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=86400"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        "x-cache",
        HeaderValue::from_static(if img.cache_hit { "HIT" } else { "MISS" }),
    );
    Ok(resp)
}

/// `GET /api/platform/proxy-image?image_path=` (also `/api/steam/proxy-image`): a
/// local or workshop image from an approved root, streamed.
pub async fn platform_proxy_image(
    Ext(sys): Ext<SystemState>,
    QueryOf(q): QueryOf<ImagePathQuery>,
) -> SysResult<Response> {
    let raw = q.image_path;
    if raw.trim().is_empty() {
        return Err(SystemError::MissingPath(
            "query image_path is required".into(),
        ));
    }
    let roots = sys.roots.clone();
    let img = blocking(move || files::proxy_image(&roots, &raw)).await?;
    let file = tokio::fs::File::open(&img.path)
        .await
        .map_err(|_| SystemError::NotFound("file not found".into()))?;
    let stream = tokio_util::io::ReaderStream::new(file);
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(img.content_type),
    );
    if let Ok(v) = HeaderValue::from_str(&img.len.to_string()) {
        h.insert(header::CONTENT_LENGTH, v);
    }
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    Ok(resp)
}

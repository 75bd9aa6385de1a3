//! `/api/model/pngtuber/…`: package upload, listing and delete.

use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::QueryOf;
use serde_json::Value;

use companiond_core::envelope::{no_store, JsonBody};
use companiond_core::Ext;

use super::answers::{Message, PackageKey, PackageList, PackageUploadedAnswer};
use super::{done, multipart, multipart_error, refused};
use crate::error::AvatarError;
use crate::Avatars;

/// `POST /api/model/pngtuber/upload_model`: every part named `files` is one
/// file of the package, its file name the path inside the package.
pub async fn upload(Ext(av): Ext<Avatars>, req: Request) -> Response {
    let mut mp = match multipart(req).await {
        Ok(mp) => mp,
        Err(e) => return e.into_response(),
    };
    let mut up = match av.pngtuber.begin_upload().await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    let streamed = loop {
        let mut field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) => break Err(multipart_error(e)),
        };
        if field.name() != Some("files") {
            continue;
        }
        let name = field.file_name().map(str::to_string);
        if let Err(e) = up.add_file(name.as_deref(), &mut field).await {
            break Err(e);
        }
    };
    match streamed {
        Ok(()) => done(
            av.pngtuber
                .finish_upload(up)
                .await
                .map(PackageUploadedAnswer::from),
        ),
        Err(e) => {
            drop(up);
            drop(mp);
            refused(e)
        }
    }
}

/// `GET /api/model/pngtuber/models`: a [`PackageList`], written as its head
/// and the store's serialised array (not parsed again).
pub async fn models(Ext(av): Ext<Avatars>) -> Response {
    let array = match av.pngtuber.list_json().await {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let mut body = Vec::with_capacity(PackageList::HEAD.len() + array.len() + 1);
    body.extend_from_slice(PackageList::HEAD);
    body.extend_from_slice(&array);
    body.push(b'}');
    no_store((
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    ))
}

/// `DELETE /api/model/pngtuber/model` by `folder`, `url` or `name` (query or
/// JSON body, in that order of preference). The body stays any JSON value
/// (`JsonBody<Value>`): a body that is not an object leaves the query's key in
/// force, which no object type can express.
pub async fn delete(
    Ext(av): Ext<Avatars>,
    QueryOf(q): QueryOf<PackageKey>,
    body: JsonBody<Value>,
) -> Response {
    let key = q.under(&body.0).key();
    let Some(key) = key else {
        return AvatarError::invalid("missing_identifier", "missing PNGTuber model identifier")
            .into_response();
    };
    let deleted = av.pngtuber.delete(&key).await;
    done(deleted.map(|folder| Message::new(format!("PNGTuber model {folder} deleted"))))
}

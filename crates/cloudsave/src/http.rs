//! Thin HTTP handlers of `/api/cloudsave`: the name audit, the option body,
//! the envelopes. The family state arrives as `Ext<CloudSave>`.

use std::future::Future;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Request};
use axum::response::{IntoResponse, Response};
use companiond_core::characters::{validate_name, NameRules};
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::{paths, Ext};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::download::DownloadOptions;
use crate::error::{CloudSaveError, Failure};
use crate::family::{CloudSave, Succeeded};

/// Largest option body accepted.
const MAX_BODY: usize = 64 * 1024;

/// Check a character name from the URL before any storage key is built:
/// the character-name rules (dots allowed for existing names), no surrounding
/// whitespace, one plain path segment.
fn audit_name(raw: &str) -> Result<String, CloudSaveError> {
    match validate_name(raw, NameRules::EXISTING) {
        Ok(n) if n == raw && paths::safe_name(&n).is_ok() => Ok(n),
        Ok(_) => Err(CloudSaveError::NameAuditFailed {
            reason: "surrounding_whitespace",
            message: "the character name may not start or end with whitespace".into(),
        }),
        Err(e) => Err(CloudSaveError::NameAuditFailed {
            reason: e.code(),
            message: e.message().to_string(),
        }),
    }
}

/// The JSON object body (empty body and `null` read as `{}`).
async fn options(req: Request) -> Result<Map<String, Value>, CloudSaveError> {
    let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|_| CloudSaveError::BodyTooLarge)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err(CloudSaveError::InvalidJsonBody(
            "expected a JSON object".into(),
        )),
        Err(e) => Err(CloudSaveError::InvalidJsonBody(e.to_string())),
    }
}

/// A boolean option: absent → default; any other type → 400.
fn flag(m: &Map<String, Value>, key: &'static str, default: bool) -> Result<bool, CloudSaveError> {
    match m.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(CloudSaveError::InvalidParameter(key)),
    }
}

/// A transfer: the audited name and the options `read` takes from the body
/// (a failure is answered for the name as given), then `run` to its end even
/// when the client goes away; a panic or a failed background task of it is
/// answered as `failed`.
async fn transfer<O, T, Work>(
    cloud: Arc<CloudSave>,
    raw: String,
    req: Request,
    read: impl FnOnce(&Map<String, Value>) -> Result<O, CloudSaveError>,
    run: impl FnOnce(Arc<CloudSave>, String, O) -> Work,
    failed: fn(String) -> CloudSaveError,
) -> Response
where
    T: Serialize + Send + 'static,
    Work: Future<Output = Result<T, CloudSaveError>> + Send + 'static,
{
    let parsed = async {
        let name = audit_name(&raw)?;
        let body = options(req).await?;
        Ok::<_, CloudSaveError>((name, read(&body)?))
    };
    let (name, opts) = match parsed.await {
        Ok(p) => p,
        Err(e) => return Failure(e, Some(raw)).into_response(),
    };
    let r = tokio::spawn(run(cloud, name.clone(), opts))
        .await
        .unwrap_or_else(|e| Err(failed(e.to_string())));
    answer(r.map_err(|e| e.in_transfer(failed)), Some(&name))
}

/// `{success: true, …}`, never cached; or the failure envelope for `name`.
fn answer<T: Serialize>(r: Result<T, CloudSaveError>, name: Option<&str>) -> Response {
    match r {
        Ok(v) => no_store(ok_json(Succeeded::new(v))),
        Err(e) => Failure(e, name.map(str::to_string)).into_response(),
    }
}

/// `GET /api/cloudsave/summary`.
pub async fn summary(Ext(cloud): Ext<CloudSave>) -> Response {
    answer(cloud.summary().await, None)
}

/// `GET /api/cloudsave/platform-autocloud-config`.
pub async fn autocloud(Ext(cloud): Ext<CloudSave>) -> Response {
    answer(Ok(cloud.autocloud_config().await), None)
}

/// `GET /api/cloudsave/character/{name}`.
pub async fn detail(Ext(cloud): Ext<CloudSave>, UrlPath(raw): UrlPath<String>) -> Response {
    match audit_name(&raw) {
        Ok(name) => answer(cloud.detail(&name).await, Some(&name)),
        Err(e) => Failure(e, Some(raw)).into_response(),
    }
}

/// The character of a route (`/api/cloudsave/character/{name}/...`): the
/// character-name rules, dots allowed for existing names, no surrounding whitespace.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // read as a string by `audit_name`
pub struct CharacterPath {
    /// The character's name.
    #[param(example = "Companion", min_length = 1, max_length = 60)]
    name: String,
}

/// The body of an upload (absent fields take their default).
#[derive(ToSchema)]
#[schema(example = json!({"overwrite": false}))]
pub struct UploadOptions {
    /// Replace the cloud's unit of the character.
    #[schema(default = false)]
    pub overwrite: bool,
}

/// `POST /api/cloudsave/character/{name}/upload` `{overwrite?}`.
pub async fn upload(
    Ext(cloud): Ext<CloudSave>,
    UrlPath(raw): UrlPath<String>,
    req: Request,
) -> Response {
    let read = |body: &Map<String, Value>| -> Result<UploadOptions, CloudSaveError> {
        Ok(UploadOptions {
            overwrite: flag(body, "overwrite", false)?,
        })
    };
    let run = |cloud: Arc<CloudSave>, name: String, opts: UploadOptions| async move {
        cloud.upload(&name, opts.overwrite).await
    };
    transfer(cloud, raw, req, read, run, CloudSaveError::UploadFailed).await
}

/// `POST /api/cloudsave/character/{name}/download`
/// `{overwrite?, backup_before_overwrite?, force?}`.
pub async fn download(
    Ext(cloud): Ext<CloudSave>,
    UrlPath(raw): UrlPath<String>,
    req: Request,
) -> Response {
    let read = |body: &Map<String, Value>| -> Result<DownloadOptions, CloudSaveError> {
        Ok(DownloadOptions {
            overwrite: flag(body, "overwrite", false)?,
            backup_before_overwrite: flag(body, "backup_before_overwrite", true)?,
            force: flag(body, "force", false)?,
        })
    };
    let run = |cloud: Arc<CloudSave>, name: String, opts| async move {
        cloud.download(&name, opts).await
    };
    transfer(cloud, raw, req, read, run, CloudSaveError::DownloadFailed).await
}

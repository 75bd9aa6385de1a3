//! Thin HTTP handlers over [`crate::service`]: name audit, body options, envelopes.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, Request};
use axum::response::{IntoResponse, Response};
use companiond_core::characters::{validate_name, NameRules};
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::{paths, Api, AppState};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{CloudSaveError, Failure};
use crate::service::{CloudSave, DownloadOptions, Succeeded};

/// Largest option body accepted.
const MAX_BODY: usize = 64 * 1024;

/// Check a character name from the URL before any storage key is built:
/// the character-name rules (dots allowed for existing names), no surrounding
/// whitespace, one plain path segment.
pub fn audit_name(raw: &str) -> Result<String, CloudSaveError> {
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

fn answer<T: Serialize>(r: Result<T, CloudSaveError>, name: Option<&str>) -> Response {
    match r {
        Ok(v) => no_store(ok_json(Succeeded::new(v))),
        Err(e) => Failure(e, name.map(str::to_string)).into_response(),
    }
}

async fn summary(svc: Arc<CloudSave>) -> Response {
    answer(svc.summary().await, None)
}

async fn autocloud(svc: Arc<CloudSave>) -> Response {
    no_store(ok_json(Succeeded::new(svc.autocloud_config().await)))
}

async fn detail(svc: Arc<CloudSave>, raw: String) -> Response {
    let name = match audit_name(&raw) {
        Ok(n) => n,
        Err(e) => return Failure(e, Some(raw)).into_response(),
    };
    answer(svc.detail(&name).await, Some(&name))
}

async fn upload(svc: Arc<CloudSave>, raw: String, req: Request) -> Response {
    let parsed = async {
        let name = audit_name(&raw)?;
        let body = options(req).await?;
        Ok::<_, CloudSaveError>((name, flag(&body, "overwrite", false)?))
    }
    .await;
    let (name, overwrite) = match parsed {
        Ok(p) => p,
        Err(e) => return Failure(e, Some(raw)).into_response(),
    };
    // The work finishes even when the client goes away.
    let n = name.clone();
    let r = tokio::spawn(async move { svc.upload(&n, overwrite).await })
        .await
        .unwrap_or_else(|e| Err(CloudSaveError::UploadFailed(e.to_string())));
    answer(r, Some(&name))
}

async fn download(svc: Arc<CloudSave>, raw: String, req: Request) -> Response {
    let parsed = async {
        let name = audit_name(&raw)?;
        let body = options(req).await?;
        let opts = DownloadOptions {
            overwrite: flag(&body, "overwrite", false)?,
            backup_before_overwrite: flag(&body, "backup_before_overwrite", true)?,
            force: flag(&body, "force", false)?,
        };
        Ok::<_, CloudSaveError>((name, opts))
    }
    .await;
    let (name, opts) = match parsed {
        Ok(p) => p,
        Err(e) => return Failure(e, Some(raw)).into_response(),
    };
    let n = name.clone();
    let r = tokio::spawn(async move { svc.download(&n, opts).await })
        .await
        .unwrap_or_else(|e| Err(CloudSaveError::DownloadFailed(e.to_string())));
    answer(r, Some(&name))
}

/// The five routes of interface.md § Cloud save.
pub fn api(state: &AppState) -> Api {
    companiond_core::fence::recover_stale(&state.store);
    let svc = Arc::new(CloudSave::new(state));
    let (s1, s2, s3, s4, s5) = (svc.clone(), svc.clone(), svc.clone(), svc.clone(), svc);
    Api::new(state, "cloudsave")
        .get(
            "/api/cloudsave/summary",
            "compare local and cloud character units",
            move || summary(s1.clone()),
        )
        .get(
            "/api/cloudsave/platform-autocloud-config",
            "cloud-save backend and sync state",
            move || autocloud(s2.clone()),
        )
        .get(
            "/api/cloudsave/character/{name}",
            "local and cloud comparison of one character",
            move |UrlPath(name): UrlPath<String>| detail(s3.clone(), name),
        )
        .post(
            "/api/cloudsave/character/{name}/upload",
            "export one character unit to cloud storage",
            move |UrlPath(name): UrlPath<String>, req: Request| upload(s4.clone(), name, req),
        )
        .post(
            "/api/cloudsave/character/{name}/download",
            "import one character unit and reload runtime state",
            move |UrlPath(name): UrlPath<String>, req: Request| download(s5.clone(), name, req),
        )
}

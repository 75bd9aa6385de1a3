//! Thin HTTP handlers of `/api/cloudsave`: the name audit, the option body,
//! the envelopes. The family state arrives as `Ext<CloudSave>`.

use std::future::Future;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Request};
use axum::response::{IntoResponse, Response};
use companiond_core::characters::{validate_name, NameRules};
use companiond_core::envelope::{no_store, ok_json, BodyFault, BodyOf, BodyRejection};
use companiond_core::{paths, Ext};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
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

/// The options body's refusal: an option that is not a boolean names itself;
/// a body that is not a JSON object (empty and `null` read as `{}`) or too large.
fn options_refused(fault: BodyFault) -> CloudSaveError {
    match fault {
        BodyFault::TooLarge { .. } => CloudSaveError::BodyTooLarge,
        BodyFault::NotJson(e) => CloudSaveError::InvalidJsonBody(e),
        BodyFault::NotObject => CloudSaveError::InvalidJsonBody("expected a JSON object".into()),
        BodyFault::Invalid { field, why } => match field.as_str() {
            "overwrite" => CloudSaveError::InvalidParameter("overwrite"),
            "backup_before_overwrite" => {
                CloudSaveError::InvalidParameter("backup_before_overwrite")
            }
            "force" => CloudSaveError::InvalidParameter("force"),
            _ => CloudSaveError::InvalidJsonBody(why),
        },
    }
}

impl BodyRejection for UploadOptions {
    type Error = Failure;
    const LIMIT: usize = MAX_BODY;
    const NULL_IS_EMPTY: bool = true;
    fn rejected(fault: BodyFault) -> Failure {
        Failure(options_refused(fault), None)
    }
}

impl BodyRejection for DownloadOptions {
    type Error = Failure;
    const LIMIT: usize = MAX_BODY;
    const NULL_IS_EMPTY: bool = true;
    fn rejected(fault: BodyFault) -> Failure {
        Failure(options_refused(fault), None)
    }
}

/// A transfer: the audited name, then the options parsed from the body (a
/// failure is answered for the name as given), then `run` to its end even
/// when the client goes away; a panic or a failed background task of it is
/// answered as `failed`.
async fn transfer<O, T, Work>(
    cloud: Arc<CloudSave>,
    raw: String,
    req: Request,
    run: impl FnOnce(Arc<CloudSave>, String, O) -> Work,
    failed: fn(String) -> CloudSaveError,
) -> Response
where
    O: DeserializeOwned + BodyRejection<Error = Failure>,
    T: Serialize + Send + 'static,
    Work: Future<Output = Result<T, CloudSaveError>> + Send + 'static,
{
    let parsed = async {
        let name = audit_name(&raw)?;
        let opts = BodyOf::<O>::read(req.into_body())
            .await
            .map_err(|Failure(e, _)| e)?;
        Ok::<_, CloudSaveError>((name, opts))
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
pub async fn detail(
    Ext(cloud): Ext<CloudSave>,
    UrlPath(CharacterPath { name: raw }): UrlPath<CharacterPath>,
) -> Response {
    match audit_name(&raw) {
        Ok(name) => answer(cloud.detail(&name).await, Some(&name)),
        Err(e) => Failure(e, Some(raw)).into_response(),
    }
}

/// The character of a route (`/api/cloudsave/character/{name}/...`): the
/// character-name rules, dots allowed for existing names, no surrounding whitespace.
// The handlers take it as `UrlPath<CharacterPath>` and audit `name` with `audit_name`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CharacterPath {
    /// The character's name.
    #[param(example = "Companion", min_length = 1, max_length = 60)]
    name: String,
}

/// The body of an upload (absent fields take their default; another type
/// than a boolean, null too, is `CLOUDSAVE_INVALID_PARAMETER`).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"overwrite": false}))]
pub struct UploadOptions {
    /// Replace the cloud's unit of the character.
    #[serde(default)]
    #[schema(default = false)]
    pub overwrite: bool,
}

/// `POST /api/cloudsave/character/{name}/upload` `{overwrite?}`.
pub async fn upload(
    Ext(cloud): Ext<CloudSave>,
    UrlPath(CharacterPath { name: raw }): UrlPath<CharacterPath>,
    req: Request,
) -> Response {
    let run = |cloud: Arc<CloudSave>, name: String, opts: UploadOptions| async move {
        cloud.upload(&name, opts.overwrite).await
    };
    transfer(cloud, raw, req, run, CloudSaveError::UploadFailed).await
}

/// `POST /api/cloudsave/character/{name}/download`
/// `{overwrite?, backup_before_overwrite?, force?}`.
pub async fn download(
    Ext(cloud): Ext<CloudSave>,
    UrlPath(CharacterPath { name: raw }): UrlPath<CharacterPath>,
    req: Request,
) -> Response {
    let run = |cloud: Arc<CloudSave>, name: String, opts: DownloadOptions| async move {
        cloud.download(&name, opts).await
    };
    transfer(cloud, raw, req, run, CloudSaveError::DownloadFailed).await
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use companiond_core::envelope::parse_body_with;

    fn download(s: &str) -> Result<DownloadOptions, CloudSaveError> {
        parse_body_with::<DownloadOptions>(s.as_bytes(), true)
            .map_err(|f| DownloadOptions::rejected(f).0)
    }

    #[test]
    fn options_read_as_before() {
        for empty in ["", "null", "{}", r#"{"other": 1}"#] {
            let o = download(empty).ok();
            assert!(
                o.is_some_and(|o| !o.overwrite && o.backup_before_overwrite && !o.force),
                "{empty}"
            );
        }
        assert!(matches!(
            download(r#"{"force": null}"#),
            Err(CloudSaveError::InvalidParameter("force"))
        ));
        assert!(matches!(
            download(r#"{"backup_before_overwrite": "no"}"#),
            Err(CloudSaveError::InvalidParameter("backup_before_overwrite"))
        ));
        assert!(matches!(
            download("[true]"),
            Err(CloudSaveError::InvalidJsonBody(_))
        ));
        assert!(matches!(
            download("{x"),
            Err(CloudSaveError::InvalidJsonBody(_))
        ));
    }
}

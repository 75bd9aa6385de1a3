//! `GET /api/backup` (the whole data folder as a ZIP, streamed) and
//! `POST /api/backup/restore` (an archive streamed in, checked, and kept to
//! replace the data folder at the next start). The archive itself is
//! `crate::backup`; docs/data.md § Backup and restore.
//!
//! A restore cannot replace the folder under the running server (every
//! family holds documents and databases of it open), so the route keeps the
//! checked archive as `<data>/restore-pending.zip` and the next start applies
//! it before anything else reads the folder (`server::run`).

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::backup::ArchiveError;
use crate::envelope::{lenient, QueryOf};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use utoipa::ToSchema;

use super::api::{Api, DocumentedError, ErrorDoc};
use super::envelope::{ok_json, SuccessError};
use super::guards::Csrf;
use crate::state::AppState;

/// A refused backup or restore.
#[derive(Debug)]
/// `GET /api/backup`: what the ZIP keeps beside the data.
#[derive(Deserialize, IntoParams)]
pub struct BackupQuery {
    /// `true` (or `1`) keeps the `*ApiKey` values.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub secrets: bool,
    /// `true` (or `1`) keeps the snapshots and the trash.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub snapshots: bool,
}

crate::query_rejected!(BackupError, BackupError::Invalid => BackupQuery);

pub enum BackupError {
    /// 400 `backup_invalid`: not a companiond backup, or a member outside the folder.
    Invalid(String),
    /// 409 `backup_format_newer`: written by a newer companiond.
    Newer(String),
    /// 500 `storage_error`.
    Storage(String),
}

impl IntoResponse for BackupError {
    fn into_response(self) -> Response {
        match self {
            BackupError::Invalid(e) => SuccessError::new(e)
                .code("backup_invalid")
                .status(StatusCode::BAD_REQUEST),
            BackupError::Newer(e) => SuccessError::new(e)
                .code("backup_format_newer")
                .status(StatusCode::CONFLICT),
            BackupError::Storage(e) => crate::disk::storage_error(e),
        }
    }
}

impl DocumentedError for BackupError {
    fn answers() -> Vec<ErrorDoc> {
        vec![
            ErrorDoc::observed(
                "not a companiond backup",
                BackupError::Invalid("not a companiond backup".into()),
            ),
            ErrorDoc::observed(
                "an archive of a newer format",
                BackupError::Newer("the backup is of format 2".into()),
            ),
            ErrorDoc::observed(
                "the archive could not be written",
                BackupError::Storage("disk full".into()),
            ),
        ]
    }
}

/// `GET /api/backup[?secrets=true]`: `application/zip`, streamed from a
/// temporary file that is unlinked as soon as it is open (the data stays
/// readable through the open handle; nothing is left after the answer).
async fn download(State(st): State<AppState>, QueryOf(q): QueryOf<BackupQuery>) -> Response {
    let include = crate::backup::Include {
        secrets: q.secrets,
        snapshots: q.snapshots,
    };
    let dir = st.data_dir().to_path_buf();
    let made = tokio::task::spawn_blocking(move || {
        // The store's temporary name: a crash leaves what the sweep removes,
        // and the backup walk skips.
        let tmp = dir.join(format!(".backup.zip.{}.tmp", crate::store::temp_token()));
        let r = (|| {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            let written = crate::backup::write_archive(&dir, &mut w, include)?;
            let mut f = w.into_inner().map_err(|e| e.into_error())?;
            std::io::Seek::rewind(&mut f)?;
            let len = f.metadata()?.len();
            Ok::<_, std::io::Error>((f, len, written))
        })();
        // Unix keeps the open file; elsewhere the start-up sweep removes it.
        let _ = std::fs::remove_file(&tmp);
        r
    })
    .await;
    let (file, len) = match made {
        Ok(Ok((f, len, _))) => (f, len),
        Ok(Err(e)) => {
            return BackupError::Storage(format!("cannot write the backup: {e}")).into_response()
        }
        Err(e) => return BackupError::Storage(e.to_string()).into_response(),
    };
    let stream =
        tokio_util::io::ReaderStream::with_capacity(tokio::fs::File::from_std(file), 256 << 10);
    let date = crate::now_rfc3339();
    let day = date.get(..10).unwrap_or("backup");
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/zip"),
    );
    h.insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
    if let Ok(v) = header::HeaderValue::from_str(&format!(
        "attachment; filename=\"companiond-backup-{day}.zip\""
    )) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    resp
}

/// `POST /api/backup/restore`: kept for the next start.
#[derive(Serialize, ToSchema)]
pub struct RestorePending {
    success: bool,
    /// Always true: the folder is replaced when companiond starts next.
    restart_required: bool,
    /// When the archive was taken (its manifest).
    created_at: String,
    /// Whether the archive holds the `*ApiKey` values.
    secrets: bool,
}

async fn upload(State(st): State<AppState>, body: Body) -> Result<Response, BackupError> {
    let dir = st.data_dir().to_path_buf();
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        crate::backup::PENDING,
        crate::store::temp_token()
    ));
    let storage = |e: std::io::Error| BackupError::Storage(format!("cannot keep the archive: {e}"));
    let mut f = tokio::fs::File::create(&tmp).await.map_err(storage)?;
    let mut stream = body.into_data_stream();
    let copied: Result<(), BackupError> = async {
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| BackupError::Invalid(format!("the upload broke off: {e}")))?;
            f.write_all(&chunk).await.map_err(storage)?;
        }
        f.sync_all().await.map_err(storage)
    }
    .await;
    drop(f);
    let checked = match copied {
        Ok(()) => {
            let t = tmp.clone();
            tokio::task::spawn_blocking(move || crate::backup::check_file(&t))
                .await
                .map_err(|e| BackupError::Storage(e.to_string()))
                .and_then(|r| {
                    r.map_err(|e| match e {
                        ArchiveError::Newer(_) => BackupError::Newer(e.to_string()),
                        ArchiveError::Unreadable(_) => BackupError::Storage(e.to_string()),
                        _ => BackupError::Invalid(e.to_string()),
                    })
                })
        }
        Err(e) => Err(e),
    };
    let manifest = match checked {
        Ok(m) => m,
        Err(e) => {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
    };
    if let Err(e) = tokio::fs::rename(&tmp, dir.join(crate::backup::PENDING)).await {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(storage(e));
    }
    Ok(ok_json(RestorePending {
        success: true,
        restart_required: true,
        created_at: manifest.created_at,
        secrets: manifest.secrets,
    }))
}

/// The backup routes.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "backup")
        .about("Whole backups of the data folder (docs/data.md): a ZIP streamed out, and an archive streamed in to replace the folder at the next start.")
        .guarded(
            Method::GET,
            "/api/backup",
            "the whole data folder as a ZIP (query: secrets=true keeps the *ApiKey values, snapshots=true the snapshots and trash)",
            Csrf::Success,
            download,
        )
        .id("download_backup")
        .query::<BackupQuery>()
        .fails::<BackupError>()
        .guarded_route(
            Method::POST,
            "/api/backup/restore",
            "upload a backup (the body is the ZIP): checked, then applied at the next start",
            Csrf::Success,
            post(upload).layer(DefaultBodyLimit::disable()),
        )
        .id("restore_backup")
        .ok::<RestorePending>()
        .fails::<BackupError>()
}

//! Uploads of user VRM models and animations: the file streamed into
//! `<data>/user_vrm/` (animations: `user_vrm/animation/`) through a hidden
//! file, synced, then published under its name without replacing one.

use std::fmt::Display;
use std::path::Path;

use axum::body::Bytes;
use futures::Stream;

use crate::error::{Answer, FrontendError};

use super::USER_VRM;

/// Largest VRM model or animation accepted by an upload (the original's 200 MB).
pub const MAX_VRM_BYTES: u64 = 200 << 20;

pub(crate) fn upload_refused(msg: impl Into<String>, code: &'static str) -> FrontendError {
    FrontendError::UploadRefused {
        code,
        error: msg.into(),
    }
}

/// Store the upload `body`, sent as the file `raw` (a path is cut to its base
/// name), as a VRM model (`.vrm` into `<data>/user_vrm/`) or an `animation`
/// (`.vrma` into `<data>/user_vrm/animation/`): its file name (ending in the
/// extension, longer than it) and size. A taken name, a wrong extension, a bad
/// name or more than [`MAX_VRM_BYTES`] → 400, nothing stored.
pub(crate) async fn store_vrm<E: Display>(
    data: &Path,
    raw: &str,
    body: &mut (impl Stream<Item = Result<Bytes, E>> + Unpin),
    animation: bool,
) -> Answer<(String, u64)> {
    use futures::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let (ext, label) = if animation {
        (".vrma", "VRM animation")
    } else {
        (".vrm", "VRM model")
    };
    let name = raw
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if !name.to_ascii_lowercase().ends_with(ext) || name.len() <= ext.len() {
        return Err(upload_refused(
            format!("the file must be a {ext} file"),
            "invalid_extension",
        ));
    }
    if let Err(e) = companiond_core::paths::check_file_name(&name) {
        return Err(upload_refused(
            format!("invalid file name: {e}"),
            "invalid_name",
        ));
    }
    let mut dir = data.join(USER_VRM);
    if animation {
        dir = dir.join("animation");
    }
    let target = dir.join(&name);
    let tmp = dir.join(format!(
        ".{name}.{}.tmp",
        companiond_core::options::random_token()
    ));
    let written = async {
        tokio::fs::create_dir_all(&dir).await?;
        if tokio::fs::try_exists(&target).await.unwrap_or(false) {
            return Ok(Err(format!(
                "{label} {name} already exists: delete or rename the existing one first"
            )));
        }
        let mut f = tokio::fs::File::create(&tmp).await?;
        let mut total: u64 = 0;
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => return Ok(Err(format!("the upload was interrupted: {e}"))),
            };
            total += chunk.len() as u64;
            if total > MAX_VRM_BYTES {
                return Ok(Err(format!(
                    "the file is too large (at most {} MB)",
                    MAX_VRM_BYTES >> 20
                )));
            }
            f.write_all(&chunk).await?;
        }
        f.sync_all().await?;
        drop(f);
        // No-clobber publish: a concurrent upload of the same name loses.
        match tokio::fs::hard_link(&tmp, &target).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Ok(Err(format!("{label} {name} already exists")))
            }
            Err(_) => {
                if tokio::fs::try_exists(&target).await.unwrap_or(false) {
                    return Ok(Err(format!("{label} {name} already exists")));
                }
                tokio::fs::rename(&tmp, &target).await?;
            }
        }
        Ok::<_, std::io::Error>(Ok(total))
    }
    .await;
    let _ = tokio::fs::remove_file(&tmp).await;
    match written {
        Ok(Ok(size)) => Ok((name, size)),
        Ok(Err(msg)) => Err(upload_refused(msg, "upload_refused")),
        Err(e) => Err(FrontendError::Storage(format!(
            "cannot store the {label}: {e}"
        ))),
    }
}

//! Uploads of user VRM models and animations: the file streamed into
//! `<data>/user_vrm/` (animations: `user_vrm/animation/`) through core's
//! [`Staging`] (a hidden temporary file, synced, removed on any failure or
//! when the request is dropped), then published under its name without
//! replacing one.

use std::fmt::Display;
use std::path::Path;

use axum::body::Bytes;
use companiond_core::staging::{StageError, Staging};
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
    let storage =
        |e: std::io::Error| FrontendError::Storage(format!("cannot store the {label}: {e}"));
    let refused = |msg: String| upload_refused(msg, "upload_refused");
    tokio::fs::create_dir_all(&dir).await.map_err(storage)?;
    if tokio::fs::try_exists(&target).await.unwrap_or(false) {
        return Err(refused(format!(
            "{label} {name} already exists: delete or rename the existing one first"
        )));
    }
    // The temporary name as before (`.<name>.<32 hex>.tmp`, the token carrying
    // this process's mark): the pattern core's `store::sweep_leftover_temps`
    // removes at the next start, should a crash leave one, and not while we write it.
    let tmp = dir.join(format!(
        ".{name}.{}.tmp",
        companiond_core::store::temp_token()
    ));
    let staging = Staging::create(&tmp, MAX_VRM_BYTES, true).map_err(storage)?;
    let staged = match staging.drain(body).await {
        Ok(staged) => staged,
        Err(StageError::TooLarge { .. }) => {
            return Err(refused(format!(
                "the file is too large (at most {} MB)",
                MAX_VRM_BYTES >> 20
            )))
        }
        Err(StageError::Body(e)) => {
            return Err(refused(format!("the upload was interrupted: {e}")))
        }
        Err(StageError::Io(e)) => return Err(storage(e)),
    };
    let size = staged.size;
    // No-clobber publish: a concurrent upload of the same name loses.
    let taken = || refused(format!("{label} {name} already exists"));
    match staged.file.persist_noclobber(&target) {
        Ok(()) => {}
        Err((_, e)) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(taken()),
        Err((file, _)) => {
            // No hard link here: a rename, unless the name was taken meanwhile.
            if tokio::fs::try_exists(&target).await.unwrap_or(false) {
                return Err(taken());
            }
            tokio::fs::rename(file.path(), &target)
                .await
                .map_err(storage)?;
            file.keep();
        }
    }
    Ok((name, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that breaks off is refused and leaves nothing behind.
    #[tokio::test]
    async fn an_interrupted_upload_stores_nothing() {
        let data = std::env::temp_dir().join(format!(
            "frontend-vrm-upload-{}-{}",
            std::process::id(),
            companiond_core::options::random_token()
        ));
        let mut body = futures::stream::iter(vec![Ok(Bytes::from_static(b"abc")), Err("gone")]);
        let r = store_vrm(&data, "Mika.vrm", &mut body, false).await;
        assert!(
            matches!(r, Err(FrontendError::UploadRefused { code: "upload_refused", ref error })
                if error == "the upload was interrupted: gone"),
            "{r:?}"
        );
        let left: Vec<_> = std::fs::read_dir(data.join(USER_VRM))
            .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
        let _ = std::fs::remove_dir_all(&data);
    }
}

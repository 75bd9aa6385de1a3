//! Uploads into the user MMD folder: a model or an animation streamed to a
//! hidden file and renamed into place, or a model ZIP extracted while it
//! streams in and committed as one folder.

use std::path::{Path, PathBuf};

use std::fmt::Display;

use bytes::Bytes;
use futures::Stream;
use serde::Serialize;

use companiond_core::paths::{check_file_name, safe_join, safe_name};
use companiond_core::task::blocking;
use companiond_core::text::human_size;

use companiond_core::staging::hidden_name;

use crate::error::AvatarError;
use crate::fsutil::{ext_lower, stem, stream_to_file, StreamStop};
use crate::layout::ANIMATION_DIR;
use crate::zipimport;
use companiond_core::staging::Cleanup;

use super::{url_of, Mmd};

const PMX_MAGIC: &[u8] = b"PMX ";
const PMD_MAGIC: &[u8] = b"Pmd";
const VMD_MAGIC: &[u8] = b"Vocaloid Motion Data";

/// `POST /upload`'s answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ModelUploaded {
    pub message: String,
    pub model_name: String,
    pub model_url: String,
    pub file_size: u64,
}

/// `POST /upload_animation`'s answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AnimationUploaded {
    pub message: String,
    pub filename: String,
    pub file_path: String,
}

/// `POST /upload_zip`'s answer.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"message": "model archive Miku.zip imported into Miku", "model_name": "Miku",
    "model_url": "/user_mmd/Miku/Miku.pmx", "file_count": 12, "file_size": 1048576,
    "extracted_size": 2097152, "folder": "Miku", "renamed_entries": 0}))]
pub struct ZipImported {
    pub message: String,
    pub model_name: String,
    pub model_url: String,
    pub file_count: usize,
    /// Bytes of the archive as received.
    pub file_size: u64,
    pub extracted_size: u64,
    pub folder: String,
    /// Entry names recovered from a legacy encoding.
    pub renamed_entries: usize,
}

/// The plain file name a client sent ([`client_file_name`]) and its lower-case
/// extension, which must be one of `exts` (else 400 `unsupported_file_type`:
/// "only `accepted` are accepted").
fn typed_file_name(
    raw: Option<&str>,
    exts: &[&str],
    accepted: &str,
) -> Result<(String, String), AvatarError> {
    let name = client_file_name(raw)?;
    let ext = ext_lower(&name);
    if !exts.contains(&ext.as_str()) {
        return Err(AvatarError::invalid(
            "unsupported_file_type",
            format!("only {accepted} are accepted"),
        ));
    }
    Ok((name, ext))
}

/// The plain file name a client sent (browsers may include folders).
fn client_file_name(raw: Option<&str>) -> Result<String, AvatarError> {
    let raw = raw.unwrap_or("").trim();
    let base = raw.rsplit(['/', '\\']).next().unwrap_or("").trim();
    if base.is_empty() {
        return Err(AvatarError::invalid(
            "invalid_filename",
            "a file with a name is required",
        ));
    }
    check_file_name(base).map_err(|p| AvatarError::bad_name("file name", base, p))?;
    if base.starts_with('.') {
        return Err(AvatarError::invalid(
            "invalid_filename",
            format!(
                "file name {}: hidden names (starting with a dot) are not accepted",
                companiond_core::text::shown_name(base)
            ),
        ));
    }
    safe_name(base)
        .map_err(|e| AvatarError::invalid("invalid_filename", format!("invalid file name: {e}")))?;
    Ok(base.to_string())
}

fn magic_check(
    magic: &'static [u8],
    what: &'static str,
) -> impl Fn(&[u8]) -> Result<(), AvatarError> + Sync {
    move |head: &[u8]| {
        if head.starts_with(magic) {
            Ok(())
        } else {
            Err(AvatarError::invalid(
                "invalid_file_content",
                format!("the file is not a valid {what} file (bad header)"),
            ))
        }
    }
}

pub(crate) fn stop_to_error(stop: StreamStop, limit: u64, what: &str) -> AvatarError {
    match stop {
        StreamStop::Limit => AvatarError::TooLarge(format!(
            "{what} exceeds the size limit of {}",
            human_size(limit)
        )),
        StreamStop::Budget => AvatarError::TooLarge(format!("{what} exceeds the size limit")),
        StreamStop::Head(e) => e,
        StreamStop::Aborted(e) => AvatarError::Aborted(format!("upload interrupted: {e}")),
        StreamStop::Io(e) => AvatarError::io("cannot store the upload", e),
    }
}

impl Mmd {
    /// Stream `body` into the new file `dir/name` (size limit and header check
    /// `(magic, format name)` while streaming, synced) and move it into place
    /// under the folder lock. Returns the size.
    async fn store_upload(
        &self,
        dir: &Path,
        name: &str,
        (magic, what): (&'static [u8], &'static str),
        body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
        label: &str,
    ) -> Result<u64, AvatarError> {
        self.ensure_dirs().await?;
        let dest = safe_join(dir, name)?;
        if dest.symlink_metadata().is_ok() {
            return Err(AvatarError::Exists(format!("{name} already exists")));
        }
        let mut tmp = Cleanup::new(dir.join(hidden_name("upload", ".part")));
        let limit = self.limits.mmd_file_bytes;
        let check = magic_check(magic, what);
        let size = stream_to_file(body, tmp.path(), limit, None, magic.len(), &check, true)
            .await
            .map_err(|s| stop_to_error(s, limit, label))?;
        self.commit_file(&mut tmp, dest).await?;
        Ok(size)
    }

    /// Move a finished temporary file to `dest` unless `dest` exists (checked
    /// under the folder lock, so two uploads of one name cannot both win).
    async fn commit_file(&self, tmp: &mut Cleanup, dest: PathBuf) -> Result<(), AvatarError> {
        let lock = self.store.lock_for(&self.user);
        let _g = lock.lock().await;
        let src = tmp.path().to_path_buf();
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        blocking(move || {
            if dest.symlink_metadata().is_ok() {
                return Err(AvatarError::Exists(format!("{name} already exists")));
            }
            std::fs::rename(&src, &dest).map_err(|e| AvatarError::io("cannot store the file", e))
        })
        .await?;
        tmp.disarm();
        Ok(())
    }

    /// `POST /upload`: a `.pmx`/`.pmd` model streamed into the user folder.
    pub async fn upload_model(
        &self,
        file_name: Option<&str>,
        body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
    ) -> Result<ModelUploaded, AvatarError> {
        let (name, ext) = typed_file_name(file_name, &["pmx", "pmd"], ".pmx and .pmd model files")?;
        let (magic, what): (&'static [u8], &'static str) = if ext == "pmx" {
            (PMX_MAGIC, "PMX")
        } else {
            (PMD_MAGIC, "PMD")
        };
        let size = self
            .store_upload(&self.user, &name, (magic, what), body, "the model file")
            .await?;
        Ok(ModelUploaded {
            message: format!("model {name} uploaded"),
            model_name: stem(&name).to_string(),
            model_url: url_of("/user_mmd", std::slice::from_ref(&name)),
            file_size: size,
        })
    }

    /// `POST /upload_animation`: a `.vmd` streamed into the user `animation/` folder.
    pub async fn upload_animation(
        &self,
        file_name: Option<&str>,
        body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
    ) -> Result<AnimationUploaded, AvatarError> {
        let (name, _) = typed_file_name(file_name, &["vmd"], ".vmd animation files")?;
        let dir = self.user.join(ANIMATION_DIR);
        self.store_upload(&dir, &name, (VMD_MAGIC, "VMD"), body, "the animation file")
            .await?;
        Ok(AnimationUploaded {
            message: format!("animation {name} uploaded"),
            file_path: format!("/user_mmd/{ANIMATION_DIR}/{name}"),
            filename: name,
        })
    }

    /// `POST /upload_zip`: a ZIP of a model and its textures, extracted while it
    /// streams in, checked, staged and moved into place.
    pub async fn upload_zip(
        &self,
        file_name: Option<&str>,
        body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
    ) -> Result<ZipImported, AvatarError> {
        let archive_name = match file_name {
            Some(n) if !n.trim().is_empty() => {
                typed_file_name(Some(n), &["zip"], ".zip archives")?.0
            }
            _ => "model.zip".to_string(),
        };
        self.ensure_dirs().await?;
        let (mut staged, archive_size) =
            zipimport::import(body, &self.user, &self.limits, stem(&archive_name)).await?;

        // Commit: rename the staging folder to its final name under the folder lock.
        let dest = safe_join(&self.user, &staged.dir_name)?;
        {
            let lock = self.store.lock_for(&self.user);
            let _g = lock.lock().await;
            let src = staged.staging.path().to_path_buf();
            let d = dest.clone();
            let name = staged.dir_name.clone();
            blocking(move || {
                if d.symlink_metadata().is_ok() {
                    return Err(AvatarError::Exists(format!(
                        "a model folder named {name} already exists"
                    )));
                }
                std::fs::rename(&src, &d)
                    .map_err(|e| AvatarError::io("cannot move the model into place", e))
            })
            .await?;
            staged.staging.disarm();
        }
        let mut rel = vec![staged.dir_name.clone()];
        rel.extend(staged.model_rel.iter().cloned());
        let model_file = staged.model_rel.last().cloned().unwrap_or_default();
        Ok(ZipImported {
            message: format!(
                "model archive {archive_name} imported into {}",
                staged.dir_name
            ),
            model_name: stem(&model_file).to_string(),
            model_url: url_of("/user_mmd", &rel),
            file_count: staged.file_count,
            file_size: archive_size,
            extracted_size: staged.extracted_bytes,
            folder: staged.dir_name.clone(),
            renamed_entries: staged.recovered_names,
        })
    }
}

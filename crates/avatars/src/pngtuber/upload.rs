//! A package upload: every part streamed into a hidden staging folder under
//! the per-file and per-package limits, then detected, converted, validated
//! and normalised there before the store commits it.

use std::path::{Path, PathBuf};

use std::fmt::Display;

use bytes::Bytes;
use futures::Stream;
use serde::Serialize;
use serde_json::{json, Map, Value};

use companiond_core::paths::{check_file_name, safe_join, safe_name};
use companiond_core::store::atomic_write;
use companiond_core::task::blocking;
use companiond_core::text::human_size;

use crate::error::AvatarError;
use crate::fsutil::{stream_to_file, Budget, StreamStop};
use crate::Limits;
use companiond_core::staging::Cleanup;

use super::detect::detect;
use super::layered::Imported;
use super::package::{normalize, relative_segments, slugify, validate};

/// Most files in one package upload.
pub const MAX_FILES: usize = 10_000;

/// `POST /upload_model`'s answer.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"message": "PNGTuber model Bunny uploaded", "model_type": "pngtuber",
    "model_name": "Bunny", "name": "Bunny", "folder": "bunny",
    "url": "/user_pngtuber/bunny/model.json",
    "pngtuber": {"idle_image": "/user_pngtuber/bunny/idle.png", "scale": 1},
    "source_format": "simple_package", "warnings": [], "file_size": 20480,
    "capabilities": ["idle_talking_swap", "emotion_image_swap"]}))]
pub struct PackageUploaded {
    pub message: String,
    pub model_type: &'static str,
    pub model_name: String,
    pub name: String,
    pub folder: String,
    pub url: String,
    /// The normalised `pngtuber` block as stored (fields: see `ListedPackage`).
    #[schema(additional_properties)]
    pub pngtuber: Map<String, Value>,
    pub source_format: &'static str,
    pub warnings: Vec<String>,
    /// Bytes received.
    pub file_size: u64,
    /// What the frontend can animate (e.g. `idle_talking_swap`).
    pub capabilities: &'static [&'static str],
    /// Layered formats only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub adapter: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub adapter_version: Option<u32>,
}

/// An upload in progress: its staging folder is removed when this is dropped
/// (unless committed).
pub struct StagedUpload {
    pub(super) staging: Cleanup,
    pub(super) files: Vec<Vec<String>>,
    pub(super) budget: Budget,
    pub(super) file_limit: u64,
}

fn stop_error(stop: StreamStop, limits: &Limits) -> AvatarError {
    match stop {
        StreamStop::Limit => AvatarError::TooLarge(format!(
            "a single file exceeds the limit of {}",
            human_size(limits.pngtuber_file_bytes)
        )),
        StreamStop::Budget => AvatarError::TooLarge(format!(
            "the package exceeds the limit of {}",
            human_size(limits.pngtuber_package_bytes)
        )),
        StreamStop::Head(e) => e,
        StreamStop::Aborted(e) => AvatarError::Aborted(format!("upload interrupted: {e}")),
        StreamStop::Io(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            AvatarError::invalid("duplicate_file", "the same file was uploaded twice")
        }
        StreamStop::Io(e) => AvatarError::io("cannot store the upload", e),
    }
}

impl StagedUpload {
    /// Stream one `files` part into the staging folder.
    pub async fn add_file(
        &mut self,
        file_name: Option<&str>,
        body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
    ) -> Result<(), AvatarError> {
        let raw = file_name.unwrap_or("");
        let norm = raw.replace('\\', "/");
        let norm = norm.trim_matches('/');
        let invalid = || {
            AvatarError::invalid(
                "invalid_upload_path",
                format!("upload path invalid: {raw:?}"),
            )
        };
        // Each component is checked first so that the answer names the problem.
        for seg in norm.split('/').filter(|s| !s.is_empty()) {
            check_file_name(seg).map_err(|p| {
                AvatarError::invalid(
                    "invalid_upload_path",
                    format!(
                        "upload path invalid: component {}: {p}",
                        companiond_core::text::shown_name(seg)
                    ),
                )
            })?;
        }
        let segs = relative_segments(norm).ok_or_else(invalid)?;
        if self.files.len() >= MAX_FILES {
            return Err(AvatarError::invalid(
                "too_many_files",
                format!("a package may hold at most {MAX_FILES} files"),
            ));
        }
        let path = safe_join(self.staging.path(), &segs.join("/")).map_err(|_| {
            AvatarError::invalid("invalid_upload_path", "upload path out of bounds")
        })?;
        if path.symlink_metadata().is_ok() {
            return Err(AvatarError::invalid(
                "duplicate_file",
                format!(
                    "{} was uploaded twice or conflicts with a folder",
                    segs.join("/")
                ),
            ));
        }
        if let Some(parent) = path.parent() {
            let parent = parent.to_path_buf();
            blocking(move || {
                std::fs::create_dir_all(&parent).map_err(|_| {
                    AvatarError::invalid("invalid_upload_path", "upload paths conflict")
                })
            })
            .await?;
        }
        let limit = self.file_limit;
        let no_check = |_: &[u8]| Ok(());
        stream_to_file(
            body,
            &path,
            limit,
            Some(&mut self.budget),
            0,
            &no_check,
            true,
        )
        .await
        .map_err(|s| {
            let limits = Limits {
                pngtuber_file_bytes: limit,
                pngtuber_package_bytes: self.budget.limit,
                ..Limits::default()
            };
            stop_error(s, &limits)
        })?;
        self.files.push(segs);
        Ok(())
    }
}

pub(super) struct Prepared {
    pub(super) pkg: PathBuf,
    pub(super) folder: String,
    pub(super) model_json: Map<String, Value>,
    pub(super) pngtuber: Map<String, Value>,
    pub(super) imported: Imported,
}

/// Blocking part of the upload: strip the common root, detect, convert,
/// validate, normalise and rewrite model.json inside the staging folder.
pub(super) fn prepare(staging: &Path, files: &[Vec<String>]) -> Result<Prepared, AvatarError> {
    let first = files[0][0].clone();
    let common = files.iter().all(|f| f.len() > 1 && f[0] == first);
    let (pkg, seed) = if common {
        (staging.join(&first), first.clone())
    } else if files.iter().any(|f| f.len() == 1 && f[0] == "model.json") {
        (staging.to_path_buf(), "model".to_string())
    } else {
        (staging.to_path_buf(), "pngtuber_model".to_string())
    };
    let seed = slugify(&seed);
    let imported = detect(&pkg, &seed)?;
    let sf = imported.source_format;
    let mut model_json = imported.model_json.clone();
    validate(&model_json, &pkg, None)
        .map_err(|e| AvatarError::import("invalid_package", e, sf, imported.warnings.clone()))?;
    let name_source = imported
        .model_name
        .clone()
        .or_else(|| {
            model_json
                .get("name")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| seed.clone());
    let folder = slugify(&name_source);
    if safe_name(&folder).is_err() {
        return Err(AvatarError::invalid(
            "invalid_name",
            "the model name cannot be used as a folder",
        ));
    }
    let pngtuber = normalize(&model_json, &folder);
    model_json.insert("model_type".into(), json!("pngtuber"));
    model_json.insert("pngtuber".into(), Value::Object(pngtuber.clone()));
    model_json.insert("source_format".into(), json!(sf));
    let bytes = serde_json::to_vec_pretty(&model_json)
        .map_err(|e| AvatarError::io("cannot write model.json", e))?;
    atomic_write(&pkg.join("model.json"), &bytes)
        .map_err(|e| AvatarError::io("cannot write model.json", e))?;
    Ok(Prepared {
        pkg,
        folder,
        model_json,
        pngtuber,
        imported,
    })
}

//! PNGTuber packages (routes, package layout and answers: `docs/avatars.md`).
//!
//! Upload flow: every multipart part is streamed into a hidden staging folder
//! `<data>/user_pngtuber/.upload-<random>` under the per-file and per-package
//! limits; then the package is detected ([`detect`]), converted by the
//! layered adapters when needed ([`plus`], [`remix`]), validated, normalised
//! and committed by renaming it to `<data>/user_pngtuber/<slug>`. Any failure
//! (or a dropped request) removes the staging folder.

mod detect;
pub mod godot;
mod image;
mod layered;
mod listing;
mod package;
mod plus;
mod remix;
mod upload;

use std::path::{Path, PathBuf};

use bytes::Bytes;

use companiond_core::paths::{safe_join, safe_name};
use companiond_core::static_files::USER_PNGTUBER;
use companiond_core::store::Store;
use companiond_core::task::blocking;

use companiond_core::staging::hidden_name;

use crate::error::AvatarError;
use crate::fsutil::{url_path, Budget};
use crate::Limits;
use companiond_core::staging::{remove_any, Cleanup};

pub use layered::capabilities;
use layered::{ADAPTER_VERSION, LAYERED_ADAPTER};
pub use listing::ListedPackage;
pub use package::slugify;
use package::URL_PREFIX;
use upload::{prepare, Prepared};
pub use upload::{PackageUploaded, StagedUpload};

/// The PNGTuber package store.
#[derive(Clone)]
pub struct Pngtuber {
    root: PathBuf,
    limits: Limits,
    store: Store,
    listing: std::sync::Arc<listing::ListCache>,
}

impl Pngtuber {
    pub fn new(data_dir: &Path, limits: Limits, store: Store) -> Self {
        Pngtuber {
            root: data_dir.join(USER_PNGTUBER),
            limits,
            store,
            listing: Default::default(),
        }
    }

    /// Remove staging folders left by a previous run (start-up).
    pub fn clean_leftovers(&self) {
        if let Ok(rd) = std::fs::read_dir(&self.root) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(".upload-") {
                    remove_any(&e.path());
                }
            }
        }
    }

    /// Start an upload: create the staging folder.
    pub async fn begin_upload(&self) -> Result<StagedUpload, AvatarError> {
        let root = self.root.clone();
        let staging = root.join(hidden_name("upload", ""));
        let s2 = staging.clone();
        blocking(move || {
            std::fs::create_dir_all(&root)
                .and_then(|_| std::fs::create_dir(&s2))
                .map_err(|e| AvatarError::io("cannot create the PNGTuber folder", e))
        })
        .await?;
        Ok(StagedUpload {
            staging: Cleanup::new(staging),
            files: Vec::new(),
            budget: Budget {
                used: 0,
                limit: self.limits.pngtuber_package_bytes,
            },
            file_limit: self.limits.pngtuber_file_bytes,
        })
    }

    /// Detect, convert, validate, normalise and commit a staged upload.
    pub async fn finish_upload(
        &self,
        mut up: StagedUpload,
    ) -> Result<PackageUploaded, AvatarError> {
        if up.files.is_empty() {
            return Err(AvatarError::invalid("no_files", "no files uploaded"));
        }
        let staging = up.staging.path().to_path_buf();
        let files = std::mem::take(&mut up.files);
        let total = up.budget.used;
        let prepared = blocking(move || prepare(&staging, &files)).await?;
        let Prepared {
            pkg,
            folder,
            model_json,
            pngtuber,
            imported,
        } = prepared;

        // Commit under the folder lock.
        let dest = safe_join(&self.root, &folder)?;
        let lock = self.store.lock_for(&self.root);
        let _g = lock.lock().await;
        let d = dest.clone();
        let f2 = folder.clone();
        let whole_staging = pkg == up.staging.path();
        blocking(move || {
            if d.symlink_metadata().is_ok() {
                return Err(AvatarError::Exists(format!(
                    "PNGTuber model {f2} already exists; delete or rename it first"
                )));
            }
            std::fs::rename(&pkg, &d).map_err(|e| AvatarError::io("cannot commit the package", e))
        })
        .await?;
        if whole_staging {
            up.staging.disarm(); // the staging folder itself became the package
        }
        drop(up); // removes what is left of the staging folder
        let name = package::display_name(&model_json, &folder);
        let layered = imported.source_format != "simple_package";
        Ok(PackageUploaded {
            message: imported.message,
            model_type: "pngtuber",
            model_name: name.clone(),
            name,
            url: format!("{URL_PREFIX}/{folder}/model.json"),
            folder,
            pngtuber,
            source_format: imported.source_format,
            warnings: imported.warnings,
            file_size: total,
            capabilities: capabilities(imported.source_format),
            adapter: layered.then_some(LAYERED_ADAPTER),
            adapter_version: layered.then_some(ADAPTER_VERSION),
        })
    }

    /// `GET /models`: the JSON array of the valid packages, sorted by folder
    /// name (case-insensitive); unchanged packages come from [`listing::ListCache`].
    pub async fn list_json(&self) -> Result<Bytes, AvatarError> {
        let root = self.root.clone();
        let cache = self.listing.clone();
        blocking(move || {
            cache
                .list(&root)
                .map_err(|e| AvatarError::io("cannot list PNGTuber models", e))
        })
        .await
    }

    /// `DELETE /model`: `key` is a folder slug, a URL ending in `<folder>/model.json`
    /// or a name. Returns the folder.
    pub async fn delete(&self, key: &str) -> Result<String, AvatarError> {
        let folder = resolve_identifier(key)?;
        let path = safe_join(&self.root, &folder).map_err(|_| {
            AvatarError::invalid(
                "out_of_bounds",
                "the identifier resolves outside the PNGTuber folder",
            )
        })?;
        let lock = self.store.lock_for(&self.root);
        let _g = lock.lock().await;
        blocking(move || {
            match path.symlink_metadata() {
                Ok(m) if m.is_dir() => {}
                _ => {
                    return Err(AvatarError::NotFound(format!(
                        "PNGTuber model {folder} does not exist"
                    )))
                }
            }
            std::fs::remove_dir_all(&path)
                .map_err(|e| AvatarError::io("cannot delete the PNGTuber model", e))?;
            Ok(folder)
        })
        .await
    }
}

/// Reduce a delete identifier to one folder slug.
fn resolve_identifier(key: &str) -> Result<String, AvatarError> {
    let invalid =
        || AvatarError::invalid("invalid_identifier", "invalid PNGTuber model identifier");
    let p = url_path(key);
    let p = p.trim_matches('/');
    let mut segs: Vec<&str> = p.split('/').collect();
    if segs.iter().any(|s| s.is_empty() || *s == "." || *s == "..") {
        return Err(AvatarError::invalid(
            "out_of_bounds",
            "the identifier resolves outside the PNGTuber folder",
        ));
    }
    if segs.first() == Some(&USER_PNGTUBER) {
        segs.remove(0);
    }
    let folder = match segs.as_slice() {
        [f, m] if m.eq_ignore_ascii_case("model.json") => *f,
        [f] => *f,
        _ => return Err(invalid()),
    };
    if folder.starts_with('.') || safe_name(folder).is_err() {
        return Err(AvatarError::invalid(
            "out_of_bounds",
            "the identifier resolves outside the PNGTuber folder",
        ));
    }
    Ok(folder.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slugify("My Model!"), "My_Model");
        assert_eq!(slugify("..x.."), "x");
        assert_eq!(slugify("!!!"), "pngtuber_model");
        assert_eq!(slugify("  かわいい モデル "), "かわいい_モデル");
        // 100 characters, but never more than 255 bytes
        assert_eq!(slugify(&"猫".repeat(100)), "猫".repeat(85));
        assert_eq!(slugify(&"a".repeat(300)), "a".repeat(100));
    }

    #[test]
    fn identifiers() {
        assert_eq!(resolve_identifier("abc").unwrap(), "abc");
        assert_eq!(
            resolve_identifier("/user_pngtuber/abc/model.json").unwrap(),
            "abc"
        );
        assert_eq!(
            resolve_identifier("http://127.0.0.1:1/user_pngtuber/abc/model.json?x=1").unwrap(),
            "abc"
        );
        assert!(resolve_identifier("../x").is_err());
        assert!(resolve_identifier("a/b").is_err());
        assert!(resolve_identifier("/user_pngtuber/a/b/model.json").is_err());
        assert!(resolve_identifier(".upload-x").is_err());
    }
}

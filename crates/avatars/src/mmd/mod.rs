//! MMD models and animations (routes and answers: `docs/avatars.md`).
//!
//! * user folder `<data>/user_mmd` (served at `/user_mmd/`), with the reserved
//!   sub-folders `animation/` (user `.vmd` files) and `emotion_config/`
//!   (`<model>.json` emotion mappings);
//! * project models: `<bundle>/static/mmd` (served at `/static/mmd/`), read-only;
//! * workshop items: every child folder of the workshop dir, `item_id` = its name.

mod delete;
mod emotion;
mod listing;
mod upload;

pub use listing::{AnimationEntry, ModelEntry, UserAnimation};
pub use upload::{AnimationUploaded, ModelUploaded, ZipImported};

use std::path::{Path, PathBuf};

use serde::Serialize;

use companiond_core::static_files::USER_MMD;
use companiond_core::store::Store;
use companiond_core::task::blocking;

use crate::error::AvatarError;
use crate::fsutil::ext_lower;
use crate::layout::{ANIMATION_DIR, EMOTION_DIR};
use crate::Limits;
use companiond_core::staging::remove_any;

/// URL prefix of the project models.
pub const STATIC_MMD_URL: &str = "/static/mmd";
/// URL prefix of workshop files.
pub const WORKSHOP_URL: &str = "/workshop";

const MODEL_EXTS: &[&str] = &["pmx", "pmd"];

/// `GET /config`'s answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct MmdConfig {
    pub paths: MmdPaths,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct MmdPaths {
    pub user_mmd: &'static str,
    pub static_mmd: &'static str,
}

/// The MMD asset store.
#[derive(Clone)]
pub struct Mmd {
    user: PathBuf,
    project: PathBuf,
    workshop: Option<PathBuf>,
    limits: Limits,
    store: Store,
}

fn is_model(name: &str) -> bool {
    MODEL_EXTS.contains(&ext_lower(name).as_str())
}

fn url_of(prefix: &str, rel: &[String]) -> String {
    format!("{prefix}/{}", rel.join("/"))
}

impl Mmd {
    pub fn new(
        data_dir: &Path,
        bundle_dir: &Path,
        workshop: Option<PathBuf>,
        limits: Limits,
        store: Store,
    ) -> Self {
        Mmd {
            user: data_dir.join(USER_MMD),
            project: bundle_dir.join("static").join("mmd"),
            workshop,
            limits,
            store,
        }
    }

    /// Remove partial uploads and staging folders left by a previous run (start-up).
    pub fn clean_leftovers(&self) {
        for dir in [self.user.clone(), self.user.join(ANIMATION_DIR)] {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with(".upload-")
                    // (archives were stored whole before streaming extraction)
                    || n.starts_with(".zipupload-")
                    || n.starts_with(".zipwork-")
                    || n.starts_with(".zipstage-")
                {
                    remove_any(&e.path());
                }
            }
        }
    }

    async fn ensure_dirs(&self) -> Result<(), AvatarError> {
        let user = self.user.clone();
        blocking(move || {
            for d in [user.join(ANIMATION_DIR), user.join(EMOTION_DIR)] {
                std::fs::create_dir_all(&d)
                    .map_err(|e| AvatarError::io("cannot create the MMD folder", e))?;
            }
            Ok(())
        })
        .await
    }

    /// `GET /config`: the URL prefixes of the user and project models.
    pub fn config(&self) -> MmdConfig {
        MmdConfig {
            paths: MmdPaths {
                user_mmd: "/user_mmd",
                static_mmd: STATIC_MMD_URL,
            },
        }
    }
}

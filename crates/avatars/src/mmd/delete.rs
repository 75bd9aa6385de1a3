//! Deleting a user model (its folder or lone file, with its emotion mapping)
//! or a user animation; project and workshop models are never deleted.

use std::path::Path;

use companiond_core::paths::{clean_segments, ensure_within, safe_join};
use companiond_core::task::blocking;

use crate::error::AvatarError;
use crate::fsutil::{ext_lower, stem, url_path};
use crate::layout::{ANIMATION_DIR, EMOTION_DIR};

use super::emotion::mapping_name;
use super::{is_model, Mmd};

impl Mmd {
    /// `DELETE /model`: a user model (its whole top-level folder, or a lone
    /// top-level file) plus its emotion mapping. Project and workshop models are refused.
    pub async fn delete_model(&self, url: &str) -> Result<Vec<String>, AvatarError> {
        let p = url_path(url);
        let p = p.trim_start_matches('/');
        if p.starts_with("static/") || p.starts_with("workshop/") {
            return Err(AvatarError::Forbidden(
                "project and workshop models cannot be deleted".into(),
            ));
        }
        let Some(rel) = p.strip_prefix("user_mmd/") else {
            return Err(AvatarError::invalid(
                "invalid_url",
                "url must be /user_mmd/<relative path>",
            ));
        };
        let segs = clean_segments(rel)?;
        if segs.is_empty() {
            return Err(AvatarError::invalid("invalid_url", "url names no model"));
        }
        let top = &segs[0];
        if top.starts_with('.') {
            return Err(AvatarError::invalid("invalid_url", "url names no model"));
        }
        if top.eq_ignore_ascii_case(ANIMATION_DIR) || top.eq_ignore_ascii_case(EMOTION_DIR) {
            return Err(AvatarError::invalid(
                "invalid_url",
                "animations and emotion mappings are not models (use DELETE /animation)",
            ));
        }
        let target = safe_join(&self.user, &segs.join("/"))?;
        let lock = self.store.lock_for(&self.user);
        let _g = lock.lock().await;
        let user = self.user.clone();
        let segs2 = segs.clone();
        blocking(move || {
            let meta = target
                .symlink_metadata()
                .map_err(|_| AvatarError::NotFound("model not found".into()))?;
            let (remove, lone_file) = if segs2.len() >= 2 {
                if !meta.is_file() || !is_model(&segs2[segs2.len() - 1]) {
                    return Err(AvatarError::invalid(
                        "invalid_url",
                        "url must name a .pmx or .pmd model",
                    ));
                }
                (user.join(&segs2[0]), false)
            } else if meta.is_dir() {
                (target.clone(), false)
            } else if meta.is_file() && is_model(&segs2[0]) {
                (target.clone(), true)
            } else {
                return Err(AvatarError::invalid(
                    "invalid_url",
                    "url must name a .pmx or .pmd model",
                ));
            };
            ensure_within(&user, &remove)?;
            let mut deleted = Vec::new();
            let mut stems = Vec::new();
            if lone_file {
                deleted.push(segs2[0].clone());
                stems.push(stem(&segs2[0]).to_string());
                std::fs::remove_file(&remove)
                    .map_err(|e| AvatarError::io("cannot delete the model", e))?;
            } else {
                for f in walk_all(&remove) {
                    let mut r = vec![segs2[0].clone()];
                    r.extend(f.iter().cloned());
                    if f.last().is_some_and(|n| is_model(n)) {
                        stems.push(stem(f.last().map(String::as_str).unwrap_or("")).to_string());
                    }
                    deleted.push(r.join("/"));
                }
                std::fs::remove_dir_all(&remove)
                    .map_err(|e| AvatarError::io("cannot delete the model folder", e))?;
            }
            for s in stems {
                if mapping_name(&s).is_err() {
                    continue;
                }
                let mp = user.join(EMOTION_DIR).join(format!("{s}.json"));
                if mp.is_file() && std::fs::remove_file(&mp).is_ok() {
                    deleted.push(format!("{EMOTION_DIR}/{s}.json"));
                }
            }
            Ok(deleted)
        })
        .await
    }

    /// `DELETE /animation`: a `.vmd` under the user `animation/` folder.
    pub async fn delete_animation(&self, url: &str) -> Result<String, AvatarError> {
        let p = url_path(url);
        let p = p.trim_start_matches('/');
        let Some(rel) = p.strip_prefix(&format!("user_mmd/{ANIMATION_DIR}/")) else {
            return Err(AvatarError::invalid(
                "invalid_url",
                "url must be /user_mmd/animation/<filename>",
            ));
        };
        let segs = clean_segments(rel)?;
        let Some(last) = segs.last() else {
            return Err(AvatarError::invalid(
                "invalid_url",
                "url names no animation",
            ));
        };
        if ext_lower(last) != "vmd" || last.starts_with('.') {
            return Err(AvatarError::invalid(
                "unsupported_file_type",
                "only .vmd animations can be deleted",
            ));
        }
        let name = last.clone();
        let path = safe_join(&self.user.join(ANIMATION_DIR), &segs.join("/"))?;
        blocking(move || {
            match path.symlink_metadata() {
                Ok(m) if m.is_file() => {}
                _ => return Err(AvatarError::NotFound("animation not found".into())),
            }
            std::fs::remove_file(&path).map_err(|e| AvatarError::io("cannot delete", e))?;
            Ok(name)
        })
        .await
    }
}

/// Every entry (files, hidden ones too) under `root`, as relative segments;
/// used to report what a folder deletion removed.
fn walk_all(root: &Path) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let mut r = rel.clone();
            r.push(e.file_name().to_string_lossy().into_owned());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push((e.path(), r)),
                Ok(_) => out.push(r),
                Err(_) => {}
            }
        }
    }
    out.sort();
    out
}

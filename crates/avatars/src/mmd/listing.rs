//! The MMD listings: project, user and workshop models (and user folders
//! left without a model), and the project and user animations.

use std::path::PathBuf;

use serde_json::{json, Value};

use companiond_core::task::blocking;

use crate::error::AvatarError;
use crate::fsutil::{ext_lower, stem, walk_files, Found};
use crate::layout::{ANIMATION_DIR, EMOTION_DIR};

use super::{is_model, url_of, Mmd, STATIC_MMD_URL, WORKSHOP_URL};

impl Mmd {
    /// `GET /models`: project, user and workshop models plus broken leftovers.
    pub async fn list_models(&self) -> Result<Vec<Value>, AvatarError> {
        let me = self.clone();
        blocking(move || Ok(me.list_models_blocking())).await
    }

    fn model_entry(f: &Found, url_prefix: &str, location: &str) -> Value {
        let filename = f.rel.last().cloned().unwrap_or_default();
        json!({
            "name": stem(&filename),
            "filename": filename,
            "url": url_of(url_prefix, &f.rel),
            "rel_path": f.rel.join("/"),
            "type": ext_lower(&filename),
            "size": f.size,
            "location": location,
        })
    }

    fn list_models_blocking(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for f in walk_files(&self.project, &[]) {
            if f.rel.last().is_some_and(|n| is_model(n)) {
                out.push(Self::model_entry(&f, STATIC_MMD_URL, "project"));
            }
        }
        let user_files = walk_files(&self.user, &[ANIMATION_DIR, EMOTION_DIR]);
        for f in &user_files {
            if f.rel.last().is_some_and(|n| is_model(n)) {
                out.push(Self::model_entry(f, "/user_mmd", "user"));
            }
        }
        // Leftover model folders: a top-level user folder holding no model file.
        if let Ok(rd) = std::fs::read_dir(&self.user) {
            let mut dirs: Vec<String> = rd
                .flatten()
                .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    !n.starts_with('.')
                        && !n.eq_ignore_ascii_case(ANIMATION_DIR)
                        && !n.eq_ignore_ascii_case(EMOTION_DIR)
                })
                .collect();
            dirs.sort();
            for d in dirs {
                let inside: Vec<_> = user_files
                    .iter()
                    .filter(|f| f.rel.len() > 1 && f.rel[0] == d)
                    .collect();
                if inside
                    .iter()
                    .any(|f| f.rel.last().is_some_and(|n| is_model(n)))
                {
                    continue;
                }
                let size: u64 = inside.iter().map(|f| f.size).sum();
                out.push(json!({
                    "name": d,
                    "filename": "",
                    "url": url_of("/user_mmd", std::slice::from_ref(&d)),
                    "rel_path": d,
                    "type": "directory",
                    "size": size,
                    "location": "user",
                    "broken": true,
                }));
            }
        }
        if let Some(ws) = &self.workshop {
            let mut items: Vec<(String, PathBuf)> = std::fs::read_dir(ws)
                .map(|rd| {
                    rd.flatten()
                        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                        .filter(|(n, _)| !n.starts_with('.'))
                        .collect()
                })
                .unwrap_or_default();
            items.sort();
            for (item_id, dir) in items {
                for f in walk_files(&dir, &[]) {
                    if f.rel.last().is_some_and(|n| is_model(n)) {
                        let prefix = format!("{WORKSHOP_URL}/{item_id}");
                        let mut e = Self::model_entry(&f, &prefix, "steam_workshop");
                        e["source"] = json!("steam_workshop");
                        e["item_id"] = json!(item_id);
                        out.push(e);
                    }
                }
            }
        }
        out
    }

    /// `GET /animations`: `.vmd` files of the project and user folders.
    pub async fn list_animations(&self) -> Result<Vec<Value>, AvatarError> {
        let me = self.clone();
        blocking(move || {
            let mut out = Vec::new();
            for (root, prefix, location, skip) in [
                (&me.project, STATIC_MMD_URL, "project", &[][..]),
                (&me.user, "/user_mmd", "user", &[EMOTION_DIR][..]),
            ] {
                for f in walk_files(root, skip) {
                    let filename = f.rel.last().cloned().unwrap_or_default();
                    if ext_lower(&filename) == "vmd" {
                        out.push(json!({
                            "name": stem(&filename),
                            "filename": filename,
                            "url": url_of(prefix, &f.rel),
                            "type": "vmd",
                            "size": f.size,
                            "location": location,
                        }));
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// `GET /animations/list`: the user animations that can be deleted.
    pub async fn deletable_animations(&self) -> Result<Vec<Value>, AvatarError> {
        let dir = self.user.join(ANIMATION_DIR);
        blocking(move || {
            let mut out = Vec::new();
            for f in walk_files(&dir, &[]) {
                let filename = f.rel.last().cloned().unwrap_or_default();
                if ext_lower(&filename) == "vmd" {
                    let mut rel = vec![ANIMATION_DIR.to_string()];
                    rel.extend(f.rel.iter().cloned());
                    out.push(json!({
                        "name": stem(&filename),
                        "filename": filename,
                        "url": url_of("/user_mmd", &rel),
                        "path": rel.join("/"),
                    }));
                }
            }
            Ok(out)
        })
        .await
    }
}

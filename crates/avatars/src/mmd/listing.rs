//! The MMD listings: project, user and workshop models (and user folders
//! left without a model), and the project and user animations.

use std::path::PathBuf;

use serde::Serialize;

use companiond_core::task::blocking;

use crate::error::AvatarError;
use crate::fsutil::{ext_lower, stem, walk_files, Found};
use crate::layout::{ANIMATION_DIR, EMOTION_DIR};

use super::{is_model, url_of, Mmd, STATIC_MMD_URL, WORKSHOP_URL};

/// Where a listed model or animation lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// Shipped with the application (`/static/mmd/`), read-only.
    Project,
    /// The user's folder (`/user_mmd/`).
    User,
    /// A workshop item (`/workshop/<item_id>/`).
    SteamWorkshop,
}

/// One entry of `GET /models`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ModelEntry {
    pub name: String,
    pub filename: String,
    pub url: String,
    pub rel_path: String,
    /// `pmx`, `pmd`, or `directory` for a user folder left without a model.
    #[serde(rename = "type")]
    pub kind: String,
    pub size: u64,
    pub location: Location,
    /// A user folder holding no model file.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub broken: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Workshop models only (`steam_workshop`).
    #[schema(nullable = false)]
    pub source: Option<Location>,
    /// The workshop item (its folder name).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub item_id: Option<String>,
}

/// One entry of `GET /animations`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AnimationEntry {
    pub name: String,
    pub filename: String,
    pub url: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub size: u64,
    pub location: Location,
}

/// One entry of `GET /animations/list` (a deletable user animation).
#[derive(Serialize, utoipa::ToSchema)]
pub struct UserAnimation {
    pub name: String,
    pub filename: String,
    pub url: String,
    pub path: String,
}

impl Mmd {
    /// `GET /models`: project, user and workshop models plus broken leftovers.
    pub async fn list_models(&self) -> Result<Vec<ModelEntry>, AvatarError> {
        let me = self.clone();
        blocking(move || Ok(me.list_models_blocking())).await
    }

    fn model_entry(f: &Found, url_prefix: &str, location: Location) -> ModelEntry {
        let filename = f.rel.last().cloned().unwrap_or_default();
        ModelEntry {
            name: stem(&filename).to_string(),
            kind: ext_lower(&filename),
            filename,
            url: url_of(url_prefix, &f.rel),
            rel_path: f.rel.join("/"),
            size: f.size,
            location,
            broken: None,
            source: None,
            item_id: None,
        }
    }

    fn list_models_blocking(&self) -> Vec<ModelEntry> {
        let mut out = Vec::new();
        for f in walk_files(&self.project, &[]) {
            if f.rel.last().is_some_and(|n| is_model(n)) {
                out.push(Self::model_entry(&f, STATIC_MMD_URL, Location::Project));
            }
        }
        let user_files = walk_files(&self.user, &[ANIMATION_DIR, EMOTION_DIR]);
        for f in &user_files {
            if f.rel.last().is_some_and(|n| is_model(n)) {
                out.push(Self::model_entry(f, "/user_mmd", Location::User));
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
                out.push(ModelEntry {
                    url: url_of("/user_mmd", std::slice::from_ref(&d)),
                    name: d.clone(),
                    filename: String::new(),
                    rel_path: d,
                    kind: "directory".into(),
                    size,
                    location: Location::User,
                    broken: Some(true),
                    source: None,
                    item_id: None,
                });
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
                        let mut e = Self::model_entry(&f, &prefix, Location::SteamWorkshop);
                        e.source = Some(Location::SteamWorkshop);
                        e.item_id = Some(item_id.clone());
                        out.push(e);
                    }
                }
            }
        }
        out
    }

    /// `GET /animations`: `.vmd` files of the project and user folders.
    pub async fn list_animations(&self) -> Result<Vec<AnimationEntry>, AvatarError> {
        let me = self.clone();
        blocking(move || {
            let mut out = Vec::new();
            for (root, prefix, location, skip) in [
                (&me.project, STATIC_MMD_URL, Location::Project, &[][..]),
                (&me.user, "/user_mmd", Location::User, &[EMOTION_DIR][..]),
            ] {
                for f in walk_files(root, skip) {
                    let filename = f.rel.last().cloned().unwrap_or_default();
                    if ext_lower(&filename) == "vmd" {
                        out.push(AnimationEntry {
                            name: stem(&filename).to_string(),
                            filename,
                            url: url_of(prefix, &f.rel),
                            kind: "vmd",
                            size: f.size,
                            location,
                        });
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// `GET /animations/list`: the user animations that can be deleted.
    pub async fn deletable_animations(&self) -> Result<Vec<UserAnimation>, AvatarError> {
        let dir = self.user.join(ANIMATION_DIR);
        blocking(move || {
            let mut out = Vec::new();
            for f in walk_files(&dir, &[]) {
                let filename = f.rel.last().cloned().unwrap_or_default();
                if ext_lower(&filename) == "vmd" {
                    let mut rel = vec![ANIMATION_DIR.to_string()];
                    rel.extend(f.rel.iter().cloned());
                    out.push(UserAnimation {
                        name: stem(&filename).to_string(),
                        filename,
                        url: url_of("/user_mmd", &rel),
                        path: rel.join("/"),
                    });
                }
            }
            Ok(out)
        })
        .await
    }
}

//! MMD models and animations (interface.md § MMD assets, § MMD models).
//!
//! * user folder `<data>/user_mmd` (served at `/user_mmd/`), with the reserved
//!   sub-folders `animation/` (user `.vmd` files) and `emotion_config/`
//!   (`<model>.json` emotion mappings);
//! * project models: `<bundle>/static/mmd` (served at `/static/mmd/`), read-only;
//! * workshop items: every child folder of the workshop dir, `item_id` = its name.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::Stream;
use serde::Serialize;
use serde_json::{json, Map, Value};

use companiond_core::paths::{
    check_file_name, clean_segments, ensure_within, safe_join, safe_name,
};
use companiond_core::static_files::USER_MMD;
use companiond_core::store::{read_json, Store};
use companiond_core::task::blocking;

use crate::error::AvatarError;
use crate::fsutil::{
    ext_lower, remove_any, stem, stream_to_file, temp_name, url_path, walk_files, Cleanup,
    StreamStop,
};
use crate::layout::{ANIMATION_DIR, EMOTION_DIR};
use crate::zipimport;
use crate::Limits;
use companiond_core::text::human_size;

/// URL prefix of the project models.
pub const STATIC_MMD_URL: &str = "/static/mmd";
/// URL prefix of workshop files.
pub const WORKSHOP_URL: &str = "/workshop";

const PMX_MAGIC: &[u8] = b"PMX ";
const PMD_MAGIC: &[u8] = b"Pmd";
const VMD_MAGIC: &[u8] = b"Vocaloid Motion Data";
const MODEL_EXTS: &[&str] = &["pmx", "pmd"];
/// Longest model name accepted for an emotion mapping.
const MAX_MODEL_NAME: usize = 200;

/// `POST /upload`'s answer.
#[derive(Serialize)]
pub struct ModelUploaded {
    pub message: String,
    pub model_name: String,
    pub model_url: String,
    pub file_size: u64,
}

/// `POST /upload_animation`'s answer.
#[derive(Serialize)]
pub struct AnimationUploaded {
    pub message: String,
    pub filename: String,
    pub file_path: String,
}

/// `POST /upload_zip`'s answer.
#[derive(Serialize)]
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

/// `GET /config`'s answer.
#[derive(Serialize)]
pub struct MmdConfig {
    pub paths: MmdPaths,
}

#[derive(Serialize)]
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
                crate::error::shown_name(base)
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

/// A validated model name for an emotion mapping (no separators).
fn mapping_name(model: &str) -> Result<&str, AvatarError> {
    let bad = || {
        AvatarError::invalid(
            "invalid_model",
            "model must be a plain model name without path separators",
        )
    };
    if model.is_empty()
        || model.len() > MAX_MODEL_NAME
        || model.starts_with('.')
        || model.contains(['/', '\\'])
    {
        return Err(bad());
    }
    safe_name(model).map_err(|_| bad())
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

    /// Stream `body` into the new file `dir/name` (size limit and header check
    /// `(magic, format name)` while streaming, synced) and move it into place
    /// under the folder lock. Returns the size.
    async fn store_upload<S, E>(
        &self,
        dir: &Path,
        name: &str,
        (magic, what): (&'static [u8], &'static str),
        body: &mut S,
        label: &str,
    ) -> Result<u64, AvatarError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        self.ensure_dirs().await?;
        let dest = safe_join(dir, name)?;
        if dest.symlink_metadata().is_ok() {
            return Err(AvatarError::Exists(format!("{name} already exists")));
        }
        let mut tmp = Cleanup::new(dir.join(temp_name("upload", ".part")));
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
    pub async fn upload_model<S, E>(
        &self,
        file_name: Option<&str>,
        body: &mut S,
    ) -> Result<ModelUploaded, AvatarError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let name = client_file_name(file_name)?;
        let ext = ext_lower(&name);
        let (magic, what): (&'static [u8], &'static str) = match ext.as_str() {
            "pmx" => (PMX_MAGIC, "PMX"),
            "pmd" => (PMD_MAGIC, "PMD"),
            _ => {
                return Err(AvatarError::invalid(
                    "unsupported_file_type",
                    "only .pmx and .pmd model files are accepted",
                ))
            }
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
    pub async fn upload_animation<S, E>(
        &self,
        file_name: Option<&str>,
        body: &mut S,
    ) -> Result<AnimationUploaded, AvatarError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let name = client_file_name(file_name)?;
        if ext_lower(&name) != "vmd" {
            return Err(AvatarError::invalid(
                "unsupported_file_type",
                "only .vmd animation files are accepted",
            ));
        }
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
    pub async fn upload_zip<S, E>(
        &self,
        file_name: Option<&str>,
        body: &mut S,
    ) -> Result<ZipImported, AvatarError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let archive_name = match file_name {
            Some(n) if !n.trim().is_empty() => {
                let n = client_file_name(Some(n))?;
                if ext_lower(&n) != "zip" {
                    return Err(AvatarError::invalid(
                        "unsupported_file_type",
                        "only .zip archives are accepted",
                    ));
                }
                n
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

    /// `GET /models`: project, user and workshop models plus broken leftovers.
    pub async fn list_models(&self) -> Result<Vec<Value>, AvatarError> {
        let me = self.clone();
        blocking(move || Ok(me.list_models_blocking())).await
    }

    fn model_entry(f: &crate::fsutil::Found, url_prefix: &str, location: &str) -> Value {
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

    /// `GET /config`: the URL prefixes of the user and project models.
    pub fn config(&self) -> MmdConfig {
        MmdConfig {
            paths: MmdPaths {
                user_mmd: "/user_mmd",
                static_mmd: STATIC_MMD_URL,
            },
        }
    }

    fn mapping_path(&self, model: &str) -> Result<PathBuf, AvatarError> {
        let model = mapping_name(model)?;
        Ok(safe_join(
            &self.user.join(EMOTION_DIR),
            &format!("{model}.json"),
        )?)
    }

    /// `GET /emotion_mapping`: the stored mapping, `{}` when absent.
    pub async fn emotion_mapping(&self, model: Option<&str>) -> Result<Value, AvatarError> {
        let Some(model) = model.filter(|m| !m.trim().is_empty()) else {
            return Ok(json!({}));
        };
        let path = self.mapping_path(model)?;
        let v = blocking(move || {
            read_json::<Value>(&path).map_err(|e| {
                AvatarError::Internal(format!("the stored emotion mapping is unreadable: {e}"))
            })
        })
        .await?;
        Ok(match v {
            Some(Value::Object(m)) => Value::Object(m),
            _ => json!({}),
        })
    }

    /// `POST /emotion_mapping`: store `mapping` for `model` (atomic write).
    pub async fn save_emotion_mapping(
        &self,
        model: &str,
        mapping: Map<String, Value>,
    ) -> Result<(), AvatarError> {
        let path = self.mapping_path(model)?;
        self.ensure_dirs().await?;
        self.store
            .write(path, Value::Object(mapping))
            .await
            .map_err(|e| AvatarError::io("cannot store the emotion mapping", e))
    }

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

//! PNGTuber packages (interface.md § PNGTuber package, § PNGTuber models).
//!
//! Upload flow: every multipart part is streamed into a hidden staging folder
//! `<data>/user_pngtuber/.upload-<random>` under the per-file and per-package
//! limits; then the package is detected ([`detect`]), converted by the
//! layered adapters when needed ([`plus`], [`remix`]), validated, normalised
//! and committed by renaming it to `<data>/user_pngtuber/<slug>`. Any failure
//! (or a dropped request) removes the staging folder.

pub mod godot;
pub mod image;
pub mod listing;
pub mod plus;
pub mod remix;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::Stream;
use serde::Serialize;
use serde_json::{json, Map, Value};

use companiond_core::paths::{
    check_file_name, clean_segments, safe_join, safe_name, MAX_NAME_BYTES,
};
use companiond_core::static_files::USER_PNGTUBER;
use companiond_core::store::{atomic_write, Store};
use companiond_core::task::blocking;

use crate::error::AvatarError;
use crate::fsutil::{
    ext_lower, remove_any, stem, stream_to_file, temp_name, url_path, walk_files, Budget, Cleanup,
    StreamStop,
};
use crate::Limits;
use companiond_core::text::human_size;

/// URL prefix of the packages.
pub const URL_PREFIX: &str = "/user_pngtuber";
/// Allowed image extensions.
pub const IMAGE_EXTS: &[&str] = &["png", "gif", "jpg", "jpeg", "webp"];
/// The state keys of the `pngtuber` block.
pub const IMAGE_KEYS: &[&str] = &[
    "idle_image",
    "talking_image",
    "drag_image",
    "click_image",
    "happy_image",
    "sad_image",
    "angry_image",
    "surprised_image",
];
/// The `adapter` of both layered formats.
pub const LAYERED_ADAPTER: &str = "layered_canvas_v1";
/// The `adapter_version` both layered adapters report.
pub const ADAPTER_VERSION: u32 = 2;
/// Most files in one package upload.
pub const MAX_FILES: usize = 10_000;

/// The adapter capabilities of interface.md § PNGTuber models, per source format.
pub fn capabilities(source_format: &str) -> &'static [&'static str] {
    match source_format {
        "simple_package" => &["idle_talking_swap", "emotion_image_swap"],
        "pngtuber_layered_save" => &[
            "idle_talking_swap",
            "layered_state_emotions",
            "blink_with_speech_bounce",
            "costume_hotkeys",
            "costume_toggles",
            "sprite_sheet_frames",
            "approximate_physics",
        ],
        "pngtuber_layered_project" => &[
            "idle_talking_swap",
            "layered_state_emotions",
            "blink_with_speech_bounce",
            "sprite_sheet_frames",
            "physics_v2",
            "state_switching",
            "emotion_mappings",
            "effective_z_index_ordering",
            "mesh_deformation_with_real_geometry",
        ],
        _ => &[],
    }
}

/// What a detector/adapter produced.
pub struct Imported {
    pub source_format: &'static str,
    pub model_name: Option<String>,
    pub model_json: Map<String, Value>,
    pub warnings: Vec<String>,
    pub message: String,
}

/// A layered project converted by an adapter, ready to be written as a package.
pub(crate) struct LayeredPackage<'a> {
    pub source_format: &'static str,
    pub metadata_file: &'static str,
    pub name: String,
    pub idle: &'a image::Rgba,
    pub talking: &'a image::Rgba,
    /// Part images (file name inside the package, image).
    pub parts: Vec<(&'a str, &'a image::Rgba)>,
    /// The original project file kept beside the conversion, when not already there.
    pub source: Option<(&'static str, &'a [u8])>,
    pub metadata: Value,
    pub warnings: Vec<String>,
}

/// Write a converted layered package (composites, parts, source, layered
/// metadata, model.json) into `pkg` and describe it.
pub(crate) fn write_layered(pkg: &Path, p: LayeredPackage<'_>) -> Result<Imported, String> {
    let write = |rel: &str, bytes: &[u8]| {
        atomic_write(&pkg.join(rel), bytes).map_err(|e| format!("cannot write {rel}: {e}"))
    };
    write("idle.png", &p.idle.to_png()?)?;
    write("talking.png", &p.talking.to_png()?)?;
    for (file, image) in &p.parts {
        write(file, &image.to_png()?)?;
    }
    if let Some((file, bytes)) = p.source {
        write(file, bytes)?;
    }
    write(
        p.metadata_file,
        &serde_json::to_vec_pretty(&p.metadata).map_err(|e| e.to_string())?,
    )?;
    let model = json!({
        "name": p.name,
        "model_type": "pngtuber",
        "source_format": p.source_format,
        "pngtuber": {
            "idle_image": "idle.png", "talking_image": "talking.png",
            "layered_metadata": p.metadata_file, "adapter": LAYERED_ADAPTER,
            "adapter_version": ADAPTER_VERSION, "source_type": p.source_format,
            "scale": 1, "offset_x": 0, "offset_y": 0, "mirror": false,
        },
    });
    let Value::Object(model_json) = model else {
        return Err("internal: model.json".into());
    };
    write(
        "model.json",
        &serde_json::to_vec_pretty(&model_json).map_err(|e| e.to_string())?,
    )?;
    Ok(Imported {
        source_format: p.source_format,
        model_name: Some(p.name),
        model_json,
        warnings: p.warnings,
        message: "imported with the layered adapter (layered_canvas_v1, adapter_version 2)".into(),
    })
}

/// `POST /upload_model`'s answer.
#[derive(Serialize)]
pub struct PackageUploaded {
    pub message: String,
    pub model_type: &'static str,
    pub model_name: String,
    pub name: String,
    pub folder: String,
    pub url: String,
    /// The normalised `pngtuber` block as stored.
    pub pngtuber: Map<String, Value>,
    pub source_format: &'static str,
    pub warnings: Vec<String>,
    /// Bytes received.
    pub file_size: u64,
    pub capabilities: &'static [&'static str],
    /// Layered formats only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_version: Option<u32>,
}

/// The PNGTuber package store.
#[derive(Clone)]
pub struct Pngtuber {
    root: PathBuf,
    limits: Limits,
    store: Store,
    listing: std::sync::Arc<listing::ListCache>,
}

/// An upload in progress: its staging folder is removed when this is dropped
/// (unless committed).
pub struct StagedUpload {
    staging: Cleanup,
    files: Vec<Vec<String>>,
    budget: Budget,
    file_limit: u64,
}

/// The folder slug of interface.md § PNGTuber package (reference `_slugify_name`):
/// runs of characters other than letters, digits, `_`, `.` and `-` become one
/// `_`; leading/trailing `.`, `_`, `-` are stripped; empty gives `pngtuber_model`.
pub fn slugify(raw: &str) -> String {
    let mut out = String::new();
    let mut in_run = false;
    for c in raw.trim().chars() {
        if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    // At most 100 characters (the reference) and, for wide scripts, at most
    // MAX_NAME_BYTES bytes of UTF-8, the longest name a file system stores.
    let mut s = String::new();
    for c in out
        .trim_matches(|c| c == '.' || c == '_' || c == '-')
        .chars()
        .take(100)
    {
        if s.len() + c.len_utf8() > MAX_NAME_BYTES {
            break;
        }
        s.push(c);
    }
    let s = s
        .trim_matches(|c| c == '.' || c == '_' || c == '-')
        .to_string();
    if s.is_empty() {
        "pngtuber_model".into()
    } else {
        s
    }
}

fn is_image(name: &str) -> bool {
    IMAGE_EXTS.contains(&ext_lower(name).as_str())
}

fn is_external(v: &str) -> bool {
    v.starts_with('/') || v.starts_with("http://") || v.starts_with("https://")
}

/// A package-relative path: plain segments, no `.`/`..`/empty parts.
fn relative_segments(v: &str) -> Option<Vec<String>> {
    let v = v.replace('\\', "/");
    if v.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return None;
    }
    clean_segments(&v).ok().filter(|s| !s.is_empty())
}

/// The raw `pngtuber` block of a model.json.
fn raw_config(model: &Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::Object(m)) = model.get("pngtuber") {
        return m.clone();
    }
    if let Some(Value::Object(m)) = model
        .get("_reserved")
        .and_then(|r| r.get("avatar"))
        .and_then(|a| a.get("pngtuber"))
    {
        return m.clone();
    }
    Map::new()
}

fn url_value(v: Option<&Value>, folder: &str) -> String {
    let Some(Value::String(s)) = v else {
        return String::new();
    };
    let s = s.trim();
    if s.is_empty() {
        return String::new();
    }
    let s = s.replace('\\', "/");
    if is_external(&s) {
        return s;
    }
    match relative_segments(&s) {
        Some(segs) => format!("{URL_PREFIX}/{folder}/{}", segs.join("/")),
        None => String::new(),
    }
}

/// The normalised `pngtuber` object (reference router § Normalized object).
pub fn normalize(model: &Map<String, Value>, folder: &str) -> Map<String, Value> {
    let raw = raw_config(model);
    let mut out = Map::new();
    for k in IMAGE_KEYS {
        out.insert((*k).into(), json!(url_value(raw.get(*k), folder)));
    }
    let meta = raw.get("layered_metadata").or_else(|| raw.get("metadata"));
    let layered = url_value(meta, folder);
    let adapter = match raw.get("adapter") {
        Some(Value::String(s)) => s.clone(),
        _ if !layered.is_empty() => LAYERED_ADAPTER.into(),
        _ => String::new(),
    };
    out.insert("layered_metadata".into(), json!(layered));
    out.insert("adapter".into(), json!(adapter));
    if let Some(v @ Value::Number(_)) = raw.get("adapter_version") {
        out.insert("adapter_version".into(), v.clone());
    }
    let scale = raw.get("scale").cloned().unwrap_or(json!(1));
    let mobile_default = match scale
        .as_f64()
        .or_else(|| scale.as_str().and_then(|s| s.parse().ok()))
    {
        Some(f) if f.is_finite() => json!(f.min(1.0)),
        _ => json!(1),
    };
    out.insert("scale".into(), scale);
    out.insert(
        "offset_x".into(),
        raw.get("offset_x").cloned().unwrap_or(json!(0)),
    );
    out.insert(
        "offset_y".into(),
        raw.get("offset_y").cloned().unwrap_or(json!(0)),
    );
    out.insert(
        "mobile_scale".into(),
        raw.get("mobile_scale").cloned().unwrap_or(mobile_default),
    );
    out.insert(
        "mobile_offset_x".into(),
        raw.get("mobile_offset_x").cloned().unwrap_or(json!(0)),
    );
    out.insert(
        "mobile_offset_y".into(),
        raw.get("mobile_offset_y").cloned().unwrap_or(json!(0)),
    );
    out.insert("mirror".into(), json!(truthy(raw.get("mirror"))));
    let source_type = match raw.get("source_type") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => "transparent_asset".into(),
    };
    let source_format = [model.get("source_format"), raw.get("source_format")]
        .into_iter()
        .flatten()
        .find_map(|v| v.as_str().filter(|s| !s.is_empty()).map(str::to_string))
        .unwrap_or_else(|| source_type.clone());
    out.insert("source_type".into(), json!(source_type));
    out.insert("source_format".into(), json!(source_format));
    out
}

/// Python-like truthiness of a JSON value.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// Package validation (interface.md: model_type, non-empty idle_image, allowed
/// extensions, every referenced file present). `folder` lets stored packages,
/// whose paths were normalised to `/user_pngtuber/<folder>/...`, be checked too.
pub fn validate(
    model: &Map<String, Value>,
    pkg: &Path,
    folder: Option<&str>,
) -> Result<(), String> {
    if model.get("model_type").and_then(Value::as_str) != Some("pngtuber") {
        return Err("model_type must be pngtuber".into());
    }
    let raw = raw_config(model);
    match raw.get("idle_image") {
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        _ => return Err("pngtuber.idle_image must be configured".into()),
    }
    let own_prefix = folder.map(|f| format!("{URL_PREFIX}/{f}/"));
    for (k, v) in &raw {
        if !k.ends_with("_image") {
            continue;
        }
        let Some(s) = v.as_str().map(str::trim).filter(|s| !s.is_empty()) else {
            continue;
        };
        let s = s.replace('\\', "/");
        let rel = match &own_prefix {
            Some(p) if s.starts_with(p.as_str()) => s[p.len()..].to_string(),
            _ if is_external(&s) => {
                let path = s.split(['?', '#']).next().unwrap_or("");
                if !is_image(path) {
                    return Err(format!("{k}: unsupported image format ({s})"));
                }
                continue;
            }
            _ => s.clone(),
        };
        let Some(segs) = relative_segments(&rel) else {
            return Err(format!("{k}: invalid path ({s})"));
        };
        if !segs.last().is_some_and(|n| is_image(n)) {
            return Err(format!(
                "{k}: unsupported image format ({s}); allowed: .png .gif .jpg .jpeg .webp"
            ));
        }
        let ok = safe_join(pkg, &segs.join("/"))
            .map(|p| p.is_file())
            .unwrap_or(false);
        if !ok {
            return Err(format!("{k}: referenced file does not exist ({s})"));
        }
    }
    Ok(())
}

fn read_model_json(path: &Path) -> Result<Option<Map<String, Value>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err("model.json is not a JSON object".into()),
        Err(e) => Err(format!("model.json is not valid JSON: {e}")),
    }
}

/// Detect the package format in `pkg` and convert it in place when it is a
/// layered format. `seed` is the folder slug the upload would get (it breaks
/// ties between several `.save` files).
pub fn detect(pkg: &Path, seed: &str) -> Result<Imported, AvatarError> {
    // 1. simple package
    match read_model_json(&pkg.join("model.json")) {
        Ok(Some(m)) if m.get("model_type").and_then(Value::as_str) == Some("pngtuber") => {
            let name = m
                .get("name")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string);
            return Ok(Imported {
                source_format: "simple_package",
                model_name: name.clone(),
                model_json: m,
                warnings: Vec::new(),
                message: format!(
                    "PNGTuber model {} uploaded",
                    name.as_deref().unwrap_or(seed)
                ),
            });
        }
        Ok(_) => {}
        Err(e) => {
            return Err(AvatarError::import(
                "invalid_model_json",
                e,
                "simple_package",
                Vec::new(),
            ))
        }
    }
    let files = walk_files(pkg, &[]);
    let rel = |f: &crate::fsutil::Found| f.rel.join("/");
    // 2. layered save files
    let saves: Vec<_> = files
        .iter()
        .filter(|f| f.rel.last().is_some_and(|n| ext_lower(n) == "save"))
        .collect();
    if !saves.is_empty() {
        let chosen = if saves.len() == 1 {
            Some(saves[0])
        } else {
            let root_matches: Vec<_> = saves
                .iter()
                .filter(|f| f.rel.len() == 1 && slugify(stem(&f.rel[0])).eq_ignore_ascii_case(seed))
                .collect();
            if root_matches.len() == 1 {
                Some(*root_matches[0])
            } else {
                None
            }
        };
        let Some(save) = chosen else {
            let candidates: Vec<String> = saves.iter().map(|f| rel(f)).collect();
            return Err(AvatarError::import(
                "ambiguous_layered_save",
                format!(
                    "the package holds {} layered .save files; upload exactly one",
                    saves.len()
                ),
                "pngtuber_layered_save",
                candidates,
            ));
        };
        return plus::convert(pkg, &save.path).map_err(|e| {
            AvatarError::import(
                "conversion_failed",
                format!("recognized a layered save file but the conversion failed: {e}"),
                "pngtuber_layered_save",
                Vec::new(),
            )
        });
    }
    // 3. layered project files
    if let Some(p) = files
        .iter()
        .find(|f| f.rel.last().is_some_and(|n| ext_lower(n) == "pngremix"))
    {
        return remix::convert(pkg, &p.path).map_err(|e| {
            AvatarError::import(
                "conversion_failed",
                format!("recognized a layered project file but the conversion failed: {e}"),
                "pngtuber_layered_project",
                Vec::new(),
            )
        });
    }
    // 4. other packed projects: recognised, not supported yet
    if let Some(p) = files.iter().find(|f| {
        f.rel
            .last()
            .is_some_and(|n| matches!(ext_lower(n).as_str(), "veado" | "veadomini"))
    }) {
        let mut warnings = vec![format!("file: {}", rel(p))];
        let head = std::fs::read(&p.path)
            .map(|b| b.into_iter().take(4).collect::<Vec<u8>>())
            .unwrap_or_default();
        if head.starts_with(b"PK\x03\x04") {
            if let Ok(f) = std::fs::File::open(&p.path) {
                if let Ok(z) = zip::ZipArchive::new(f) {
                    let names: Vec<&str> = z.file_names().collect();
                    let yaml = names
                        .iter()
                        .filter(|n| matches!(ext_lower(n).as_str(), "yaml" | "yml"))
                        .count();
                    let images = names.iter().filter(|n| is_image(n)).count();
                    warnings.push(format!(
                        "zip container with {yaml} yaml files and {images} images"
                    ));
                }
            }
        } else {
            warnings.push(
                "this packed project is not a zip container, possibly an old binary format".into(),
            );
        }
        return Err(AvatarError::import(
            "unsupported_format",
            "recognized a packed project file, but this format is not supported yet; please provide a sample",
            "packed_project",
            warnings,
        ));
    }
    // 5. images only
    let images: Vec<String> = files
        .iter()
        .filter(|f| f.rel.last().is_some_and(|n| is_image(n)))
        .map(rel)
        .collect();
    if !images.is_empty() {
        return Err(AvatarError::import(
            "image_pair_candidate",
            "found images but no model.json or project file; use the two-image importer (idle and talking images) or add a model.json",
            "image_pair_candidate",
            images.into_iter().take(20).collect(),
        ));
    }
    Err(AvatarError::import(
        "unknown_package",
        "the package needs a root model.json or a recognized project file (.save, .pngRemix, .veado, .veadomini)",
        "unknown",
        Vec::new(),
    ))
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
    pub async fn add_file<S, E>(
        &mut self,
        file_name: Option<&str>,
        body: &mut S,
    ) -> Result<(), AvatarError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
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
                        crate::error::shown_name(seg)
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
        let staging = root.join(temp_name("upload", ""));
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
        let name = model_json
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| folder.clone());
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

struct Prepared {
    pkg: PathBuf,
    folder: String,
    model_json: Map<String, Value>,
    pngtuber: Map<String, Value>,
    imported: Imported,
}

/// Blocking part of the upload: strip the common root, detect, convert,
/// validate, normalise and rewrite model.json inside the staging folder.
fn prepare(staging: &Path, files: &[Vec<String>]) -> Result<Prepared, AvatarError> {
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

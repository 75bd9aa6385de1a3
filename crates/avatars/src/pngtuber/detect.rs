//! Recognising an uploaded package: a simple package with its `model.json`,
//! a layered save or project (converted in place), or a format that is
//! recognised but not supported, each refusal naming what was found.

use std::path::Path;

use serde_json::Value;

use crate::error::AvatarError;
use crate::fsutil::{ext_lower, stem, walk_files, Found};

use super::layered::Imported;
use super::package::{is_image, read_model_json, slugify};
use super::{plus, remix};

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
    let rel = |f: &Found| f.rel.join("/");
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

//! What the format adapters share: the description of an imported package,
//! the adapter capabilities and the writer of a converted layered package.

use std::path::Path;

use serde_json::{json, Map, Value};

use companiond_core::store::atomic_write;

use super::image;

/// The `adapter` of both layered formats.
pub const LAYERED_ADAPTER: &str = "layered_canvas_v1";
/// The `adapter_version` both layered adapters report.
pub const ADAPTER_VERSION: u32 = 2;

/// The adapter capabilities a listing and an upload report, per source format.
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

/// A name reduced to ASCII letters, digits, `-` and `_` (others become `_`),
/// usable in the file names of the converted layers.
pub(crate) fn safe_id(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A layered metadata document: the head every adapter writes (adapter,
/// runtime, supported capabilities, source format, application and file,
/// warnings) followed by the adapter's `own` keys.
pub(crate) fn layered_metadata(
    source_format: &'static str,
    application: &str,
    source_file: &str,
    warnings: &[String],
    own: Value,
) -> Value {
    let mut doc = Map::new();
    doc.insert("adapter".into(), json!(LAYERED_ADAPTER));
    doc.insert("adapter_version".into(), json!(ADAPTER_VERSION));
    doc.insert("runtime".into(), json!("layered_canvas"));
    doc.insert("supported".into(), json!(capabilities(source_format)));
    doc.insert("source_format".into(), json!(source_format));
    doc.insert("source_application".into(), json!(application));
    doc.insert("source_file".into(), json!(source_file));
    doc.insert("warnings".into(), json!(warnings));
    if let Value::Object(own) = own {
        doc.extend(own);
    }
    Value::Object(doc)
}

//! CHARX: a ZIP archive with `card.json` (a V3 card) at its root and the
//! card's assets beside it, referred to as `embeded://<path>` in
//! `data.assets`. Read whole in memory (the file is at most
//! [`super::MAX_FILE_BYTES`]); every entry name is checked with the shared
//! path rules before anything is kept.

use std::io::{Cursor, Read, Write};

use serde_json::{json, Map, Value};

use super::{image_ext, normalise, CardError, ReadCard};
use crate::paths::clean_segments;

/// Most entries of an imported CHARX archive.
pub const MAX_ENTRIES: usize = 256;
/// Most bytes all entries of an archive may inflate to.
pub const MAX_UNPACKED: u64 = 64 << 20;

/// Read a CHARX archive.
pub fn read(bytes: &[u8]) -> Result<ReadCard, CardError> {
    let mut zip =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| CardError::Zip(e.to_string()))?;
    if zip.len() > MAX_ENTRIES {
        return Err(CardError::TooManyEntries(zip.len()));
    }
    let mut card_json: Option<Vec<u8>> = None;
    let mut files: Vec<(Vec<String>, Vec<u8>)> = Vec::new();
    let mut budget = MAX_UNPACKED;
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).map_err(|e| CardError::Zip(e.to_string()))?;
        let name = f.name().to_string();
        let segs = clean_segments(&name).map_err(|_| CardError::UnsafePath(name.clone()))?;
        if f.enclosed_name().is_none() || f.is_symlink() {
            return Err(CardError::UnsafePath(name));
        }
        if f.is_dir() || segs.is_empty() {
            continue;
        }
        let mut data = Vec::new();
        (&mut f)
            .take(budget + 1)
            .read_to_end(&mut data)
            .map_err(|e| CardError::Zip(e.to_string()))?;
        if data.len() as u64 > budget {
            return Err(CardError::Zip(format!(
                "the entries inflate to more than {} MiB",
                MAX_UNPACKED >> 20
            )));
        }
        budget -= data.len() as u64;
        if segs.len() == 1 && segs[0] == "card.json" {
            card_json = Some(data);
        } else {
            files.push((segs, data));
        }
    }
    let raw = card_json.ok_or(CardError::NoCardJson)?;
    let v: Value = serde_json::from_slice(&raw).map_err(|e| CardError::BadJson(e.to_string()))?;
    let (card, source_spec) = normalise(v)?;
    let image = main_icon(&card).and_then(|path| {
        let segs = clean_segments(&path).ok()?;
        let bytes = files.iter().find(|(s, _)| *s == segs)?.1.clone();
        let ext = image_ext(&bytes)?;
        Some((bytes, ext))
    });
    Ok(ReadCard {
        card,
        source_spec,
        format: "charx",
        image,
        assets: files,
    })
}

/// The archive path of the card's main icon (`type: icon`, `name: main`, else
/// the first icon) when it is embedded.
fn main_icon(card: &Map<String, Value>) -> Option<String> {
    let assets = super::data(card)?.get("assets")?.as_array()?;
    let icons: Vec<&Value> = assets
        .iter()
        .filter(|a| a.get("type").and_then(Value::as_str) == Some("icon"))
        .collect();
    let pick = icons
        .iter()
        .find(|a| a.get("name").and_then(Value::as_str) == Some("main"))
        .or_else(|| icons.first())?;
    let uri = pick.get("uri").and_then(Value::as_str)?;
    uri.strip_prefix("embeded://")
        .or_else(|| uri.strip_prefix("embedded://"))
        .map(str::to_string)
}

/// One entry of a V3 card's `data.assets`.
#[derive(serde::Serialize)]
struct CardAsset<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    uri: String,
    name: &'a str,
    ext: &'a str,
}

/// A CHARX archive of `card` with `assets` (relative path, bytes); when
/// `image` is given and the card names no embedded main icon, the image is
/// added as the archive's `assets/icon/images/main.<ext>` and listed in `data.assets`.
pub fn write(
    card: &Map<String, Value>,
    assets: &[(String, Vec<u8>)],
    image: Option<(&[u8], &str)>,
) -> Result<Vec<u8>, String> {
    let mut card = card.clone();
    let mut files: Vec<(String, Vec<u8>)> = assets.to_vec();
    if let Some((bytes, ext)) = image {
        if main_icon(&card).is_none() {
            let path = format!("assets/icon/images/main.{ext}");
            if let Some(Value::Object(d)) = card.get_mut("data") {
                let list = d.entry("assets").or_insert_with(|| json!([]));
                if let Some(a) = list.as_array_mut() {
                    let icon = CardAsset {
                        kind: "icon",
                        uri: format!("embeded://{path}"),
                        name: "main",
                        ext,
                    };
                    a.push(serde_json::to_value(icon).map_err(|e| e.to_string())?);
                }
            }
            files.retain(|(p, _)| *p != path);
            files.push((path, bytes.to_vec()));
        }
    }
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let err = |e: zip::result::ZipError| e.to_string();
    zip.start_file("card.json", opts).map_err(err)?;
    zip.write_all(Value::Object(card).to_string().as_bytes())
        .map_err(|e| e.to_string())?;
    for (path, bytes) in &files {
        zip.start_file(path.as_str(), opts).map_err(err)?;
        zip.write_all(bytes).map_err(|e| e.to_string())?;
    }
    Ok(zip.finish().map_err(err)?.into_inner())
}

//! Model ZIP import (interface.md § MMD models, ZIP rules).
//!
//! The archive has already been streamed to a temporary file. [`extract`]:
//! 1. refuses more than `zip_entries` entries, symlink and encrypted entries,
//!    absolute paths and `..` (checked on the decoded names with the shared
//!    path rules), and archives without a `.pmx`/`.pmd`;
//! 2. recovers legacy names: entries without the UTF-8 flag whose raw bytes are
//!    not UTF-8 are decoded as Shift-JIS, GBK/GB18030, Big5 or EUC-KR, chosen by
//!    `chardetng` over all such names together and confirmed by an error-free decode;
//! 3. extracts into a hidden staging folder through a counting reader, so the
//!    uncompressed limit holds whatever the headers declare;
//! 4. returns the staging folder (removed on drop) for the caller to rename into place.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use companiond_core::paths::{clean_segments, safe_join, safe_name};
use encoding_rs::{Encoding, BIG5, EUC_KR, GB18030, GBK, SHIFT_JIS};

use crate::error::AvatarError;
use crate::fsutil::{ext_lower, stem, temp_name, Cleanup};
use crate::mmd::{ANIMATION_DIR, EMOTION_DIR};
use crate::{human_size, Limits};

/// A finished extraction, still in its staging folder.
pub struct Staged {
    pub staging: Cleanup,
    /// Final folder name under the user folder.
    pub dir_name: String,
    /// The main model's path inside that folder.
    pub model_rel: Vec<String>,
    pub file_count: usize,
    pub extracted_bytes: u64,
    /// How many entry names were recovered from a legacy encoding.
    pub recovered_names: usize,
}

struct Entry {
    index: usize,
    segs: Vec<String>,
    is_dir: bool,
}

const S_IFMT: u32 = 0o170000;
const S_IFLNK: u32 = 0o120000;
const COPY_BUF: usize = 256 * 1024;

fn bad_zip(msg: impl Into<String>) -> AvatarError {
    AvatarError::invalid("invalid_zip", msg)
}

/// Legacy encodings tried for names without the UTF-8 flag.
const LEGACY: &[&Encoding] = &[SHIFT_JIS, GBK, BIG5, EUC_KR];

/// Choose the encoding of the raw names that are not UTF-8.
pub fn detect_legacy_encoding(raw_names: &[&[u8]]) -> Option<&'static Encoding> {
    if raw_names.is_empty() {
        return None;
    }
    let mut det = chardetng::EncodingDetector::new();
    for n in raw_names {
        det.feed(n, false);
        det.feed(b" ", false);
    }
    det.feed(b"", true);
    let guess = det.guess(None, false);
    let guess = if guess == GB18030 { GBK } else { guess };
    let decodes_all = |enc: &'static Encoding| {
        raw_names.iter().all(|n| {
            enc.decode_without_bom_handling_and_without_replacement(n)
                .is_some()
        })
    };
    if LEGACY.contains(&guess) && decodes_all(guess) {
        return Some(guess);
    }
    LEGACY.iter().copied().find(|e| decodes_all(e))
}

/// Decode the entry names. `raw[i]` is `(raw bytes, name as the zip crate
/// decoded it, UTF-8 flag or Unicode-path field present)`. Returns the names and
/// how many were recovered from a legacy encoding.
pub fn decode_names(raw: &[(Vec<u8>, String, bool)]) -> (Vec<String>, usize) {
    let legacy: Vec<&[u8]> = raw
        .iter()
        .filter(|(b, _, utf8)| !utf8 && std::str::from_utf8(b).is_err())
        .map(|(b, _, _)| b.as_slice())
        .collect();
    let enc = detect_legacy_encoding(&legacy);
    let mut recovered = 0;
    let names = raw
        .iter()
        .map(|(b, zip_name, utf8)| {
            if *utf8 {
                return zip_name.clone();
            }
            if let Ok(s) = std::str::from_utf8(b) {
                return s.to_string();
            }
            if let Some(enc) = enc {
                if let Some(s) = enc.decode_without_bom_handling_and_without_replacement(b) {
                    recovered += 1;
                    return s.into_owned();
                }
            }
            // Nothing fits: the zip crate's CP437 reading.
            zip_name.clone()
        })
        .collect();
    (names, recovered)
}

/// Split and check an entry name: no absolute path, drive, `..` or control characters.
fn entry_segments(name: &str) -> Result<Vec<String>, AvatarError> {
    let n = name.replace('\\', "/");
    let unsafe_entry =
        |why: &str| AvatarError::invalid("unsafe_zip_entry", format!("entry {name:?}: {why}"));
    if n.starts_with('/') {
        return Err(unsafe_entry("absolute paths are not allowed"));
    }
    if n.split('/').any(|s| s == "..") {
        return Err(unsafe_entry("'..' is not allowed"));
    }
    clean_segments(&n).map_err(|e| unsafe_entry(&e.to_string()))
}

/// Entries skipped silently: macOS resource forks and Finder metadata.
fn is_junk(segs: &[String]) -> bool {
    segs.first().is_some_and(|s| s == "__MACOSX")
        || segs
            .last()
            .is_some_and(|s| s.starts_with("._") || s == ".DS_Store" || s == "Thumbs.db")
}

fn is_model(name: &str) -> bool {
    matches!(ext_lower(name).as_str(), "pmx" | "pmd")
}

/// Extract the archive at `zip_path` into a staging folder under `user_root`.
pub fn extract(
    zip_path: &Path,
    user_root: &Path,
    limits: &Limits,
    archive_stem: &str,
) -> Result<Staged, AvatarError> {
    let file = File::open(zip_path).map_err(|e| AvatarError::io("cannot read the archive", e))?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| bad_zip(format!("the upload is not a readable ZIP archive: {e}")))?;
    let count = zip.len();
    if count > limits.zip_entries {
        return Err(AvatarError::invalid(
            "too_many_entries",
            format!(
                "the archive has {count} entries; at most {} are allowed",
                limits.zip_entries
            ),
        ));
    }

    // Pass 1: metadata only (no decompression).
    let mut raw = Vec::with_capacity(count);
    let mut kinds = Vec::with_capacity(count);
    let mut declared: u64 = 0;
    for i in 0..count {
        let f = zip
            .by_index_raw(i)
            .map_err(|e| bad_zip(format!("entry {i} is unreadable: {e}")))?;
        let name_raw = f.name_raw().to_vec();
        let zip_name = f.name().to_string();
        let flagged = std::str::from_utf8(&name_raw).is_ok_and(|s| s == zip_name);
        if f.unix_mode().is_some_and(|m| m & S_IFMT == S_IFLNK) {
            return Err(AvatarError::invalid(
                "unsafe_zip_entry",
                format!("entry {zip_name:?} is a symbolic link; links are not allowed"),
            ));
        }
        if f.encrypted() {
            return Err(bad_zip(format!("entry {zip_name:?} is encrypted")));
        }
        declared = declared.saturating_add(f.size());
        kinds.push(f.is_dir());
        raw.push((name_raw, zip_name, flagged));
    }
    if declared > limits.zip_uncompressed_bytes {
        return Err(AvatarError::TooLarge(format!(
            "the archive expands to more than {}",
            human_size(limits.zip_uncompressed_bytes)
        )));
    }
    let (names, recovered) = decode_names(&raw);

    let mut entries = Vec::with_capacity(count);
    for (i, name) in names.iter().enumerate() {
        let segs = entry_segments(name)?;
        if segs.is_empty() || is_junk(&segs) {
            continue;
        }
        let is_dir = kinds[i] || name.ends_with('/') || name.ends_with('\\');
        entries.push(Entry {
            index: i,
            segs,
            is_dir,
        });
    }
    // A path used both as a file and as a folder cannot be extracted.
    let file_paths: std::collections::HashSet<&[String]> = entries
        .iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.segs.as_slice())
        .collect();
    for e in &entries {
        for n in 1..e.segs.len() {
            if file_paths.contains(&e.segs[..n]) {
                return Err(bad_zip(format!(
                    "{} is both a file and a folder in the archive",
                    e.segs[..n].join("/")
                )));
            }
        }
    }
    let mut models: Vec<&Entry> = entries
        .iter()
        .filter(|e| !e.is_dir && e.segs.last().is_some_and(|n| is_model(n)))
        .collect();
    if models.is_empty() {
        return Err(AvatarError::invalid(
            "no_model",
            "the archive contains no .pmx or .pmd model",
        ));
    }
    models.sort_by(|a, b| a.segs.len().cmp(&b.segs.len()).then(a.segs.cmp(&b.segs)));

    // A single top-level folder names the destination and is stripped.
    let files: Vec<&Entry> = entries.iter().filter(|e| !e.is_dir).collect();
    let first = &files[0].segs[0];
    let single_top = files
        .iter()
        .all(|e| e.segs.len() > 1 && &e.segs[0] == first)
        && entries.iter().all(|e| &e.segs[0] == first);
    let strip = usize::from(single_top);
    let main_model = models[0].segs[strip..].to_vec();
    let dir_name = if single_top {
        first.clone()
    } else {
        let s = stem(
            main_model
                .last()
                .map(String::as_str)
                .unwrap_or(archive_stem),
        );
        if s.is_empty() {
            archive_stem.to_string()
        } else {
            s.to_string()
        }
    };
    let dir_name = dir_name.trim().to_string();
    if dir_name.is_empty()
        || dir_name.starts_with('.')
        || safe_name(&dir_name).is_err()
        || dir_name.eq_ignore_ascii_case(ANIMATION_DIR)
        || dir_name.eq_ignore_ascii_case(EMOTION_DIR)
    {
        return Err(AvatarError::invalid(
            "invalid_model_name",
            format!("the model folder name {dir_name:?} cannot be used"),
        ));
    }
    if user_root.join(&dir_name).symlink_metadata().is_ok() {
        return Err(AvatarError::Exists(format!(
            "a model folder named {dir_name} already exists"
        )));
    }

    // Pass 2: extract into the staging folder, counting real bytes.
    let staging = Cleanup::new(user_root.join(temp_name("zipstage", "")));
    std::fs::create_dir(staging.path())
        .map_err(|e| AvatarError::io("cannot create the staging folder", e))?;
    let mut total: u64 = 0;
    let mut file_count = 0usize;
    let mut buf = vec![0u8; COPY_BUF];
    for e in &entries {
        let rel = &e.segs[strip..];
        if rel.is_empty() {
            continue;
        }
        let path = safe_join(staging.path(), &rel.join("/"))?;
        if e.is_dir {
            std::fs::create_dir_all(&path)
                .map_err(|err| AvatarError::io("cannot create a folder", err))?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| AvatarError::io("cannot create a folder", err))?;
        }
        let mut out = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => f,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(bad_zip(format!(
                    "entry {} appears twice in the archive",
                    rel.join("/")
                )))
            }
            Err(err) => return Err(AvatarError::io("cannot write an extracted file", err)),
        };
        let mut reader = zip
            .by_index(e.index)
            .map_err(|err| bad_zip(format!("entry {} is unreadable: {err}", rel.join("/"))))?;
        loop {
            let n = reader
                .read(&mut buf)
                .map_err(|err| bad_zip(format!("entry {} is corrupt: {err}", rel.join("/"))))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > limits.zip_uncompressed_bytes {
                return Err(AvatarError::TooLarge(format!(
                    "the archive expands to more than {}",
                    human_size(limits.zip_uncompressed_bytes)
                )));
            }
            out.write_all(&buf[..n])
                .map_err(|err| AvatarError::io("cannot write an extracted file", err))?;
        }
        file_count += 1;
    }
    Ok(Staged {
        staging,
        dir_name,
        model_rel: main_model,
        file_count,
        extracted_bytes: total,
        recovered_names: recovered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(enc: &'static Encoding, names: &[&str]) -> Vec<(Vec<u8>, String, bool)> {
        names
            .iter()
            .map(|n| (enc.encode(n).0.into_owned(), "cp437".to_string(), false))
            .collect()
    }

    #[test]
    fn recovers_cjk_legacy_names() {
        for (enc, names) in [
            (
                SHIFT_JIS,
                &["初音ミク/初音ミク.pmx", "初音ミク/テクスチャ/顔.png"][..],
            ),
            (GBK, &["模型/模型文件.pmx", "模型/贴图/脸部纹理.png"][..]),
            (BIG5, &["模型/繁體中文模型.pmx", "模型/貼圖/臉部.png"][..]),
            (EUC_KR, &["모델/한국어모델.pmx", "모델/텍스처/얼굴.png"][..]),
        ] {
            let (out, n) = decode_names(&legacy(enc, names));
            assert_eq!(out, names, "{}", enc.name());
            assert_eq!(n, names.len());
        }
        let raw = vec![(b"plain.pmx".to_vec(), "plain.pmx".to_string(), false)];
        assert_eq!(decode_names(&raw).0, vec!["plain.pmx"]);
    }
}

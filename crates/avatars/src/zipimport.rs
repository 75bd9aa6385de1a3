//! Model ZIP import (the ZIP rules are listed below and in `docs/avatars.md`).
//!
//! [`import`] extracts while the upload streams in (`zipstream`): every entry's
//! data is written once, to a numbered file in a private work folder, with the
//! uncompressed limit counted on the real bytes and each CRC checked. When the
//! central directory has arrived, [`place`]:
//! 1. refuses more than `zip_entries` entries, symlink and encrypted entries,
//!    absolute paths and `..` (checked on the decoded names with the shared
//!    path rules), and archives without a `.pmx`/`.pmd`;
//! 2. recovers legacy names: entries without the UTF-8 flag whose raw bytes are
//!    not UTF-8 are decoded as Shift-JIS, GBK/GB18030, Big5 or EUC-KR, chosen by
//!    `chardetng` over all such names together and confirmed by an error-free decode;
//! 3. moves the numbered files to their names in a hidden staging folder and
//!    returns it (removed on drop) for the caller to rename into place.
//!
//! Nothing is ever created under a name taken from the archive before that name
//! has been checked, and a failed import leaves neither folder behind.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use std::fmt::Display;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use companiond_core::paths::{check_file_name, clean_segments, safe_join, safe_name};
use encoding_rs::{Encoding, BIG5, EUC_KR, GB18030, GBK, SHIFT_JIS};

use companiond_core::staging::hidden_name;

use crate::error::AvatarError;
use crate::fsutil::{ext_lower, stem};
use crate::layout::{ANIMATION_DIR, EMOTION_DIR};
use crate::zipstream::{bad_zip, cp437, read_archive, Input, Streamed};
use crate::Limits;
use companiond_core::staging::Cleanup;
use companiond_core::text::human_size;

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
    let unsafe_entry = |why: &str| {
        AvatarError::invalid(
            "unsafe_zip_entry",
            format!("entry {}: {why}", companiond_core::text::shown_name(name)),
        )
    };
    if n.starts_with('/') {
        return Err(unsafe_entry("absolute paths are not allowed"));
    }
    if n.split('/').any(|s| s == "..") {
        return Err(unsafe_entry("'..' is not allowed"));
    }
    let segs = clean_segments(&n).map_err(|e| unsafe_entry(&e.to_string()))?;
    for s in &segs {
        check_file_name(s).map_err(|p| {
            unsafe_entry(&format!(
                "component {}: {p}",
                companiond_core::text::shown_name(s)
            ))
        })?;
    }
    Ok(segs)
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

/// Receive the archive from `body` and extract it into a staging folder under
/// `user_root`. Returns the staged model and the archive's size.
pub async fn import(
    body: &mut (impl Stream<Item = Result<Bytes, impl Display>> + Unpin),
    user_root: &Path,
    limits: &Limits,
    archive_stem: &str,
) -> Result<(Staged, u64), AvatarError> {
    let work = Cleanup::new(user_root.join(hidden_name("zipwork", "")));
    tokio::fs::create_dir(work.path())
        .await
        .map_err(|e| AvatarError::io("cannot create the extraction folder", e))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(companiond_core::sink::QUEUE);
    let (work_path, root, lim, stem_name) = (
        work.path().to_path_buf(),
        user_root.to_path_buf(),
        *limits,
        archive_stem.to_string(),
    );
    let extractor = tokio::task::spawn_blocking(move || {
        let mut input = Input::new(rx);
        let streamed = read_archive(
            &mut input,
            &work_path,
            lim.zip_entries,
            lim.zip_uncompressed_bytes,
        )?;
        place(streamed, &root, &lim, &stem_name)
    });
    let mut received = 0u64;
    let fed = loop {
        match body.next().await {
            None => break Ok(()),
            Some(Err(e)) => break Err(AvatarError::Aborted(format!("upload interrupted: {e}"))),
            Some(Ok(chunk)) => {
                received += chunk.len() as u64;
                if received > limits.zip_archive_bytes {
                    break Err(AvatarError::TooLarge(format!(
                        "the archive exceeds the size limit of {}",
                        human_size(limits.zip_archive_bytes)
                    )));
                }
                // A closed channel means the extractor stopped: its error is reported.
                if tx.send(chunk).await.is_err() {
                    break Ok(());
                }
            }
        }
    };
    drop(tx);
    let extracted = extractor
        .await
        .map_err(|e| AvatarError::Internal(format!("the extraction task failed: {e}")));
    drop(work);
    fed?;
    Ok((extracted??, received))
}

/// Check the streamed entries against the central directory, decide the names
/// and move the extracted files into a staging folder under `user_root`.
pub fn place(
    streamed: Streamed,
    user_root: &Path,
    limits: &Limits,
    archive_stem: &str,
) -> Result<Staged, AvatarError> {
    let Streamed { locals, central } = streamed;
    let count = central.len();
    if count > limits.zip_entries {
        return Err(AvatarError::invalid(
            "too_many_entries",
            format!(
                "the archive has {count} entries; at most {} are allowed",
                limits.zip_entries
            ),
        ));
    }
    let by_offset: HashMap<u64, usize> = locals
        .iter()
        .enumerate()
        .map(|(i, l)| (l.offset, i))
        .collect();
    let mut used = vec![false; locals.len()];
    let mut data = Vec::with_capacity(count);
    let mut raw = Vec::with_capacity(count);
    for c in &central {
        let zip_name = c.utf8_name.clone().unwrap_or_else(|| cp437(&c.name_raw));
        if c.unix_mode.is_some_and(|m| m & S_IFMT == S_IFLNK) {
            return Err(AvatarError::invalid(
                "unsafe_zip_entry",
                format!("entry {zip_name:?} is a symbolic link; links are not allowed"),
            ));
        }
        if c.encrypted {
            return Err(bad_zip(format!("entry {zip_name:?} is encrypted")));
        }
        let local = by_offset
            .get(&c.offset)
            .copied()
            .filter(|&i| !used[i])
            .ok_or_else(|| {
                bad_zip(format!(
                    "entry {zip_name:?} of the central directory has no data in the archive"
                ))
            })?;
        used[local] = true;
        let l = &locals[local];
        if l.size != c.size || l.crc != c.crc {
            return Err(bad_zip(format!(
                "entry {zip_name:?}: the central directory does not match its data"
            )));
        }
        data.push(l);
        raw.push((c.name_raw.clone(), zip_name, c.utf8_name.is_some()));
    }
    let (names, recovered) = decode_names(&raw);

    let mut entries = Vec::with_capacity(count);
    for (i, name) in names.iter().enumerate() {
        let segs = entry_segments(name)?;
        if segs.is_empty() || is_junk(&segs) {
            continue;
        }
        let is_dir = name.ends_with('/') || name.ends_with('\\');
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

    // Move the extracted files to their names inside the staging folder.
    let staging = Cleanup::new(user_root.join(hidden_name("zipstage", "")));
    std::fs::create_dir(staging.path())
        .map_err(|e| AvatarError::io("cannot create the staging folder", e))?;
    let mut total: u64 = 0;
    let mut file_count = 0usize;
    let mut kept = Vec::new();
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
        if path.symlink_metadata().is_ok() {
            return Err(bad_zip(format!(
                "entry {} appears twice in the archive",
                rel.join("/")
            )));
        }
        let l = data[e.index];
        match &l.file {
            Some(src) => std::fs::rename(src, &path),
            None => File::create(&path).map(|_| ()),
        }
        .map_err(|err| AvatarError::io("cannot move an extracted file", err))?;
        kept.push(path);
        total += l.size;
        file_count += 1;
    }
    // The import is durable once it answers, like a single model upload: the
    // data of every kept file is synced (writeback began while it streamed in,
    // so this mostly waits for the tail). Refused archives never pay for it.
    for path in &kept {
        File::open(path)
            .and_then(|f| f.sync_data())
            .map_err(|err| AvatarError::io("cannot sync an extracted file", err))?;
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

//! Registering uploaded songs and actions: names, ids, duplicate refusal.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use companiond_core::paths::{check_file_name, safe_name, MAX_NAME_BYTES};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::error::JukeboxError;
use crate::library::{Jukebox, Kind};
use crate::model::{extension, file_stem, sanitize_id, unique_id, Action, Library, Song};
use crate::operations::Record;
use crate::tags::{read_tags, AudioTags};
use companiond_core::text::shown_name;

/// A received file with its MD5 (hex), removed when dropped unless placed.
pub type Staged = companiond_core::staging::Staged<String>;

/// Why one uploaded file was not added (the other files of the request are
/// not affected).
#[derive(Debug)]
pub enum Refused {
    /// The file name or type is not acceptable.
    Invalid(String),
    /// A file with the same MD5 is already in the library.
    Duplicate { kind: Kind, existing: String },
    /// The file could not be stored.
    NotStored(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Invalid(m) | Refused::NotStored(m) => f.write_str(m),
            Refused::Duplicate { kind, existing } => {
                write!(f, "{} already exists: {existing}", kind.word())
            }
        }
    }
}

/// The outcome of one uploaded file.
#[derive(Debug)]
pub enum Uploaded {
    Added(Box<Record>),
    Refused(Refused),
}

impl Serialize for Uploaded {
    /// `{success: true, song|action}` or `{success: false, error}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Uploaded::Added(record) => record.serialize(s),
            Uploaded::Refused(r) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("success", &false)?;
                m.serialize_entry("error", &r.to_string())?;
                m.end()
            }
        }
    }
}

/// Names given for one file in the `metadata` field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    pub name: Option<String>,
    pub artist: Option<String>,
}

/// One received `files` part.
pub struct Upload {
    /// The file name as uploaded (already reduced to a plain base name).
    pub file_name: String,
    /// The staged file, or why this item was refused.
    pub outcome: Result<Staged, Refused>,
}

/// Parse the optional `metadata` JSON array (objects with name / artist).
/// Entries that are not objects, and fields that are not non-empty strings, count as absent.
pub fn parse_metadata(raw: Option<&str>) -> Result<Vec<Meta>, JukeboxError> {
    let raw = match raw.map(str::trim) {
        None | Some("") => return Ok(Vec::new()),
        Some(r) => r,
    };
    let v: Value =
        serde_json::from_str(raw).map_err(|_| JukeboxError::bad("metadata format error"))?;
    let Value::Array(items) = v else {
        return Err(JukeboxError::bad("metadata must be a JSON array"));
    };
    let field = |o: &Value, k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    Ok(items
        .iter()
        .map(|o| Meta {
            name: field(o, "name"),
            artist: field(o, "artist"),
        })
        .collect())
}

/// Most characters kept from an uploaded file name.
const MAX_NAME_CHARS: usize = 150;

/// Reduce an uploaded file name to a plain, safe base name (no folders, no
/// leading dots, `:` replaced, at most [`MAX_NAME_CHARS`] characters). The base
/// name as sent must be a usable file name (`core::paths::check_file_name`: not
/// empty, at most 255 bytes of UTF-8, not only dots or spaces, no NUL or control
/// characters); otherwise the item is refused with the problem named.
pub fn upload_basename(raw: &str) -> Result<String, String> {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or("");
    check_file_name(base).map_err(|p| format!("invalid file name {}: {p}", shown_name(base)))?;
    let cleaned: String = base
        .chars()
        .map(|c| if c == ':' { '_' } else { c })
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').trim().to_string();
    let cleaned = if cleaned.chars().count() > MAX_NAME_CHARS {
        let ext = extension(&cleaned);
        let keep = MAX_NAME_CHARS.saturating_sub(ext.len() + 1);
        let stem: String = file_stem(&cleaned).chars().take(keep).collect();
        if ext.is_empty() {
            stem
        } else {
            format!("{stem}.{ext}")
        }
    } else {
        cleaned
    };
    if cleaned.is_empty() || safe_name(&cleaned).is_err() {
        return Err(format!(
            "invalid file name {}: not a plain file name",
            shown_name(base)
        ));
    }
    Ok(cleaned)
}

/// Check the type of an uploaded file; the per-item error when unsupported.
pub fn check_type(kind: Kind, file_name: &str) -> Result<String, String> {
    let ext = extension(file_name);
    if kind.extensions().contains(&ext.as_str()) {
        Ok(ext)
    } else if ext.is_empty() {
        Err(format!("unsupported format: {file_name} has no extension"))
    } else {
        Err(format!("unsupported format: .{ext}"))
    }
}

/// `stem` cut (at a character boundary) to at most `max` bytes.
fn cut_bytes(stem: &str, max: usize) -> &str {
    let mut end = stem.len().min(max);
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    &stem[..end]
}

/// `name`, or `stem_1.ext`, `stem_2.ext` ... — the first free one in `dir`. A
/// suffixed name never grows past 255 bytes: the stem is shortened to make room.
fn free_name(dir: &Path, name: &str, skip: &[String]) -> Result<String, String> {
    check_file_name(name).map_err(|p| format!("invalid file name {}: {p}", shown_name(name)))?;
    let ext = extension(name);
    let stem = file_stem(name);
    for n in 0..10_000u32 {
        let cand = if n == 0 {
            name.to_string()
        } else {
            let tail = if ext.is_empty() {
                format!("_{n}")
            } else {
                format!("_{n}.{ext}")
            };
            let room = MAX_NAME_BYTES.saturating_sub(tail.len());
            format!("{}{tail}", cut_bytes(stem, room))
        };
        if !skip.contains(&cand) && !dir.join(&cand).exists() {
            return Ok(cand);
        }
    }
    Err(format!("cannot find a free file name for {name}"))
}

/// Move a staged file into `dir` under a free name based on `name`.
pub fn place(staged: Staged, dir: &Path, name: &str) -> Result<(PathBuf, String), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the library folder: {e}"))?;
    let mut file = staged.file;
    let mut tried: Vec<String> = Vec::new();
    loop {
        let cand = free_name(dir, name, &tried)?;
        let target = dir.join(&cand);
        match file.persist_noclobber(&target) {
            Ok(()) => return Ok((target, cand)),
            Err((back, e)) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                file = back;
                tried.push(cand);
            }
            Err((_, e)) => return Err(format!("cannot store the file: {e}")),
        }
    }
}

impl Jukebox {
    /// Register received files in order; per-item failures are results, not errors.
    pub async fn commit_uploads(
        self: &Arc<Self>,
        kind: Kind,
        uploads: Vec<Upload>,
        metas: Vec<Meta>,
    ) -> Result<Vec<Uploaded>, JukeboxError> {
        // Tags are read outside the library lock.
        let uploads = companiond_core::task::blocking(move || {
            Ok::<_, JukeboxError>(
                uploads
                    .into_iter()
                    .enumerate()
                    .map(|(i, u)| {
                        let meta = metas.get(i).cloned().unwrap_or_default();
                        let tags = match (&u.outcome, kind) {
                            (Ok(st), Kind::Song)
                                if meta.name.is_none() || meta.artist.is_none() =>
                            {
                                read_tags(st.file.path(), &extension(&u.file_name))
                            }
                            _ => AudioTags::default(),
                        };
                        (u, meta, tags)
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await?;

        let dir = self.dir(kind);
        self.mutate(move |lib, _, tx| {
            let mut results = Vec::with_capacity(uploads.len());
            for (u, meta, tags) in uploads {
                let staged = match u.outcome {
                    Ok(s) => s,
                    Err(refused) => {
                        results.push(Uploaded::Refused(refused));
                        continue;
                    }
                };
                let existing = match kind {
                    Kind::Song => lib.md5.songs.get(&staged.tap),
                    Kind::Action => lib.md5.actions.get(&staged.tap),
                };
                if let Some(existing) = existing {
                    results.push(Uploaded::Refused(Refused::Duplicate {
                        kind,
                        existing: existing.clone(),
                    }));
                    continue;
                }
                let md5 = staged.tap.clone();
                let (path, stored) = match place(staged, &dir, &u.file_name) {
                    Ok(p) => p,
                    Err(e) => {
                        results.push(Uploaded::Refused(Refused::NotStored(e)));
                        continue;
                    }
                };
                tx.created.push(path);
                results.push(register(lib, kind, &stored, md5, meta, tags));
            }
            Ok(results)
        })
        .await
    }
}

/// Add the record of a stored file and return it.
fn register(
    lib: &mut Library,
    kind: Kind,
    stored: &str,
    md5: String,
    meta: Meta,
    tags: AudioTags,
) -> Uploaded {
    let ext = extension(stored);
    let now = companiond_core::now_rfc3339();
    let stem = file_stem(stored).to_string();
    match kind {
        Kind::Song => {
            let id = unique_id(&sanitize_id(stored), |c| lib.songs.contains_key(c));
            let song = Song {
                id: id.clone(),
                name: meta.name.or(tags.title).unwrap_or(stem),
                artist: meta.artist.or(tags.artist).unwrap_or_default(),
                audio: format!("songs/{stored}"),
                audio_md5: md5,
                audio_format: ext,
                visible: true,
                upload_date: now,
                default_action: String::new(),
                is_builtin: false,
                extra: Default::default(),
            };
            lib.insert_song(song.clone());
            Uploaded::Added(Box::new(Record::Song(song)))
        }
        Kind::Action => {
            let id = unique_id(&sanitize_id(stored), |c| lib.actions.contains_key(c));
            let action = Action {
                id: id.clone(),
                name: meta.name.unwrap_or(stem),
                file: format!("actions/{stored}"),
                file_md5: md5,
                format: ext,
                upload_date: now,
                visible: true,
                missing: false,
                is_builtin: false,
                extra: Default::default(),
            };
            lib.insert_action(action.clone());
            Uploaded::Added(Box::new(Record::Action(action)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basenames() {
        assert_eq!(upload_basename("a/b\\c.mp3").unwrap(), "c.mp3");
        assert_eq!(upload_basename("../../etc/passwd").unwrap(), "passwd");
        assert!(upload_basename("..").is_err());
        assert!(upload_basename(". .").is_err());
        assert_eq!(upload_basename("..mp3").unwrap(), "mp3");
        assert_eq!(upload_basename("C:evil.mp3").unwrap(), "C_evil.mp3");
        assert!(upload_basename("x\u{0}y.wav")
            .unwrap_err()
            .contains("refuses"));
        assert!(upload_basename("").is_err());
        let long = format!("{}.flac", "n".repeat(200));
        let b = upload_basename(&long).unwrap();
        assert!(b.ends_with(".flac") && b.chars().count() <= MAX_NAME_CHARS);
        let too_long = format!("{}.flac", "n".repeat(251));
        assert!(upload_basename(&too_long)
            .unwrap_err()
            .contains("256 bytes"));
        assert!(upload_basename(&format!("{}.mp3", "曲".repeat(84))).is_err());
        assert!(upload_basename(&format!("{}.mp3", "曲".repeat(83))).is_ok());
    }

    #[test]
    fn suffixed_names_stay_within_255_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{}.mp3", "曲".repeat(83)); // 253 bytes
        std::fs::write(dir.path().join(&name), b"x").unwrap();
        let next = free_name(dir.path(), &name, &[]).unwrap();
        assert!(next.len() <= 255 && next.ends_with("_1.mp3"), "{next}");
    }

    #[test]
    fn types_and_metadata() {
        assert_eq!(check_type(Kind::Song, "a.MP3").unwrap(), "mp3");
        assert!(check_type(Kind::Song, "a.vmd").is_err());
        assert!(check_type(Kind::Action, "a.vrma").is_ok());
        let m = parse_metadata(Some(r#"[{"name":"N","artist":""}, 3, {"artist":"A"}]"#)).unwrap();
        assert_eq!(m[0].name.as_deref(), Some("N"));
        assert_eq!(m[0].artist, None);
        assert_eq!(m[1], Meta::default());
        assert_eq!(m[2].artist.as_deref(), Some("A"));
        assert!(parse_metadata(Some("{")).is_err());
        assert!(parse_metadata(Some("{}")).is_err());
        assert!(parse_metadata(None).unwrap().is_empty());
    }
}

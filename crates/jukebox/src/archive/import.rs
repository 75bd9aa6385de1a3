//! Import: an archive staged on disk is checked entry by entry, only the
//! files its config.json references are extracted (MD5 computed on the way,
//! every limit enforced on the bytes produced), then merged by MD5.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

use companiond_core::paths::{check_file_name, clean_segments};
use companiond_core::text::human_size;
use serde::Serialize;
use serde_json::{Map, Value};
use zip::ZipArchive;

use crate::error::JukeboxError;
use crate::library::{Jukebox, Kind, Limits, Tx};
use crate::md5sum::Md5;
use crate::model::{
    extension, file_stem, parse_bool, sanitize_id, unique_id, value_to_offset, Action, Library,
    Song,
};
use crate::upload::{place, Staged};
use companiond_core::text::shown_name;

use super::zip_err;

/// The answer of an import: `{success, stats {...}, skipped}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = JukeboxImported)]
pub struct Imported {
    pub success: bool,
    pub stats: ImportStats,
    /// Records of the archive that were left out (no file, unusable entry).
    pub skipped: usize,
}

/// What an import added or merged (by MD5) into the library.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = JukeboxImportStats)]
#[serde(rename_all = "camelCase")]
pub struct ImportStats {
    pub songs_added: usize,
    pub songs_merged: usize,
    pub actions_added: usize,
    pub actions_merged: usize,
    pub bindings_added: usize,
}

/// An import archive received on disk.
pub type StagedArchive = companiond_core::staging::Staged<()>;

impl Jukebox {
    /// Import an archive staged on disk: merge by MD5, convert MD5-level bindings
    /// back to ids, return the stats.
    pub async fn import(
        self: &Arc<Self>,
        archive: StagedArchive,
    ) -> Result<Imported, JukeboxError> {
        let this = self.clone();
        let prepared =
            companiond_core::task::blocking(move || prepare_import(&this, &archive)).await?;
        let songs_dir = self.dir(Kind::Song);
        let actions_dir = self.dir(Kind::Action);
        self.mutate(move |lib, _, tx| Ok(apply_import(lib, prepared, tx, &songs_dir, &actions_dir)))
            .await
    }
}

/// One song or action of an import archive.
struct Incoming {
    old_id: String,
    record: Map<String, Value>,
    /// Base name of the file inside the archive.
    file_name: String,
    md5: String,
    staged: Option<Staged>,
    builtin: bool,
}

struct Prepared {
    songs: Vec<Incoming>,
    actions: Vec<Incoming>,
    bindings: Vec<(String, Vec<(String, i64)>)>,
    skipped: usize,
}

fn open_archive(path: &Path) -> Result<ZipArchive<File>, JukeboxError> {
    let f = File::open(path).map_err(|e| zip_err("cannot read the uploaded archive", e))?;
    ZipArchive::new(f).map_err(|_| JukeboxError::bad("the import file is not a valid ZIP archive"))
}

/// Check every entry name and the declared sizes; returns `entry name -> index`.
fn index_entries(
    zip: &mut ZipArchive<File>,
    limits: &Limits,
) -> Result<HashMap<String, usize>, JukeboxError> {
    if zip.len() > limits.archive_entries {
        return Err(JukeboxError::bad(format!(
            "the archive has too many entries ({} > {})",
            zip.len(),
            limits.archive_entries
        )));
    }
    let mut map = HashMap::new();
    let mut declared = 0u64;
    for i in 0..zip.len() {
        let e = zip
            .by_index_raw(i)
            .map_err(|e| JukeboxError::bad(format!("the archive is damaged: {e}")))?;
        let raw = e.name().to_string();
        let unsafe_path =
            || JukeboxError::bad(format!("the archive contains an unsafe path: {raw}"));
        let segs = clean_segments(&raw).map_err(|_| unsafe_path())?;
        if e.enclosed_name().is_none() {
            return Err(unsafe_path());
        }
        for s in &segs {
            check_file_name(s).map_err(|p| {
                JukeboxError::bad(format!(
                    "the archive contains an unusable file name {}: {p}",
                    shown_name(s)
                ))
            })?;
        }
        if e.is_symlink() {
            return Err(JukeboxError::bad(format!(
                "the archive contains a link: {raw}"
            )));
        }
        declared = declared.saturating_add(e.size());
        if declared > limits.archive {
            return Err(JukeboxError::TooLarge(format!(
                "the archive expands to more than {}",
                human_size(limits.archive)
            )));
        }
        if !e.is_dir() && !segs.is_empty() {
            map.insert(segs.join("/"), i);
        }
    }
    Ok(map)
}

/// Extract entry `idx` into `dir` as a staged file, computing its MD5.
fn extract(
    zip: &mut ZipArchive<File>,
    idx: usize,
    dir: &Path,
    limits: &Limits,
    budget: &mut u64,
) -> Result<Staged, JukeboxError> {
    let mut entry = zip
        .by_index(idx)
        .map_err(|e| JukeboxError::bad(format!("the archive is damaged: {e}")))?;
    let name = entry.name().to_string();
    let too_large = || {
        JukeboxError::TooLarge(format!(
            "{name} in the archive is larger than {}",
            human_size(limits.file)
        ))
    };
    if entry.size() > limits.file {
        return Err(too_large());
    }
    std::fs::create_dir_all(dir).map_err(|e| zip_err("cannot create the library folder", e))?;
    let file = tempfile::Builder::new()
        .prefix(".import-")
        .suffix(".part")
        .tempfile_in(dir)
        .map_err(|e| zip_err("cannot create a temporary file", e))?;
    let mut md5 = Md5::new();
    let mut size = 0u64;
    {
        let mut w = BufWriter::with_capacity(1 << 20, file.as_file());
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = entry.read(&mut buf).map_err(|e| {
                JukeboxError::bad(format!("the archive entry {name} is damaged: {e}"))
            })?;
            if n == 0 {
                break;
            }
            size += n as u64;
            *budget += n as u64;
            if size > limits.file {
                return Err(too_large());
            }
            if *budget > limits.archive {
                return Err(JukeboxError::TooLarge(format!(
                    "the archive expands to more than {}",
                    human_size(limits.archive)
                )));
            }
            md5.update(&buf[..n]);
            w.write_all(&buf[..n])
                .map_err(|e| zip_err("cannot write an imported file", e))?;
        }
        w.flush()
            .map_err(|e| zip_err("cannot write an imported file", e))?;
    }
    file.as_file()
        .sync_data()
        .map_err(|e| zip_err("cannot write an imported file", e))?;
    let path = file
        .into_temp_path()
        .keep()
        .map_err(|e| zip_err("cannot keep an imported file", e))?;
    Ok(Staged {
        file: companiond_core::staging::StagedFile::new(path),
        size,
        tap: md5.hex(),
    })
}

fn read_config(
    zip: &mut ZipArchive<File>,
    idx: usize,
    limits: &Limits,
) -> Result<Map<String, Value>, JukeboxError> {
    let entry = zip
        .by_index(idx)
        .map_err(|e| JukeboxError::bad(format!("the archive is damaged: {e}")))?;
    if entry.size() > limits.archive_config {
        return Err(JukeboxError::bad("config.json in the archive is too large"));
    }
    let mut bytes = Vec::new();
    entry
        .take(limits.archive_config + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| JukeboxError::bad(format!("config.json in the archive is damaged: {e}")))?;
    if bytes.len() as u64 > limits.archive_config {
        return Err(JukeboxError::bad("config.json in the archive is too large"));
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(JukeboxError::bad(
            "config.json in the archive is not a JSON object",
        )),
        Err(_) => Err(JukeboxError::bad(
            "config.json in the archive is not valid JSON",
        )),
    }
}

fn object<'a>(
    cfg: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>, JukeboxError> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(JukeboxError::bad(format!(
            "{key} in config.json must be an object"
        ))),
    }
}

/// The name of an imported resource: the exported name, unless it was only
/// the exported file's stem (then the stem of the file as stored here).
fn imported_name(rec: &Map<String, Value>, exported_file: &str, stored: &str) -> String {
    let name = str_field(rec, "name");
    if name.is_empty() || name == file_stem(exported_file) {
        file_stem(stored).to_string()
    } else {
        name
    }
}

/// The settings an imported song or action keeps from its exported record:
/// its [`imported_name`], its upload date (`now` when it has none) and its
/// visibility (visible when unset).
struct Kept {
    name: String,
    upload_date: String,
    visible: bool,
}

fn kept(rec: &Map<String, Value>, exported_file: &str, stored: &str, now: &str) -> Kept {
    let date = str_field(rec, "uploadDate");
    Kept {
        name: imported_name(rec, exported_file, stored),
        upload_date: if date.is_empty() {
            now.to_string()
        } else {
            date
        },
        visible: rec.get("visible").and_then(Value::as_bool).unwrap_or(true),
    }
}

fn str_field(rec: &Map<String, Value>, key: &str) -> String {
    rec.get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The archive entry a record's relative path names, when it is `<dir>/<plain file>`
/// of an allowed type.
fn record_entry(kind: Kind, rel: &str) -> Option<(String, String)> {
    let segs = clean_segments(rel).ok()?;
    if segs.len() != 2 || segs[0] != kind.dir() {
        return None;
    }
    let name = segs[1].clone();
    if !kind.extensions().contains(&extension(&name).as_str()) {
        return None;
    }
    Some((format!("{}/{}", kind.dir(), name), name))
}

fn prepare_import(j: &Jukebox, archive: &StagedArchive) -> Result<Prepared, JukeboxError> {
    let limits = j.limits;
    let mut zip = open_archive(archive.file.path())?;
    let entries = index_entries(&mut zip, &limits)?;
    let cfg_idx = *entries
        .get("config.json")
        .ok_or_else(|| JukeboxError::bad("config.json is missing from the archive"))?;
    let cfg = read_config(&mut zip, cfg_idx, &limits)?;
    let records_total = ["songs", "actions"]
        .iter()
        .filter_map(|k| cfg.get(*k).and_then(Value::as_object))
        .map(Map::len)
        .sum::<usize>();
    if records_total > limits.archive_entries {
        return Err(JukeboxError::bad(format!(
            "config.json in the archive lists too many items ({records_total} > {})",
            limits.archive_entries
        )));
    }
    let mut budget = 0u64;
    let mut skipped = 0usize;
    // Each entry is extracted once; later records naming it reuse its MD5.
    let mut extracted: HashMap<usize, String> = HashMap::new();
    let mut out = Prepared {
        songs: Vec::new(),
        actions: Vec::new(),
        bindings: Vec::new(),
        skipped: 0,
    };
    for kind in [Kind::Song, Kind::Action] {
        let key = match kind {
            Kind::Song => "songs",
            Kind::Action => "actions",
        };
        let Some(records) = object(&cfg, key)? else {
            continue;
        };
        for (old_id, rec) in records {
            let Value::Object(rec) = rec else {
                skipped += 1;
                continue;
            };
            let (path_key, md5_key) = match kind {
                Kind::Song => ("audio", "audioMd5"),
                Kind::Action => ("file", "fileMd5"),
            };
            let builtin = kind == Kind::Action
                && rec.get("isBuiltin").is_some_and(|v| {
                    v.as_bool() == Some(true) || v.as_str().and_then(parse_bool) == Some(true)
                });
            let declared_md5 = str_field(rec, md5_key).to_ascii_lowercase();
            let mut item = Incoming {
                old_id: old_id.clone(),
                record: rec.clone(),
                file_name: String::new(),
                md5: declared_md5,
                staged: None,
                builtin,
            };
            if !builtin {
                match record_entry(kind, &str_field(rec, path_key)) {
                    Some((entry, file_name)) => {
                        item.file_name = file_name;
                        if let Some(&idx) = entries.get(&entry) {
                            // Never trust the declared MD5 when the file is there.
                            if let Some(md5) = extracted.get(&idx) {
                                item.md5 = md5.clone();
                            } else {
                                let st =
                                    extract(&mut zip, idx, &j.dir(kind), &limits, &mut budget)?;
                                extracted.insert(idx, st.tap.clone());
                                item.md5 = st.tap.clone();
                                item.staged = Some(st);
                            }
                        }
                    }
                    None => {
                        skipped += 1;
                        continue;
                    }
                }
            }
            match kind {
                Kind::Song => out.songs.push(item),
                Kind::Action => out.actions.push(item),
            }
        }
    }
    if let Some(bindings) = object(&cfg, "bindings")? {
        for (song_md5, map) in bindings {
            let Value::Object(map) = map else { continue };
            let list = map
                .iter()
                .map(|(action_md5, b)| {
                    let offset = b.get("offset").map(value_to_offset).unwrap_or(0);
                    (action_md5.to_ascii_lowercase(), offset)
                })
                .collect();
            out.bindings.push((song_md5.to_ascii_lowercase(), list));
        }
    }
    out.skipped = skipped;
    Ok(out)
}

/// Place an extracted file in `dir`: a new id and the stored name (`None`
/// when it cannot be stored: the item is skipped).
fn place_imported(
    lib: &Library,
    kind: Kind,
    staged: Staged,
    dir: &Path,
    file_name: &str,
    tx: &mut Tx,
) -> Option<(String, String)> {
    let (path, stored) = match place(staged, dir, file_name) {
        Ok(x) => x,
        Err(e) => {
            tracing::warn!("jukebox import: {e}");
            return None;
        }
    };
    tx.created.push(path);
    let id = unique_id(&sanitize_id(&stored), |c| match kind {
        Kind::Song => lib.songs.contains_key(c),
        Kind::Action => lib.actions.contains_key(c),
    });
    Some((id, stored))
}

fn apply_import(
    lib: &mut Library,
    p: Prepared,
    tx: &mut Tx,
    songs_dir: &Path,
    actions_dir: &Path,
) -> Imported {
    let (
        mut songs_added,
        mut songs_merged,
        mut actions_added,
        mut actions_merged,
        mut bindings_added,
    ) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut skipped = p.skipped;
    let mut song_map: HashMap<String, String> = HashMap::new();
    let mut action_map: HashMap<String, String> = HashMap::new();
    let mut defaults: Vec<(String, String)> = Vec::new();
    let now = companiond_core::now_rfc3339();

    for item in p.songs {
        let old_default = str_field(&item.record, "defaultAction");
        let local = if item.md5.is_empty() {
            None
        } else {
            lib.md5.songs.get(&item.md5).cloned()
        };
        let id = if let Some(existing) = local {
            songs_merged += 1;
            existing
        } else if let Some(st) = item.staged {
            let Some((id, stored)) =
                place_imported(lib, Kind::Song, st, songs_dir, &item.file_name, tx)
            else {
                skipped += 1;
                continue;
            };
            let k = kept(&item.record, &item.file_name, &stored, &now);
            let song = Song {
                id: id.clone(),
                name: k.name,
                artist: str_field(&item.record, "artist"),
                audio: format!("songs/{stored}"),
                audio_md5: item.md5.clone(),
                audio_format: extension(&stored),
                visible: k.visible,
                upload_date: k.upload_date,
                default_action: String::new(),
                is_builtin: false,
                extra: Default::default(),
            };
            lib.insert_song(song);
            songs_added += 1;
            id
        } else {
            skipped += 1;
            continue;
        };
        if !old_default.is_empty() {
            defaults.push((id.clone(), old_default));
        }
        song_map.insert(item.old_id, id);
    }

    for item in p.actions {
        let local = if item.md5.is_empty() {
            None
        } else {
            lib.md5.actions.get(&item.md5).cloned()
        };
        if let Some(existing) = local {
            actions_merged += 1;
            action_map.insert(item.old_id, existing);
            continue;
        }
        let Some(st) = item.staged.filter(|_| !item.builtin) else {
            skipped += 1;
            continue;
        };
        let Some((id, stored)) =
            place_imported(lib, Kind::Action, st, actions_dir, &item.file_name, tx)
        else {
            skipped += 1;
            continue;
        };
        let k = kept(&item.record, &item.file_name, &stored, &now);
        let action = Action {
            id: id.clone(),
            name: k.name,
            file: format!("actions/{stored}"),
            file_md5: item.md5.clone(),
            format: extension(&stored),
            upload_date: k.upload_date,
            visible: k.visible,
            missing: false,
            is_builtin: false,
            extra: Default::default(),
        };
        lib.insert_action(action);
        actions_added += 1;
        action_map.insert(item.old_id, id);
    }

    for (song_md5, list) in p.bindings {
        let Some(song_id) = lib.md5.songs.get(&song_md5).cloned() else {
            continue;
        };
        for (action_md5, offset) in list {
            let Some(action_id) = lib.md5.actions.get(&action_md5).cloned() else {
                continue;
            };
            if lib.is_bound(&song_id, &action_id) {
                continue;
            }
            lib.put_binding(&song_id, &action_id, offset);
            bindings_added += 1;
            if let Some(s) = lib.song_mut(&song_id) {
                if s.default_action.is_empty() {
                    s.default_action = action_id;
                }
            }
        }
    }

    // The archive's default actions, where the mapped pair is bound.
    for (song_id, old_action) in defaults {
        if let Some(action_id) = action_map.get(&old_action) {
            if lib.is_bound(&song_id, action_id) {
                if let Some(s) = lib.song_mut(&song_id) {
                    s.default_action = action_id.clone();
                }
            }
        }
    }

    Imported {
        success: true,
        stats: ImportStats {
            songs_added,
            songs_merged,
            actions_added,
            actions_merged,
            bindings_added,
        },
        skipped,
    }
}

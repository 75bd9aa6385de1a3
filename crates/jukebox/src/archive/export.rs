//! Export: the selected songs and actions, their bindings and a config.json
//! written into a ZIP (a temporary file, streamed to the client).

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::sync::Arc;

use companiond_core::paths::clean_segments;
use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use crate::error::JukeboxError;
use crate::library::Jukebox;
use crate::model::Library;

use super::{entry_options, finish_zip, new_zip, zip_err};

/// Which resources an export contains.
#[derive(Clone, Debug, Default)]
pub struct ExportSelection {
    pub song_ids: Option<Vec<String>>,
    pub action_ids: Option<Vec<String>>,
    pub include_hidden: bool,
}

/// The export plan: the config.json object and the files to copy (entry name, path).
pub fn plan_export(
    j: &Jukebox,
    lib: &Library,
    sel: &ExportSelection,
) -> (Value, Vec<(String, std::path::PathBuf)>) {
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    let mut entry_names: HashSet<String> = HashSet::new();
    let mut add_file = |rel: &str, files: &mut Vec<_>| -> Option<String> {
        let segs = clean_segments(rel).ok()?;
        if segs.is_empty() {
            return None;
        }
        let name = segs.join("/");
        let path = companiond_core::paths::safe_existing(j.root(), rel).ok()?;
        if !path.is_file() {
            return None;
        }
        if entry_names.insert(name.clone()) {
            files.push((name.clone(), path));
        }
        Some(name)
    };

    let visible_ok = |v: bool| sel.include_hidden || v;
    let candidates: Vec<String> = match &sel.song_ids {
        Some(ids) => ids.clone(),
        None => lib.songs.keys().cloned().collect(),
    };
    let mut song_ids: Vec<String> = Vec::new();
    for id in candidates {
        if let Some(s) = lib.songs.get(&id) {
            if !s.is_builtin && visible_ok(s.visible) && !song_ids.contains(&id) {
                song_ids.push(id);
            }
        }
    }
    let mut action_ids: Vec<String> = match &sel.action_ids {
        Some(ids) => {
            let mut v: Vec<String> = Vec::new();
            for id in ids.iter().chain(
                song_ids
                    .iter()
                    .filter_map(|s| lib.bindings.get(s))
                    .flat_map(|m| m.keys()),
            ) {
                if !v.contains(id) {
                    v.push(id.clone());
                }
            }
            v
        }
        None => lib.actions.keys().cloned().collect(),
    };
    action_ids.retain(|id| lib.actions.get(id).is_some_and(|a| visible_ok(a.visible)));

    let mut songs = Map::new();
    for id in &song_ids {
        let Some(s) = lib.songs.get(id) else { continue };
        let mut rec = s.clone();
        if let Some(name) = add_file(&s.audio, &mut files) {
            rec.audio = name;
        }
        // A default action that is not in the archive (hidden and excluded, or
        // not selected) is cleared in the exported copy; the library keeps it.
        if !rec.default_action.is_empty() && !action_ids.contains(&rec.default_action) {
            rec.default_action = String::new();
        }
        songs.insert(id.clone(), json!(rec));
    }
    let mut actions = Map::new();
    for id in &action_ids {
        let Some(a) = lib.actions.get(id) else {
            continue;
        };
        if a.is_builtin {
            actions.insert(
                id.clone(),
                json!({"id": id, "name": a.name, "fileMd5": a.file_md5, "isBuiltin": true}),
            );
            continue;
        }
        let mut rec = a.clone();
        if let Some(name) = add_file(&a.file, &mut files) {
            rec.file = name;
        }
        actions.insert(id.clone(), json!(rec));
    }

    let mut bindings: IndexMap<String, IndexMap<String, Value>> = IndexMap::new();
    for (sid, map) in lib.bindings.iter() {
        if sel.song_ids.is_some() && !song_ids.contains(sid) {
            continue;
        }
        let Some(s) = lib.songs.get(sid) else {
            continue;
        };
        if s.is_builtin || !visible_ok(s.visible) || s.audio_md5.is_empty() {
            continue;
        }
        for (aid, b) in map {
            let Some(a) = lib.actions.get(aid) else {
                continue;
            };
            if !visible_ok(a.visible) || a.file_md5.is_empty() {
                continue;
            }
            bindings
                .entry(s.audio_md5.clone())
                .or_default()
                .insert(a.file_md5.clone(), json!({"offset": b.offset}));
        }
    }
    let config = json!({
        "version": lib.version,
        "songs": songs,
        "actions": actions,
        "bindings": bindings,
    });
    (config, files)
}

impl Jukebox {
    /// Write the export archive; returns the rewound temporary file and its length.
    pub async fn export(
        self: &Arc<Self>,
        sel: ExportSelection,
    ) -> Result<(File, u64), JukeboxError> {
        let this = self.clone();
        companiond_core::task::blocking(move || {
            let (config, files) = this.with_library(|lib| plan_export(&this, lib, &sel))?;
            let mut w = new_zip(&this.tmp_dir())?;
            for (name, path) in files {
                let mut src = match File::open(&path) {
                    Ok(f) => f,
                    // Deleted meanwhile: leave it out.
                    Err(_) => continue,
                };
                let size = src.metadata().map(|m| m.len()).unwrap_or(0);
                w.start_file(name, entry_options(&path.to_string_lossy(), size))
                    .map_err(|e| zip_err("cannot write the archive", e))?;
                std::io::copy(&mut src, &mut w)
                    .map_err(|e| zip_err("cannot write the archive", e))?;
            }
            let body = serde_json::to_vec_pretty(&config)
                .map_err(|e| zip_err("cannot write the archive", e))?;
            w.start_file(
                "config.json",
                entry_options("config.json", body.len() as u64),
            )
            .map_err(|e| zip_err("cannot write the archive", e))?;
            w.write_all(&body)
                .map_err(|e| zip_err("cannot write the archive", e))?;
            finish_zip(w)
        })
        .await
    }
}

//! The character rename transaction: configuration, memory storage and chat
//! session move together or not at all (docs/memory.md).
//!
//! Order: validate → serialise (one rename at a time) → fence → idempotent
//! follow-up / existence checks → destination preflight → drain background
//! memory work of both names (admission stays closed until the end) → take
//! the history locks of both names → publish the new name in the characters
//! file → move the memory storage (directory, or a merge into an existing
//! directory that never overwrites a child; legacy flat files are mapped into
//! the directory) → rewrite the old name inside `recent.json` → move the chat
//! session → "reload" (create missing unit files, open and check the SQLite
//! time index). Any failure undoes every step done so far, in reverse order.

use companiond_core::frames::ServerFrame;
use std::path::{Path, PathBuf};
use std::time::Duration;

use companiond_core::characters::{validate_name, CharacterError, NameRules};
use companiond_core::history;
use companiond_core::rename::Renamed;
use companiond_core::snapshots;
use companiond_core::store::atomic_write;
use companiond_core::AppState;
use serde_json::{Map, Value};

use crate::error::MemoryError;
use crate::{fence, unit, MemoryRuntime};

/// Rename events kept in a profile.
pub const MAX_RENAME_EVENTS: usize = 20;
/// How long the rename waits for background memory work to stop.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// One undoable file-system step.
#[derive(Debug)]
enum FsStep {
    Moved { from: PathBuf, to: PathBuf },
    CreatedDir(PathBuf),
    CreatedFile(PathBuf),
    RemovedDir(PathBuf),
    Rewrote { path: PathBuf, original: Vec<u8> },
}

fn invalid(which: &str, e: companiond_core::characters::NameError) -> MemoryError {
    MemoryError::Invalid {
        code: e.code(),
        error: format!("{which}: {}", e.message()),
    }
}

/// Run the transaction. `Ok` is the success body.
pub async fn rename(
    state: &AppState,
    rt: &MemoryRuntime,
    old_raw: &str,
    new_raw: &str,
) -> Result<Renamed, MemoryError> {
    let new = validate_name(new_raw, NameRules::NEW).map_err(|e| invalid("new_name", e))?;
    let old = validate_name(old_raw, NameRules::EXISTING).map_err(|e| invalid("old_name", e))?;
    if old == new {
        return Err(MemoryError::Invalid {
            code: "same_name",
            error: "new_name equals old_name".into(),
        });
    }
    let data = state.data_dir().to_path_buf();
    let _serial = rt.rename_lock.write().await;
    fence::check(&data, "rename", &format!("characters/{old} -> {new}"))?;

    if !state.characters.exists(&old) {
        if state.characters.exists(&new) {
            if unit::memory_exists(&data, &old) {
                return Err(MemoryError::PartialRename(format!(
                    "the configuration already holds {new:?} but the memory storage of {old:?} remains"
                )));
            }
            return Ok(Renamed {
                success: true,
                changed: false,
                already_renamed: Some(true),
                exists_after: Some(unit::memory_exists(&data, &new)),
                memory_renamed: None,
                memory_server_reloaded: None,
                old_name: old,
                new_name: new,
            });
        }
        return Err(MemoryError::NotFound(format!(
            "character {old:?} does not exist"
        )));
    }
    if state.characters.exists(&new) {
        return Err(MemoryError::Exists {
            code: "character_exists",
            error: format!("character {new:?} already exists"),
        });
    }
    let new_dir = unit::character_dir(&data, &new).map_err(MemoryError::BadRequest)?;
    unit::character_dir(&data, &old).map_err(MemoryError::BadRequest)?;
    if let Ok(m) = new_dir.symlink_metadata() {
        if !m.is_dir() {
            return Err(MemoryError::Exists {
                code: "destination_exists",
                error: format!(
                    "something that is not a memory directory is in the way at memory/{new}"
                ),
            });
        }
    }

    let _drain = match rt.tasks.drain(&[&old, &new], DRAIN_TIMEOUT).await {
        Ok(g) => g,
        Err(_g) => {
            return Err(MemoryError::Busy(format!(
                "background memory work of {old:?} did not stop in time"
            )))
        }
    };
    // The time index of either name closes before its file moves.
    rt.index.close(&[&old, &new]);
    // History locks of both names, in a fixed order.
    let mut names = [old.as_str(), new.as_str()];
    names.sort();
    let l0 = state.history.lock(names[0]).lock_owned().await;
    let l1 = state.history.lock(names[1]).lock_owned().await;

    // The documents as they were, and the profile, kept as a snapshot that
    // follows the character to its new name (docs/data.md § Snapshots).
    let (d, o, profile) = (
        data.clone(),
        old.clone(),
        state
            .characters
            .profile(&old)
            .map(companiond_core::characters::Profile::into_value),
    );
    let snap = tokio::task::spawn_blocking(move || {
        let files = snapshots::document_files();
        snapshots::before_change(
            &d,
            &snapshots::Take {
                character: &o,
                kind: snapshots::Kind::Rename,
                files: &files,
                profile,
                renamed_from: Some(o.clone()),
                restored: None,
            },
        )
    })
    .await
    .ok()
    .flatten();
    let result = transaction(state, &old, &new).await;
    match (&result, snap) {
        (Ok(_), _) => {
            let (d, o, n) = (data.clone(), old.clone(), new.clone());
            let moved =
                tokio::task::spawn_blocking(move || snapshots::follow_rename(&d, &o, &n)).await;
            if !matches!(moved, Ok(Ok(()))) {
                tracing::warn!("the snapshots of {old} did not follow the rename to {new}");
            }
        }
        (Err(_), Some(m)) => snapshots::discard(&data, &old, &m.id),
        (Err(_), None) => {}
    }
    drop((l1, l0));
    let body = result?;
    // The index follows the name (its lines were rewritten with the history).
    drop(_serial);
    if let Err(e) = crate::longterm::resync(state, &new).await {
        tracing::warn!("cannot re-index the memory of {new} after the rename: {e}");
    }
    if let Some(m) = state.sessions.get(&new) {
        m.notify(ServerFrame::CharacterRenamed {
            old_name: old.to_string(),
            new_name: new.to_string(),
        });
    }
    Ok(body)
}

/// What publishing changed, to undo it.
struct Published {
    index: usize,
    profile: Value,
    was_current: bool,
}

async fn transaction(state: &AppState, old: &str, new: &str) -> Result<Renamed, MemoryError> {
    let data = state.data_dir().to_path_buf();
    // 1. Publish the new name.
    let published = publish(state, old, new).await?;

    // 2. Move the storage and rewrite the history.
    let (o, n, d) = (old.to_string(), new.to_string(), data.clone());
    let (journal, moved) = tokio::task::spawn_blocking(move || {
        let mut journal = Vec::new();
        let r = move_storage(&d, &o, &n, &mut journal)
            .and_then(|_| rewrite_history(&d, &o, &n, &mut journal));
        (journal, r)
    })
    .await
    .map_err(|e| MemoryError::Internal(e.to_string()))?;
    if let Err(e) = moved {
        let failure = if e.kind() == std::io::ErrorKind::AlreadyExists {
            MemoryError::Exists {
                code: "destination_exists",
                error: format!("cannot move the memory storage: {e}"),
            }
        } else {
            MemoryError::NotWritable {
                error: format!("cannot move the memory storage: {e}"),
                rolled_back: true,
            }
        };
        return Err(rollback(state, old, new, &published, journal, false, failure).await);
    }

    // 3. The chat session follows the new name.
    state.sessions.rename(old, new);

    // 4. Reload: every unit file exists and the time index opens.
    let d = data.clone();
    let n = new.to_string();
    let (journal, reloaded) = tokio::task::spawn_blocking(move || {
        let mut journal = journal;
        let r = reload(&d, &n, &mut journal);
        (journal, r)
    })
    .await
    .map_err(|e| MemoryError::Internal(e.to_string()))?;
    if let Err(e) = reloaded {
        let failure = MemoryError::ReloadFailed {
            error: format!("the memory of {new:?} could not be reloaded: {e}"),
            rolled_back: true,
            rollback_error: String::new(),
        };
        return Err(rollback(state, old, new, &published, journal, true, failure).await);
    }
    Ok(Renamed {
        success: true,
        changed: true,
        already_renamed: None,
        exists_after: None,
        memory_renamed: Some(true),
        memory_server_reloaded: Some(true),
        old_name: old.to_string(),
        new_name: new.to_string(),
    })
}

fn storage_error(e: CharacterError) -> MemoryError {
    match e {
        CharacterError::NotFound(n) => {
            MemoryError::NotFound(format!("character {n:?} does not exist"))
        }
        CharacterError::Exists(n) => MemoryError::Exists {
            code: "character_exists",
            error: format!("character {n:?} already exists"),
        },
        CharacterError::Invalid(e) => invalid("name", e),
        CharacterError::Storage(e) => MemoryError::NotWritable {
            error: e,
            rolled_back: true,
        },
        CharacterError::LastCharacter => MemoryError::Internal("unexpected registry state".into()),
    }
}

async fn publish(state: &AppState, old: &str, new: &str) -> Result<Published, MemoryError> {
    let (o, n) = (old.to_string(), new.to_string());
    let renamed_at = companiond_core::now_rfc3339();
    state
        .characters
        .mutate(move |doc| {
            let Some(index) = doc.characters.keys().position(|k| *k == o) else {
                return Err(CharacterError::NotFound(o));
            };
            if doc.characters.contains_key(&n) {
                return Err(CharacterError::Exists(n));
            }
            let mut profile = Value::Null;
            let mut next = Map::new();
            for (k, v) in std::mem::take(&mut doc.characters) {
                if k == o {
                    profile = v.clone();
                    next.insert(n.clone(), with_rename_event(v, &o, &n, &renamed_at));
                } else {
                    next.insert(k, v);
                }
            }
            doc.characters = next;
            let was_current = doc.current == o;
            if was_current {
                doc.current = n.clone();
            }
            Ok(Published {
                index,
                profile,
                was_current,
            })
        })
        .await
        .map_err(storage_error)
}

/// One of a profile's `_reserved.ai_context.rename_events` (the newest
/// [`MAX_RENAME_EVENTS`] kept), so the character knows its former name.
#[derive(serde::Serialize)]
struct RenameEvent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    old_name: &'a str,
    new_name: &'a str,
    renamed_at: &'a str,
}

fn with_rename_event(mut profile: Value, old: &str, new: &str, at: &str) -> Value {
    let Some(p) = profile.as_object_mut() else {
        return profile;
    };
    let reserved = p
        .entry("_reserved")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(reserved) = reserved.as_object_mut() else {
        return profile;
    };
    let ctx = reserved
        .entry("ai_context")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(ctx) = ctx.as_object_mut() else {
        return profile;
    };
    let events = ctx
        .entry("rename_events")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = events.as_array_mut() {
        let event = RenameEvent {
            kind: "profile_rename",
            old_name: old,
            new_name: new,
            renamed_at: at,
        };
        list.extend(serde_json::to_value(event).ok());
        let excess = list.len().saturating_sub(MAX_RENAME_EVENTS);
        list.drain(..excess);
    }
    profile
}

async fn unpublish(state: &AppState, old: &str, new: &str, p: &Published) -> Result<(), String> {
    let (o, n) = (old.to_string(), new.to_string());
    let (profile, index, was_current) = (p.profile.clone(), p.index, p.was_current);
    state
        .characters
        .mutate(move |doc| {
            let mut entries: Vec<(String, Value)> =
                std::mem::take(&mut doc.characters).into_iter().collect();
            entries.retain(|(k, _)| *k != n && *k != o);
            let at = index.min(entries.len());
            entries.insert(at, (o.clone(), profile));
            doc.characters = entries.into_iter().collect();
            if was_current || doc.current == n {
                doc.current = o;
            }
            Ok(())
        })
        .await
        .map_err(|e| format!("cannot restore the characters file: {e:?}"))
}

async fn rollback(
    state: &AppState,
    old: &str,
    new: &str,
    published: &Published,
    journal: Vec<FsStep>,
    session_moved: bool,
    failure: MemoryError,
) -> MemoryError {
    let mut errors = Vec::new();
    let undone = tokio::task::spawn_blocking(move || undo(journal)).await;
    match undone {
        Ok(Ok(())) => {}
        Ok(Err(e)) => errors.push(e),
        Err(e) => errors.push(e.to_string()),
    }
    if session_moved {
        state.sessions.rename(new, old);
    }
    if let Err(e) = unpublish(state, old, new, published).await {
        errors.push(e);
    }
    if errors.is_empty() {
        tracing::warn!("rename {old:?} -> {new:?} rolled back: {failure}");
        failure
    } else {
        tracing::error!(
            "rename {old:?} -> {new:?} failed ({failure}) and rollback failed: {errors:?}"
        );
        MemoryError::RollbackFailed {
            error: failure.to_string(),
            rollback_error: errors.join("; "),
        }
    }
}

fn undo(journal: Vec<FsStep>) -> Result<(), String> {
    let mut errors = Vec::new();
    for step in journal.into_iter().rev() {
        let r = match &step {
            FsStep::Moved { from, to } => std::fs::rename(to, from),
            FsStep::CreatedDir(d) => std::fs::remove_dir(d),
            FsStep::CreatedFile(f) => std::fs::remove_file(f),
            FsStep::RemovedDir(d) => std::fs::create_dir(d),
            FsStep::Rewrote { path, original } => atomic_write(path, original),
        };
        if let Err(e) = r {
            errors.push(format!("{step:?}: {e}"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn exists(p: &Path) -> bool {
    p.symlink_metadata().is_ok()
}

fn in_the_way(p: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("{} already exists", p.display()),
    )
}

/// Move `memory/<old>` (and the legacy flat files of `old`) to `memory/<new>`.
fn move_storage(
    data: &Path,
    old: &str,
    new: &str,
    journal: &mut Vec<FsStep>,
) -> std::io::Result<()> {
    let root = unit::memory_root(data);
    let old_dir = root.join(old);
    let new_dir = root.join(new);
    if let Ok(meta) = old_dir.symlink_metadata() {
        if !exists(&new_dir) {
            std::fs::rename(&old_dir, &new_dir)?;
            journal.push(FsStep::Moved {
                from: old_dir.clone(),
                to: new_dir.clone(),
            });
        } else if meta.is_dir() {
            let mut children: Vec<_> = std::fs::read_dir(&old_dir)?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()?;
            children.sort();
            for c in children {
                let (from, to) = (old_dir.join(&c), new_dir.join(&c));
                if exists(&to) {
                    return Err(in_the_way(&to));
                }
                std::fs::rename(&from, &to)?;
                journal.push(FsStep::Moved { from, to });
            }
            std::fs::remove_dir(&old_dir)?;
            journal.push(FsStep::RemovedDir(old_dir.clone()));
        } else {
            return Err(in_the_way(&new_dir));
        }
    }
    for (flat, target) in unit::legacy_flat_entries(old) {
        let from = root.join(&flat);
        if !exists(&from) {
            continue;
        }
        if !exists(&new_dir) {
            std::fs::create_dir_all(&new_dir)?;
            journal.push(FsStep::CreatedDir(new_dir.clone()));
        }
        let to = new_dir.join(target);
        if exists(&to) {
            return Err(in_the_way(&to));
        }
        std::fs::rename(&from, &to)?;
        journal.push(FsStep::Moved { from, to });
    }
    Ok(())
}

/// Replace the old name in `recent.json`: exact-match `speaker`, `author`,
/// `name`, `character` fields (top level and in `data`), and in the message
/// text the speaker prefixes `<old>说：`, `<old>说:`, `<old>:`, `<old>->`,
/// `[<old>]`, `<old> | ` when they start a word.
fn rewrite_history(
    data: &Path,
    old: &str,
    new: &str,
    journal: &mut Vec<FsStep>,
) -> std::io::Result<()> {
    let path = unit::memory_root(data).join(new).join(unit::RECENT);
    let original = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let Ok(mut entries) = serde_json::from_slice::<Vec<Value>>(&original) else {
        return Ok(());
    };
    let mut changed = false;
    for e in entries.iter_mut() {
        changed |= rewrite_entry(e, old, new);
    }
    if !changed {
        return Ok(());
    }
    let bytes = history::encode(&entries).map_err(std::io::Error::other)?;
    atomic_write(&path, &bytes)?;
    journal.push(FsStep::Rewrote { path, original });
    Ok(())
}

fn rewrite_entry(e: &mut Value, old: &str, new: &str) -> bool {
    let mut changed = false;
    let fix_fields = |o: &mut Map<String, Value>| {
        let mut c = false;
        for k in ["speaker", "author", "name", "character"] {
            if o.get(k).and_then(Value::as_str) == Some(old) {
                o.insert(k.into(), Value::String(new.into()));
                c = true;
            }
        }
        c
    };
    if let Some(o) = e.as_object_mut() {
        changed |= fix_fields(o);
        if let Some(Value::String(s)) = o.get_mut("content") {
            changed |= rewrite_text(s, old, new);
        }
        if let Some(d) = o.get_mut("data").and_then(Value::as_object_mut) {
            changed |= fix_fields(d);
            if let Some(Value::String(s)) = d.get_mut("content") {
                changed |= rewrite_text(s, old, new);
            }
        }
    }
    changed
}

/// Rewrite speaker prefixes of `old` in `s`; whether anything changed.
pub fn rewrite_text(s: &mut String, old: &str, new: &str) -> bool {
    let patterns: [(String, String); 6] = [
        (format!("{old}说："), format!("{new}说：")),
        (format!("{old}说:"), format!("{new}说:")),
        (format!("{old}:"), format!("{new}:")),
        (format!("{old}->"), format!("{new}->")),
        (format!("[{old}]"), format!("[{new}]")),
        (format!("{old} | "), format!("{new} | ")),
    ];
    let mut changed = false;
    for (from, to) in &patterns {
        if !s.contains(from.as_str()) {
            continue;
        }
        let mut out = String::with_capacity(s.len());
        let mut rest = s.as_str();
        let mut prev: Option<char> = None;
        while let Some(pos) = rest.find(from.as_str()) {
            let before = rest[..pos].chars().last().or(prev);
            out.push_str(&rest[..pos]);
            let boundary = from.starts_with('[') || !before.is_some_and(char::is_alphanumeric);
            if boundary {
                out.push_str(to);
                changed = true;
            } else {
                out.push_str(from);
            }
            prev = from.chars().last();
            rest = &rest[pos + from.len()..];
        }
        out.push_str(rest);
        *s = out;
    }
    changed
}

/// Create the unit files that are missing and check the time index.
fn reload(data: &Path, new: &str, journal: &mut Vec<FsStep>) -> Result<(), String> {
    let dir = unit::memory_root(data).join(new);
    let created = unit::ensure_memory_files(&dir).map_err(|e| e.to_string())?;
    for p in created {
        journal.push(if p == dir {
            FsStep::CreatedDir(p)
        } else {
            FsStep::CreatedFile(p)
        });
    }
    unit::verify_time_index(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_rewrites() {
        let mut s = "Mika: hi [Mika] Mika说：好 Mika-> x Mika | y EMika: no".to_string();
        assert!(rewrite_text(&mut s, "Mika", "Rin"));
        assert_eq!(s, "Rin: hi [Rin] Rin说：好 Rin-> x Rin | y EMika: no");
        let mut s = "nothing here".to_string();
        assert!(!rewrite_text(&mut s, "Mika", "Rin"));
    }

    #[test]
    fn rename_events_are_capped() {
        let mut p = json!({"a": 1});
        for i in 0..25 {
            p = with_rename_event(p, &format!("o{i}"), "n", "t");
        }
        let ev = p["_reserved"]["ai_context"]["rename_events"]
            .as_array()
            .unwrap();
        assert_eq!(ev.len(), MAX_RENAME_EVENTS);
        assert_eq!(ev[0]["old_name"], "o5");
        assert_eq!(p["a"], 1);
    }
}

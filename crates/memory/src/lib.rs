//! Memory (`/api/memory`) and the character rename transaction
//! (`POST /api/characters/profile/{old_name}/rename`).
//!
//! Domain modules know nothing of HTTP; [`http`] holds the thin handlers.
//! * [`unit`]: the per-character memory directory and its unit files (the
//!   layout cloud save relies on);
//! * [`recent`] + [`theater`]: listing, reading and the compare-and-swap save;
//! * [`rename`]: the rename transaction with rollback;
//! * [`toggles`]: `review_config` / `powerful_memory_config`;
//! * [`legacy`]: scan and purge of legacy memory roots;
//! * [`tasks`] + [`review`]: background memory work with cancellation;
//! * [`fence`]: the cloud-storage maintenance fence;
//! * long-term memory: [`stores`] (facts, reflections, persona in the original
//!   application's shapes), [`index`] (the SQLite time index with FTS5
//!   search), [`extract`] (extraction off the hot path), [`longterm`]
//!   (listing, search, correct, forget) and [`recall`] (the chat turn's side).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use companiond_core::state::MemoryService;
use futures::future::BoxFuture;

use companiond_core::state::Inner;
use companiond_core::{Api, AppState};

pub mod error;
pub mod extract;
pub mod fence;
mod http;
pub mod index;
pub mod legacy;
pub mod longterm;
pub mod recall;
pub mod recent;
pub mod rename;
pub mod review;
pub mod stores;
pub mod tasks;
pub mod theater;
pub mod timefmt;
pub mod toggles;
pub mod unit;
pub mod vectors;

pub use error::MemoryError;
pub use unit::{ensure_memory_files, LOCAL_ONLY, UNIT_FILES};

/// In-process state of the memory family for one server.
#[derive(Default)]
pub struct MemoryRuntime {
    /// Background memory work per character.
    pub tasks: Arc<tasks::TaskRegistry>,
    /// A rename transaction holds it exclusively; work that may create memory
    /// files (listing, reading, saving) holds it shared, so nothing recreates
    /// a directory a rename is moving. Always taken before any history lock.
    pub rename_lock: tokio::sync::RwLock<()>,
    /// Toggle writes hold it exclusively (migration + save); reads share it,
    /// so a read waits for a pending write.
    pub toggle_lock: tokio::sync::RwLock<()>,
    /// Open time-index connections per character.
    pub index: index::Handles,
    /// When long-term memory extractions start.
    pub extract: extract::Scheduler,
    watcher_started: AtomicBool,
}

impl MemoryRuntime {
    /// The runtime of the server that owns `state` (created on first use).
    pub fn of(state: &AppState) -> Arc<MemoryRuntime> {
        state.ext::<MemoryRuntime>()
    }
}

/// How long a release waits for in-flight memory work to stop.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// The memory service other families call around an import (cloud save).
struct Service {
    state: Weak<Inner>,
}

impl MemoryService for Service {
    fn release(&self, character: String) -> BoxFuture<'static, Result<(), String>> {
        let state = self.state.upgrade().map(AppState);
        Box::pin(async move {
            let Some(state) = state else {
                return Err("the server is stopping".into());
            };
            let rt = MemoryRuntime::of(&state);
            // Cancel and wait for review / compression work; admission reopens
            // when the guard drops (the storage fence blocks writes meanwhile).
            let drained = match rt.tasks.drain(&[character.as_str()], RELEASE_TIMEOUT).await {
                Ok(_guard) => Ok(()),
                Err(_guard) => Err(format!("memory work for {character} did not stop in time")),
            };
            // The time index closes: its file may be replaced next.
            rt.index.close(&[character.as_str()]);
            drained
        })
    }

    fn reload(&self, character: String) -> BoxFuture<'static, Result<(), String>> {
        let state = self.state.upgrade().map(AppState);
        Box::pin(async move {
            let Some(state) = state else {
                return Err("the server is stopping".into());
            };
            let dir = unit::character_dir(state.data_dir(), &character)?;
            MemoryRuntime::of(&state).index.close(&[character.as_str()]);
            tokio::task::spawn_blocking(move || {
                ensure_memory_files(&dir).map_err(|e| e.to_string())?;
                unit::verify_time_index(&dir)
            })
            .await
            .map_err(|e| e.to_string())??;
            // Re-index what was loaded (lines, facts, reflections, persona).
            longterm::resync(&state, &character).await
        })
    }
}

/// Create the memory unit of every configured character (best effort; skipped
/// while the cloud-storage fence is up).
///
/// Start-up cost is one listing of the memory root: a character without a
/// directory gets its unit at once; an existing directory is checked (one
/// listing each, files created only when missing) here when there are at
/// most [`SYNC_UNIT_CHECKS`] of them, otherwise by [`complete_units`] beside
/// the server, before the start-up index catch-up.
pub fn ensure_all(state: &AppState) {
    if let Some(names) = ensure_units(state) {
        complete_units(state, names, false);
    }
}

/// The start-up part of [`ensure_all`]: the existing directories left to
/// check in the background, if any.
fn ensure_units(state: &AppState) -> Option<Vec<String>> {
    let existing = ensure_missing_units(state)?;
    if existing.len() > SYNC_UNIT_CHECKS && tokio::runtime::Handle::try_current().is_ok() {
        return Some(existing);
    }
    for name in &existing {
        complete_unit(state.data_dir(), name);
    }
    None
}

/// Existing unit directories checked before the server answers; more are
/// checked in the background (a heavy user's 3,000 cost ~40 ms).
const SYNC_UNIT_CHECKS: usize = 64;

/// Create the unit of every configured character that has no directory yet;
/// the names whose plain directory exists (`None` while fenced).
fn ensure_missing_units(state: &AppState) -> Option<Vec<String>> {
    if companiond_core::fence::mode(state.data_dir()) != "normal" {
        return None;
    }
    // One listing of the root: the entry types come with it (no stat each).
    let mut dirs = std::collections::HashSet::new();
    if let Ok(rd) = std::fs::read_dir(unit::memory_root(state.data_dir())) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.insert(e.file_name());
            }
        }
    }
    let mut existing = Vec::new();
    for name in state.characters.names() {
        // A real directory (never a symlink) named by a plain segment lies
        // inside the root, which is all `character_dir` checks.
        if companiond_core::paths::safe_name(&name).is_ok()
            && dirs.contains(std::ffi::OsStr::new(&name))
        {
            existing.push(name);
        } else {
            ensure_unit(state.data_dir(), &name);
        }
    }
    Some(existing)
}

/// Create whatever `name`'s unit lacks (the full, path-checked way).
fn ensure_unit(data_dir: &std::path::Path, name: &str) {
    match unit::character_dir(data_dir, name) {
        Ok(dir) => {
            if let Err(e) = ensure_memory_files(&dir) {
                tracing::warn!("cannot create the memory files of {name}: {e}");
            }
        }
        Err(e) => tracing::warn!("character {name:?} has no usable memory directory: {e}"),
    }
}

/// Check the existing directory of `name` with one listing; only a unit
/// that lacks a file goes through [`ensure_unit`].
fn complete_unit(data_dir: &std::path::Path, name: &str) {
    let dir = unit::memory_root(data_dir).join(name);
    let complete = std::fs::read_dir(&dir).is_ok_and(|rd| {
        let present: std::collections::HashSet<_> = rd.flatten().map(|e| e.file_name()).collect();
        UNIT_FILES
            .iter()
            .all(|f| present.contains(std::ffi::OsStr::new(f)))
    });
    if !complete {
        ensure_unit(data_dir, name);
    }
}

/// [`complete_unit`] for every name, beside the server, then (with
/// `then_catch_up`) the review watcher and the index catch-up. Renames wait meanwhile (nothing recreates a moved directory);
/// the fence and the character list are checked again per unit.
fn complete_units(state: &AppState, names: Vec<String>, then_catch_up: bool) {
    let weak = Arc::downgrade(&state.0);
    tokio::spawn(async move {
        let Some(inner) = weak.upgrade() else { return };
        let state = AppState(inner);
        let rt = MemoryRuntime::of(&state);
        {
            let _no_rename = rt.rename_lock.read().await;
            let st = state.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for name in names {
                    if companiond_core::fence::mode(st.data_dir()) != "normal" {
                        return;
                    }
                    if st.characters.exists(&name) {
                        complete_unit(st.data_dir(), &name);
                    }
                }
            })
            .await;
        }
        if then_catch_up {
            review::spawn_watcher(&state);
            catch_up(&state);
        }
    });
}

/// At start-up: bring every character's index in step with its files and
/// schedule the extraction of lines not read yet (e.g. before a restart).
fn catch_up(state: &AppState) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(&state.0);
    handle.spawn(async move {
        let names = match weak.upgrade() {
            Some(inner) => AppState(inner).characters.names(),
            None => return,
        };
        for name in names {
            let Some(inner) = weak.upgrade() else { return };
            let state = AppState(inner);
            if companiond_core::fence::mode(state.data_dir()) != "normal" {
                return;
            }
            match longterm::resync(&state, &name).await {
                Ok(()) => extract::note_activity(&state, &name),
                Err(e) => tracing::warn!("cannot index the memory of {name}: {e}"),
            }
        }
    });
}

/// The routes of this family.
pub fn api(state: &AppState) -> Api {
    let rt = MemoryRuntime::of(state);
    state.hooks.set_memory_service(Arc::new(Service {
        state: Arc::downgrade(&state.0),
    }));
    state.hooks.set_memory_recall(Arc::new(recall::Recall {
        state: Arc::downgrade(&state.0),
    }));
    let deferred = ensure_units(state);
    let start = !rt.watcher_started.swap(true, Ordering::AcqRel);
    match deferred {
        // The watcher and the catch-up start once the units are complete.
        Some(names) => complete_units(state, names, start),
        None if start => {
            review::spawn_watcher(state);
            catch_up(state);
        }
        None => {}
    }
    http::api(state)
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}

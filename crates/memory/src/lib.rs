//! Memory (`/api/memory`) and the character rename transaction
//! (`POST /api/characters/profile/{old_name}/rename`).
//!
//! [`api`] lists every route; [`start`] does the start-up work. Domain
//! modules know nothing of HTTP; `http` holds the thin handlers, which reach
//! the family state ([`MemoryRuntime`]) through `Ext<MemoryRuntime>`.
//! * `unit`: the per-character memory directory and its unit files (the
//!   layout cloud save relies on);
//! * `listing`, `recent` + [`theater`]: listing, reading and the
//!   compare-and-swap save;
//! * [`rename`]: the rename transaction with rollback;
//! * [`toggles`]: `review_config` / `powerful_memory_config`;
//! * [`legacy`]: scan and purge of legacy memory roots;
//! * [`tasks`] + [`review`]: background memory work with cancellation;
//! * [`fence`]: the cloud-storage maintenance fence;
//! * long-term memory: [`stores`] (facts, reflections, persona in the original
//!   application's shapes), [`index`] (the SQLite time index with FTS5
//!   search), [`extract`] (extraction off the hot path), [`longterm`]
//!   (listing, search, correct, forget) and [`recall`] (the chat turn's side);
//! * [`fold`]: `recent.json` stays a working window; past its bound the oldest
//!   entries are summarised and move to the time index's archive.

use std::sync::{Arc, Weak};
use std::time::Duration;

use companiond_core::rename::{CharacterRename, RenameError, Renamed};
use companiond_core::state::MemoryService;
use futures::future::BoxFuture;

use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::post;
use companiond_core::guards::Csrf;
use companiond_core::state::Inner;
use companiond_core::{Api, AppState};

mod error;
pub mod extract;
mod fence;
pub mod fold;
mod http;
pub mod index;
mod legacy;
mod listing;
pub mod longterm;
mod recall;
mod recent;
mod rename;
pub mod review;
mod save_body;
mod stored_json;
mod stores;
mod tasks;
pub mod theater;
mod timefmt;
mod toggles;
mod undo;
mod unit;
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
    /// What `GET /api/memory/recent_files` keeps between calls.
    listing: Arc<listing::Cache>,
    /// Fingerprints of the history files this process last read or wrote.
    known: recent::KnownFiles,
}

impl MemoryRuntime {
    /// The runtime of the server that owns `state`, for work outside a request
    /// (hooks, start-up, background tasks); handlers take `Ext<MemoryRuntime>`.
    pub(crate) fn of(state: &AppState) -> Arc<MemoryRuntime> {
        state.ext::<MemoryRuntime>()
    }
}

/// Start `work(state, name, cancel)` in the background as `name`'s task of
/// `kind` ([`tasks::TaskRegistry::spawn`]: refused while one of that kind runs
/// or while the character is drained); its task and the receiver of its result.
fn spawn_task<F, Fut, T>(
    state: &AppState,
    name: &str,
    kind: tasks::TaskKind,
    work: F,
) -> Result<(tasks::TaskInfo, tokio::sync::oneshot::Receiver<T>), tasks::Refused>
where
    F: FnOnce(AppState, String, tokio_util::sync::CancellationToken) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (st, n) = (state.clone(), name.to_string());
    MemoryRuntime::of(state)
        .tasks
        .spawn(name, kind, move |cancel| work(st, n, cancel))
}

/// Run `work(state, name)` on the current runtime, beside the caller
/// (nothing outside a runtime): background memory work of one character.
fn spawn_for<F, Fut>(state: &AppState, name: &str, work: F)
where
    F: FnOnce(AppState, String) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(work(state.clone(), name.to_string()));
    }
}

/// The rename transaction of `POST /api/characters/profile/{old_name}/rename`
/// (configuration, memory storage and chat session together) as core's rename
/// hook, for the other families' routes of the same job (the original pages').
struct Renamer {
    state: Weak<Inner>,
}

impl CharacterRename for Renamer {
    fn rename(&self, old: String, new: String) -> BoxFuture<'static, Result<Renamed, RenameError>> {
        let state = self.state.upgrade().map(AppState);
        Box::pin(async move {
            let Some(state) = state else {
                return Err(MemoryError::Busy("the server is stopping".into()).into());
            };
            let rt = MemoryRuntime::of(&state);
            Ok(rename::rename(&state, &rt, &old, &new).await?)
        })
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
/// while the cloud-storage fence is up); the existing directories left to
/// check in the background, if any.
///
/// Start-up cost is one listing of the memory root: a character without a
/// directory gets its unit at once; an existing directory is checked (one
/// listing each, files created only when missing) here when there are at
/// most [`SYNC_UNIT_CHECKS`] of them, otherwise by [`complete_units`] beside
/// the server, before the start-up index catch-up.
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
    if !companiond_core::fence::is_normal(state.data_dir()) {
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

/// [`complete_unit`] for every name, beside the server, then the review
/// watcher and the index catch-up. Renames wait meanwhile (nothing recreates
/// a moved directory); the fence and the character list are checked again
/// per unit.
fn complete_units(state: &AppState, names: Vec<String>) {
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
                    if !companiond_core::fence::is_normal(st.data_dir()) {
                        return;
                    }
                    if st.characters.exists(&name) {
                        complete_unit(st.data_dir(), &name);
                    }
                }
            })
            .await;
        }
        review::spawn_watcher(&state);
        catch_up(&state);
    });
}

/// At start-up: bring every character's index in step with its files (only
/// those whose files changed since their last full sync) and schedule the
/// extraction of lines not read yet (e.g. before a restart).
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
            if !companiond_core::fence::is_normal(state.data_dir()) {
                return;
            }
            match longterm::catch_up(&state, &name).await {
                Ok(longterm::CatchUp::Synced) => extract::note_activity(&state, &name),
                // Unchanged files: only what awaits extraction or embedding.
                Ok(longterm::CatchUp::Unchanged { pending }) => {
                    vectors::schedule(&state, &name);
                    if pending > 0 {
                        extract::note_pending(&state, &name, pending);
                    }
                }
                Err(e) => tracing::warn!("cannot index the memory of {name}: {e}"),
            }
            // A history past its bound (or a fold a stop cut short) is folded.
            fold::schedule(&state, &name);
        }
    });
}

/// Every route of this family, with its literal path, and what it reads and
/// answers (docs/memory.md § OpenAPI).
pub fn api(state: &AppState) -> Api {
    use http::*;
    Api::new(state, "memory")
        .about("Memory: the recent chat history (read, compare-and-swap save), the character rename transaction, memory toggles, legacy memory roots and long-term memory (facts, reflections, persona, search, corrections). Errors answer `{success:false, error, code?}` (docs/memory.md).")
        .get(
            "/api/memory/recent_files",
            "logical recent-history file names (recent_<character>.json)",
            http::recent_files,
        )
        .id("list_recent_files")
        .ok::<listing::Files<'static>>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/recent_file",
            "one recent-history file: content, fingerprint, identity_token",
            http::recent_file,
        )
        .id("read_recent_file")
        .query::<RecentFileQuery>()
        .ok::<recent::RecentFile>()
        .fails::<MemoryError>()
        .route(
            Method::POST,
            "/api/memory/recent_file/save",
            "replace a character's recent history (compare-and-swap on the read tokens)",
            post(http::recent_save).layer(DefaultBodyLimit::max(recent::MAX_SAVE_BODY)),
        )
        .id("save_recent_file")
        .json_body::<save_body::SaveFields>()
        .ok::<recent::Saved>()
        .fails::<MemoryError>()
        .post(
            "/api/memory/update_character_name",
            "rename a character (alias of /api/characters/profile/{old_name}/rename)",
            http::rename_alias,
        )
        .id("update_character_name")
        .json_body::<RenameAliasBody>()
        .ok::<Renamed>()
        .fails::<MemoryError>()
        .post(
            "/api/characters/profile/{old_name}/rename",
            "rename a character: configuration, memory storage and chat session together",
            http::rename_canonical,
        )
        .id("rename_character")
        .json_body::<RenameBody>()
        .ok::<Renamed>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/review_config",
            "automatic recent-memory review toggle",
            http::toggle_get::<http::Review>,
        )
        .id("get_review_config")
        .ok::<ToggleState>()
        .post(
            "/api/memory/review_config",
            "update the automatic recent-memory review toggle",
            http::toggle_post::<http::Review>,
        )
        .id("set_review_config")
        .json_body::<ToggleBody>()
        .ok::<ToggleSaved>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/powerful_memory_config",
            "powerful-memory toggle",
            http::toggle_get::<http::Powerful>,
        )
        .id("get_powerful_memory_config")
        .ok::<ToggleState>()
        .post(
            "/api/memory/powerful_memory_config",
            "update the powerful-memory toggle (runs the switch-off migration)",
            http::toggle_post::<http::Powerful>,
        )
        .id("set_powerful_memory_config")
        .json_body::<ToggleBody>()
        .ok::<ToggleSaved>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/legacy/scan",
            "scan the legacy memory roots without changing them",
            http::legacy_scan,
        )
        .id("scan_legacy")
        .ok::<legacy::Scan>()
        .fails::<MemoryError>()
        .post(
            "/api/memory/legacy/purge",
            "delete selected entries below recognized legacy memory roots",
            http::legacy_purge,
        )
        .id("purge_legacy")
        .json_body::<PurgeBody>()
        .ok::<legacy::Purge>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/facts",
            "facts of a character (query: character, q, since, until, offset, limit, archived)",
            http::facts_list,
        )
        .id("list_facts")
        .query::<ListQuery>()
        .ok::<longterm::Listing>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/reflections",
            "reflections of a character (query: character, q, since, until, offset, limit, archived)",
            http::reflections_list,
        )
        .id("list_reflections")
        .query::<ListQuery>()
        .ok::<longterm::Listing>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/persona",
            "the persona of a character (stable traits kept from facts)",
            http::persona_get,
        )
        .id("get_persona")
        .query::<CharacterQuery>()
        .ok::<PersonaAnswer>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/search",
            "search a character's memory (query: character, q, since, until, offset, limit, kinds)",
            http::search,
        )
        .id("search")
        .query::<SearchQuery>()
        .ok::<SearchAnswer>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/archive",
            "the entries folded out of a character's recent history, newest first, read-only (query: character, before, limit)",
            http::archive,
        )
        .id("list_archive")
        .query::<ArchiveQuery>()
        .ok::<fold::ArchivePage>()
        .fails::<MemoryError>()
        .guarded(
            Method::POST,
            "/api/memory/correct",
            "correct a fact, reflection or persona entry ({character, id, text, importance?, entity?})",
            Csrf::Success,
            http::correct,
        )
        .id("correct")
        .json_body::<CorrectBody>()
        .ok::<longterm::Corrected>()
        .fails::<MemoryError>()
        .guarded(
            Method::POST,
            "/api/memory/forget",
            "forget a fact, reflection or persona entry everywhere ({character, id})",
            Csrf::Success,
            http::forget,
        )
        .id("forget")
        .json_body::<ForgetBody>()
        .ok::<longterm::Forgotten>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/extraction",
            "how the character's background extraction fares (failures, back-off, last error)",
            http::extraction_status,
        )
        .id("extraction_status")
        .query::<CharacterQuery>()
        .ok::<ExtractionStatus>()
        .fails::<MemoryError>()
        .guarded(
            Method::POST,
            "/api/memory/extract",
            "extract long-term memory from the unread history now ({character})",
            Csrf::Success,
            http::extract_now,
        )
        .id("extract")
        .json_body::<ExtractBody>()
        .ok::<Extracted>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/snapshots",
            "a character's snapshots, newest first (query: character)",
            http::snapshots_list,
        )
        .id("list_snapshots")
        .query::<CharacterQuery>()
        .ok::<undo::SnapshotList>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/snapshots/{character}/{id}",
            "what one snapshot holds: files, entry counts, dates, profile",
            http::snapshot_show,
        )
        .id("show_snapshot")
        .ok::<undo::SnapshotShown>()
        .fails::<MemoryError>()
        .guarded(
            Method::POST,
            "/api/memory/snapshots/restore",
            "restore a snapshot ({character, id}); what it replaces becomes a snapshot",
            Csrf::Success,
            http::snapshot_restore,
        )
        .id("restore_snapshot")
        .json_body::<undo::SnapshotRestoreBody>()
        .ok::<undo::SnapshotRestored>()
        .fails::<MemoryError>()
        .get(
            "/api/memory/trash",
            "deleted characters kept in the trash (30 days)",
            http::trash,
        )
        .id("list_trash")
        .ok::<undo::TrashList>()
        .fails::<MemoryError>()
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Once a minute (with the heap's trim, `companiond_core::alloc`), the open
/// indexes hand back their caches and mapped pages ([`index::Handles::release`]).
fn spawn_releaser(state: &AppState) {
    let weak = Arc::downgrade(&state.0);
    companiond_core::alloc::spawn_with_trim(move || match weak.upgrade() {
        Some(inner) => {
            AppState(inner).ext::<MemoryRuntime>().index.release();
            true
        }
        None => false,
    });
}

/// Start-up work: provide the family state, install the memory hooks other
/// families call, create or complete every character's memory unit, then
/// start the review watcher and the index catch-up.
pub fn start(state: &AppState) {
    state.provide(Arc::new(MemoryRuntime::default()));
    state.hooks.set_memory_service(Arc::new(Service {
        state: Arc::downgrade(&state.0),
    }));
    state.hooks.set_memory_recall(Arc::new(recall::Recall {
        state: Arc::downgrade(&state.0),
    }));
    state.provide(Arc::new(companiond_core::rename::Renamer::new(Arc::new(
        Renamer {
            state: Arc::downgrade(&state.0),
        },
    ))));
    // The trash of deleted characters expires.
    if tokio::runtime::Handle::try_current().is_ok() {
        let d = state.data_dir().to_path_buf();
        tokio::task::spawn_blocking(move || companiond_core::snapshots::expire_trash(&d));
        spawn_releaser(state);
    }
    match ensure_units(state) {
        // The watcher and the catch-up start once the units are complete.
        Some(names) => complete_units(state, names),
        None => {
            review::spawn_watcher(state);
            catch_up(state);
        }
    }
}

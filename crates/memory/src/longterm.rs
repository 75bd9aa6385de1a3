//! Long-term memory operations over the stores ([`crate::stores`]) and the
//! time index ([`crate::index`]): the index kept in step, listing, search,
//! correcting and forgetting. HTTP lives in [`crate::http`]; the extraction
//! pipeline in [`crate::extract`]; the chat side in [`crate::recall`].

use std::path::{Path, PathBuf};

use companiond_core::snapshots;
use companiond_core::AppState;
use rusqlite::Connection;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::index::{self, Hit, Query};
use crate::stores::{self, str_of, Obj, Stores};
use crate::tasks::TaskKind;
use crate::{fence, timefmt, unit, vectors, MemoryRuntime};

/// Run `f` with `name`'s index connection on the blocking pool.
pub async fn with_index<T, F>(state: &AppState, name: &str, f: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(&mut Connection, &Path) -> Result<T, String> + Send + 'static,
{
    let rt = MemoryRuntime::of(state);
    let dir = unit::character_dir(state.data_dir(), name)?;
    let n = name.to_string();
    // A rename moves the file: wait for it rather than reopen the old path.
    let _rename = rt.rename_lock.read().await;
    let rt2 = rt.clone();
    let notices = state.notices.clone();
    tokio::task::spawn_blocking(move || {
        let conn = rt2.index.get(&n, &dir, Some(&notices))?;
        let mut g = conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g, &dir)
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Bring `name`'s whole index in step with its files (history and stores).
pub async fn resync(state: &AppState, name: &str) -> Result<(), String> {
    let now = companiond_core::now_millis();
    let r = with_index(state, name, move |conn, dir| {
        sync_all(conn, dir, now, std::time::SystemTime::now())
    })
    .await;
    if r.is_ok() {
        crate::vectors::changed(state, name);
    }
    r
}

/// Sync the whole index of `dir` with its files and record their stamps
/// (taken at `at`, before reading them).
fn sync_all(
    conn: &mut Connection,
    dir: &Path,
    now: i64,
    at: std::time::SystemTime,
) -> Result<(), String> {
    let sources = index::Sources::of(dir, at);
    index::sync_lines(conn, dir, now)?;
    match Stores::load(dir, None) {
        Ok(s) => {
            index::sync_docs(conn, &s)?;
        }
        // A store that is not valid JSON is left alone (and not indexed); the
        // next start tries again.
        Err(e) => {
            tracing::warn!("memory stores not indexed: {e}");
            return index::set_synced_from(dir, None);
        }
    }
    index::set_synced_from(dir, Some(&sources))
}

/// What the start-up catch-up did for one character.
#[derive(Debug, PartialEq, Eq)]
pub enum CatchUp {
    /// The index was last fully synced from these very files: nothing read.
    Unchanged { pending: usize },
    /// The index was synced with the files.
    Synced,
}

/// At start-up: sync `name`'s index with its files unless it was last fully
/// synced from these very files (their stamps are kept in the index), so a
/// restart reads only what changed.
pub async fn catch_up(state: &AppState, name: &str) -> Result<CatchUp, String> {
    let rt = MemoryRuntime::of(state);
    let dir = unit::character_dir(state.data_dir(), name)?;
    let n = name.to_string();
    let now = companiond_core::now_millis();
    // A rename moves the file: wait for it rather than reopen the old path.
    let _rename = rt.rename_lock.read().await;
    let index = rt.clone();
    let notices = state.notices.clone();
    let r = tokio::task::spawn_blocking(move || {
        catch_up_dir(
            &dir,
            || index.index.get(&n, &dir, Some(&notices)),
            now,
            std::time::SystemTime::now(),
        )
    })
    .await
    .map_err(|e| e.to_string())??;
    if r == CatchUp::Synced {
        crate::vectors::changed(state, name);
    }
    Ok(r)
}

/// [`catch_up`] of the memory directory `dir`; `open` gives its connection.
fn catch_up_dir(
    dir: &Path,
    open: impl FnOnce() -> Result<std::sync::Arc<std::sync::Mutex<Connection>>, String>,
    now: i64,
    at: std::time::SystemTime,
) -> Result<CatchUp, String> {
    if let Some(pending) = index::synced_from(dir, &index::Sources::of(dir, at)) {
        return Ok(CatchUp::Unchanged { pending });
    }
    let conn = open()?;
    let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
    sync_all(&mut conn, dir, now, at)?;
    Ok(CatchUp::Synced)
}

/// Index the new history lines of `name`; how many lines await extraction.
pub async fn index_lines(state: &AppState, name: &str) -> Result<usize, String> {
    let now = companiond_core::now_millis();
    with_index(state, name, move |conn, dir| {
        index::sync_lines(conn, dir, now)?;
        index::pending(conn)
    })
    .await
}

/// The memory directory of a configured character (404 otherwise).
pub fn character(state: &AppState, name: &str) -> Result<PathBuf, MemoryError> {
    if !state.characters.exists(name) {
        return Err(MemoryError::NotFound(format!(
            "character {name:?} does not exist"
        )));
    }
    let dir = unit::character_dir(state.data_dir(), name).map_err(MemoryError::BadRequest)?;
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| MemoryError::Storage(format!("cannot create the memory folder: {e}")))?;
    }
    Ok(dir)
}

/// Change `name`'s stores under their lock: load, `f`, save (archives first),
/// then the index follows. Fenced while cloud storage is in maintenance.
pub async fn commit<R, F>(
    state: &AppState,
    name: &str,
    operation: &str,
    f: F,
) -> Result<R, MemoryError>
where
    R: Send + 'static,
    F: FnOnce(&mut Stores) -> Result<R, MemoryError> + Send + 'static,
{
    let dir = character(state, name)?;
    fence::check(state.data_dir(), operation, &format!("memory/{name}"))?;
    let rt = MemoryRuntime::of(state);
    // Nothing may move the directory meanwhile (rename holds it exclusively).
    let _rename = rt.rename_lock.read().await;
    let lock = state.store.lock_for(stores::lock_rel(name));
    let _g = lock.lock().await;
    let n = name.to_string();
    let rt2 = rt.clone();
    // A user's correction or forget can be undone (docs/data.md § Snapshots);
    // the extraction's own changes are not snapshotted.
    let kind = match operation {
        "correct" => Some(snapshots::Kind::Correct),
        "forget" => Some(snapshots::Kind::Forget),
        _ => None,
    };
    let data_dir = state.data_dir().to_path_buf();
    let notices = state.notices.clone();
    let r = tokio::task::spawn_blocking(move || {
        let mut s = Stores::load(&dir, Some(&notices)).map_err(MemoryError::from)?;
        let r = f(&mut s)?;
        // Kept even when the save fails half way (archives are written
        // first): the snapshot undoes what was written.
        if let Some(kind) = kind {
            snapshots::before_change(
                &data_dir,
                &snapshots::Take {
                    character: &n,
                    kind,
                    files: snapshots::LONG_TERM_FILES,
                    profile: None,
                    renamed_from: None,
                    restored: None,
                },
            );
        }
        s.save(&dir).map_err(MemoryError::Storage)?;
        // The index follows; a failure here is repaired by the next resync.
        let synced = rt2
            .index
            .get(&n, &dir, Some(&notices))
            .and_then(|c| index::sync_docs(&mut c.lock().unwrap_or_else(|e| e.into_inner()), &s));
        if let Err(e) = synced {
            tracing::warn!("the memory index of {n} did not follow a change: {e}");
        }
        Ok(r)
    })
    .await
    .map_err(|e| MemoryError::Internal(e.to_string()))?;
    if r.is_ok() {
        // New or changed entries get their vectors in the background.
        crate::vectors::changed(state, name);
    }
    r
}

/// Read `name`'s stores (no lock: every write is an atomic rename).
pub async fn load(state: &AppState, name: &str) -> Result<Stores, MemoryError> {
    let dir = character(state, name)?;
    let notices = state.notices.clone();
    companiond_core::task::blocking(move || {
        Stores::load(&dir, Some(&notices)).map_err(MemoryError::from)
    })
    .await
}

// ------------------------------------------------------------------ listing

/// Which list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Fact,
    Reflection,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fact => "fact",
            Kind::Reflection => "reflection",
        }
    }
}

/// A listing request.
#[derive(Clone, Debug)]
pub struct ListRequest {
    pub kind: Kind,
    pub query: Query,
    pub archived: bool,
}

fn entry_ts(o: &Obj) -> i64 {
    stores::entry_time(o, &["created_at", "updated_at"]).unwrap_or(0)
}

/// A page of facts or reflections (`GET /api/memory/facts`, `/reflections`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MemoryListing)]
pub struct Listing {
    pub success: bool,
    pub character: String,
    /// `fact` or `reflection`.
    pub kind: &'static str,
    pub archived: bool,
    /// Entries matching the query (all pages).
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    /// The stored entries as kept on disk (the original application's shapes:
    /// `id`, `text`, `created_at`, `importance`, `entity`, ... and any field
    /// an older version wrote), newest first or by rank when `q` is given.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<Value>,
}

/// List (or search) facts or reflections: `{total, items}`.
pub async fn list(state: &AppState, name: &str, req: ListRequest) -> Result<Listing, MemoryError> {
    let s = load(state, name).await?;
    let doc = match (req.kind, req.archived) {
        (Kind::Fact, false) => &s.facts,
        (Kind::Fact, true) => &s.facts_archive,
        (Kind::Reflection, false) => &s.reflections,
        (Kind::Reflection, true) => &s.reflections_archive,
    };
    let q = &req.query;
    let searching = !req.archived && index::fts_query(&q.text).is_some();
    let (total, items): (usize, Vec<Value>) = if searching {
        let q2 = q.clone();
        let kind = req.kind.as_str();
        let (total, hits) = with_index(state, name, move |conn, _| {
            Ok((
                index::count_docs(conn, &q2, kind)?,
                index::search_docs(conn, &q2, &[kind])?,
            ))
        })
        .await
        .map_err(MemoryError::Storage)?;
        let items = hits
            .iter()
            .filter_map(|h| doc.find(&h.id))
            .map(|o| Value::Object(o.clone()))
            .collect();
        (total, items)
    } else {
        let (lo, hi) = (q.since.unwrap_or(i64::MIN), q.until.unwrap_or(i64::MAX));
        let mut all: Vec<&Obj> = doc
            .objects()
            .filter(|o| str_of(o, "id").is_some())
            .filter(|o| (lo..=hi).contains(&entry_ts(o)))
            .collect();
        all.sort_by_key(|o| std::cmp::Reverse(entry_ts(o)));
        let total = all.len();
        let items = all
            .into_iter()
            .skip(q.offset)
            .take(q.limit)
            .map(|o| Value::Object(o.clone()))
            .collect();
        (total, items)
    };
    Ok(Listing {
        success: true,
        character: name.to_string(),
        kind: req.kind.as_str(),
        archived: req.archived,
        total,
        offset: q.offset,
        limit: q.limit,
        items,
    })
}

/// One search hit as answered.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MemoryHit)]
pub struct HitAnswer {
    /// `fact`, `reflection`, `persona` or `line`.
    pub kind: String,
    pub id: String,
    pub text: String,
    /// ISO 8601 time of the entry.
    pub time: String,
    /// Rank score (BM25: lower is better).
    pub score: f64,
    /// Who spoke the line (lines only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// `master`, `neko` or `relationship` (facts, reflections, persona).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
}

/// The answer form of a search hit.
pub fn hit_answer(h: &Hit) -> HitAnswer {
    let line = h.kind == "line";
    HitAnswer {
        kind: h.kind.clone(),
        id: h.id.clone(),
        text: h.text.clone(),
        time: timefmt::iso(h.ts),
        score: h.score,
        speaker: line.then(|| h.who.clone()),
        entity: (!line).then(|| h.who.clone()),
    }
}

/// Search facts, reflections, persona entries and history lines; the ranked
/// lists of each kind are fused (reciprocal rank fusion), with the vector
/// ranking of the docs when an embedding endpoint is configured and answers
/// in time ([`vectors::SEARCH_TIMEOUT`]).
pub async fn search(
    state: &AppState,
    name: &str,
    q: Query,
    kinds: Vec<&'static str>,
) -> Result<Vec<Hit>, String> {
    let docs = kinds.iter().any(|k| *k != "line");
    let qv = if docs {
        vectors::query_vector(state, &q.text, vectors::SEARCH_TIMEOUT).await
    } else {
        None
    };
    if qv.is_some() {
        vectors::schedule(state, name);
    }
    with_index(state, name, move |conn, _| {
        search_fused(conn, &q, &kinds, qv.as_ref())
    })
    .await
}

/// [`search`] on a connection, BM25 only.
pub fn search_blocking(conn: &Connection, q: &Query, kinds: &[&str]) -> Result<Vec<Hit>, String> {
    search_fused(conn, q, kinds, None)
}

/// [`search`] on a connection: BM25 per kind, plus the vector ranking of the
/// docs when `qv` is given (only for queries with text).
pub fn search_fused(
    conn: &Connection,
    q: &Query,
    kinds: &[&str],
    qv: Option<&vectors::QueryVector>,
) -> Result<Vec<Hit>, String> {
    let deep = Query {
        limit: q.offset + q.limit,
        offset: 0,
        ..q.clone()
    };
    let mut lists: Vec<Vec<Hit>> = Vec::new();
    for k in kinds.iter().filter(|k| **k != "line") {
        lists.push(index::search_docs(conn, &deep, &[k])?);
    }
    if let Some(qv) = qv.filter(|_| !q.text.trim().is_empty()) {
        let bm25: Vec<Hit> = lists.iter().flatten().cloned().collect();
        let sem = vectors::search(conn, &deep, kinds, qv, &bm25)?;
        if !sem.is_empty() {
            lists.push(sem);
        }
    }
    if kinds.contains(&"line") {
        lists.push(index::search_lines(conn, &deep)?);
    }
    let refs: Vec<&[Hit]> = lists.iter().map(Vec::as_slice).collect();
    Ok(index::rrf(&refs)
        .into_iter()
        .skip(q.offset)
        .take(q.limit)
        .cloned()
        .collect())
}

// ------------------------------------------------------------------ forget / correct

/// Forget one fact, reflection or persona entry everywhere: every store, the
/// index, and the references to it. 404 when nothing has that id.
/// One entry a forget removed.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MemoryRemoved)]
pub struct Removed {
    /// `fact`, `reflection` or `persona` (active or archived).
    pub kind: &'static str,
    pub id: String,
}

/// The answer of `POST /api/memory/forget`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Forgotten {
    pub success: bool,
    pub character: String,
    pub id: String,
    pub removed: Vec<Removed>,
}

pub async fn forget(state: &AppState, name: &str, id: String) -> Result<Forgotten, MemoryError> {
    // A running extraction might bring it back from what it already read.
    MemoryRuntime::of(state)
        .tasks
        .cancel(name, Some(TaskKind::Extraction));
    let id2 = id.clone();
    let removed = commit(state, name, "forget", move |s| {
        let removed = s.forget(&id2);
        if removed.is_empty() {
            return Err(MemoryError::NotFound(format!(
                "no memory entry has the id {id2:?}"
            )));
        }
        Ok(removed)
    })
    .await?;
    let removed = removed
        .into_iter()
        .map(|(k, i)| Removed { kind: k, id: i })
        .collect();
    Ok(Forgotten {
        success: true,
        character: name.to_string(),
        id,
        removed,
    })
}

/// A correction of one entry.
#[derive(Clone, Debug)]
pub struct Correction {
    pub id: String,
    pub text: String,
    pub importance: Option<i64>,
    pub entity: Option<String>,
}

/// The corrected version of the fact or reflection `old` (a new id, the
/// corrected text; a fact is stamped and loses its stale embedding) and its id.
fn corrected(old: &Obj, kind: &str, c: &Correction, now: i64) -> (Obj, String) {
    let mut new = old.clone();
    let new_id = stores::new_id(kind, now, &c.text);
    new.insert("id".into(), json!(new_id));
    new.insert("text".into(), json!(c.text));
    new.insert("hash".into(), json!(stores::content_hash(&c.text)));
    let fact = kind == "fact";
    if fact {
        new.insert("updated_at".into(), json!(timefmt::iso(now)));
    }
    new.insert("corrected_from".into(), json!(c.id));
    if fact {
        new.insert("embedding".into(), Value::Null);
        if let Some(i) = c.importance {
            new.insert("importance".into(), json!(i));
        }
    }
    if let Some(e) = &c.entity {
        new.insert("entity".into(), json!(e));
    }
    (new, new_id)
}

/// Correct one fact, reflection or persona entry. A fact or reflection gets a
/// new id and the old version goes to its archive (`arbitration_reason:
/// "user_correction"`, `superseded_by`); a persona entry is edited in place
/// (the old text goes to its `version_history`).
/// The answer of `POST /api/memory/correct`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Corrected {
    pub success: bool,
    pub character: String,
    /// `fact`, `reflection` or `persona`.
    pub kind: &'static str,
    /// The corrected entry as stored (a fact or reflection under its new id).
    #[schema(value_type = Object)]
    pub item: Value,
}

pub async fn correct(
    state: &AppState,
    name: &str,
    c: Correction,
) -> Result<Corrected, MemoryError> {
    MemoryRuntime::of(state)
        .tasks
        .cancel(name, Some(TaskKind::Extraction));
    let item = commit(state, name, "correct", move |s| {
        let now = companiond_core::now_millis();
        for kind in ["fact", "reflection"] {
            let (list, archive) = match kind {
                "fact" => (&mut s.facts, &mut s.facts_archive),
                _ => (&mut s.reflections, &mut s.reflections_archive),
            };
            let Some(old) = list.find(&c.id).cloned() else {
                continue;
            };
            let (new, new_id) = corrected(&old, kind, &c, now);
            list.remove(&c.id);
            archive.push(stores::archived(old, "user_correction", Some(&new_id), now));
            list.push(new.clone());
            s.persona_remove(&c.id);
            if kind == "fact" {
                crate::extract::promote_persona(s, now);
            }
            return Ok((kind, Value::Object(new)));
        }
        for section in s.persona.values_mut() {
            let Some(list) = section.get_mut("facts").and_then(Value::as_array_mut) else {
                continue;
            };
            for e in list.iter_mut().filter_map(Value::as_object_mut) {
                if str_of(e, "id") != Some(c.id.as_str()) {
                    continue;
                }
                let old = e.get("text").cloned().unwrap_or(Value::Null);
                let hist = e.entry("version_history").or_insert_with(|| json!([]));
                if let Some(h) = hist.as_array_mut() {
                    h.push(json!({"text": old, "replaced_at": timefmt::iso(now), "reason": "user_correction"}));
                }
                e.insert("text".into(), json!(c.text));
                let item = Value::Object(e.clone());
                s.persona_dirty = true;
                return Ok(("persona", item));
            }
        }
        Err(MemoryError::NotFound(format!(
            "no active memory entry has the id {:?}",
            c.id
        )))
    })
    .await?;
    let (kind, item) = item;
    Ok(Corrected {
        success: true,
        character: name.to_string(),
        kind,
        item,
    })
}

#[cfg(test)]
mod catch_up_tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, SystemTime};

    fn history(dir: &Path, lines: &[&str]) {
        let v: Vec<Value> = lines
            .iter()
            .map(|t| json!({"type": "human", "data": {"content": t}}))
            .collect();
        std::fs::write(dir.join(unit::RECENT), Value::Array(v).to_string()).unwrap();
    }

    /// A start with unchanged files opens no index and reads no file; a
    /// changed history is synced again; stamps not settled yet are not kept.
    #[test]
    fn a_restart_syncs_only_characters_whose_files_changed() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        unit::ensure_memory_files(dir).unwrap();
        history(dir, &["My cat is called Miso"]);
        let conn = Arc::new(Mutex::new(index::open(dir).unwrap()));
        let opened = Cell::new(0);
        let open = || -> Result<Arc<Mutex<Connection>>, String> {
            opened.set(opened.get() + 1);
            Ok(conn.clone())
        };
        let synced_from = || index::synced_key(dir);
        // Files written just now: synced, but their stamps are not trusted yet.
        let r = catch_up_dir(dir, open, 1000, SystemTime::now()).unwrap();
        assert_eq!(r, CatchUp::Synced);
        assert_eq!(synced_from(), None);
        assert_eq!(opened.get(), 1);
        // Once settled, the stamps are kept ...
        let later = || SystemTime::now() + Duration::from_secs(3);
        assert_eq!(
            catch_up_dir(dir, open, 2000, later()).unwrap(),
            CatchUp::Synced
        );
        assert!(synced_from().is_some());
        assert_eq!(opened.get(), 2);
        // ... and a restart with the same files does nothing.
        for _ in 0..2 {
            assert_eq!(
                catch_up_dir(dir, open, 3000, later()).unwrap(),
                CatchUp::Unchanged { pending: 1 }
            );
        }
        assert_eq!(opened.get(), 2);
        // A changed history is synced again.
        history(dir, &["My cat is called Miso", "I live in Berlin"]);
        assert_eq!(
            catch_up_dir(dir, open, 4000, later()).unwrap(),
            CatchUp::Synced
        );
        assert_eq!(opened.get(), 3);
        let lines = index::lines_after(&conn.lock().unwrap(), 0, 10).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            catch_up_dir(dir, open, 5000, later()).unwrap(),
            CatchUp::Unchanged { pending: 2 }
        );
        // So is a changed store; a store that cannot be read is tried every time.
        std::fs::write(dir.join(stores::FACTS), b"{broken").unwrap();
        for _ in 0..2 {
            assert_eq!(
                catch_up_dir(dir, open, 6000, later()).unwrap(),
                CatchUp::Synced
            );
        }
        assert_eq!(synced_from(), None);
        assert_eq!(opened.get(), 5);
    }
}

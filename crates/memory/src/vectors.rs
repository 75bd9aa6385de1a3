//! Embedding vectors of the long-term memory, when an embedding endpoint is
//! configured (`embeddingModelId`, optionally `embeddingModelUrl` /
//! `embeddingModelApiKey`; OpenAI-compatible `POST <url>/embeddings`, see
//! `companiond_core::providers::resolve_embedding`). No model is bundled.
//!
//! * Facts, reflections and persona entries are embedded in the background,
//!   in batches of [`BATCH`], after the docs change (extraction, correction,
//!   forgetting, start-up, a cloud-save reload) and after each chat turn when
//!   something is missing: docs without a vector of the configured model
//!   (a new model re-embeds everything, newest first). Vectors live in
//!   `time_indexed.db` (`memory_vectors`: doc row id, model id, the doc's
//!   signature, dimension, little-endian f32 BLOB of the unit vector), so they travel with the
//!   character unit. History lines are not embedded (BM25 only).
//! * A search embeds its query within a short budget ([`TURN_TIMEOUT`] for a
//!   chat turn, [`SEARCH_TIMEOUT`] for the routes and the tool); the newest
//!   [`SCAN`] vectors of each kind in the time window, plus the BM25 hits, are
//!   ranked by cosine similarity and the list is fused with the BM25 list by
//!   reciprocal rank. A failed or slow embedding call leaves the search to
//!   BM25 and pauses query embeddings of that endpoint for [`BACKOFF`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use companiond_core::providers::Endpoint;
use companiond_core::AppState;
use rusqlite::{params, Connection, OptionalExtension};

use crate::index::{self, db_err, Hit, Query};
use crate::longterm::with_index;

/// Docs embedded per request.
pub const BATCH: usize = 32;
/// Whole-call limit of a background embedding request.
pub const EMBED_TIMEOUT: Duration = Duration::from_secs(60);
/// Budget of a chat turn's query embedding.
pub const TURN_TIMEOUT: Duration = Duration::from_millis(300);
/// Budget of a search route's or the tool's query embedding.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failure, no call to that endpoint for this long.
pub const BACKOFF: Duration = Duration::from_secs(30);
/// Newest vectors of each kind compared with the query (BM25 hits are compared too).
pub const SCAN: usize = 2000;
/// Characters of a doc's text sent to the model.
const MAX_TEXT: usize = 2000;
/// Query vectors kept (the same message is often embedded twice: turn and tool).
const CACHE: usize = 32;

/// A query's embedding.
#[derive(Clone, Debug)]
pub struct QueryVector {
    pub model: String,
    pub vec: Arc<Vec<f32>>,
}

/// A cached query vector: (endpoint key, text, vector).
type Cached = (String, String, Arc<Vec<f32>>);

/// In-process state (one per server).
#[derive(Default)]
pub struct VectorRuntime {
    /// Characters being embedded; `true` = run again when done.
    running: Mutex<HashMap<String, bool>>,
    /// Characters whose docs all have a vector of this model.
    done: Mutex<HashMap<String, String>>,
    /// An endpoint (url + model) that failed, and until when it is left alone.
    down: Mutex<Option<(String, Instant)>>,
    cache: Mutex<VecDeque<Cached>>,
}

fn rt(state: &AppState) -> Arc<VectorRuntime> {
    state.ext::<VectorRuntime>()
}

fn endpoint_key(ep: &Endpoint) -> String {
    format!("{}\n{}", ep.base_url, ep.model)
}

impl VectorRuntime {
    fn is_down(&self, key: &str) -> bool {
        let g = self.down.lock().unwrap_or_else(|e| e.into_inner());
        matches!(&*g, Some((k, until)) if k == key && Instant::now() < *until)
    }
    fn set_down(&self, key: &str) {
        *self.down.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((key.to_string(), Instant::now() + BACKOFF));
    }
    fn set_up(&self, key: &str) {
        let mut g = self.down.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(&*g, Some((k, _)) if k == key) {
            *g = None;
        }
    }
}

// ------------------------------------------------------------------ blobs

/// A vector as stored: little-endian f32.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// A stored vector (`None` when the blob is not a whole number of f32).
pub fn from_blob(b: &[u8]) -> Option<Vec<f32>> {
    b.len().is_multiple_of(4).then(|| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// `v` scaled to unit length (unchanged when zero).
pub fn normalised(v: &[f32]) -> Vec<f32> {
    let n = norm(v);
    if n > 0.0 {
        v.iter().map(|x| x / n).collect()
    } else {
        v.to_vec()
    }
}

fn lane(b: &[u8], i: usize) -> f32 {
    f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// Dot product of `q` and a stored blob of the same dimension (8 lanes, so
/// the compiler vectorises it).
fn dot_blob(q: &[f32], blob: &[u8]) -> f32 {
    let mut acc = [0.0f32; 8];
    let qs = q.chunks_exact(8);
    let bs = blob.chunks_exact(32);
    let (qr, br) = (qs.remainder(), bs.remainder());
    for (qq, bb) in qs.zip(bs) {
        for i in 0..8 {
            acc[i] += qq[i] * lane(bb, i);
        }
    }
    let mut dot: f32 = acc.iter().sum();
    for (i, x) in qr.iter().enumerate() {
        dot += x * lane(br, i);
    }
    dot
}

/// Cosine similarity of the unit query `q` and a stored (unit) vector;
/// `None` for a different dimension.
fn cosine_blob(q: &[f32], blob: &[u8]) -> Option<f32> {
    (blob.len() == q.len() * 4).then(|| dot_blob(q, blob))
}

// ------------------------------------------------------------------ blocking side

/// A doc waiting for its vector: `(row id, signature, text)`.
pub type Pending = (i64, String, String);

/// Docs without a vector of `model`, newest first.
pub fn pending(conn: &Connection, model: &str, limit: usize) -> Result<Vec<Pending>, String> {
    let mut st = conn
        .prepare_cached(
            "SELECT d.id, d.sig, d.text FROM memory_docs d
             LEFT JOIN memory_vectors v ON v.doc = d.id
             WHERE v.doc IS NULL OR v.model <> ?1
             ORDER BY d.ts DESC, d.id DESC LIMIT ?2",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![model, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(db_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
}

/// Store vectors of `model` for docs (`(row id, signature, vector)`, stored
/// scaled to unit length so a similarity is one dot product); a doc
/// that changed or left meanwhile (signature differs) is skipped. How many
/// were stored.
pub fn store(
    conn: &mut Connection,
    model: &str,
    rows: &[(i64, String, Vec<f32>)],
) -> Result<usize, String> {
    let tx = conn.transaction().map_err(db_err)?;
    let mut n = 0;
    {
        let mut st = tx
            .prepare_cached(
                "INSERT OR REPLACE INTO memory_vectors(doc, model, sig, dim, vec)
                 SELECT ?1, ?2, ?3, ?4, ?5
                 WHERE EXISTS (SELECT 1 FROM memory_docs WHERE id = ?1 AND sig = ?3)",
            )
            .map_err(db_err)?;
        for (id, sig, v) in rows {
            let unit = normalised(v);
            n += st
                .execute(params![id, model, sig, v.len() as i64, to_blob(&unit)])
                .map_err(db_err)?;
        }
    }
    tx.commit().map_err(db_err)?;
    Ok(n)
}

/// `(docs with a vector of model, docs)`.
pub fn coverage(conn: &Connection, model: &str) -> Result<(usize, usize), String> {
    conn.query_row(
        "SELECT (SELECT count(*) FROM memory_vectors v JOIN memory_docs d ON d.id = v.doc
                 WHERE v.model = ?1),
                (SELECT count(*) FROM memory_docs)",
        [model],
        |r| Ok((r.get::<_, i64>(0)? as usize, r.get::<_, i64>(1)? as usize)),
    )
    .map_err(db_err)
}

/// The docs of `kinds` (fact / reflection / persona) in the query's time
/// window closest to `qv` by cosine similarity (> 0), best first, at most
/// `q.offset + q.limit`: the newest [`SCAN`] vectors of each kind are compared,
/// and the docs of `also` (e.g. the BM25 hits) whatever their age. `score` is
/// the cosine distance (1 - similarity; lower is better, as for BM25).
pub fn search(
    conn: &Connection,
    q: &Query,
    kinds: &[&str],
    qv: &QueryVector,
    also: &[Hit],
) -> Result<Vec<Hit>, String> {
    let kinds: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|k| matches!(*k, "fact" | "reflection" | "persona"))
        .collect();
    let want = q.offset + q.limit;
    if kinds.is_empty() || want == 0 {
        return Ok(Vec::new());
    }
    let (lo, hi) = (q.since.unwrap_or(i64::MIN), q.until.unwrap_or(i64::MAX));
    let qn = normalised(&qv.vec);
    let mut scored: HashMap<i64, f32> = HashMap::new();
    {
        let mut st = conn
            .prepare_cached(
                "SELECT d.id, v.vec FROM memory_docs d CROSS JOIN memory_vectors v ON v.doc = d.id
                 WHERE d.kind = ?1 AND d.ts BETWEEN ?2 AND ?3 AND v.model = ?4
                 ORDER BY d.ts DESC LIMIT ?5",
            )
            .map_err(db_err)?;
        for k in &kinds {
            let mut rows = st
                .query(params![k, lo, hi, qv.model, SCAN as i64])
                .map_err(db_err)?;
            while let Some(r) = rows.next().map_err(db_err)? {
                let id: i64 = r.get(0).map_err(db_err)?;
                let blob = r.get_ref(1).map_err(db_err)?.as_blob().map_err(db_err_ty)?;
                if let Some(c) = cosine_blob(&qn, blob).filter(|c| *c > 0.0) {
                    scored.insert(id, c);
                }
            }
        }
        let mut one = conn
            .prepare_cached(
                "SELECT d.id, v.vec FROM memory_docs d JOIN memory_vectors v ON v.doc = d.id
                 WHERE d.kind = ?1 AND d.ref = ?2 AND d.ts BETWEEN ?3 AND ?4 AND v.model = ?5",
            )
            .map_err(db_err)?;
        for h in also.iter().filter(|h| kinds.contains(&h.kind.as_str())) {
            let row: Option<(i64, Vec<u8>)> = one
                .query_row(params![h.kind, h.id, lo, hi, qv.model], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
                .map_err(db_err)?;
            if let Some((id, blob)) = row {
                if let Some(c) = cosine_blob(&qn, &blob).filter(|c| *c > 0.0) {
                    scored.insert(id, c);
                }
            }
        }
    }
    let mut best: Vec<(i64, f32)> = scored.into_iter().collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    best.truncate(want);
    let mut st = conn
        .prepare_cached("SELECT kind, ref, entity, text, ts, 0.0 FROM memory_docs WHERE id = ?1")
        .map_err(db_err)?;
    let mut out = Vec::with_capacity(best.len());
    for (id, c) in best {
        if let Some(mut h) = st
            .query_row([id], index::doc_hit)
            .optional()
            .map_err(db_err)?
        {
            h.score = f64::from(1.0 - c);
            out.push(h);
        }
    }
    Ok(out)
}

fn db_err_ty(e: rusqlite::types::FromSqlError) -> String {
    format!("time index: {e}")
}

// ------------------------------------------------------------------ async side

/// The embedding of `text` within `timeout`, or `None` (no endpoint, no
/// text, the endpoint failing or too slow: the caller searches by BM25 only).
pub async fn query_vector(state: &AppState, text: &str, timeout: Duration) -> Option<QueryVector> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let ep = state.llm.embedding_endpoint().await?;
    let key = endpoint_key(&ep);
    let r = rt(state);
    if r.is_down(&key) {
        return None;
    }
    let text: String = text.chars().take(MAX_TEXT).collect();
    {
        let c = r.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, v)) = c.iter().find(|(k, t, _)| *k == key && *t == text) {
            return Some(QueryVector {
                model: ep.model,
                vec: v.clone(),
            });
        }
    }
    match state
        .llm
        .embed_at(&ep, std::slice::from_ref(&text), timeout)
        .await
    {
        Ok(mut v) => {
            let vec = Arc::new(v.pop()?);
            let mut c = r.cache.lock().unwrap_or_else(|e| e.into_inner());
            if c.len() >= CACHE {
                c.pop_front();
            }
            c.push_back((key, text, vec.clone()));
            Some(QueryVector {
                model: ep.model,
                vec,
            })
        }
        Err(e) => {
            tracing::info!(
                "no query embedding ({e}); searching by words only for {} s",
                BACKOFF.as_secs()
            );
            r.set_down(&key);
            None
        }
    }
}

/// The docs of `name` changed: embed what is new.
pub fn changed(state: &AppState, name: &str) {
    let r = rt(state);
    r.done
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(name);
    schedule(state, name);
}

/// Embed `name`'s docs that lack a vector of the configured model, in the
/// background (one run per character at a time; nothing when no endpoint is
/// configured, everything is embedded, or the endpoint failed recently).
pub fn schedule(state: &AppState, name: &str) {
    crate::spawn_for(state, name, |st, name| async move {
        let r = rt(&st);
        {
            let mut running = r.running.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(again) = running.get_mut(&name) {
                *again = true;
                return;
            }
            running.insert(name.clone(), false);
        }
        loop {
            let finished = run(&st, &name).await;
            let mut running = r.running.lock().unwrap_or_else(|e| e.into_inner());
            match running.get_mut(&name) {
                Some(again) if *again && finished => *again = false,
                _ => {
                    running.remove(&name);
                    return;
                }
            }
        }
    });
}

/// One pass; `false` when it stopped early (no endpoint, a failure).
async fn run(state: &AppState, name: &str) -> bool {
    let Some(ep) = state.llm.embedding_endpoint().await else {
        return false;
    };
    let r = rt(state);
    let key = endpoint_key(&ep);
    let already = r
        .done
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .is_some_and(|m| *m == ep.model);
    if already || r.is_down(&key) {
        return false;
    }
    let mut embedded = 0usize;
    loop {
        if !companiond_core::fence::is_normal(state.data_dir()) || !state.characters.exists(name) {
            return false;
        }
        let model = ep.model.clone();
        let batch = match with_index(state, name, move |conn, _| pending(conn, &model, BATCH)).await
        {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!("cannot read the docs to embed of {name}: {e}");
                return false;
            }
        };
        if batch.is_empty() {
            if embedded > 0 {
                tracing::debug!("embedded {embedded} memory entries of {name}");
            }
            r.done
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.to_string(), ep.model.clone());
            return true;
        }
        let texts: Vec<String> = batch
            .iter()
            .map(|(_, _, t)| t.chars().take(MAX_TEXT).collect())
            .collect();
        let vecs = match state.llm.embed_at(&ep, &texts, EMBED_TIMEOUT).await {
            Ok(v) => v,
            Err(e) => {
                tracing::info!("cannot embed the memory of {name}: {e}");
                r.set_down(&key);
                return false;
            }
        };
        r.set_up(&key);
        let rows: Vec<(i64, String, Vec<f32>)> = batch
            .into_iter()
            .zip(vecs)
            .map(|((id, sig, _), v)| (id, sig, v))
            .collect();
        let n = rows.len();
        let model = ep.model.clone();
        if let Err(e) = with_index(state, name, move |conn, _| store(conn, &model, &rows)).await {
            tracing::debug!("cannot store the vectors of {name}: {e}");
            return false;
        }
        embedded += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{open, upsert_doc, Doc};

    #[test]
    fn vectors_are_stored_ranked_and_follow_the_docs() {
        let d = std::env::temp_dir().join(format!("mem-vec-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).unwrap();
        let mut c = open(&d).unwrap();
        let doc = |id: &str, text: &str, ts: i64| Doc {
            kind: "fact",
            id: id.into(),
            entity: "master".into(),
            text: text.into(),
            ts,
        };
        upsert_doc(&c, &doc("a", "cat", 1)).unwrap();
        upsert_doc(&c, &doc("b", "tea", 2)).unwrap();
        let p = pending(&c, "m1", 10).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].2, "tea");
        let rows: Vec<(i64, String, Vec<f32>)> = p
            .iter()
            .map(|(id, sig, t)| {
                let v = if t == "cat" {
                    vec![1.0, 0.0]
                } else {
                    vec![0.0, 1.0]
                };
                (*id, sig.clone(), v)
            })
            .collect();
        // A doc that changed meanwhile is skipped.
        let mut stale = rows.clone();
        stale[0].1 = "other".into();
        assert_eq!(store(&mut c, "m1", &stale).unwrap(), 1);
        assert_eq!(store(&mut c, "m1", &rows).unwrap(), 2);
        assert!(pending(&c, "m1", 10).unwrap().is_empty());
        assert_eq!(pending(&c, "m2", 10).unwrap().len(), 2);
        assert_eq!(coverage(&c, "m1").unwrap(), (2, 2));
        let qv = QueryVector {
            model: "m1".into(),
            vec: Arc::new(vec![0.9, 0.1]),
        };
        let q = Query {
            limit: 5,
            ..Default::default()
        };
        let hits = search(&c, &q, &["fact"], &qv, &[]).unwrap();
        assert_eq!(
            hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(hits[0].score < hits[1].score);
        // Another model's vectors are not compared.
        let other = QueryVector {
            model: "m2".into(),
            ..qv.clone()
        };
        assert!(search(&c, &q, &["fact"], &other, &[]).unwrap().is_empty());
        // A changed text drops its vector; a removed doc too.
        upsert_doc(&c, &doc("a", "dog", 1)).unwrap();
        assert_eq!(pending(&c, "m1", 10).unwrap().len(), 1);
        index::delete_doc(&c, None, "b").unwrap();
        assert_eq!(coverage(&c, "m1").unwrap(), (0, 1));
        assert_eq!(from_blob(&to_blob(&[1.5, -2.0])), Some(vec![1.5, -2.0]));
        assert_eq!(from_blob(&[0, 1, 2]), None);
        let _ = std::fs::remove_dir_all(d);
    }
}

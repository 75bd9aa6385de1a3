//! The docs: active facts, reflections and persona entries of the JSON
//! stores, kept in `memory_docs` and its FTS5 index.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use crate::stores::{self, str_of, Stores};

use super::{db_err, fts_body};

/// A fact, reflection or persona entry as indexed.
#[derive(Clone, Debug, PartialEq)]
pub struct Doc {
    pub kind: &'static str,
    pub id: String,
    pub entity: String,
    pub text: String,
    pub ts: i64,
}

impl Doc {
    pub fn sig(&self) -> String {
        stores::content_hash(&format!("{}\n{}\n{}", self.entity, self.ts, self.text))
    }
}

/// The docs of the stores: active facts, reflections not denied or archived,
/// persona entries not suppressed.
pub fn docs_of(s: &Stores) -> Vec<Doc> {
    let mut out = Vec::new();
    for f in s.active_facts() {
        out.push(Doc {
            kind: "fact",
            id: str_of(f, "id").unwrap_or_default().to_string(),
            entity: str_of(f, "entity").unwrap_or("master").to_string(),
            text: str_of(f, "text").unwrap_or_default().to_string(),
            ts: stores::entry_time(f, &["created_at", "updated_at"]).unwrap_or(0),
        });
    }
    for r in s.reflections.objects() {
        let (Some(id), Some(text)) = (str_of(r, "id"), str_of(r, "text")) else {
            continue;
        };
        if matches!(str_of(r, "status"), Some("denied" | "archived")) {
            continue;
        }
        out.push(Doc {
            kind: "reflection",
            id: id.to_string(),
            entity: str_of(r, "entity").unwrap_or("master").to_string(),
            text: text.to_string(),
            ts: stores::entry_time(r, &["created_at"]).unwrap_or(0),
        });
    }
    for (entity, e) in s.persona_entries() {
        let (Some(id), Some(text)) = (str_of(e, "id"), str_of(e, "text")) else {
            continue;
        };
        if e.get("suppress").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        out.push(Doc {
            kind: "persona",
            id: id.to_string(),
            entity,
            text: text.to_string(),
            ts: stores::entry_time(e, &["created_at"]).unwrap_or(0),
        });
    }
    out
}

/// Insert or update one doc.
pub fn upsert_doc(conn: &Connection, d: &Doc) -> Result<(), String> {
    let sig = d.sig();
    let cur: Option<(i64, String)> = conn
        .query_row(
            "SELECT id, sig FROM memory_docs WHERE kind = ?1 AND ref = ?2",
            params![d.kind, d.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(db_err)?;
    match cur {
        Some((_, s)) if s == sig => Ok(()),
        Some((rowid, _)) => {
            conn.execute(
                "UPDATE memory_docs SET entity = ?2, text = ?3, ts = ?4, sig = ?5 WHERE id = ?1",
                params![rowid, d.entity, d.text, d.ts, sig],
            )
            .map_err(db_err)?;
            conn.execute("DELETE FROM memory_docs_fts WHERE rowid = ?1", [rowid])
                .map_err(db_err)?;
            conn.execute(
                "INSERT INTO memory_docs_fts(rowid, body) VALUES (?1, ?2)",
                params![rowid, fts_body(&d.text)],
            )
            .map_err(db_err)?;
            // Its vector is stale: embedded again in the background.
            conn.execute("DELETE FROM memory_vectors WHERE doc = ?1", [rowid])
                .map_err(db_err)?;
            Ok(())
        }
        None => {
            conn.execute(
                "INSERT INTO memory_docs(kind, ref, entity, text, ts, sig) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![d.kind, d.id, d.entity, d.text, d.ts, sig],
            )
            .map_err(db_err)?;
            let rowid = conn.last_insert_rowid();
            conn.execute(
                "INSERT INTO memory_docs_fts(rowid, body) VALUES (?1, ?2)",
                params![rowid, fts_body(&d.text)],
            )
            .map_err(db_err)?;
            Ok(())
        }
    }
}

/// Remove one doc (any kind when `kind` is `None`).
pub fn delete_doc(conn: &Connection, kind: Option<&str>, id: &str) -> Result<usize, String> {
    let rowids: Vec<i64> = {
        let mut st = conn
            .prepare("SELECT id FROM memory_docs WHERE ref = ?1 AND (?2 IS NULL OR kind = ?2)")
            .map_err(db_err)?;
        let rows = st
            .query_map(params![id, kind], |r| r.get(0))
            .map_err(db_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db_err)?
    };
    for r in &rowids {
        conn.execute("DELETE FROM memory_docs WHERE id = ?1", [r])
            .map_err(db_err)?;
        conn.execute("DELETE FROM memory_docs_fts WHERE rowid = ?1", [r])
            .map_err(db_err)?;
        conn.execute("DELETE FROM memory_vectors WHERE doc = ?1", [r])
            .map_err(db_err)?;
    }
    Ok(rowids.len())
}

/// Make the docs table equal to the stores; `(upserted, removed)`.
pub fn sync_docs(conn: &mut Connection, s: &Stores) -> Result<(usize, usize), String> {
    let want = docs_of(s);
    let tx = conn.transaction().map_err(db_err)?;
    let have: HashMap<(String, String), String> = {
        let mut st = tx
            .prepare("SELECT kind, ref, sig FROM memory_docs")
            .map_err(db_err)?;
        let rows = st
            .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
            .map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)?
    };
    let mut keep = std::collections::HashSet::new();
    let mut upserted = 0;
    for d in &want {
        let key = (d.kind.to_string(), d.id.clone());
        if have.get(&key) != Some(&d.sig()) {
            upsert_doc(&tx, d)?;
            upserted += 1;
        }
        keep.insert(key);
    }
    let mut removed = 0;
    for (kind, id) in have.keys().filter(|k| !keep.contains(*k)) {
        removed += delete_doc(&tx, Some(kind), id)?;
    }
    tx.commit().map_err(db_err)?;
    Ok((upserted, removed))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::index::testutil::tmp;
    use crate::index::*;

    #[test]
    fn docs_follow_the_stores() {
        let d = tmp();
        std::fs::write(
            d.join("facts.json"),
            json!([{"id": "f1", "text": "The user lives in Berlin", "entity": "master", "created_at": "2024-05-01T10:00:00"}]).to_string(),
        )
        .unwrap();
        let mut c = open(&d).unwrap();
        let s = Stores::load(&d, None).unwrap();
        assert_eq!(sync_docs(&mut c, &s).unwrap(), (1, 0));
        assert_eq!(sync_docs(&mut c, &s).unwrap(), (0, 0));
        let q = Query {
            text: "where does the user live".into(),
            limit: 5,
            ..Default::default()
        };
        let hits = search_docs(&c, &q, &["fact"]).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, "f1");
        assert_eq!(count_docs(&c, &q, "fact").unwrap(), 1);
        std::fs::write(d.join("facts.json"), "[]").unwrap();
        let s = Stores::load(&d, None).unwrap();
        assert_eq!(sync_docs(&mut c, &s).unwrap(), (0, 1));
        assert!(search_docs(&c, &q, &["fact"]).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(d);
    }
}

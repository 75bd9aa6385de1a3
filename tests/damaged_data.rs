//! Damaged data (docs/data.md § Databases, § Damaged documents).
//!
//! A damaged SQLite database: the memory index,
//! the token-usage record and the leaderboard, overwritten with garbage while
//! no connection is open, are set aside as `NAME.corrupt-<time>` with their
//! bytes kept, a pending notice names each, and a new database takes their
//! place — the routes answer as for a new user, never a 500.

use std::path::{Path, PathBuf};

use companiond_core::testkit::TestServer;

const GARBAGE: &[u8] = b"this is not an SQLite database, it was damaged by a bad disk";

fn aside_of(path: &Path) -> Vec<PathBuf> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{name}.corrupt-"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_databases_are_set_aside_with_a_notice_and_replaced() {
    let data = tempfile::tempdir().unwrap();
    let dbs = [
        data.path().join("memory/Companion/time_indexed.db"),
        data.path().join("state/token_usage.db"),
        data.path().join("state/game_scores/badminton_scores.db"),
    ];
    for p in &dbs {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, GARBAGE).unwrap();
    }
    let s = TestServer::start_in(companiond::FAMILIES, data.path()).await;

    let (status, body) = s
        .get("/api/memory/search?character=Companion&q=hello&kinds=fact,line")
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.get("/api/token-usage?days=7").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.get("/api/game/badminton/leaderboard").await;
    assert_eq!(status, 200, "{body}");

    for p in &dbs {
        let aside = aside_of(p);
        assert_eq!(aside.len(), 1, "{} set aside once: {aside:?}", p.display());
        assert_eq!(std::fs::read(&aside[0]).unwrap(), GARBAGE, "its bytes kept");
        let c = rusqlite::Connection::open(p).unwrap();
        let ok: String = c.query_row("PRAGMA quick_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok", "a new database at {}", p.display());
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert!(v >= 1, "{} carries its schema version", p.display());
    }
    let (_, notices) = s.get("/api/pending-notices").await;
    let text = notices.to_string();
    assert_eq!(
        text.matches("database_recovered").count(),
        3,
        "one notice per database: {text}"
    );
    assert!(text.contains("memory index of Companion"), "{text}");
}

/// Damaged JSON documents of several families: each answers its documented
/// error at most once, the document is kept aside whole with a notice, and
/// the family starts it anew (a new user's answer, then saves work).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_that_are_not_json_are_set_aside_with_a_notice_and_started_anew() {
    let llm = companiond_core::testkit::MockLlm::start("a reply after the damage").await;
    let data = tempfile::tempdir().unwrap();
    let docs = [
        (
            "config/conversation_settings.json",
            "/api/config/conversation-settings",
        ),
        ("config/preferences.json", "/api/config/preferences"),
        (
            "state/seven_day_tutorial_state.json",
            "/api/seven-day-tutorial/state",
        ),
        (
            "memory/Companion/facts.json",
            "/api/memory/facts?character=Companion",
        ),
    ];
    let recent = data.path().join("memory/Companion/recent.json");
    let s = TestServer::start_in(companiond::FAMILIES, data.path()).await;
    s.configure_llm(&llm.base()).await;
    for p in docs
        .iter()
        .map(|(rel, _)| data.path().join(rel))
        .chain([recent.clone()])
    {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, GARBAGE).unwrap();
    }
    for (rel, route) in docs {
        let (first, body) = s.get(route).await;
        assert_ne!(first, 500, "{route}: {body}");
        let (status, body) = s.get(route).await;
        assert_eq!(
            status, 200,
            "{route} after the damage was set aside: {body}"
        );
        let aside = aside_of(&data.path().join(rel));
        assert_eq!(aside.len(), 1, "{rel} set aside once: {aside:?}");
        assert_eq!(
            std::fs::read(&aside[0]).unwrap(),
            GARBAGE,
            "{rel}: its bytes kept"
        );
    }
    // A chat turn after the damage of the history: the old one kept aside,
    // the turn stored in a new one.
    let (mut ws, _) = s.chat("Companion").await;
    futures::SinkExt::send(
        &mut ws,
        tokio_tungstenite::tungstenite::Message::text(
            serde_json::json!({"type": "user_text", "text": "still there?"}).to_string(),
        ),
    )
    .await
    .unwrap();
    companiond_core::testkit::next_of_type(&mut ws, "turn_end").await;
    let history: Vec<serde_json::Value> = serde_json::from_slice(
        &std::fs::read(data.path().join("memory/Companion/recent.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    let aside = aside_of(&recent);
    assert_eq!(aside.len(), 1, "the history set aside once: {aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), GARBAGE);

    let (_, notices) = s.get("/api/pending-notices").await;
    let text = notices.to_string();
    assert_eq!(
        text.matches("document_recovered").count(),
        docs.len() + 1,
        "one notice per document: {text}"
    );
}

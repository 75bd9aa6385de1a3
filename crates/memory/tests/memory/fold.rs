//! Folding the recent history (docs/memory.md § Folding): a history pushed
//! past the bound by the save route and real chat turns is folded in the
//! background; the folded lines stay in the time index (search, the archive
//! route), a summary heads the file when a summary model answers, and a
//! restart keeps everything.

use crate::common::*;

use companiond_memory::fold::{KEEP_ENTRIES, MAX_ENTRIES, SUMMARY_SOURCE};

/// Replace the history with `n` lines through the save route (read, then
/// save with its tokens); line `i` mentions `word<i>`.
async fn save_lines(s: &TestServer, n: usize) {
    let (st, r) = read(s, "recent_Companion.json").await;
    assert_eq!(st, 200, "{r}");
    let chat: Vec<Value> = (0..n)
        .map(|i| {
            let role = if i % 2 == 0 { "human" } else { "ai" };
            json!({"role": role, "text": format!("message {i} mentions word{i}")})
        })
        .collect();
    let (st, b) = save(
        s,
        json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
               "identity_token": r["identity_token"], "chat": chat}),
    )
    .await;
    assert_eq!(st, 200, "{b}");
}

fn stored_entries(s: &TestServer) -> Vec<Value> {
    serde_json::from_slice(&std::fs::read(recent_path(s, C)).unwrap()).unwrap()
}

async fn wait_folded(s: &TestServer) -> Vec<Value> {
    let t = Instant::now();
    loop {
        let v = stored_entries(s);
        if v.len() <= KEEP_ENTRIES + 1 {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "not folded: {} entries",
            v.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every archived entry, paging with `before`.
async fn archive_all(s: &TestServer) -> Vec<Value> {
    let mut out = Vec::new();
    let mut before: Option<i64> = None;
    loop {
        let url = match before {
            Some(b) => format!("/api/memory/archive?character={C}&limit=64&before={b}"),
            None => format!("/api/memory/archive?character={C}&limit=64"),
        };
        let (st, b) = s.get(&url).await;
        assert_eq!(st, 200, "{b}");
        out.extend(b["items"].as_array().unwrap().iter().cloned());
        match b["next_before"].as_i64() {
            Some(n) => before = Some(n),
            None => {
                assert_eq!(b["total"].as_u64().unwrap() as usize, out.len(), "{b}");
                return out;
            }
        }
    }
}

async fn search_line(s: &TestServer, word: &str) -> Vec<String> {
    let (st, b) = s
        .get(&format!(
            "/api/memory/search?character={C}&q={word}&kinds=line"
        ))
        .await;
    assert_eq!(st, 200, "{b}");
    b["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["text"].as_str().map(str::to_string))
        .collect()
}

fn summary_requests(llm: &MockLlm) -> usize {
    llm.chat_requests()
        .iter()
        .filter(|r| r.to_string().contains("Summarise the conversation"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_past_the_bound_is_folded_into_a_summary_and_stays_reachable() {
    let llm = MockLlm::start("ok").await;
    llm.push_matching(
        "Summarise the conversation",
        MockReply::Text("They counted messages together.".into()),
    );
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    let n = MAX_ENTRIES + 100;
    save_lines(&s, n).await;
    // Within the bound until a turn: nothing folds on a save.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stored_entries(&s).len(), n);
    let (reply, frames) = turn(&s, C, "What did I say first?").await;
    assert_eq!(reply, "ok", "{frames:?}");

    let kept = wait_folded(&s).await;
    assert_eq!(kept.len(), KEEP_ENTRIES + 1);
    assert_eq!(kept[0]["type"], "system");
    assert_eq!(kept[0]["source"], SUMMARY_SOURCE);
    assert_eq!(
        kept[0]["data"]["content"],
        "They counted messages together."
    );
    assert_eq!(kept[KEEP_ENTRIES]["data"]["content"], "ok");
    assert_eq!(
        kept[KEEP_ENTRIES - 1]["data"]["content"],
        "What did I say first?"
    );
    assert_eq!(summary_requests(&llm), 1);
    // The summary model saw the folded lines.
    let asked = llm
        .chat_requests()
        .into_iter()
        .find(|r| r.to_string().contains("Summarise the conversation"))
        .unwrap();
    assert!(asked.to_string().contains("message 0 mentions word0"));

    // Every folded line is in the archive, in order, and found by search.
    let folded = n + 2 - KEEP_ENTRIES;
    let archive = archive_all(&s).await;
    assert_eq!(archive.len(), folded);
    assert_eq!(
        archive.last().unwrap()["entry"]["data"]["content"],
        "message 0 mentions word0"
    );
    assert_eq!(
        archive[0]["entry"]["data"]["content"],
        format!("message {} mentions word{}", folded - 1, folded - 1)
    );
    for i in [0, 7, folded - 1] {
        let hits = search_line(&s, &format!("word{i}")).await;
        assert!(
            hits.contains(&format!("message {i} mentions word{i}")),
            "word{i}: {hits:?}"
        );
    }

    // The route's input is checked, in the family's envelope.
    for (q, status) in [
        ("", 400),
        ("character=Companion&limit=0", 400),
        ("character=Companion&limit=201", 400),
        ("character=Companion&limit=x", 400),
        ("character=Companion&before=0", 400),
        ("character=Nobody", 404),
    ] {
        let (st, b) = s.get(&format!("/api/memory/archive?{q}")).await;
        assert_eq!(st, status, "{q}: {b}");
        assert_eq!(b["success"], false, "{q}: {b}");
    }

    // A restart keeps everything; more turns within the bound fold nothing.
    s.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s2 = memory_server(Some(&s.data)).await;
    let (reply, _) = turn(&s2, C, "Still there?").await;
    assert_eq!(reply, "ok");
    // The summary reaches the turn's memory text.
    let system = last_system_prompt(&llm);
    assert!(
        system.contains("Summary of your earlier conversations:\nThey counted messages together."),
        "{system}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = stored_entries(&s2);
    assert_eq!(after.len(), KEEP_ENTRIES + 3);
    assert_eq!(after[0], kept[0]);
    assert_eq!(archive_all(&s2).await, archive);
    let hits = search_line(&s2, "word3").await;
    assert!(
        hits.contains(&"message 3 mentions word3".to_string()),
        "{hits:?}"
    );
    // A folded line that matches a new message is recalled into its turn.
    let (reply, _) = turn(&s2, C, "Do you remember word5?").await;
    assert_eq!(reply, "ok");
    let system = last_system_prompt(&llm);
    assert!(system.contains("message 5 mentions word5"), "{system}");
    assert_eq!(summary_requests(&llm), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_summary_model_the_lines_are_archived_as_they_are() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    s.merge_core_config(json!({"summaryModelUrl": "", "correctionModelUrl": ""}))
        .await;
    let n = MAX_ENTRIES + 50;
    save_lines(&s, n).await;
    let (reply, _) = turn(&s, C, "Hello again").await;
    assert_eq!(reply, "ok");
    let kept = wait_folded(&s).await;
    assert_eq!(kept.len(), KEEP_ENTRIES);
    assert!(
        kept.iter().all(|e| e["source"] != SUMMARY_SOURCE),
        "{kept:?}"
    );
    let first_kept = n + 2 - KEEP_ENTRIES;
    assert_eq!(
        kept[0]["data"]["content"],
        format!("message {first_kept} mentions word{first_kept}")
    );
    assert_eq!(summary_requests(&llm), 0);
    let archive = archive_all(&s).await;
    assert_eq!(archive.len(), first_kept);
    // Stored as they were, nothing the user said dropped.
    for (i, a) in archive.iter().rev().enumerate() {
        assert_eq!(
            a["entry"]["data"]["content"],
            format!("message {i} mentions word{i}")
        );
    }
    let hits = search_line(&s, "word1").await;
    assert!(
        hits.contains(&"message 1 mentions word1".to_string()),
        "{hits:?}"
    );
}

/// A stop between a fold's archive commit and its file write (simulated: the
/// archive rows and the note of the fold are put in the index of a stopped
/// server, the history left whole) loses nothing and archives nothing twice:
/// the restarted server undoes the half-done fold and folds again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_cut_short_is_redone_once_after_a_restart() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    s.merge_core_config(json!({"summaryModelUrl": "", "correctionModelUrl": ""}))
        .await;
    let n = MAX_ENTRIES + 20;
    save_lines(&s, n).await;
    let db = s.data.join("memory").join(C).join("time_indexed.db");
    s.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The half-done fold: the first `k` entries archived, the note committed.
    let bytes = std::fs::read(recent_path(&s, C)).unwrap();
    let k = 50;
    let mut end = 0;
    let mut seen = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            seen += 1;
            if seen == k + 1 {
                end = i - 1; // before the comma ending entry k-1
                break;
            }
        }
    }
    assert_eq!(bytes[end], b',');
    let entries: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        // The history is indexed (as after a turn; this server had none).
        let lines: i64 = c
            .query_row("SELECT count(*) FROM memory_lines", [], |r| r.get(0))
            .unwrap();
        assert_eq!(lines, 0);
        for e in &entries {
            companiond_memory::index::insert_line(
                &c,
                e["type"].as_str().unwrap(),
                e["data"]["content"].as_str().unwrap(),
                1,
            )
            .unwrap();
        }
        let ids: Vec<i64> = c
            .prepare("SELECT id FROM memory_lines ORDER BY id LIMIT ?1")
            .unwrap()
            .query_map([k as i64], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (i, id) in ids.iter().enumerate() {
            c.execute(
                "INSERT INTO memory_archive(fold, line, raw, ts) VALUES (7, ?1, ?2, 1)",
                rusqlite::params![id, entries[i].to_string()],
            )
            .unwrap();
        }
        c.execute(
            "INSERT INTO memory_meta(key, value) VALUES ('fold_pending', ?1)",
            [format!("7:{end}:{}", crc32fast::hash(&bytes[..end]))],
        )
        .unwrap();
    }

    // The restart (its start-up fold check) settles and folds again.
    let s2 = memory_server(Some(&s.data)).await;
    let kept = wait_folded(&s2).await;
    assert_eq!(kept.len(), KEEP_ENTRIES);
    let archive = archive_all(&s2).await;
    assert_eq!(archive.len(), n - KEEP_ENTRIES, "each entry archived once");
    for (i, a) in archive.iter().rev().enumerate() {
        assert_eq!(a["entry"], entries[i]);
        assert_ne!(a["fold"], 7);
    }
    let hits = search_line(&s2, "word2").await;
    assert_eq!(
        hits.iter()
            .filter(|h| *h == "message 2 mentions word2")
            .count(),
        1,
        "{hits:?}"
    );
}

/// The archive travels with the character unit: uploaded after a fold and
/// downloaded on another device, the folded lines are in its archive and
/// found by its search, and the window is the folded one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archive_travels_with_the_cloud_unit() {
    let families: &[companiond_core::server::Family] =
        &[companiond_memory::FAMILY, companiond_cloudsave::FAMILY];
    let llm = MockLlm::start("ok").await;
    let s = server_with(families, None).await;
    s.configure_llm(&llm.base()).await;
    s.merge_core_config(json!({"summaryModelUrl": "", "correctionModelUrl": ""}))
        .await;
    save_lines(&s, MAX_ENTRIES + 10).await;
    turn(&s, C, "Fold, please").await;
    let kept = wait_folded(&s).await;
    let archive = archive_all(&s).await;
    assert_eq!(archive.len(), MAX_ENTRIES + 12 - KEEP_ENTRIES);
    let (st, b) = s
        .post("/api/cloudsave/character/Companion/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{b}");

    let cloud = s.data.join("cloud").to_string_lossy().into_owned();
    let other = TestServer::start_with(
        families,
        TestOptions {
            edit: Some(Box::new(move |o| o.cloud = cloud)),
            ..Default::default()
        },
    )
    .await;
    assert!(archive_all(&other).await.is_empty());
    let (st, b) = other
        .post(
            "/api/cloudsave/character/Companion/download",
            json!({"overwrite": true, "force": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(stored_entries(&other), kept);
    assert_eq!(archive_all(&other).await, archive);
    let hits = search_line(&other, "word4").await;
    assert!(
        hits.contains(&"message 4 mentions word4".to_string()),
        "{hits:?}"
    );
}

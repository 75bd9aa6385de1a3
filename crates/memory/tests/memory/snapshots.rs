//! Snapshots and undo: every kind of change that replaces or removes a
//! character's memory is undone through the snapshot routes, and the result
//! compared byte for byte with what was there before.

use crate::common::*;

use companiond_core::testkit::CSRF;
use reqwest::Method;

fn both() -> &'static [companiond_core::server::Family] {
    &[companiond_memory::FAMILY, companiond_cloudsave::FAMILY]
}

/// The bytes of every file of `name`'s memory folder (temporary files of
/// the writers aside).
fn unit_bytes(s: &TestServer, name: &str) -> BTreeMap<String, Vec<u8>> {
    let dir = s.data.join("memory").join(name);
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with('.') || n.ends_with(".db") || n.contains(".db-") {
            continue;
        }
        out.insert(n, std::fs::read(e.path()).unwrap());
    }
    out
}

fn characters_file(s: &TestServer) -> Vec<u8> {
    std::fs::read(s.data.join("config/characters.json")).unwrap()
}

async fn list(s: &TestServer, name: &str) -> Vec<Value> {
    let (st, b) = s
        .get(&format!(
            "/api/memory/snapshots?character={}",
            url_encode(name)
        ))
        .await;
    assert_eq!(st, 200, "{b}");
    b["snapshots"].as_array().unwrap().clone()
}

async fn restore(s: &TestServer, name: &str, id: &str) -> Value {
    let (st, b) = s
        .post_csrf(
            "/api/memory/snapshots/restore",
            json!({"character": name, "id": id}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    b
}

async fn save_chat(s: &TestServer, name: &str, chat: Value) {
    let (st, cur) = read(s, &format!("recent_{name}.json")).await;
    assert_eq!(st, 200, "{cur}");
    let (st, b) = save(
        s,
        json!({"filename": format!("recent_{name}.json"), "fingerprint": cur["fingerprint"],
               "identity_token": cur["identity_token"], "chat": chat}),
    )
    .await;
    assert_eq!(st, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_is_undone_and_the_undo_is_undone() {
    let s = server().await;
    write_history(
        &s,
        C,
        &json!([
            msg("human", "hello"),
            msg("ai", "hi there"),
            msg("human", "bye")
        ]),
    );
    let before = unit_bytes(&s, C);
    save_chat(&s, C, json!([{"role": "human", "text": "edited"}])).await;
    let saved = unit_bytes(&s, C);
    assert_ne!(saved["recent.json"], before["recent.json"]);

    let snaps = list(&s, C).await;
    assert_eq!(snaps.len(), 1, "{snaps:?}");
    assert_eq!(snaps[0]["kind"], "save");
    assert_eq!(snaps[0]["files"][0]["how"], "link");
    let id = snaps[0]["id"].as_str().unwrap().to_string();

    // What it holds: the three entries of the history before the save.
    let (st, shown) = s.get(&format!("/api/memory/snapshots/{C}/{id}")).await;
    assert_eq!(st, 200, "{shown}");
    assert_eq!(shown["files"][0]["name"], "recent.json");
    assert_eq!(shown["files"][0]["entries"], 3);

    let r = restore(&s, C, &id).await;
    assert_eq!(r["restored"], id.as_str());
    assert_eq!(unit_bytes(&s, C), before, "restored byte for byte");
    // The restored history reads and saves like any other.
    let (st, cur) = read(&s, &format!("recent_{C}.json")).await;
    assert_eq!(st, 200);
    assert_eq!(
        cur["content"].as_str().unwrap().as_bytes(),
        &before["recent.json"][..]
    );

    // The restore itself is undone.
    let undo = r["undo"].as_str().unwrap();
    restore(&s, C, undo).await;
    assert_eq!(unit_bytes(&s, C), saved, "the undo of the undo");
    let kinds: Vec<Value> = list(&s, C)
        .await
        .iter()
        .map(|m| m["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("restore"), json!("restore"), json!("save")]
    );
}

fn fact(id: &str, text: &str) -> Value {
    json!({"id": id, "text": text, "importance": 5, "entity": "master",
           "source": "user_observation", "tags": [], "created_at": "2026-11-01T10:00:00.000000"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correction_and_a_forget_are_undone() {
    let s = server().await;
    let dir = s.data.join("memory").join(C);
    std::fs::write(
        dir.join("facts.json"),
        serde_json::to_vec_pretty(&json!([
            fact("fact_20261101100000_aaaaaaaa", "The user likes tea"),
            fact("fact_20261101100000_bbbbbbbb", "The user has a cat")
        ]))
        .unwrap(),
    )
    .unwrap();
    let before = unit_bytes(&s, C);

    let (st, b) = s
        .post_csrf(
            "/api/memory/correct",
            json!({"character": C, "id": "fact_20261101100000_aaaaaaaa", "text": "The user likes coffee"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    let corrected = unit_bytes(&s, C);
    assert_ne!(corrected, before);
    let (st, b) = s
        .post_csrf(
            "/api/memory/forget",
            json!({"character": C, "id": "fact_20261101100000_bbbbbbbb"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    let (_, found) = s.get("/api/memory/search?character=Companion&q=cat").await;
    assert_eq!(found["items"].as_array().unwrap().len(), 0, "{found}");

    let snaps = list(&s, C).await;
    assert_eq!(snaps[0]["kind"], "forget");
    assert_eq!(snaps[1]["kind"], "correct");
    let (_, shown) = s
        .get(&format!(
            "/api/memory/snapshots/{C}/{}",
            snaps[1]["id"].as_str().unwrap()
        ))
        .await;
    let facts = shown["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "facts.json")
        .unwrap()
        .clone();
    assert_eq!(facts["entries"], 2, "{shown}");
    assert_eq!(facts["oldest"], "2026-11-01T10:00:00.000000");

    // Undo the forget: the fact is back, in the files and in search.
    restore(&s, C, snaps[0]["id"].as_str().unwrap()).await;
    assert_eq!(unit_bytes(&s, C), corrected);
    let (_, found) = s.get("/api/memory/search?character=Companion&q=cat").await;
    assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
    // Undo the correction too.
    restore(&s, C, snaps[1]["id"].as_str().unwrap()).await;
    assert_eq!(unit_bytes(&s, C), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_is_undone() {
    let s = server().await;
    let (st, b) = s
        .post(
            "/api/characters/profile",
            json!({"name": "Mika", "voice": "soft"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    write_history(
        &s,
        "Mika",
        &json!([msg("human", "hello"), msg("ai", "Mika: hi there")]),
    );
    // A complete unit (every file of it exists, as after a start).
    companiond_memory::ensure_memory_files(&s.data.join("memory/Mika")).unwrap();
    let before = unit_bytes(&s, "Mika");
    let config_before = characters_file(&s);

    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Nora"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_ne!(unit_bytes(&s, "Nora")["recent.json"], before["recent.json"]);

    // The snapshot followed the character to its new name.
    assert!(list(&s, "Mika").await.is_empty());
    let snaps = list(&s, "Nora").await;
    assert_eq!(snaps[0]["kind"], "rename");
    assert_eq!(snaps[0]["renamed_from"], "Mika");
    let r = restore(&s, "Nora", snaps[0]["id"].as_str().unwrap()).await;
    assert_eq!(r["renamed_back"], true);
    assert_eq!(r["character"], "Mika");
    assert!(!s.data.join("memory/Nora").exists());
    assert_eq!(unit_bytes(&s, "Mika"), before);
    assert_eq!(
        String::from_utf8(characters_file(&s)).unwrap(),
        String::from_utf8(config_before).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_character_comes_back_from_the_trash() {
    let s = server().await;
    let (st, _) = s
        .post(
            "/api/characters/profile",
            json!({"name": "Mika", "voice": "soft"}),
        )
        .await;
    assert_eq!(st, 200);
    write_history(&s, "Mika", &json!([msg("human", "hello"), msg("ai", "hi")]));
    companiond_memory::ensure_memory_files(&s.data.join("memory/Mika")).unwrap();
    let before = unit_bytes(&s, "Mika");
    let config_before = characters_file(&s);

    let (st, b) = s
        .send(Method::DELETE, "/api/characters/profile/Mika", None)
        .await;
    assert_eq!(st, 200, "{b}");
    // Memory written meanwhile under the same folder (replaced, as every
    // writer does) is replaced too.
    let tmp = s.data.join("memory/Mika/recent.json.new");
    std::fs::write(&tmp, b"[]").unwrap();
    std::fs::rename(&tmp, s.data.join("memory/Mika/recent.json")).unwrap();

    let (st, t) = s.get("/api/memory/trash").await;
    assert_eq!(st, 200, "{t}");
    let item = &t["items"][0];
    assert_eq!(item["character"], "Mika");
    assert_eq!(item["configured"], false);
    assert!(item["snapshot"]["expires_at"].is_string());
    let id = item["snapshot"]["id"].as_str().unwrap();
    // The time index is kept with SQLite's online backup.
    assert!(item["snapshot"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["name"] == "time_indexed.db" && f["how"] == "sqlite"));

    let r = restore(&s, "Mika", id).await;
    assert_eq!(r["recreated"], true);
    assert_eq!(unit_bytes(&s, "Mika"), before);
    assert_eq!(characters_file(&s), config_before);
    let (_, l) = s.get("/api/characters").await;
    assert!(l["characters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "Mika" && c["voice"] == "soft"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_download_is_undone() {
    let s = TestServer::start(both()).await;
    write_history(&s, C, &json!([msg("human", "from the cloud")]));
    let (st, b) = s
        .post("/api/cloudsave/character/Companion/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{b}");
    // Local changes after the upload, then a download over them.
    write_history(
        &s,
        C,
        &json!([msg("human", "local"), msg("ai", "only here")]),
    );
    let before = unit_bytes(&s, C);
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Companion/download",
            json!({"overwrite": true, "force": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_ne!(unit_bytes(&s, C), before);

    let snaps = list(&s, C).await;
    assert_eq!(snaps[0]["kind"], "download", "{snaps:?}");
    assert_eq!(snaps[0]["has_profile"], true);
    restore(&s, C, snaps[0]["id"].as_str().unwrap()).await;
    assert_eq!(unit_bytes(&s, C), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_check_csrf_fence_and_input() {
    let s = server().await;
    write_history(&s, C, &json!([msg("human", "hello")]));
    save_chat(&s, C, json!([{"role": "human", "text": "edited"}])).await;
    let id = list(&s, C).await[0]["id"].as_str().unwrap().to_string();

    // No CSRF token: refused, nothing restored.
    let (st, _) = s
        .post(
            "/api/memory/snapshots/restore",
            json!({"character": C, "id": id}),
        )
        .await;
    assert_eq!(st, 403);
    // Unknown ids, hostile names, a malformed body.
    for (body, want) in [
        (json!({"character": C, "id": "1-nothing"}), 404),
        (json!({"character": C, "id": "../../config"}), 404),
        (json!({"character": "../config", "id": id}), 400),
        (json!({"character": C}), 422),
    ] {
        let (st, b) = s
            .post_csrf("/api/memory/snapshots/restore", body.clone())
            .await;
        assert_eq!(st, want, "{body} → {b}");
        assert_eq!(b["success"], false, "{b}");
    }
    let (st, _) = s.get("/api/memory/snapshots/Companion/..").await;
    assert!(st == 404 || st == 400, "{st}");
    let (st, _) = s.get("/api/memory/snapshots").await;
    assert_eq!(st, 400);

    // While cloud storage is in maintenance, a restore is fenced.
    std::fs::create_dir_all(s.data.join("state")).unwrap();
    std::fs::write(
        s.data.join("state/root_state.json"),
        br#"{"mode": "maintenance_readonly"}"#,
    )
    .unwrap();
    let (st, b) = s
        .post_csrf(
            "/api/memory/snapshots/restore",
            json!({"character": C, "id": id}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "CLOUDSAVE_WRITE_FENCE_ACTIVE");
    let r = s
        .http
        .post(s.url("/api/memory/snapshots/restore"))
        .header("X-CSRF-Token", CSRF)
        .header("Origin", "http://evil.example")
        .json(&json!({"character": C, "id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_is_undone() {
    use companiond_memory::review::{self, ReviewOutcome};
    let s = server().await;
    write_history(
        &s,
        C,
        &json!([msg("human", "helo helo"), msg("ai", "fine")]),
    );
    let before = unit_bytes(&s, C);
    let llm = MockLlm::start("[\"hello\", \"fine\"]").await;
    s.configure_llm(&llm.base()).await;
    let h = review::start(&s.state, C).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, ReviewOutcome::Applied(1));
    assert_ne!(unit_bytes(&s, C), before);
    let snaps = list(&s, C).await;
    assert_eq!(snaps[0]["kind"], "review", "{snaps:?}");
    restore(&s, C, snaps[0]["id"].as_str().unwrap()).await;
    assert_eq!(unit_bytes(&s, C), before);
}

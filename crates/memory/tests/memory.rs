//! End-to-end tests of the memory family over real HTTP, with real files and
//! a real SQLite database.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use companiond_core::testkit::{TestOptions, TestServer, Upstream};
use companiond_memory::review::{self, ReviewOutcome};
use companiond_memory::theater::THEATER_SOURCE;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

async fn server() -> TestServer {
    TestServer::start(&[companiond_memory::FAMILY]).await
}

fn recent_path(s: &TestServer, name: &str) -> PathBuf {
    s.data.join("memory").join(name).join("recent.json")
}

fn write_history(s: &TestServer, name: &str, v: &Value) {
    let p = recent_path(s, name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

fn msg(t: &str, c: &str) -> Value {
    json!({"type": t, "data": {"content": c}})
}

fn theater_msg(c: &str) -> Value {
    json!({"type": "system", "data": {"content": c, "metadata": {
        "source": THEATER_SOURCE, "memory_tier": "episode_summary", "story_id": "st-1", "run_index": 2}}})
}

async fn read(s: &TestServer, filename: &str) -> (u16, Value) {
    let url = format!("/api/memory/recent_file?filename={}", url_encode(filename));
    s.get(&url).await
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn save(s: &TestServer, body: Value) -> (u16, Value) {
    s.post("/api/memory/recent_file/save", body).await
}

async fn post_raw(s: &TestServer, path: &str, body: Vec<u8>) -> (u16, Value) {
    let r = s
        .http
        .post(s.url(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    companiond_core::testkit::split(r).await
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn texts(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["content"].as_str().unwrap_or("").to_string())
        .collect()
}

fn stored(s: &TestServer, name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(recent_path(s, name)).unwrap()).unwrap()
}

/// Every file (bytes) and directory below `dir`.
fn tree(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let m = p.symlink_metadata().unwrap();
            if m.is_dir() {
                out.insert(rel + "/", None);
                walk(base, &p, out);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

// ------------------------------------------------------------------ unit files

#[tokio::test]
async fn memory_unit_files_and_routes_exist() {
    let s = server().await;
    let dir = s.data.join("memory").join("Companion");
    for f in companiond_memory::UNIT_FILES {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let conn = rusqlite::Connection::open(dir.join("time_indexed.db")).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        tables.contains(&"time_indexed_original".to_string()),
        "{tables:?}"
    );
    assert!(tables.contains(&"time_indexed_compressed".to_string()));

    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    let paths = doc["paths"].as_object().unwrap();
    for (p, m) in [
        ("/api/memory/recent_files", "get"),
        ("/api/memory/recent_file", "get"),
        ("/api/memory/recent_file/save", "post"),
        ("/api/memory/update_character_name", "post"),
        ("/api/memory/review_config", "get"),
        ("/api/memory/review_config", "post"),
        ("/api/memory/powerful_memory_config", "get"),
        ("/api/memory/powerful_memory_config", "post"),
        ("/api/memory/legacy/scan", "get"),
        ("/api/memory/legacy/purge", "post"),
        ("/api/characters/profile/{old_name}/rename", "post"),
    ] {
        assert!(
            paths.get(p).and_then(|o| o.get(m)).is_some(),
            "{m} {p} not documented"
        );
    }
}

/// A heavy user's units: a character without a directory gets its unit before
/// the server answers; existing directories (more than are checked at start)
/// are completed beside it, without touching what is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_units_are_completed_beside_the_server() {
    let names: Vec<String> = (0..150).map(|i| format!("Unit {i:03}")).collect();
    let listed = names.clone();
    let s = TestServer::start_with(
        &[companiond_memory::FAMILY],
        TestOptions {
            prepare: Some(Box::new(move |data: &Path, _: &Path| {
                let chars: serde_json::Map<String, Value> = listed
                    .iter()
                    .map(|n| (n.clone(), json!({"nickname": n})))
                    .collect();
                std::fs::create_dir_all(data.join("config")).unwrap();
                std::fs::write(
                    data.join("config/characters.json"),
                    serde_json::to_vec(&json!({"current": listed[0], "characters": chars}))
                        .unwrap(),
                )
                .unwrap();
                // Every unit exists but the last; the first lacks two files.
                let template = data.join("template");
                companiond_memory::ensure_memory_files(&template).unwrap();
                for n in &listed[..listed.len() - 1] {
                    let dir = data.join("memory").join(n);
                    std::fs::create_dir_all(&dir).unwrap();
                    for f in companiond_memory::UNIT_FILES {
                        std::fs::copy(template.join(f), dir.join(f)).unwrap();
                    }
                }
                std::fs::remove_dir_all(&template).unwrap();
                let first = data.join("memory").join(&listed[0]);
                std::fs::write(first.join("recent.json"), b"[1]").unwrap();
                std::fs::remove_file(first.join("facts.json")).unwrap();
                std::fs::remove_file(first.join("time_indexed.db")).unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let unit = |n: &str| s.data.join("memory").join(n);
    let last = unit(names.last().unwrap());
    for f in companiond_memory::UNIT_FILES {
        assert!(last.join(f).is_file(), "{f} missing at start");
    }
    let first = unit(&names[0]);
    let t = Instant::now();
    while !companiond_memory::UNIT_FILES
        .iter()
        .all(|f| first.join(f).is_file())
    {
        assert!(t.elapsed() < Duration::from_secs(10), "never completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(std::fs::read(first.join("recent.json")).unwrap(), b"[1]");
    assert_eq!(std::fs::read(first.join("facts.json")).unwrap(), b"[]");
    // A rename after start moves the unit; nothing recreates the old one.
    let (st, b) = s
        .post(
            "/api/characters/profile/Unit%20001/rename",
            json!({"new_name": "Renamed"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!unit(&names[1]).exists());
    assert!(unit("Renamed").join("recent.json").is_file());
}

// ------------------------------------------------------------------ recent file

#[tokio::test]
async fn recent_file_read_edit_save_round_trip() {
    let s = server().await;
    write_history(
        &s,
        "Companion",
        &json!([
            msg("human", "hello"),
            msg("ai", "hi there"),
            msg("human", "bye")
        ]),
    );
    // A legacy flat file and a bundled file are listed too, deduplicated and sorted.
    std::fs::write(s.data.join("memory").join("recent_Old.json"), b"[]").unwrap();
    std::fs::create_dir_all(s.bundle.join("memory").join("Seed")).unwrap();
    std::fs::write(
        s.bundle.join("memory").join("Seed").join("recent.json"),
        serde_json::to_vec(&json!([msg("ai", "seeded")])).unwrap(),
    )
    .unwrap();
    std::fs::write(s.bundle.join("memory").join("recent_Companion.json"), b"[]").unwrap();
    let (st, body) = s.get("/api/memory/recent_files").await;
    assert_eq!(st, 200);
    assert_eq!(
        body["files"],
        json!([
            "recent_Companion.json",
            "recent_Old.json",
            "recent_Seed.json"
        ])
    );

    let (st, r) = read(&s, "recent_Companion.json").await;
    assert_eq!(st, 200, "{r}");
    let on_disk = std::fs::read(recent_path(&s, "Companion")).unwrap();
    assert_eq!(
        r["content"].as_str().unwrap().as_bytes(),
        on_disk.as_slice()
    );
    assert_eq!(r["fingerprint"], sha(&on_disk));
    let identity = r["identity_token"].as_str().unwrap().to_string();
    assert_eq!(identity.len(), 64);
    // Reading again gives the same tokens.
    let (_, r2) = read(&s, "recent_Companion.json").await;
    assert_eq!(r2, r);

    // Edit: change one text, delete one, add one; unknown fields are not stored.
    let (st, saved) = save(
        &s,
        json!({
            "filename": "recent_Companion.json",
            "fingerprint": r["fingerprint"], "identity_token": r["identity_token"],
            "chat": [
                {"role": "human", "text": "hello!", "source_index": 0, "evil": "x"},
                {"role": "ai", "text": "hi there", "source_index": 1},
                {"role": "system", "text": "note"},
                {"role": "ai"}
            ]
        }),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    assert_eq!(saved["success"], true);
    assert_eq!(saved["need_refresh"], true);
    assert_eq!(saved["profile_name"], "Companion");
    let v = stored(&s, "Companion");
    assert_eq!(texts(&v), vec!["hello!", "hi there", "note", ""]);
    assert_eq!(v[0]["type"], "human");
    assert_eq!(v[0]["data"]["type"], "human");
    assert!(v[0].get("evil").is_none() && v[0]["data"].get("evil").is_none());
    assert_eq!(v[1]["data"]["tool_calls"], json!([]));
    let bytes = std::fs::read(recent_path(&s, "Companion")).unwrap();
    assert_eq!(saved["fingerprint"], sha(&bytes));
    // The new tokens are those of the next read.
    let (_, r3) = read(&s, "recent_Companion.json").await;
    assert_eq!(r3["fingerprint"], saved["fingerprint"]);
    assert_eq!(r3["identity_token"], saved["identity_token"]);

    // The old tokens now conflict and the answer carries the current tokens,
    // which then succeed.
    let (st, c) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
               "identity_token": r["identity_token"], "chat": []}),
    )
    .await;
    assert_eq!(st, 409);
    assert_eq!(c["code"], "RECENT_FILE_CONFLICT");
    assert_eq!(c["success"], false);
    assert_eq!(c["fingerprint"], saved["fingerprint"]);
    assert_eq!(c["identity_token"], saved["identity_token"]);
    let (st, _) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": c["fingerprint"],
               "identity_token": c["identity_token"], "chat": [{"role": "ai", "text": "only"}]}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(texts(&stored(&s, "Companion")), vec!["only"]);

    // A chat append after the read (the chat session's path) is a conflict too.
    let (_, r4) = read(&s, "recent_Companion.json").await;
    s.state
        .store
        .update("memory/Companion/recent.json", |cur: Option<Vec<Value>>| {
            let mut v = cur.unwrap_or_default();
            v.push(json!({"type": "human", "data": {"content": "appended"}}));
            (v, ())
        })
        .await
        .unwrap();
    let (st, c) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r4["fingerprint"],
               "identity_token": r4["identity_token"], "chat": []}),
    )
    .await;
    assert_eq!(st, 409);
    assert_eq!(c["code"], "RECENT_FILE_CONFLICT");
    assert_eq!(texts(&stored(&s, "Companion")), vec!["only", "appended"]);

    // Identity alone differing is a conflict.
    let (_, r5) = read(&s, "recent_Companion.json").await;
    let (st, c) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r5["fingerprint"],
               "identity_token": "0".repeat(64), "chat": []}),
    )
    .await;
    assert_eq!(
        (st, c["code"].clone()),
        (409, json!("RECENT_FILE_CONFLICT"))
    );

    // Missing tokens: 409 without a code.
    for body in [
        json!({"filename": "recent_Companion.json", "chat": []}),
        json!({"filename": "recent_Companion.json", "fingerprint": r5["fingerprint"], "chat": []}),
        json!({"filename": "recent_Companion.json", "fingerprint": null, "identity_token": null, "chat": []}),
    ] {
        let (st, c) = save(&s, body).await;
        assert_eq!(st, 409, "{c}");
        assert!(c.get("code").is_none(), "{c}");
        assert_eq!(c["success"], false);
    }

    // A bundled history is read from the bundle and saved to the data dir.
    let (st, seed) = read(&s, "recent_Seed.json").await;
    assert_eq!(st, 200);
    assert!(seed["content"].as_str().unwrap().contains("seeded"));
    let (st, _) = save(
        &s,
        json!({"filename": "recent_Seed.json", "fingerprint": seed["fingerprint"],
               "identity_token": seed["identity_token"], "chat": [{"role": "ai", "text": "mine"}]}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(texts(&stored(&s, "Seed")), vec!["mine"]);
    assert!(
        std::fs::read_to_string(s.bundle.join("memory/Seed/recent.json"))
            .unwrap()
            .contains("seeded")
    );
}

#[tokio::test]
async fn recent_file_bad_input() {
    let s = server().await;
    let before = tree(&s.data);
    for bad in [
        "",
        "recent.json",
        "recent_.json",
        "recent_../x.json",
        "../recent_Companion.json",
        "recent_a/b.json",
        "recent_a\\b.json",
        "recent_x..json",
        "settings_Companion.json",
        "recent_Companion.txt",
        "recent_a:b.json",
        "recent_%2e%2e.json",
    ] {
        let (st, b) = read(&s, bad).await;
        assert_eq!(st, 400, "{bad:?} → {b}");
        assert_eq!(b["success"], false);
        assert!(b["error"].is_string());
    }
    let (st, _) = s.get("/api/memory/recent_file").await;
    assert_eq!(st, 400);
    let (st, b) = read(&s, "recent_Nobody.json").await;
    assert_eq!(st, 404, "{b}");
    assert_eq!(b["success"], false);

    // Save: malformed bodies and validation failures are 400 and change nothing.
    let (_, r) = read(&s, "recent_Companion.json").await;
    let before_save = tree(&s.data);
    for raw in [&b"{broken"[..], b"", b"[]", b"null", b"\xff"] {
        let (st, b) = post_raw(&s, "/api/memory/recent_file/save", raw.to_vec()).await;
        assert_eq!(st, 400, "{raw:?} → {b}");
    }
    let ok = json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
                    "identity_token": r["identity_token"], "chat": []});
    let variants: Vec<Value> = vec![
        {
            let mut b = ok.clone();
            b["filename"] = json!("../x.json");
            b
        },
        {
            let mut b = ok.clone();
            b.as_object_mut().unwrap().remove("filename");
            b
        },
        {
            let mut b = ok.clone();
            b.as_object_mut().unwrap().remove("chat");
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!("x");
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!([{"text": "no role"}]);
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!([{"role": "ai", "text": 3}]);
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!([7]);
            b
        },
        {
            let mut b = ok.clone();
            b["fingerprint"] = json!(5);
            b
        },
        {
            let mut b = ok.clone();
            b["identity_token"] = json!(["x"]);
            b
        },
    ];
    for b in variants {
        let (st, resp) = save(&s, b.clone()).await;
        assert_eq!(st, 400, "{b} → {resp}");
        assert_eq!(resp["success"], false);
    }
    assert_eq!(tree(&s.data), before_save);
    let _ = before;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_saves_from_one_read_exactly_one_wins() {
    let s = Arc::new(server().await);
    write_history(&s, "Companion", &json!([msg("human", "base")]));
    let (_, r) = read(&s, "recent_Companion.json").await;
    let mut handles = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        let r = r.clone();
        handles.push(tokio::spawn(async move {
            let (st, b) = save(
                &s,
                json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
                       "identity_token": r["identity_token"],
                       "chat": [{"role": "human", "text": format!("writer {i}")}]}),
            )
            .await;
            (i, st, b)
        }));
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for h in handles {
        let (i, st, b) = h.await.unwrap();
        match st {
            200 => winners.push((i, b)),
            409 => losers.push(b),
            other => panic!("unexpected {other}: {b}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one save wins");
    assert_eq!(losers.len(), 7);
    let (wi, wb) = &winners[0];
    assert_eq!(
        texts(&stored(&s, "Companion")),
        vec![format!("writer {wi}")]
    );
    for l in &losers {
        assert_eq!(l["code"], "RECENT_FILE_CONFLICT");
        assert_eq!(l["fingerprint"], wb["fingerprint"]);
        assert_eq!(l["identity_token"], wb["identity_token"]);
    }
    // A loser reads again (tokens from the conflict) and succeeds.
    let (st, _) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": losers[0]["fingerprint"],
               "identity_token": losers[0]["identity_token"],
               "chat": [{"role": "human", "text": "merged"}]}),
    )
    .await;
    assert_eq!(st, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_at_its_boundary_and_one_past() {
    let s = server().await;
    let tokens = |r: &Value| (r["fingerprint"].clone(), r["identity_token"].clone());
    let body = |t: &(Value, Value), chat: Vec<Value>| {
        json!({"filename": "recent_Companion.json", "fingerprint": t.0,
               "identity_token": t.1, "chat": chat})
    };
    let (_, r) = read(&s, "recent_Companion.json").await;
    let t = tokens(&r);

    // Entries: 10,001 → 400; nothing written.
    let (st, b) = save(
        &s,
        body(&t, vec![json!({"role": "ai", "text": "x"}); 10_001]),
    )
    .await;
    assert_eq!(st, 400, "{b}");
    // Text of one message: 32,769 characters (multi-byte) → 400.
    let (st, _) = save(
        &s,
        body(&t, vec![json!({"role": "ai", "text": "猫".repeat(32_769)})]),
    )
    .await;
    assert_eq!(st, 400);
    // Total: 64 × 32,768 + 1 → 400.
    let mut chat = vec![json!({"role": "ai", "text": "x".repeat(32_768)}); 64];
    chat.push(json!({"role": "human", "text": "y"}));
    let (st, _) = save(&s, body(&t, chat)).await;
    assert_eq!(st, 400);
    let (_, again) = read(&s, "recent_Companion.json").await;
    assert_eq!(
        again["fingerprint"], r["fingerprint"],
        "rejected saves wrote nothing"
    );

    // One message of exactly 32,768 (multi-byte) characters.
    let (st, saved) = save(
        &s,
        body(&t, vec![json!({"role": "ai", "text": "猫".repeat(32_768)})]),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    let t = (
        saved["fingerprint"].clone(),
        saved["identity_token"].clone(),
    );
    // Exactly 2,097,152 characters in total.
    let chat = vec![json!({"role": "ai", "text": "x".repeat(32_768)}); 64];
    let (st, saved) = save(&s, body(&t, chat)).await;
    assert_eq!(st, 200, "{saved}");
    let t = (
        saved["fingerprint"].clone(),
        saved["identity_token"].clone(),
    );

    // Exactly 10,000 entries with 2,000,000 characters: the benchmark history.
    let chat: Vec<Value> = (0..10_000)
        .map(|i| json!({"role": if i % 2 == 0 { "human" } else { "ai" }, "text": "z".repeat(200)}))
        .collect();
    let started = Instant::now();
    let (st, saved) = save(&s, body(&t, chat)).await;
    let first = started.elapsed();
    assert_eq!(st, 200, "{saved}");
    assert_eq!(stored(&s, "Companion").as_array().unwrap().len(), 10_000);

    let (st, r) = read(&s, "recent_Companion.json").await;
    assert_eq!(st, 200);
    assert_eq!(r["fingerprint"], saved["fingerprint"]);
    eprintln!("10,000-entry save over HTTP (debug build): {first:?}");
}

#[tokio::test]
async fn theater_messages_are_read_only() {
    let s = server().await;
    let snapshot = json!([
        msg("human", "one"),
        theater_msg("capsule A"),
        msg("ai", "two"),
        msg("human", "three"),
        theater_msg("capsule B"),
    ]);
    write_history(&s, "Companion", &snapshot);
    let read_tokens = |r: &Value| (r["fingerprint"].clone(), r["identity_token"].clone());
    let body = |t: &(Value, Value), chat: Value| {
        json!({"filename": "recent_Companion.json", "fingerprint": t.0,
               "identity_token": t.1, "chat": chat})
    };

    // 1. Without source_index: the client drops the theater messages and deletes "two".
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, saved) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([{"role": "human", "text": "one"}, {"role": "human", "text": "three"}]),
        ),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    let v = stored(&s, "Companion");
    assert_eq!(texts(&v), vec!["one", "capsule A", "three", "capsule B"]);
    assert_eq!(v[1], snapshot[1], "theater message kept verbatim");
    assert_eq!(v[3], snapshot[4]);

    // 2. With source_index: edit ordinary texts, try to edit a theater text.
    write_history(&s, "Companion", &snapshot);
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, saved) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([
                {"role": "human", "text": "ONE", "source_index": 0},
                {"role": "system", "text": "hacked capsule", "source_index": 1, "theater": true},
                {"role": "ai", "text": "TWO", "source_index": 2},
                {"role": "human", "text": "THREE", "source_index": 3}
            ]),
        ),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    let v = stored(&s, "Companion");
    assert_eq!(
        texts(&v),
        vec!["ONE", "capsule A", "TWO", "THREE", "capsule B"]
    );
    assert_eq!(v[1], snapshot[1]);
    assert_eq!(v[4], snapshot[4]);

    // 3. Without source_index an edited entry matches nothing while theater
    //    messages are unmatched: 409 RECENT_FILE_THEATER_READONLY, nothing written.
    write_history(&s, "Companion", &snapshot);
    let before = std::fs::read(recent_path(&s, "Companion")).unwrap();
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, b) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([{"role": "human", "text": "edited one"}, {"role": "ai", "text": "two"}]),
        ),
    )
    .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "RECENT_FILE_THEATER_READONLY");
    assert_eq!(std::fs::read(recent_path(&s, "Companion")).unwrap(), before);

    // 4. The same edit echoing the theater messages (no source_index) is accepted.
    let (st, b) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([
                {"role": "human", "text": "edited one"},
                {"role": "system", "text": "capsule A", "theater": true},
                {"role": "ai", "text": "two"},
                {"role": "system", "text": "capsule B", "theater": true}
            ]),
        ),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let v = stored(&s, "Companion");
    assert_eq!(
        texts(&v),
        vec!["edited one", "capsule A", "two", "capsule B"]
    );
    assert_eq!(v[3], snapshot[4]);

    // 5. An emptied chat keeps only the theater messages.
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, _) = save(&s, body(&read_tokens(&r), json!([]))).await;
    assert_eq!(st, 200);
    assert_eq!(
        texts(&stored(&s, "Companion")),
        vec!["capsule A", "capsule B"]
    );
}

// ------------------------------------------------------------------ review

/// A loopback model server whose answers wait for `gate` permits.
async fn gated_llm(gate: Arc<tokio::sync::Semaphore>, reply: String) -> Upstream {
    use axum::routing::post;
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let gate = gate.clone();
            let reply = reply.clone();
            async move {
                if let Ok(p) = gate.acquire().await {
                    p.forget();
                }
                axum::Json(json!({
                    "id": "x", "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                }))
            }
        }),
    );
    Upstream::start(router).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_applies_and_a_save_cancels_it() {
    let s = server().await;
    write_history(
        &s,
        "Companion",
        &json!([
            msg("human", "helo helo"),
            theater_msg("cap"),
            msg("ai", "fine")
        ]),
    );
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let llm = gated_llm(gate.clone(), "[\"hello\", \"fine\"]".into()).await;
    s.configure_llm(&format!("{}/v1", llm.base)).await;

    // Not cancelled: the corrected text is written, theater untouched.
    let h = review::start(&s.state, "Companion").unwrap();
    gate.add_permits(1);
    let out = tokio::time::timeout(Duration::from_secs(10), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, ReviewOutcome::Applied(1));
    let v = stored(&s, "Companion");
    assert_eq!(texts(&v), vec!["hello", "cap", "fine"]);
    assert_eq!(v[1], theater_msg("cap"));

    // In flight while the model thinks; a save cancels it and wins.
    let h = review::start(&s.state, "Companion").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while llm.requests_to("/chat/completions").len() < 2 {
        assert!(Instant::now() < deadline, "review never reached the model");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rt = companiond_memory::MemoryRuntime::of(&s.state);
    assert_eq!(rt.tasks.in_flight("Companion"), 1);
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, b) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
               "identity_token": r["identity_token"],
               "chat": [{"role": "human", "text": "user edit", "source_index": 0},
                        {"role": "ai", "text": "fine", "source_index": 2}]}),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let out = tokio::time::timeout(Duration::from_secs(5), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, ReviewOutcome::Cancelled);
    assert_eq!(rt.tasks.in_flight("Companion"), 0);
    gate.add_permits(10);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        texts(&stored(&s, "Companion")),
        vec!["user edit", "cap", "fine"]
    );

    // A history that changed under the review is not overwritten.
    let h = review::start(&s.state, "Companion").unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        ReviewOutcome::Applied(1),
        "reply [hello, fine] changes 'user edit'"
    );
    // Turning the toggle off cancels pending reviews.
    let gate2 = Arc::new(tokio::sync::Semaphore::new(0));
    let llm2 = gated_llm(gate2.clone(), "[\"a\", \"b\"]".into()).await;
    s.configure_llm(&format!("{}/v1", llm2.base)).await;
    let h = review::start(&s.state, "Companion").unwrap();
    while llm2.requests_to("/chat/completions").is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (st, _) = s
        .post("/api/memory/review_config", json!({"enabled": false}))
        .await;
    assert_eq!(st, 200);
    let out = tokio::time::timeout(Duration::from_secs(5), h.outcome)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, ReviewOutcome::Cancelled);
}

// ------------------------------------------------------------------ fence

#[tokio::test]
async fn writes_answer_409_while_cloud_storage_is_fenced() {
    let s = server().await;
    let (_, r) = read(&s, "recent_Companion.json").await;
    std::fs::create_dir_all(s.data.join("state")).unwrap();
    std::fs::write(
        s.data.join("state/root_state.json"),
        br#"{"mode": "bootstrap_importing"}"#,
    )
    .unwrap();
    let before = tree(&s.data);
    let (st, b) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
               "identity_token": r["identity_token"], "chat": []}),
    )
    .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "CLOUDSAVE_WRITE_FENCE_ACTIVE");
    assert_eq!(b["mode"], "bootstrap_importing");
    let (st, b) = s
        .post("/api/memory/review_config", json!({"enabled": false}))
        .await;
    assert_eq!(
        (st, b["code"].clone()),
        (409, json!("CLOUDSAVE_WRITE_FENCE_ACTIVE"))
    );
    let (st, _) = s
        .post(
            "/api/memory/update_character_name",
            json!({"old_name": "Companion", "new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409);
    assert_eq!(tree(&s.data), before);
    // Reads still work; lowering the fence lets the save through.
    let (st, _) = s.get("/api/memory/review_config").await;
    assert_eq!(st, 200);
    std::fs::write(
        s.data.join("state/root_state.json"),
        br#"{"mode": "normal"}"#,
    )
    .unwrap();
    let (st, _) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
               "identity_token": r["identity_token"], "chat": []}),
    )
    .await;
    assert_eq!(st, 200);
}

// ------------------------------------------------------------------ rename

async fn create_character(s: &TestServer, name: &str) {
    let (st, b) = s
        .post(
            "/api/characters/profile",
            json!({"name": name, "nickname": "n"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
}

async fn character_names(s: &TestServer) -> (Vec<String>, String) {
    let (_, b) = s.get("/api/characters").await;
    let names = b["characters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    (names, b["current"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_moves_everything_and_repeats_as_a_no_op() {
    let s = server().await;
    create_character(&s, "Mika").await;
    s.post("/api/characters/current", json!({"name": "Mika"}))
        .await;
    let (st, _) = s.get("/api/memory/recent_files").await;
    assert_eq!(st, 200);
    write_history(
        &s,
        "Mika",
        &json!([
            msg("human", "Mika: hi"),
            msg("ai", "[Mika] hello, EMika: stays")
        ]),
    );
    std::fs::write(
        s.data.join("memory/Mika/facts.json"),
        br#"[{"fact": "likes tea"}]"#,
    )
    .unwrap();
    // A legacy flat file of Mika is folded into the directory.
    std::fs::write(s.data.join("memory/surfaced_Mika.json"), br#"["legacy"]"#).unwrap();
    std::fs::remove_file(s.data.join("memory/Mika/surfaced.json")).unwrap();

    // An open chat session follows the rename.
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url("/ws/Mika"))
        .await
        .unwrap();
    let first = ws.next().await.unwrap().unwrap();
    assert!(first.to_string().contains("session_started"));
    assert!(s.state.sessions.is_active("Mika"));

    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": " Rin "}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["memory_renamed"], true);
    assert_eq!(b["memory_server_reloaded"], true);
    let (names, current) = character_names(&s).await;
    assert_eq!(names, vec!["Companion", "Rin"]);
    assert_eq!(current, "Rin");
    let (_, list) = s.get("/api/characters").await;
    let rin = &list["characters"][1];
    assert_eq!(rin["nickname"], "n");
    assert_eq!(
        rin["_reserved"]["ai_context"]["rename_events"][0]["old_name"],
        "Mika"
    );
    assert!(!s.data.join("memory/Mika").exists());
    assert!(!s.data.join("memory/surfaced_Mika.json").exists());
    let dir = s.data.join("memory/Rin");
    for f in companiond_memory::UNIT_FILES {
        assert!(dir.join(f).is_file(), "{f}");
    }
    assert_eq!(
        std::fs::read(dir.join("facts.json")).unwrap(),
        br#"[{"fact": "likes tea"}]"#
    );
    assert_eq!(
        std::fs::read(dir.join("surfaced.json")).unwrap(),
        br#"["legacy"]"#
    );
    assert_eq!(
        texts(&stored(&s, "Rin")),
        vec!["Rin: hi", "[Rin] hello, EMika: stays"]
    );
    let (st, _) = read(&s, "recent_Rin.json").await;
    assert_eq!(st, 200);
    let (st, _) = read(&s, "recent_Mika.json").await;
    assert_eq!(st, 404);

    // The session continues under the new name and is told.
    assert!(s.state.sessions.is_active("Rin"));
    assert!(s.state.sessions.get("Mika").is_none());
    let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let frame: Value = serde_json::from_str(frame.to_text().unwrap()).unwrap();
    assert_eq!(
        frame,
        json!({"type": "character_renamed", "old_name": "Mika", "new_name": "Rin"})
    );
    ws.send(tokio_tungstenite::tungstenite::Message::Close(None))
        .await
        .ok();

    // The follow-up (alias) is an idempotent no-op.
    let (st, b) = s
        .post(
            "/api/memory/update_character_name",
            json!({"old_name": "Mika", "new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["changed"], false);
    assert_eq!(b["already_renamed"], true);
    assert_eq!(b["exists_after"], true);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!((st, b["changed"].clone()), (200, json!(false)));

    // Old storage reappearing while the config holds the new name → 409.
    std::fs::create_dir_all(s.data.join("memory/Mika")).unwrap();
    let (st, b) = s
        .post(
            "/api/memory/update_character_name",
            json!({"old_name": "Mika", "new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    std::fs::remove_dir(s.data.join("memory/Mika")).unwrap();

    // Rename back through the alias; dotted existing names are accepted as old names.
    let (st, b) = s
        .post(
            "/api/memory/update_character_name",
            json!({"old_name": "Rin", "new_name": "Mika"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(character_names(&s).await.0, vec!["Companion", "Mika"]);
}

#[tokio::test]
async fn rename_refuses_bad_names() {
    let s = server().await;
    create_character(&s, "Mika").await;
    let before = tree(&s.data);
    let cases: Vec<(Value, u16)> = vec![
        (json!({"old_name": "Mika", "new_name": "a/b"}), 400),
        (json!({"old_name": "Mika", "new_name": "../x"}), 400),
        (json!({"old_name": "Mika", "new_name": "api"}), 400),
        (json!({"old_name": "Mika", "new_name": "a.b"}), 400),
        (json!({"old_name": "Mika", "new_name": "CON"}), 400),
        (json!({"old_name": "Mika", "new_name": "x".repeat(61)}), 400),
        (json!({"old_name": "Mika", "new_name": ""}), 400),
        (json!({"old_name": "Mika"}), 400),
        (json!({"new_name": "Rin"}), 400),
        (json!({"old_name": 3, "new_name": "Rin"}), 400),
        (json!({"old_name": "Mika", "new_name": "Mika"}), 400),
        (json!({"old_name": "../Mika", "new_name": "Rin"}), 400),
        (json!({"old_name": "Nobody", "new_name": "Rin"}), 404),
        (json!({"old_name": "Mika", "new_name": "Companion"}), 409),
    ];
    for (body, want) in cases {
        let (st, b) = s
            .post("/api/memory/update_character_name", body.clone())
            .await;
        assert_eq!(st, want, "{body} → {b}");
        assert_eq!(b["success"], false);
    }
    let (st, _) = post_raw(&s, "/api/memory/update_character_name", b"{broken".to_vec()).await;
    assert_eq!(st, 400);
    let (st, _) = post_raw(&s, "/api/characters/profile/Mika/rename", b"".to_vec()).await;
    assert_eq!(st, 400);
    let (st, _) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "ws"}),
        )
        .await;
    assert_eq!(st, 400);
    assert_eq!(tree(&s.data), before);
}

#[tokio::test]
async fn rename_rolls_back_every_step_on_injected_failures() {
    let s = server().await;
    create_character(&s, "Mika").await;
    s.post("/api/characters/current", json!({"name": "Mika"}))
        .await;
    s.get("/api/memory/recent_files").await;
    write_history(&s, "Mika", &json!([msg("human", "Mika: hello")]));
    std::fs::write(s.data.join("memory/recent_meta.json"), b"{}").unwrap();
    let chars_file = s.data.join("config/characters.json");

    // (a) The reload fails after storage moved: a damaged time index.
    std::fs::write(
        s.data.join("memory/Mika/time_indexed.db"),
        b"this is not sqlite",
    )
    .unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 500, "{b}");
    assert_eq!(b["code"], "MEMORY_RELOAD_FAILED");
    assert_eq!(b["rolled_back"], true);
    assert_eq!(tree(&s.data), before, "state byte-identical after rollback");
    assert_eq!(
        character_names(&s).await,
        (vec!["Companion".into(), "Mika".into()], "Mika".into())
    );
    assert!(s.state.sessions.get("Mika").is_some() && s.state.sessions.get("Rin").is_none());
    let conn = rusqlite::Connection::open(s.data.join("memory/Mika/time_indexed.db")).unwrap();
    drop(conn);
    std::fs::remove_file(s.data.join("memory/Mika/time_indexed.db")).unwrap();
    s.get("/api/memory/recent_files").await; // recreates a good time index

    // (b) A merge into an existing directory meets a child in the way after
    //     other children moved.
    std::fs::create_dir_all(s.data.join("memory/Rin")).unwrap();
    std::fs::write(s.data.join("memory/Rin/time_indexed.db"), b"orphan").unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "destination_exists");
    assert_eq!(tree(&s.data), before);
    assert_eq!(character_names(&s).await.0, vec!["Companion", "Mika"]);
    std::fs::remove_dir_all(s.data.join("memory/Rin")).unwrap();

    // (c) A file in the way of the new directory.
    std::fs::write(s.data.join("memory/Rin"), b"file in the way").unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(tree(&s.data), before);
    std::fs::remove_file(s.data.join("memory/Rin")).unwrap();

    // (d) The characters file cannot be written (a directory in its place):
    //     nothing moves, 409 non-writable storage.
    let saved_chars = std::fs::read(&chars_file).unwrap();
    std::fs::remove_file(&chars_file).unwrap();
    std::fs::create_dir(&chars_file).unwrap();
    std::fs::write(chars_file.join("keep"), b"x").unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "STORAGE_NOT_WRITABLE");
    assert_eq!(tree(&s.data), before);
    std::fs::remove_dir_all(&chars_file).unwrap();
    std::fs::write(&chars_file, &saved_chars).unwrap();

    // (e) A read-only memory root (only meaningful without root privileges).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let root = s.data.join("memory");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o555)).unwrap();
        let privileged = std::fs::write(root.join(".probe"), b"x").is_ok();
        let _ = std::fs::remove_file(root.join(".probe"));
        if !privileged {
            let before = tree(&s.data);
            let (st, b) = s
                .post(
                    "/api/characters/profile/Mika/rename",
                    json!({"new_name": "Rin"}),
                )
                .await;
            assert_eq!(st, 409, "{b}");
            assert_eq!(tree(&s.data), before);
        } else {
            eprintln!("running with privileges: read-only directory case not observable");
        }
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    // Finally the rename succeeds.
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(s.data.join("memory/recent_meta.json").exists());
}

// ------------------------------------------------------------------ toggles

fn core_config(s: &TestServer) -> PathBuf {
    s.data.join("config/core_config.json")
}

#[tokio::test]
async fn toggles_follow_every_rule() {
    let s = server().await;
    let _ = std::fs::remove_file(core_config(&s));
    for path in [
        "/api/memory/review_config",
        "/api/memory/powerful_memory_config",
    ] {
        let (st, b) = s.get(path).await;
        assert_eq!((st, b), (200, json!({"enabled": true})), "{path} default");
    }
    // Only a missing file starts a new configuration.
    let (st, b) = s
        .post("/api/memory/review_config", json!({"enabled": false}))
        .await;
    assert_eq!((st, b), (200, json!({"success": true, "enabled": false})));
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg, json!({"recent_memory_auto_review": false}));
    assert_eq!(
        s.get("/api/memory/review_config").await.1,
        json!({"enabled": false})
    );

    // Other keys are kept.
    std::fs::write(
        core_config(&s),
        br#"{"coreApi": "qwen", "recent_memory_auto_review": false}"#,
    )
    .unwrap();
    let (st, _) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": true}),
        )
        .await;
    assert_eq!(st, 200);
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg["coreApi"], "qwen");
    assert_eq!(cfg["powerful_memory_enabled"], true);
    assert_eq!(cfg["recent_memory_auto_review"], false);

    // Bad POST bodies → 400, file untouched.
    let before = std::fs::read(core_config(&s)).unwrap();
    let bad: Vec<&[u8]> = vec![
        b"null",
        b"[]",
        b"true",
        b"0",
        b"\"false\"",
        b"{}",
        br#"{"enabled": null}"#,
        br#"{"enabled": "false"}"#,
        br#"{"enabled": 0}"#,
        br#"{"enabled": 1}"#,
        br#"{"enabled": []}"#,
        br#"{"enabled": {}}"#,
        b"{broken",
        b"",
        b"\xff",
    ];
    for path in [
        "/api/memory/review_config",
        "/api/memory/powerful_memory_config",
    ] {
        for body in &bad {
            let (st, b) = post_raw(&s, path, body.to_vec()).await;
            assert_eq!(st, 400, "{path} {body:?} → {b}");
            assert_eq!(b["success"], false);
            assert!(b["error"].is_string());
        }
    }
    assert_eq!(std::fs::read(core_config(&s)).unwrap(), before);

    // Corrupt files: GET 503 {error} without enabled; POST refuses and keeps the bytes.
    let corrupt: Vec<&[u8]> = vec![b"{broken", b"[]", b"null", b"\"text\"", b"\xff\xfe", b""];
    for raw in corrupt {
        std::fs::write(core_config(&s), raw).unwrap();
        for path in [
            "/api/memory/review_config",
            "/api/memory/powerful_memory_config",
        ] {
            let (st, b) = s.get(path).await;
            assert_eq!(st, 503, "{raw:?} {b}");
            assert!(b["error"].is_string());
            assert!(b.get("enabled").is_none() && b.get("code").is_none(), "{b}");
            let (st, b) = s.post(path, json!({"enabled": true})).await;
            assert_eq!(b["success"], false, "{raw:?} {b}");
            assert_eq!(st, 503);
            assert_eq!(std::fs::read(core_config(&s)).unwrap(), raw);
        }
    }

    // A non-boolean stored value: 503 with code; the keys are judged independently;
    // a valid POST repairs it and keeps the other keys.
    for v in [
        json!(null),
        json!("false"),
        json!(0),
        json!(1),
        json!([]),
        json!({}),
    ] {
        std::fs::write(
            core_config(&s),
            serde_json::to_vec(&json!({"recent_memory_auto_review": v, "other": 7})).unwrap(),
        )
        .unwrap();
        let (st, b) = s.get("/api/memory/review_config").await;
        assert_eq!(st, 503);
        assert_eq!(b["code"], "invalid_memory_setting");
        assert!(b.get("enabled").is_none());
        assert_eq!(
            s.get("/api/memory/powerful_memory_config").await,
            (200, json!({"enabled": true}))
        );
    }
    let (st, _) = s
        .post("/api/memory/review_config", json!({"enabled": true}))
        .await;
    assert_eq!(st, 200);
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg, json!({"recent_memory_auto_review": true, "other": 7}));
    assert_eq!(
        s.get("/api/memory/review_config").await,
        (200, json!({"enabled": true}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toggle_writes_serialise_and_keep_other_keys() {
    let s = Arc::new(server().await);
    std::fs::write(core_config(&s), br#"{"coreApi": "keep-me"}"#).unwrap();
    let mut handles = Vec::new();
    for i in 0..20 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let path = if i % 2 == 0 {
                "/api/memory/review_config"
            } else {
                "/api/memory/powerful_memory_config"
            };
            let (st, _) = s.post(path, json!({"enabled": i % 4 < 2})).await;
            assert_eq!(st, 200);
            let (st, b) = s.get(path).await;
            assert_eq!(st, 200);
            assert!(b["enabled"].is_boolean());
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg["coreApi"], "keep-me");
    assert!(cfg["recent_memory_auto_review"].is_boolean());
    assert!(cfg["powerful_memory_enabled"].is_boolean());
}

#[tokio::test]
async fn powerful_memory_off_migrates_first() {
    let s = server().await;
    let refl = s.data.join("memory/Companion/reflections.json");
    std::fs::write(
        &refl,
        serde_json::to_vec(&json!([
            {"id": "r1", "status": "confirmed", "confirmed_at": "2020-01-01T00:00:00Z"},
            {"id": "r2", "status": "pending", "created_at": "2020-01-01T00:00:00Z"}
        ]))
        .unwrap(),
    )
    .unwrap();
    // A failing migration (another character's reflections are unreadable)
    // leaves the setting unsaved.
    std::fs::create_dir_all(s.data.join("memory/Other")).unwrap();
    std::fs::write(s.data.join("memory/Other/reflections.json"), b"{not json").unwrap();
    std::fs::write(
        core_config(&s),
        br#"{"powerful_memory_enabled": true, "x": 1}"#,
    )
    .unwrap();
    let cfg_before = std::fs::read(core_config(&s)).unwrap();
    let refl_before = std::fs::read(&refl).unwrap();
    let (st, b) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(b["success"], false, "{b}");
    assert!(b["error"].as_str().unwrap().contains("reflections"));
    assert_eq!(st, 500);
    assert_eq!(std::fs::read(core_config(&s)).unwrap(), cfg_before);
    assert_eq!(
        std::fs::read(&refl).unwrap(),
        refl_before,
        "all-or-nothing migration"
    );
    assert_eq!(
        s.get("/api/memory/powerful_memory_config").await.1,
        json!({"enabled": true})
    );

    // Migration succeeds → anchors reset, then the value is saved.
    std::fs::remove_dir_all(s.data.join("memory/Other")).unwrap();
    let (st, b) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!((st, b), (200, json!({"success": true, "enabled": false})));
    let r: Value = serde_json::from_slice(&std::fs::read(&refl).unwrap()).unwrap();
    assert_ne!(r[0]["confirmed_at"], "2020-01-01T00:00:00Z");
    assert!(r[0]["age_anchor_reset_at"].is_string());
    assert!(
        r[1].get("age_anchor_reset_at").is_none(),
        "pending ones untouched"
    );
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg, json!({"powerful_memory_enabled": false, "x": 1}));

    // Already boolean false: no migration again.
    let stamp = std::fs::read(&refl).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (st, _) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(std::fs::read(&refl).unwrap(), stamp);
    // An invalid legacy value counts as unknown: the migration runs.
    std::fs::write(core_config(&s), br#"{"powerful_memory_enabled": "no"}"#).unwrap();
    let (st, _) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(st, 200);
    assert_ne!(std::fs::read(&refl).unwrap(), stamp);
}

// ------------------------------------------------------------------ legacy

fn legacy_server_opts(big: bool) -> TestOptions {
    TestOptions {
        edit: Some(Box::new(|o| {
            let base = o.data_dir.parent().unwrap().to_path_buf();
            o.legacy_memory_roots = vec![
                base.join("legacy1"),
                base.join("legacy2").join("."),
                base.join("missing-root"),
                o.data_dir.join("memory"),
                base.join("legacy1"),
            ];
        })),
        prepare: Some(Box::new(move |data, _| {
            let base = data.parent().unwrap();
            let l1 = base.join("legacy1");
            std::fs::create_dir_all(l1.join("Companion")).unwrap();
            std::fs::write(l1.join("Companion/recent.json"), vec![b'x'; 100]).unwrap();
            std::fs::write(l1.join("Companion/facts.json"), vec![b'y'; 23]).unwrap();
            std::fs::create_dir_all(l1.join("Ghost/sub")).unwrap();
            std::fs::write(l1.join("Ghost/sub/a.json"), b"12345").unwrap();
            std::fs::write(l1.join("recent_Flat.json"), b"[]").unwrap();
            std::fs::write(l1.join(".hidden"), b"h").unwrap();
            std::fs::create_dir_all(l1.join("_private")).unwrap();
            let outside = base.join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("secret.txt"), b"do not delete").unwrap();
            #[cfg(unix)]
            std::os::unix::fs::symlink(&outside, l1.join("link")).unwrap();
            let l2 = base.join("legacy2");
            std::fs::create_dir_all(l2.join("Big")).unwrap();
            if big {
                for i in 0..50_001 {
                    std::fs::File::create(l2.join("Big").join(format!("{i}"))).unwrap();
                }
            }
        })),
        ..Default::default()
    }
}

#[tokio::test]
async fn legacy_scan_reports_without_changing_anything() {
    let s = TestServer::start_with(&[companiond_memory::FAMILY], legacy_server_opts(true)).await;
    let base = s.data.parent().unwrap().to_path_buf();
    let before = tree(&base.join("legacy1"));
    let (st, b) = s.get("/api/memory/legacy/scan").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(
        b["runtime_memory_dir"],
        s.data.join("memory").to_string_lossy().as_ref()
    );
    let roots = b["legacy_roots"].as_array().unwrap();
    assert_eq!(roots.len(), 3, "deduplicated, runtime dir dropped: {b}");
    assert_eq!(roots[2]["exists"], false);
    assert_eq!(roots[2]["entries"], json!([]));
    let l1 = &roots[0];
    assert_eq!(l1["exists"], true);
    let names: Vec<&str> = l1["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["Companion", "Ghost", "recent_Flat.json"],
        "hidden, _ and symlinks skipped"
    );
    let e0 = &l1["entries"][0];
    assert_eq!(e0["is_dir"], true);
    assert_eq!(e0["size_bytes"], 123);
    assert_eq!(e0["is_unlinked"], false);
    assert_eq!(e0["runtime_has_same_name"], true);
    assert_eq!(
        e0["path"],
        base.join("legacy1/Companion").to_string_lossy().as_ref()
    );
    let e1 = &l1["entries"][1];
    assert_eq!(
        (e1["size_bytes"].clone(), e1["is_unlinked"].clone()),
        (json!(5), json!(true))
    );
    assert_eq!(e1["runtime_has_same_name"], false);
    assert_eq!(l1["entries"][2]["is_dir"], false);
    let big = &roots[1]["entries"][0];
    assert_eq!(big["name"], "Big");
    assert_eq!(big["size_bytes"], -1, "over the safety scan limit");
    assert_eq!(b["total_entries"], 4);
    assert_eq!(b["total_size_bytes"], 123 + 5 + 2);
    assert_eq!(tree(&base.join("legacy1")), before);
}

#[tokio::test]
async fn legacy_purge_never_leaves_a_recognised_root() {
    let s = TestServer::start_with(&[companiond_memory::FAMILY], legacy_server_opts(false)).await;
    let base = s.data.parent().unwrap().to_path_buf();
    let l1 = base.join("legacy1");
    let p = |x: &Path| x.to_string_lossy().into_owned();
    let outside_before = tree(&base.join("outside"));
    let runtime_before = tree(&s.data);
    let hostile: Vec<Value> = vec![
        json!("legacy1/Ghost"),
        json!("./Ghost"),
        json!(""),
        json!("   "),
        json!(42),
        json!(null),
        json!(p(&l1)),
        json!(format!("{}/", p(&l1))),
        json!(format!("{}/.", p(&l1))),
        json!(format!("{}/Ghost/../../outside", p(&l1))),
        json!(format!("{}/..", p(&l1))),
        json!(format!("{}\\..\\outside", p(&l1))),
        json!(p(&l1.join("link").join("secret.txt"))),
        json!(p(&base.join("outside"))),
        json!(p(&base.join("outside/secret.txt"))),
        json!(p(&s.data.join("memory"))),
        json!(p(&s.data.join("memory/Companion"))),
        json!(p(&s.data)),
        json!(p(&base)),
        json!("/"),
        json!(format!("{}/Gh\0ost", p(&l1))),
        json!(p(&base.join("legacy1-evil"))),
    ];
    let n = hostile.len();
    let (st, b) = s
        .post("/api/memory/legacy/purge", json!({"paths": hostile}))
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["removed"], json!([]), "{b}");
    assert_eq!(b["errors"].as_array().unwrap().len(), n, "{b}");
    assert_eq!(tree(&base.join("outside")), outside_before);
    assert_eq!(tree(&s.data), runtime_before);
    assert!(l1.join("Ghost/sub/a.json").exists());

    // Legitimate targets: a directory, a file, a symlink entry (removed itself,
    // never followed) and a missing target (counts as removed).
    let (st, b) = s
        .post(
            "/api/memory/legacy/purge",
            json!({"paths": [p(&l1.join("Ghost")), p(&l1.join("recent_Flat.json")),
                              p(&l1.join("link")), p(&l1.join("never-existed")),
                              format!("{}/./Companion", p(&l1))]}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["errors"], json!([]), "{b}");
    assert_eq!(b["removed"].as_array().unwrap().len(), 5);
    assert!(!l1.join("Ghost").exists());
    assert!(!l1.join("recent_Flat.json").exists());
    assert!(l1.join("link").symlink_metadata().is_err());
    assert!(!l1.join("Companion").exists());
    assert_eq!(
        tree(&base.join("outside")),
        outside_before,
        "link target untouched"
    );
    assert!(l1.exists(), "the root itself stays");
    assert_eq!(tree(&s.data), runtime_before);

    // Malformed bodies → 400.
    for raw in [
        &b"{broken"[..],
        b"",
        b"{}",
        br#"{"paths": []}"#,
        br#"{"paths": "x"}"#,
        b"[]",
    ] {
        let (st, b) = post_raw(&s, "/api/memory/legacy/purge", raw.to_vec()).await;
        assert_eq!(st, 400, "{raw:?} {b}");
    }
}

#[tokio::test]
async fn legacy_purge_without_recognised_roots_is_409() {
    let s = TestServer::start_with(
        &[companiond_memory::FAMILY],
        TestOptions {
            edit: Some(Box::new(|o| {
                o.legacy_memory_roots = vec![
                    o.data_dir.join("memory"),
                    PathBuf::from("/nonexistent/legacy"),
                ];
            })),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = s
        .post(
            "/api/memory/legacy/purge",
            json!({"paths": ["/nonexistent/legacy/x"]}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["success"], false);
    let (st, b) = s.get("/api/memory/legacy/scan").await;
    assert_eq!(st, 200);
    assert_eq!(b["legacy_roots"].as_array().unwrap().len(), 1);
    assert_eq!(b["total_entries"], 0);
}

#[tokio::test]
async fn memory_service_releases_and_reloads_for_imports() {
    let s = server().await;
    let svc = s
        .state
        .hooks
        .memory_service()
        .expect("the memory family installs its service");
    svc.release("Companion".into()).await.unwrap();
    svc.reload("Companion".into()).await.unwrap();
    // A missing unit file is recreated; a database that is not SQLite fails the reload.
    let dir = s.data.join("memory").join("Companion");
    std::fs::remove_file(dir.join("facts.json")).unwrap();
    svc.reload("Companion".into()).await.unwrap();
    assert!(dir.join("facts.json").is_file());
    std::fs::write(
        dir.join("time_indexed.db"),
        b"definitely not sqlite, definitely not sqlite",
    )
    .unwrap();
    assert!(svc.reload("Companion".into()).await.is_err());
    assert!(svc.reload("../escape".into()).await.is_err());
}

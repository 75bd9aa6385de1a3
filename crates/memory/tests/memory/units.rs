//! The memory unit files of every character and the routes that exist.

use crate::common::*;

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

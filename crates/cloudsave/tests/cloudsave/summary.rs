//! `GET /api/cloudsave/summary` and `GET /api/cloudsave/character/{name}`:
//! names, workshop status, WAL databases and the caches behind the summary.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn unicode_names_workshop_status_and_wal_databases() {
    let data_ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data_ws.path().join("31337")).unwrap();
    let ws_dir = data_ws.path().to_path_buf();
    let s = companiond_core::testkit::TestServer::start_with(
        &[companiond_cloudsave::FAMILY],
        companiond_core::testkit::TestOptions {
            edit: Some(Box::new(move |o| o.workshop_dir = Some(ws_dir))),
            ..Default::default()
        },
    )
    .await;
    let name = "小雪 (Yuki)";
    let url_name = "%E5%B0%8F%E9%9B%AA%20(Yuki)";
    create_character(
        &s,
        name,
        json!({"_reserved": {"avatar": {"model_type": "vrm", "asset_source": "steam_workshop", "asset_source_id": "31337"}}}),
    )
    .await;
    create_character(
        &s,
        "Gone",
        json!({"_reserved": {"avatar": {"asset_source": "steam_workshop", "asset_source_id": "404"}}}),
    )
    .await;
    let dir = mem_dir(&s, name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("recent.json"), "[]").unwrap();
    // A WAL database with committed rows still in the -wal file, connection open.
    let db = dir.join("time_indexed.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
         CREATE TABLE events(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
         INSERT INTO events(text) VALUES ('in wal');",
    )
    .unwrap();
    assert!(dir.join("time_indexed.db-wal").exists());

    let (st, b) = s
        .post(
            &format!("/api/cloudsave/character/{url_name}/upload"),
            json!({}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["character_name"], name);
    assert_eq!(
        b["detail"]["item"]["local_workshop_status"],
        "installed_and_subscribed"
    );
    assert_eq!(
        b["detail"]["item"]["cloud_workshop_status"],
        "installed_and_subscribed"
    );
    assert_eq!(b["detail"]["item"]["local_asset_state"], "ready");
    drop(conn);

    let (st, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(st, 200);
    let it = item(&sum, name).unwrap();
    assert_eq!(it["relation_state"], "matched", "{it}");
    let gone = item(&sum, "Gone").unwrap();
    assert_eq!(gone["local_workshop_status"], "unavailable");
    assert_eq!(
        gone["warnings"],
        json!(["local_resource_missing_on_this_device"])
    );
    let plain = item(&sum, "Companion").unwrap();
    assert_eq!(plain["local_workshop_status"], "");

    // Download replaces the database and drops its stale side files.
    std::fs::write(dir.join("time_indexed.db-wal"), b"garbage").unwrap();
    std::fs::write(dir.join("time_indexed.db-shm"), b"garbage").unwrap();
    let (st, b) = s
        .post(
            &format!("/api/cloudsave/character/{url_name}/download"),
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(!dir.join("time_indexed.db-wal").exists());
    assert_eq!(db_rows(&db), vec!["in wal"]);
    let (st, d) = s.get(&format!("/api/cloudsave/character/{url_name}")).await;
    assert_eq!(st, 200);
    assert_eq!(d["cloud_summary"]["character_name"], name);
}

/// The summary keeps fingerprints and meta records between calls; any change
/// on disk or through the server shows in the next summary.
#[tokio::test]
async fn summary_caches_follow_every_change() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({})).await;
    let dir = mem_dir(&s, "Mika");
    write_memory(&dir);
    let (st, up) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{up}");
    let local_fp = |sum: &Value| item(sum, "Mika").unwrap()["local_fingerprint"].clone();
    let relation = |sum: &Value| item(sum, "Mika").unwrap()["relation_state"].clone();
    // Past the racy window, so the values are cached.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let (_, first) = s.get("/api/cloudsave/summary").await;
    assert_eq!(relation(&first), "matched", "{first}");
    let (_, again) = s.get("/api/cloudsave/summary").await;
    assert_eq!(again, first);

    // A JSON member edited in place, the same length.
    let recent = std::fs::read_to_string(dir.join("recent.json")).unwrap();
    std::fs::write(dir.join("recent.json"), recent.replace("hello", "hallo")).unwrap();
    let (_, sum) = s.get("/api/cloudsave/summary").await;
    assert_ne!(local_fp(&sum), local_fp(&first));
    assert_eq!(relation(&sum), "diverged");
    std::fs::write(dir.join("recent.json"), &recent).unwrap();
    let (_, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(local_fp(&sum), local_fp(&first));

    // A row added to the SQLite member.
    add_db_row(&dir.join("time_indexed.db"), "third");
    let (_, sum) = s.get("/api/cloudsave/summary").await;
    assert_ne!(local_fp(&sum), local_fp(&first));

    // The profile changed through the server.
    let (_, before) = s.get("/api/cloudsave/summary").await;
    s.state
        .characters
        .mutate(|d| {
            d.characters
                .insert("Mika".into(), json!({"display_name": "M"}));
            Ok(())
        })
        .await
        .unwrap();
    let (_, sum) = s.get("/api/cloudsave/summary").await;
    assert_ne!(local_fp(&sum), local_fp(&before));
    assert_eq!(item(&sum, "Mika").unwrap()["display_name"], "M");

    // The cloud record replaced on disk (another device uploaded).
    let meta_path = cloud_unit(&s, "Mika").join("meta.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["sequence_number"] = json!(99);
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let (_, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(item(&sum, "Mika").unwrap()["cloud_sequence_number"], 99);
    // ... and removed.
    std::fs::remove_file(&meta_path).unwrap();
    let (_, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(relation(&sum), "local_only");
}

/// Many characters: the local units are read in parallel parts, and every
/// item still pairs each character with its own unit.
#[tokio::test]
async fn many_characters_pair_with_their_own_units() {
    let s = server_with_cloud(None).await;
    s.state
        .characters
        .mutate(|d| {
            for i in 0..300 {
                d.characters.insert(
                    format!("C{i:03}"),
                    json!({"display_name": format!("Name {i}")}),
                );
            }
            Ok(())
        })
        .await
        .unwrap();
    for i in (0..300).step_by(7) {
        let dir = mem_dir(&s, &format!("C{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("facts.json"), "x".repeat(i + 1)).unwrap();
    }
    let (st, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(st, 200, "{sum}");
    for i in 0..300 {
        let name = format!("C{i:03}");
        let it = item(&sum, &name).unwrap();
        assert_eq!(it["display_name"], format!("Name {i}"));
        assert_eq!(it["relation_state"], "local_only");
        // Only the units given a file have a latest change.
        let has_files = it["local_updated_at_utc"] != "";
        assert_eq!(has_files, i % 7 == 0, "{it}");
    }
    let (_, d) = s.get("/api/cloudsave/character/C140").await;
    assert_eq!(d["local_summary"]["files"]["facts.json"], 141, "{d}");
    let (_, d) = s.get("/api/cloudsave/character/C141").await;
    assert!(
        d["local_summary"]["files"].get("facts.json").is_none(),
        "{d}"
    );
    let local_files = |sum: &Value, name: &str| {
        sum["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["character_name"] == name)
            .map(|i| i["local_fingerprint"].clone())
    };
    // Units with the same files have the same fingerprint only with the same profile.
    assert_ne!(local_files(&sum, "C007"), local_files(&sum, "C014"));
}

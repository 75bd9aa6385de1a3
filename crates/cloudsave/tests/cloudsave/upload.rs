//! `POST /api/cloudsave/character/{name}/upload`: publishing, overwrite rules,
//! sequence numbers, staged payloads and large members.

use std::time::{Duration, SystemTime};

use crate::common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn round_trip_on_the_directory_target() {
    let s = server_with_cloud(None).await;
    let up = round_trip(&s, "local_directory").await;

    // The published unit on disk: meta last, payload with a valid SQLite snapshot.
    let unit = cloud_unit(&s, "Mika");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(unit.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        meta["payload_fingerprint"],
        up["meta"]["payload_fingerprint"]
    );
    let payload = unit
        .join("payload")
        .join(meta["payload_id"].as_str().unwrap());
    let stored = tree(&payload);
    let names: Vec<&String> = stored.keys().collect();
    assert_eq!(
        names,
        vec![
            "memory/facts.json",
            "memory/recent.json",
            "memory/settings.json",
            "memory/time_indexed.db",
            "profile.json"
        ]
    );
    assert_eq!(
        db_rows(&payload.join("memory/time_indexed.db")),
        vec!["first", "second"]
    );
    let profile: Value = serde_json::from_slice(&stored["profile.json"]).unwrap();
    assert_eq!(profile["display_name"], "Mika the Cat");

    // Overwrite rules and the per-device sequence.
    let (st, b) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 409, "{b}");
    assert_envelope(&b, "CLOUD_CHARACTER_EXISTS");
    assert_eq!(b["character_name"], "Mika");
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/upload",
            json!({"overwrite": false}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/upload",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["sequence_number"], 2);
    // The previous payload is gone, the new one is the only one.
    assert_eq!(
        payload_ids(&s, "Mika"),
        vec![b["meta"]["payload_id"].as_str().unwrap().to_string()]
    );
    let ls: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/cloudsave_local_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ls["next_sequence_number"], 3);
    assert_eq!(ls["client_id"], b["meta"]["source_client_id"]);
    assert!(ls["last_successful_export_at"].as_str().unwrap().len() > 10);
    assert!(ls["last_successful_import_at"].as_str().unwrap().len() > 10);

    // Another device sharing the folder: the character is new there.
    let cloud = s.data.join("cloud").to_string_lossy().into_owned();
    let other = server_with_cloud(Some(cloud)).await;
    let (st, sum) = other.get("/api/cloudsave/summary").await;
    assert_eq!(st, 200);
    let it = item(&sum, "Mika").unwrap();
    assert_eq!(it["relation_state"], "cloud_only");
    assert_eq!(it["available_actions"], json!(["download"]));
    assert_eq!(sum["platform_autocloud"]["startup_import_required"], true);
    assert_eq!(sum["platform_autocloud"]["manual_download_required"], false);
    let (st, d) = other.get("/api/cloudsave/character/Mika").await;
    assert_eq!(st, 200, "{d}");
    assert!(d["local_summary"].is_null());
    assert_eq!(d["cloud_summary"]["sequence_number"], 2);
    let (st, d) = other
        .post("/api/cloudsave/character/Mika/download", json!({}))
        .await;
    assert_eq!(st, 200, "{d}");
    assert_eq!(d["detail"]["item"]["relation_state"], "matched");
    assert!(other.state.characters.exists("Mika"));
    assert!(other.state.sessions.get("Mika").is_some());
    let there = tree(&mem_dir(&other, "Mika"));
    let here = tree(&mem_dir(&s, "Mika"));
    for f in ["recent.json", "facts.json", "settings.json"] {
        assert_eq!(there[f], here[f]);
    }
    assert!(!there.contains_key("recent_meta.json"));
    assert_eq!(
        db_rows(&mem_dir(&other, "Mika").join("time_indexed.db")),
        vec!["first", "second"]
    );
    // Its own sequence counter starts at 1 (per device).
    let (_, b) = other
        .post(
            "/api/cloudsave/character/Mika/upload",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(b["sequence_number"], 1);
    assert_ne!(
        b["meta"]["source_client_id"],
        up["meta"]["source_client_id"]
    );
}

#[tokio::test]
async fn half_written_units_are_never_visible_and_stale_stages_are_collected() {
    let s = server_with_cloud(None).await;
    // A staged payload whose meta was never written (crash mid-upload).
    let ghost = cloud_unit(&s, "Ghost").join("payload").join("1-abc");
    std::fs::create_dir_all(ghost.join("memory")).unwrap();
    std::fs::write(ghost.join("profile.json"), "{}").unwrap();
    std::fs::write(ghost.join("memory/recent.json"), "[]").unwrap();

    let (st, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(st, 200, "{sum}");
    assert!(item(&sum, "Ghost").is_none(), "{sum}");
    assert_eq!(sum["platform_autocloud"]["has_snapshot"], false);
    let (st, b) = s.get("/api/cloudsave/character/Ghost").await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUDSAVE_CHARACTER_NOT_FOUND");
    let (st, b) = s
        .post("/api/cloudsave/character/Ghost/download", json!({}))
        .await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUDSAVE_CHARACTER_NOT_FOUND");
    assert!(!s.state.characters.exists("Ghost"));
    assert!(!mem_dir(&s, "Ghost").exists());

    // Uploading over it: the published unit wins; an old unpublished stage is
    // collected, a fresh one (another device still uploading) is left alone.
    create_character(&s, "Mika", json!({})).await;
    write_memory(&mem_dir(&s, "Mika"));
    let stale = cloud_unit(&s, "Mika").join("payload").join("7-stale");
    let fresh = cloud_unit(&s, "Mika").join("payload").join("8-fresh");
    for d in [&stale, &fresh] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("profile.json"), "{}").unwrap();
    }
    let old = SystemTime::now() - Duration::from_secs(3 * 3600);
    std::fs::File::options()
        .write(true)
        .open(stale.join("profile.json"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let (st, b) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{b}");
    let ids = payload_ids(&s, "Mika");
    assert!(!ids.contains(&"7-stale".to_string()), "{ids:?}");
    assert!(ids.contains(&"8-fresh".to_string()), "{ids:?}");
    assert!(ids.contains(&b["meta"]["payload_id"].as_str().unwrap().to_string()));
    // The staging folder on the local side is empty again.
    assert!(tree(&s.data.join("state/cloudsave_tmp")).is_empty());
}

#[tokio::test]
async fn a_large_database_streams_through_multipart_and_round_trips() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({})).await;
    let dir = mem_dir(&s, "Mika");
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("time_indexed.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE events(id INTEGER PRIMARY KEY, text TEXT NOT NULL); BEGIN;")
            .unwrap();
        let blob = "x".repeat(4000);
        for i in 0..3000 {
            c.execute(
                "INSERT INTO events(text) VALUES (?1)",
                [format!("{i}{blob}")],
            )
            .unwrap();
        }
        c.execute_batch("COMMIT;").unwrap();
    }
    assert!(std::fs::metadata(&db).unwrap().len() > 10 * 1024 * 1024);
    let t = std::time::Instant::now();
    let (st, b) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{b}");
    let upload_ms = t.elapsed().as_millis();
    std::fs::remove_file(&db).unwrap();
    let t = std::time::Instant::now();
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    eprintln!(
        "12 MB database: upload {upload_ms} ms, download {} ms",
        t.elapsed().as_millis()
    );
    assert_eq!(db_rows(&db).len(), 3000);
}

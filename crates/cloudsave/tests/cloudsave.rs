//! Cloud save on the directory target, over real HTTP and WebSocket.

mod common;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use common::*;
use futures::StreamExt;
use serde_json::{json, Value};

fn cloud_unit(s: &companiond_core::testkit::TestServer, name: &str) -> PathBuf {
    s.data.join("cloud").join("characters").join(name)
}

fn payload_ids(s: &companiond_core::testkit::TestServer, name: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cloud_unit(s, name).join("payload"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

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
async fn bad_options_and_names_are_refused_before_touching_storage() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({})).await;
    write_memory(&mem_dir(&s, "Mika"));

    for (path, body, param) in [
        ("upload", json!({"overwrite": "yes"}), "overwrite"),
        ("upload", json!({"overwrite": 1}), "overwrite"),
        (
            "download",
            json!({"overwrite": true, "force": "true"}),
            "force",
        ),
        (
            "download",
            json!({"backup_before_overwrite": null}),
            "backup_before_overwrite",
        ),
        ("download", json!({"overwrite": [true]}), "overwrite"),
    ] {
        let (st, b) = s
            .post(&format!("/api/cloudsave/character/Mika/{path}"), body)
            .await;
        assert_eq!(st, 400, "{b}");
        assert_envelope(&b, "INVALID_PARAMETER");
        assert_eq!(b["message_params"]["parameter"], param);
        assert_eq!(b["character_name"], "Mika");
    }
    for raw in ["{not json", "[true]", "\"overwrite\""] {
        let r = s
            .http
            .post(s.url("/api/cloudsave/character/Mika/upload"))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400);
        let b: Value = r.json().await.unwrap();
        assert_envelope(&b, "INVALID_JSON_BODY");
    }
    // An empty body means the defaults.
    let r = s
        .http
        .post(s.url("/api/cloudsave/character/Mika/upload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    // Hostile names never become storage keys.
    for raw in [
        "..", "%2E%2E", "a%2Fb", "a%5Cb", "%20Mika", "CON", "a%3Cb", "x..",
    ] {
        for (m, path) in [
            ("GET", format!("/api/cloudsave/character/{raw}")),
            ("POST", format!("/api/cloudsave/character/{raw}/upload")),
            ("POST", format!("/api/cloudsave/character/{raw}/download")),
        ] {
            let method = reqwest::Method::from_bytes(m.as_bytes()).unwrap();
            let r = s.http.request(method, s.url(&path)).send().await.unwrap();
            let status = r.status().as_u16();
            let b: Value = r.json().await.unwrap_or(Value::Null);
            // ".." segments are normalised away by some clients; whatever route
            // answers, it must not be a success.
            assert!(
                status == 400 || status == 404 || status == 405,
                "{raw}: {status} {b}"
            );
            if status == 400 {
                assert_envelope(&b, "NAME_AUDIT_FAILED");
            }
        }
    }
    let cloud = tree(&s.data.join("cloud"));
    assert_eq!(
        cloud
            .keys()
            .filter(|k| !k.starts_with("characters/Mika/"))
            .count(),
        0,
        "{:?}",
        cloud.keys()
    );

    // Unknown characters.
    let (st, b) = s.get("/api/cloudsave/character/Nobody").await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUDSAVE_CHARACTER_NOT_FOUND");
    assert_eq!(b["character_name"], "Nobody");
    let (st, b) = s
        .post("/api/cloudsave/character/Nobody/upload", json!({}))
        .await;
    assert_eq!(st, 404);
    assert_envelope(&b, "LOCAL_CHARACTER_NOT_FOUND");
    let (st, b) = s
        .post("/api/cloudsave/character/Nobody/download", json!({}))
        .await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUDSAVE_CHARACTER_NOT_FOUND");
    // Local only: 200 with a null cloud side.
    create_character(&s, "Solo", json!({})).await;
    let (st, b) = s.get("/api/cloudsave/character/Solo").await;
    assert_eq!(st, 200, "{b}");
    assert!(b["cloud_summary"].is_null());
    assert_eq!(b["item"]["relation_state"], "local_only");
    assert_eq!(b["sync_backend"], "local_directory");
    // Local exists, cloud does not: download says so.
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Solo/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUD_CHARACTER_NOT_FOUND");

    // The five routes are in the OpenAPI listing.
    let (_, doc) = s.get("/openapi.json").await;
    for p in [
        "/api/cloudsave/summary",
        "/api/cloudsave/platform-autocloud-config",
        "/api/cloudsave/character/{name}",
        "/api/cloudsave/character/{name}/upload",
        "/api/cloudsave/character/{name}/download",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} missing from openapi");
    }
    let (st, cfg) = s.get("/api/cloudsave/platform-autocloud-config").await;
    assert_eq!(st, 200);
    assert_eq!(cfg["success"], true);
    assert_eq!(cfg["sync_backend"], "local_directory");
    let pa = &cfg["platform_autocloud"];
    for k in [
        "backend",
        "app_id",
        "has_snapshot",
        "snapshot_sequence_number",
        "snapshot_exported_at_utc",
        "manifest_fingerprint",
        "last_applied_manifest_fingerprint",
        "startup_import_required",
        "manual_download_required",
        "runtime_has_user_content",
        "last_successful_export_at",
        "last_successful_import_at",
        "source_launch",
        "steam_session_ready",
        "steam_launch_tracked",
        "steam_available",
        "steam_running",
        "steam_logged_on",
        "runtime_root",
        "cloudsave_root",
        "manifest_path",
        "manifest_exists",
        "recommended_paths",
        "current_platform_rule",
    ] {
        assert!(pa.get(k).is_some(), "platform_autocloud.{k} missing");
    }
    assert_eq!(pa["has_snapshot"], true);
    assert_eq!(pa["runtime_has_user_content"], true);
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

async fn open_chat(
    s: &companiond_core::testkit::TestServer,
    name: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url(&format!("/ws/{name}")))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.to_text().unwrap().contains("session_started"));
    assert!(s.state.sessions.is_active(name));
    ws
}

#[tokio::test]
async fn active_session_blocks_download_until_forced() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({"display_name": "Mika"})).await;
    let dir = mem_dir(&s, "Mika");
    write_memory(&dir);
    let (st, _) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200);
    std::fs::write(dir.join("recent.json"), "[]").unwrap();
    let before = tree(&dir);

    let mut ws = open_chat(&s, "Mika").await;
    for body in [
        json!({"overwrite": true}),
        json!({"overwrite": true, "force": false}),
    ] {
        let (st, b) = s.post("/api/cloudsave/character/Mika/download", body).await;
        assert_eq!(st, 409, "{b}");
        assert_envelope(&b, "ACTIVE_SESSION_BLOCKED");
        assert_eq!(b["can_force"], true);
        assert_eq!(b["character_name"], "Mika");
    }
    assert_eq!(tree(&dir), before, "nothing local touched");
    assert!(!s.data.join("cloudsave_backups").exists());
    assert!(s.state.sessions.is_active("Mika"));

    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true, "force": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(!s.state.sessions.is_active("Mika"));
    // The client saw its connection closed.
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(m) = ws.next().await {
            match m {
                Ok(tokio_tungstenite::tungstenite::Message::Close(_)) | Err(_) => return true,
                _ => {}
            }
        }
        true
    })
    .await
    .unwrap();
    assert!(closed);
    let after = tree(&dir);
    assert_ne!(after["recent.json"], b"[]".to_vec());
    assert!(std::str::from_utf8(&after["recent.json"])
        .unwrap()
        .contains("hi there"));
    let backup = PathBuf::from(b["backup_path"].as_str().unwrap());
    assert_eq!(
        std::fs::read(backup.join("memory/recent.json")).unwrap(),
        b"[]"
    );

    // backup_before_overwrite:false keeps no backup.
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true, "backup_before_overwrite": false}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(b["backup_path"].is_null());
    assert_eq!(
        std::fs::read_dir(s.data.join("cloudsave_backups"))
            .unwrap()
            .count(),
        1
    );
}

#[tokio::test]
async fn reload_failure_rolls_back_to_the_exact_previous_state() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", serde_json::from_str(PROFILE).unwrap()).await;
    let dir = mem_dir(&s, "Mika");
    write_memory(&dir);
    // The unit carries a memory file the memory side cannot load.
    std::fs::write(dir.join("facts.json"), "{broken").unwrap();
    let (st, b) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{b}");

    // Local state diverges in every way the import touches.
    std::fs::write(dir.join("facts.json"), r#"[{"fact":"fixed"}]"#).unwrap();
    std::fs::write(
        dir.join("recent.json"),
        r#"[{"type":"human","data":{"content":"newer"}}]"#,
    )
    .unwrap();
    std::fs::write(dir.join("surfaced.json"), "[]").unwrap();
    add_db_row(&dir.join("time_indexed.db"), "local only");
    s.state
        .characters
        .mutate(|doc| {
            doc.characters
                .insert("Mika".into(), json!({"display_name": "Local Mika"}));
            Ok(())
        })
        .await
        .unwrap();
    let mem_before = tree(&dir);
    let chars_before = std::fs::read(s.data.join("config/characters.json")).unwrap();

    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 500, "{b}");
    assert_envelope(&b, "LOCAL_RELOAD_FAILED_ROLLED_BACK");
    assert_eq!(b["rolled_back"], true, "{b}");
    assert_eq!(b["rollback_error"], "");
    assert!(b["message_params"]["message"]
        .as_str()
        .unwrap()
        .contains("facts.json"));
    assert!(b["backup_path"].is_string());

    assert_eq!(
        tree(&dir),
        mem_before,
        "memory byte-identical after rollback"
    );
    assert_eq!(
        std::fs::read(s.data.join("config/characters.json")).unwrap(),
        chars_before
    );
    assert_eq!(
        s.state.characters.profile("Mika").unwrap()["display_name"],
        "Local Mika"
    );
    let root: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("state/root_state.json")).unwrap())
            .unwrap();
    assert_eq!(root["mode"], "normal", "the fence is lowered");

    // On a device where the character is new, the rollback removes it again.
    let cloud = s.data.join("cloud").to_string_lossy().into_owned();
    let other = server_with_cloud(Some(cloud)).await;
    let chars_before = std::fs::read(other.data.join("config/characters.json")).unwrap();
    let (st, b) = other
        .post("/api/cloudsave/character/Mika/download", json!({}))
        .await;
    assert_eq!(st, 500, "{b}");
    assert_eq!(b["rolled_back"], true);
    assert!(!other.state.characters.exists("Mika"));
    assert!(other.state.sessions.get("Mika").is_none());
    assert!(!mem_dir(&other, "Mika").exists());
    assert_eq!(
        std::fs::read(other.data.join("config/characters.json")).unwrap(),
        chars_before
    );
}

#[tokio::test]
async fn corrupted_or_hostile_cloud_units_are_refused_before_anything_local_changes() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({"display_name": "Mika"})).await;
    let dir = mem_dir(&s, "Mika");
    write_memory(&dir);
    let (st, up) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200);
    std::fs::write(dir.join("recent.json"), "[]").unwrap();
    let before = tree(&dir);
    let chars_before = std::fs::read(s.data.join("config/characters.json")).unwrap();
    let unit = cloud_unit(&s, "Mika");
    let payload = unit
        .join("payload")
        .join(up["meta"]["payload_id"].as_str().unwrap());

    // A member changed behind the meta record's back.
    let good = std::fs::read(payload.join("memory/recent.json")).unwrap();
    std::fs::write(payload.join("memory/recent.json"), b"[\"tampered\"]").unwrap();
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 502, "{b}");
    assert_envelope(&b, "CLOUD_PAYLOAD_CORRUPT");
    assert_eq!(tree(&dir), before);
    assert_eq!(
        std::fs::read(s.data.join("config/characters.json")).unwrap(),
        chars_before
    );
    assert!(!s.data.join("cloudsave_backups").exists());
    std::fs::write(payload.join("memory/recent.json"), good).unwrap();

    // A meta record naming a file outside the unit, or a foreign fingerprint.
    let meta_path = unit.join("meta.json");
    let meta_good = std::fs::read(&meta_path).unwrap();
    let mut meta: Value = serde_json::from_slice(&meta_good).unwrap();
    meta["files"]["../../config/evil.json"] = json!({"sha256": "00", "size": 1});
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 502, "{b}");
    assert_envelope(&b, "CLOUD_PAYLOAD_CORRUPT");
    let mut meta: Value = serde_json::from_slice(&meta_good).unwrap();
    meta["payload_fingerprint"] = json!("sha256:0000");
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 502, "{b}");
    assert!(
        b["message"].as_str().unwrap().contains("fingerprint"),
        "{b}"
    );
    assert_eq!(tree(&dir), before);
    assert!(!s.data.join("config/evil.json").exists());

    // An unreadable meta record: the detail route says so, upload needs overwrite.
    std::fs::write(&meta_path, b"{oops").unwrap();
    let (st, b) = s.get("/api/cloudsave/character/Mika").await;
    assert_eq!(st, 502, "{b}");
    let (st, b) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 409, "{b}");
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/upload",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    let (st, _) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200);
}

#[tokio::test]
async fn the_write_fence_refuses_operations_and_is_always_lowered() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({})).await;
    write_memory(&mem_dir(&s, "Mika"));
    let root = s.data.join("state/root_state.json");
    std::fs::create_dir_all(root.parent().unwrap()).unwrap();
    std::fs::write(&root, r#"{"version":1,"mode":"maintenance_readonly"}"#).unwrap();
    let (st, b) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 409, "{b}");
    assert_envelope(&b, "CLOUDSAVE_WRITE_FENCE_ACTIVE");
    assert_eq!(b["mode"], "maintenance_readonly");
    assert!(!cloud_unit(&s, "Mika").join("meta.json").exists());
    std::fs::write(&root, r#"{"version":1,"mode":"normal"}"#).unwrap();
    let (st, _) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200);
    std::fs::write(&root, r#"{"version":1,"mode":"maintenance_readonly"}"#).unwrap();
    std::fs::write(mem_dir(&s, "Mika").join("recent.json"), "[]").unwrap();
    let before = tree(&mem_dir(&s, "Mika"));
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_envelope(&b, "CLOUDSAVE_WRITE_FENCE_ACTIVE");
    assert_eq!(tree(&mem_dir(&s, "Mika")), before);

    std::fs::write(&root, r#"{"version":1,"mode":"normal","current_root":"x"}"#).unwrap();
    let (st, _) = s
        .post(
            "/api/cloudsave/character/Mika/upload",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200);
    let (st, _) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200);
    let doc: Value = serde_json::from_slice(&std::fs::read(&root).unwrap()).unwrap();
    assert_eq!(doc["mode"], "normal");
    assert_eq!(doc["current_root"], "x", "other fields kept");
    assert!(doc.get("operation").is_none());
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

/// A memory service that records calls and fails on demand.
struct FakeMemory {
    calls: std::sync::Mutex<Vec<String>>,
    fail_release: bool,
    fail_reload: bool,
}

impl companiond_core::state::MemoryService for FakeMemory {
    fn release(&self, c: String) -> futures::future::BoxFuture<'static, Result<(), String>> {
        self.calls.lock().unwrap().push(format!("release {c}"));
        let fail = self.fail_release;
        Box::pin(async move {
            if fail {
                Err("handle busy".into())
            } else {
                Ok(())
            }
        })
    }
    fn reload(&self, c: String) -> futures::future::BoxFuture<'static, Result<(), String>> {
        self.calls.lock().unwrap().push(format!("reload {c}"));
        let fail = self.fail_reload;
        Box::pin(async move {
            if fail {
                Err("cannot open".into())
            } else {
                Ok(())
            }
        })
    }
}

#[tokio::test]
async fn memory_handles_are_released_before_and_reloaded_after_an_import() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({"display_name": "Mika"})).await;
    let dir = mem_dir(&s, "Mika");
    write_memory(&dir);
    assert_eq!(
        s.post("/api/cloudsave/character/Mika/upload", json!({}))
            .await
            .0,
        200
    );
    std::fs::write(dir.join("recent.json"), "[]").unwrap();
    let before = tree(&dir);

    // Release fails: 503, nothing local touched.
    let failing = std::sync::Arc::new(FakeMemory {
        calls: Default::default(),
        fail_release: true,
        fail_reload: false,
    });
    s.state.hooks.set_memory_service(failing.clone());
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 503, "{b}");
    assert_envelope(&b, "MEMORY_RELEASE_FAILED");
    assert_eq!(tree(&dir), before);
    assert_eq!(
        *failing.calls.lock().unwrap(),
        vec!["release Mika".to_string()]
    );

    // Reload fails: rolled back to the exact previous state.
    let reload_fails = std::sync::Arc::new(FakeMemory {
        calls: Default::default(),
        fail_release: false,
        fail_reload: true,
    });
    s.state.hooks.set_memory_service(reload_fails.clone());
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 500, "{b}");
    assert_envelope(&b, "LOCAL_RELOAD_FAILED_ROLLED_BACK");
    assert_eq!(b["rolled_back"], true);
    assert_eq!(tree(&dir), before);

    // Both succeed: release, import, reload, in that order.
    let ok = std::sync::Arc::new(FakeMemory {
        calls: Default::default(),
        fail_release: false,
        fail_reload: false,
    });
    s.state.hooks.set_memory_service(ok.clone());
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        *ok.calls.lock().unwrap(),
        vec!["release Mika".to_string(), "reload Mika".to_string()]
    );
    assert_ne!(tree(&dir)["recent.json"], b"[]".to_vec());
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

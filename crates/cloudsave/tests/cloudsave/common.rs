//! Fixtures shared by every resource's tests: servers with a cloud target,
//! characters and memory folders, SQLite members, the failure envelope.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use companiond_core::testkit::{TestOptions, TestServer};
use serde_json::{json, Value};

pub async fn server_with_cloud(cloud: Option<String>) -> TestServer {
    let opts = TestOptions {
        edit: cloud
            .map(|c| -> companiond_core::testkit::EditOptions { Box::new(move |o| o.cloud = c) }),
        ..Default::default()
    };
    TestServer::start_with(&[companiond_cloudsave::FAMILY], opts).await
}

pub async fn create_character(s: &TestServer, name: &str, profile: Value) {
    let mut body = profile.as_object().cloned().unwrap_or_default();
    body.insert("name".into(), json!(name));
    let (st, b) = s.post("/api/characters/profile", Value::Object(body)).await;
    assert_eq!(st, 200, "create {name}: {b}");
}

pub fn mem_dir(s: &TestServer, name: &str) -> PathBuf {
    s.data.join("memory").join(name)
}

/// A SQLite file (rollback-journal mode, closed) holding `rows`.
pub fn make_db(path: &Path, rows: &[&str]) {
    let _ = std::fs::remove_file(path);
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch("CREATE TABLE events(id INTEGER PRIMARY KEY, text TEXT NOT NULL);")
        .unwrap();
    for r in rows {
        c.execute("INSERT INTO events(text) VALUES (?1)", [r])
            .unwrap();
    }
}

pub fn add_db_row(path: &Path, row: &str) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute("INSERT INTO events(text) VALUES (?1)", [row])
        .unwrap();
}

pub fn db_rows(path: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let r: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(r, "ok");
    let mut st = c.prepare("SELECT text FROM events ORDER BY id").unwrap();
    let rows = st
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

/// Fill a memory folder: managed files, excluded files and an archive folder.
pub fn write_memory(dir: &Path) {
    std::fs::create_dir_all(dir.join("reflection_archive")).unwrap();
    std::fs::write(
        dir.join("recent.json"),
        r#"[{"type":"human","data":{"content":"hello"}},{"type":"ai","data":{"content":"hi there"}}]"#,
    )
    .unwrap();
    std::fs::write(dir.join("facts.json"), r#"[{"fact":"likes tea"}]"#).unwrap();
    std::fs::write(dir.join("settings.json"), r#"{"mood":"calm"}"#).unwrap();
    // Excluded from the unit.
    std::fs::write(dir.join("recent_meta.json"), "{}").unwrap();
    std::fs::write(dir.join("cursors.json"), "{}").unwrap();
    std::fs::write(dir.join("outbox.ndjson"), "{}\n").unwrap();
    std::fs::write(dir.join("facts_pending_dedup.json"), "[]").unwrap();
    std::fs::write(dir.join("reflection_archive").join("2024.json"), "[]").unwrap();
    make_db(&dir.join("time_indexed.db"), &["first", "second"]);
}

/// Every regular file under `dir` (relative path → bytes).
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

pub fn item<'a>(summary: &'a Value, name: &str) -> Option<&'a Value> {
    summary["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["character_name"] == name)
}

/// The cloud-save failure envelope, fully present.
pub fn assert_envelope(body: &Value, code: &str) {
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(body["error"].is_string(), "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(
        body["message_key"]
            .as_str()
            .is_some_and(|m| m.starts_with("cloudsave.error.")),
        "{body}"
    );
    assert!(body["message_params"].is_object(), "{body}");
    assert!(body.get("character_name").is_some(), "{body}");
}

pub const PROFILE: &str = r#"{"display_name":"Mika the Cat","_reserved":{"avatar":{"model_type":"live2d","asset_source":"builtin"}},"age":3}"#;

/// The full round trip over HTTP: upload → change locally → download restores.
/// Returns the upload response.
pub async fn round_trip(s: &TestServer, backend: &str) -> Value {
    let name = "Mika";
    create_character(s, name, serde_json::from_str(PROFILE).unwrap()).await;
    let dir = mem_dir(s, name);
    write_memory(&dir);
    let original = tree(&dir);

    let (st, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(st, 200, "{sum}");
    assert_eq!(sum["sync_backend"], backend);
    assert_eq!(sum["platform_autocloud"]["backend"], backend);
    let it = item(&sum, name).unwrap();
    assert_eq!(it["relation_state"], "local_only");
    assert_eq!(it["available_actions"], json!(["upload"]));
    assert_eq!(it["display_name"], "Mika the Cat");

    let (st, up) = s
        .post(
            &format!("/api/cloudsave/character/{name}/upload"),
            json!({}),
        )
        .await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["success"], true);
    assert_eq!(up["character_name"], name);
    assert_eq!(up["sync_backend"], backend);
    assert_eq!(up["sequence_number"], 1);
    assert_eq!(up["meta"]["sequence_number"], 1);
    assert_eq!(up["meta"]["character_name"], name);
    assert!(up["meta"]["source_client_id"].as_str().unwrap().len() >= 16);
    let fp = up["meta"]["payload_fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fp.starts_with("sha256:"));
    let files: Vec<&String> = up["meta"]["files"].as_object().unwrap().keys().collect();
    assert_eq!(
        files,
        vec![
            "facts.json",
            "recent.json",
            "settings.json",
            "time_indexed.db"
        ],
        "only the managed flat files travel"
    );
    assert_eq!(up["detail"]["item"]["relation_state"], "matched");
    assert_eq!(up["platform_autocloud"]["has_snapshot"], true);
    assert_eq!(up["platform_autocloud"]["snapshot_sequence_number"], 1);
    // Upload never touches local data.
    assert_eq!(tree(&dir), original);

    // Change everything locally.
    std::fs::write(
        dir.join("recent.json"),
        r#"[{"type":"human","data":{"content":"changed"}}]"#,
    )
    .unwrap();
    std::fs::remove_file(dir.join("facts.json")).unwrap();
    std::fs::write(dir.join("reflections.json"), "[1,2,3]").unwrap();
    add_db_row(&dir.join("time_indexed.db"), "third");
    s.state
        .characters
        .mutate(|doc| {
            doc.characters
                .insert("Mika".into(), json!({"display_name": "Changed"}));
            Ok(())
        })
        .await
        .unwrap();
    let changed = tree(&dir);

    let (_, sum) = s.get("/api/cloudsave/summary").await;
    let it = item(&sum, name).unwrap();
    assert_eq!(it["relation_state"], "diverged");
    assert_eq!(it["cloud_fingerprint"], fp.as_str());
    assert_ne!(it["local_fingerprint"], fp.as_str());
    assert_eq!(it["available_actions"], json!(["upload", "download"]));

    // Download without overwrite is refused; nothing changes.
    let (st, b) = s
        .post(
            &format!("/api/cloudsave/character/{name}/download"),
            json!({}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_envelope(&b, "LOCAL_CHARACTER_EXISTS");
    assert_eq!(tree(&dir), changed);

    let (st, down) = s
        .post(
            &format!("/api/cloudsave/character/{name}/download"),
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{down}");
    assert_eq!(down["success"], true);
    assert_eq!(down["sync_backend"], backend);
    assert!(down["platform_autocloud"].is_object());
    assert_eq!(down["detail"]["item"]["relation_state"], "matched");

    // Local state is the uploaded one again (the database as a valid snapshot).
    let now = tree(&dir);
    for f in ["recent.json", "facts.json", "settings.json"] {
        assert_eq!(now[f], original[f], "{f} restored");
    }
    assert!(
        !now.contains_key("reflections.json"),
        "managed file absent from the unit removed"
    );
    assert!(
        now.contains_key("recent_meta.json"),
        "excluded files untouched"
    );
    assert!(now.contains_key("reflection_archive/2024.json"));
    assert_eq!(
        db_rows(&dir.join("time_indexed.db")),
        vec!["first", "second"]
    );
    let (_, chars) = s.get("/api/characters").await;
    let mika = chars["characters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap();
    assert_eq!(mika["display_name"], "Mika the Cat");
    assert_eq!(mika["age"], 3);

    // The backup holds the files as they were before the download.
    let backup = PathBuf::from(down["backup_path"].as_str().unwrap());
    assert!(backup.starts_with(s.data.join("cloudsave_backups")));
    let b = tree(&backup);
    assert_eq!(b["memory/recent.json"], changed["recent.json"]);
    assert_eq!(b["memory/reflections.json"], changed["reflections.json"]);
    assert_eq!(b["memory/time_indexed.db"], changed["time_indexed.db"]);
    assert!(!b.contains_key("memory/facts.json"));
    let op: Value = serde_json::from_slice(&b["_operation.json"]).unwrap();
    assert_eq!(op["operation"], "character_download");
    assert_eq!(op["previous_profile"]["display_name"], "Changed");
    let chars_backup: Value = serde_json::from_slice(&b["config/characters.json"]).unwrap();
    assert_eq!(
        chars_backup["characters"]["Mika"]["display_name"],
        "Changed"
    );

    let (_, sum) = s.get("/api/cloudsave/summary").await;
    assert_eq!(item(&sum, name).unwrap()["relation_state"], "matched");
    up
}

pub fn cloud_unit(s: &companiond_core::testkit::TestServer, name: &str) -> PathBuf {
    s.data.join("cloud").join("characters").join(name)
}

pub fn payload_ids(s: &companiond_core::testkit::TestServer, name: &str) -> Vec<String> {
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

pub async fn open_chat(
    s: &companiond_core::testkit::TestServer,
    name: &str,
) -> companiond_core::testkit::Ws {
    let (ws, _) = s.chat(name).await;
    assert!(s.state.sessions.is_active(name));
    ws
}

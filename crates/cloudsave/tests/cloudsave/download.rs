//! `POST /api/cloudsave/character/{name}/download`: verification before any
//! local change, active sessions, memory handles.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;
use futures::StreamExt;
use serde_json::{json, Value};

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

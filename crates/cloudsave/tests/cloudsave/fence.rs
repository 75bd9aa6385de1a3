//! The write fence around uploads and downloads.

use crate::common::*;
use serde_json::{json, Value};

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

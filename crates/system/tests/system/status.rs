//! `GET /api/system/status`.

use crate::common::*;

#[tokio::test]
async fn status_reports_migration_flags() {
    let s = server().await;
    let r = s
        .http
        .get(s.url("/api/system/status"))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (code, v) = split(r).await;
    assert_eq!(code, 200);
    assert_eq!(v["status"], "ready");
    assert_eq!(v["ready"], true);
    for f in [
        "selection_required",
        "migration_pending",
        "recovery_required",
        "legacy_cleanup_pending",
    ] {
        assert_eq!(v["storage"][f], false, "{f}");
    }
    assert_eq!(v["storage"]["blocking_reason"], "");

    write(
        &s.data.join("state/storage_migration.json"),
        br#"{"pending": true, "legacy_cleanup_pending": true, "reason": "moving_data_dir"}"#,
    );
    let (_, v) = s.get("/api/system/status").await;
    assert_eq!(v["status"], "migration_required");
    assert_eq!(v["ready"], false);
    assert_eq!(v["storage"]["migration_pending"], true);
    assert_eq!(v["storage"]["legacy_cleanup_pending"], true);
    assert_eq!(v["storage"]["blocking_reason"], "moving_data_dir");
    std::fs::remove_file(s.data.join("state/storage_migration.json")).unwrap();

    let core = s.data.join("config/core_config.json");
    write(&core, b"{broken");
    let (_, v) = s.get("/api/system/status").await;
    assert_eq!(v["status"], "migration_required");
    assert_eq!(v["storage"]["recovery_required"], true);
    assert_eq!(v["storage"]["blocking_reason"], "recovery_required");
    assert!(v["storage"]["last_error_summary"]
        .as_str()
        .unwrap()
        .contains("core_config.json"));
    std::fs::remove_file(&core).unwrap();
    let (_, v) = s.get("/api/system/status").await;
    assert_eq!(v["status"], "ready");

    s.state.set_ready(false);
    let (code, v) = s.get("/api/system/status").await;
    assert_eq!(
        (code, v["status"].as_str(), v["ready"].as_bool()),
        (200, Some("starting"), Some(false))
    );
}

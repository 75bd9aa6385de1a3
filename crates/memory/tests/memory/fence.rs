//! Writes while cloud storage is fenced.

use crate::common::*;

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

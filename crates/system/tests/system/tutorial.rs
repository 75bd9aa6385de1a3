//! `GET|PUT /api/seven-day-tutorial/state`.

use crate::common::*;

#[tokio::test]
async fn seven_day_tutorial_revisions() {
    let s = server().await;
    let (code, v) = s.get("/api/seven-day-tutorial/state").await;
    assert_eq!(code, 200);
    assert_eq!(
        v,
        json!({"ok": true, "storeVersion": 1, "initialized": false, "revision": 0, "state": null})
    );
    let state = json!({"firstSeenDate": "2024-05-01", "completedRounds": [2, 1, 1, 9], "skippedRounds": [1, 3], "currentRound": 2, "junk": true});
    let (code, v) = send_csrf(
        &s,
        Method::PUT,
        "/api/seven-day-tutorial/state",
        json!({"state": state, "expectedRevision": 0}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (v["revision"].as_i64(), v["initialized"].as_bool()),
        (Some(1), Some(true))
    );
    assert_eq!(v["state"]["completedRounds"], json!([1, 2]));
    assert_eq!(v["state"]["skippedRounds"], json!([3]));
    assert!(v["state"].get("junk").is_none());
    let path = s.data.join("state/seven_day_tutorial_state.json");
    let before = std::fs::read(&path).unwrap();

    let (code, v) = send_csrf(
        &s,
        Method::PUT,
        "/api/seven-day-tutorial/state",
        json!({"state": {"completedRounds": [7]}, "expectedRevision": 0}),
    )
    .await;
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error_code"], "seven_day_tutorial_revision_conflict");
    assert_eq!(v["revision"], 1);
    assert_eq!(v["state"]["completedRounds"], json!([1, 2]));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a stale write changes nothing"
    );
    for bad in [
        json!({"state": {}, "expectedRevision": true}),
        json!({"state": {}, "expectedRevision": -1}),
        json!({"state": {}, "expectedRevision": 1.5}),
        json!({"state": [], "expectedRevision": 1}),
        json!({"expectedRevision": 1}),
    ] {
        let (code, _) = send_csrf(
            &s,
            Method::PUT,
            "/api/seven-day-tutorial/state",
            bad.clone(),
        )
        .await;
        assert_eq!(code, 400, "{bad}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let (code, v) = send_csrf(
        &s,
        Method::PUT,
        "/api/seven-day-tutorial/state",
        json!({"state": {"completedRounds": [7]}, "expectedRevision": 1}),
    )
    .await;
    assert_eq!((code, v["revision"].as_i64()), (200, Some(2)));
    let (_, v) = s.get("/api/seven-day-tutorial/state").await;
    assert_eq!(v["state"]["completedRounds"], json!([7]));

    let legacy = server_with(|data, _| {
        write(
            &data.join("state/tutorial_prompt.json"),
            br#"{"completed": true}"#,
        )
    })
    .await;
    let (_, v) = legacy.get("/api/seven-day-tutorial/state").await;
    assert_eq!(
        (v["revision"].as_i64(), v["initialized"].as_bool()),
        (Some(1), Some(true))
    );
    assert_eq!(v["state"]["completedRounds"], json!([1]));
}

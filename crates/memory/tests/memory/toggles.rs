//! `review_config` and `powerful_memory_config`.

use crate::common::*;

fn core_config(s: &TestServer) -> PathBuf {
    s.data.join("config/core_config.json")
}

#[tokio::test]
async fn toggles_follow_every_rule() {
    let s = server().await;
    let _ = std::fs::remove_file(core_config(&s));
    for path in [
        "/api/memory/review_config",
        "/api/memory/powerful_memory_config",
    ] {
        let (st, b) = s.get(path).await;
        assert_eq!((st, b), (200, json!({"enabled": true})), "{path} default");
    }
    // Only a missing file starts a new configuration.
    let (st, b) = s
        .post("/api/memory/review_config", json!({"enabled": false}))
        .await;
    assert_eq!((st, b), (200, json!({"success": true, "enabled": false})));
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg, json!({"recent_memory_auto_review": false}));
    assert_eq!(
        s.get("/api/memory/review_config").await.1,
        json!({"enabled": false})
    );

    // Other keys are kept.
    std::fs::write(
        core_config(&s),
        br#"{"coreApi": "qwen", "recent_memory_auto_review": false}"#,
    )
    .unwrap();
    let (st, _) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": true}),
        )
        .await;
    assert_eq!(st, 200);
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg["coreApi"], "qwen");
    assert_eq!(cfg["powerful_memory_enabled"], true);
    assert_eq!(cfg["recent_memory_auto_review"], false);

    // Bad POST bodies → 400, file untouched.
    let before = std::fs::read(core_config(&s)).unwrap();
    let bad: Vec<&[u8]> = vec![
        b"null",
        b"[]",
        b"true",
        b"0",
        b"\"false\"",
        b"{}",
        br#"{"enabled": null}"#,
        br#"{"enabled": "false"}"#,
        br#"{"enabled": 0}"#,
        br#"{"enabled": 1}"#,
        br#"{"enabled": []}"#,
        br#"{"enabled": {}}"#,
        b"{broken",
        b"",
        b"\xff",
    ];
    for path in [
        "/api/memory/review_config",
        "/api/memory/powerful_memory_config",
    ] {
        for body in &bad {
            let (st, b) = post_raw(&s, path, body.to_vec()).await;
            assert_eq!(st, 400, "{path} {body:?} → {b}");
            assert_eq!(b["success"], false);
            assert!(b["error"].is_string());
        }
    }
    assert_eq!(std::fs::read(core_config(&s)).unwrap(), before);

    // Corrupt files: GET 503 {error} without enabled; POST refuses and keeps the bytes.
    let corrupt: Vec<&[u8]> = vec![b"{broken", b"[]", b"null", b"\"text\"", b"\xff\xfe", b""];
    for raw in corrupt {
        std::fs::write(core_config(&s), raw).unwrap();
        for path in [
            "/api/memory/review_config",
            "/api/memory/powerful_memory_config",
        ] {
            let (st, b) = s.get(path).await;
            assert_eq!(st, 503, "{raw:?} {b}");
            assert!(b["error"].is_string());
            assert!(b.get("enabled").is_none() && b.get("code").is_none(), "{b}");
            let (st, b) = s.post(path, json!({"enabled": true})).await;
            assert_eq!(b["success"], false, "{raw:?} {b}");
            assert_eq!(st, 503);
            assert_eq!(std::fs::read(core_config(&s)).unwrap(), raw);
        }
    }

    // A non-boolean stored value: 503 with code; the keys are judged independently;
    // a valid POST repairs it and keeps the other keys.
    for v in [
        json!(null),
        json!("false"),
        json!(0),
        json!(1),
        json!([]),
        json!({}),
    ] {
        std::fs::write(
            core_config(&s),
            serde_json::to_vec(&json!({"recent_memory_auto_review": v, "other": 7})).unwrap(),
        )
        .unwrap();
        let (st, b) = s.get("/api/memory/review_config").await;
        assert_eq!(st, 503);
        assert_eq!(b["code"], "invalid_memory_setting");
        assert!(b.get("enabled").is_none());
        assert_eq!(
            s.get("/api/memory/powerful_memory_config").await,
            (200, json!({"enabled": true}))
        );
    }
    let (st, _) = s
        .post("/api/memory/review_config", json!({"enabled": true}))
        .await;
    assert_eq!(st, 200);
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg, json!({"recent_memory_auto_review": true, "other": 7}));
    assert_eq!(
        s.get("/api/memory/review_config").await,
        (200, json!({"enabled": true}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toggle_writes_serialise_and_keep_other_keys() {
    let s = Arc::new(server().await);
    std::fs::write(core_config(&s), br#"{"coreApi": "keep-me"}"#).unwrap();
    let mut handles = Vec::new();
    for i in 0..20 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let path = if i % 2 == 0 {
                "/api/memory/review_config"
            } else {
                "/api/memory/powerful_memory_config"
            };
            let (st, _) = s.post(path, json!({"enabled": i % 4 < 2})).await;
            assert_eq!(st, 200);
            let (st, b) = s.get(path).await;
            assert_eq!(st, 200);
            assert!(b["enabled"].is_boolean());
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg["coreApi"], "keep-me");
    assert!(cfg["recent_memory_auto_review"].is_boolean());
    assert!(cfg["powerful_memory_enabled"].is_boolean());
}

#[tokio::test]
async fn powerful_memory_off_migrates_first() {
    let s = server().await;
    let refl = s.data.join("memory/Companion/reflections.json");
    std::fs::write(
        &refl,
        serde_json::to_vec(&json!([
            {"id": "r1", "status": "confirmed", "confirmed_at": "2020-01-01T00:00:00Z"},
            {"id": "r2", "status": "pending", "created_at": "2020-01-01T00:00:00Z"}
        ]))
        .unwrap(),
    )
    .unwrap();
    // A failing migration (another character's reflections are unreadable)
    // leaves the setting unsaved.
    std::fs::create_dir_all(s.data.join("memory/Other")).unwrap();
    std::fs::write(s.data.join("memory/Other/reflections.json"), b"{not json").unwrap();
    std::fs::write(
        core_config(&s),
        br#"{"powerful_memory_enabled": true, "x": 1}"#,
    )
    .unwrap();
    let cfg_before = std::fs::read(core_config(&s)).unwrap();
    let refl_before = std::fs::read(&refl).unwrap();
    let (st, b) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(b["success"], false, "{b}");
    assert!(b["error"].as_str().unwrap().contains("reflections"));
    assert_eq!(st, 500);
    assert_eq!(std::fs::read(core_config(&s)).unwrap(), cfg_before);
    assert_eq!(
        std::fs::read(&refl).unwrap(),
        refl_before,
        "all-or-nothing migration"
    );
    assert_eq!(
        s.get("/api/memory/powerful_memory_config").await.1,
        json!({"enabled": true})
    );

    // Migration succeeds → anchors reset, then the value is saved.
    std::fs::remove_dir_all(s.data.join("memory/Other")).unwrap();
    let (st, b) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!((st, b), (200, json!({"success": true, "enabled": false})));
    let r: Value = serde_json::from_slice(&std::fs::read(&refl).unwrap()).unwrap();
    assert_ne!(r[0]["confirmed_at"], "2020-01-01T00:00:00Z");
    assert!(r[0]["age_anchor_reset_at"].is_string());
    assert!(
        r[1].get("age_anchor_reset_at").is_none(),
        "pending ones untouched"
    );
    let cfg: Value = serde_json::from_slice(&std::fs::read(core_config(&s)).unwrap()).unwrap();
    assert_eq!(cfg, json!({"powerful_memory_enabled": false, "x": 1}));

    // Already boolean false: no migration again.
    let stamp = std::fs::read(&refl).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (st, _) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(std::fs::read(&refl).unwrap(), stamp);
    // An invalid legacy value counts as unknown: the migration runs.
    std::fs::write(core_config(&s), br#"{"powerful_memory_enabled": "no"}"#).unwrap();
    let (st, _) = s
        .post(
            "/api/memory/powerful_memory_config",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(st, 200);
    assert_ne!(std::fs::read(&refl).unwrap(), stamp);
}

//! `GET|POST /api/config/conversation-settings`.

use crate::common::*;

#[tokio::test]
async fn conversation_settings_revision_etag_and_if_match() {
    let s = server().await;
    let (st, h, v) = get_with_headers(&s, CS).await;
    assert_eq!(st, 200);
    assert_eq!(h["etag"], "\"conversation-settings-0\"");
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(v["revision"], json!("0"));
    assert_eq!(v["settings"], json!({}));
    assert_eq!(v["reset"], json!(false));
    assert_eq!(v["telemetryBranch"], json!("main"));

    let (st, h, v) = post_with(
        &s,
        CS,
        &[("If-Match", "\"conversation-settings-0\"")],
        json!({"proactiveChatEnabled": true, "proactiveChatInterval": 0, "bogus": 1}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(h["etag"], "\"conversation-settings-1\"");
    assert_eq!(v["revision"], json!("1"));
    assert_eq!(v["settings"], json!({"proactiveChatEnabled": true}));
    assert_eq!(v["rejected"], json!(["proactiveChatInterval"]));
    assert_eq!(v["ignored"], json!(["bogus"]));

    // Stale If-Match: 412 with the current state, nothing written.
    let disk = std::fs::read(s.data.join("config/conversation_settings.json")).unwrap();
    let (st, h, v) = post_with(
        &s,
        CS,
        &[("If-Match", "\"conversation-settings-0\"")],
        json!({"subtitleEnabled": true}),
    )
    .await;
    assert_eq!(st, 412, "{v}");
    assert_eq!(h["etag"], "\"conversation-settings-1\"");
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(v["success"], json!(false));
    assert_eq!(v["settings"], json!({"proactiveChatEnabled": true}));
    assert_eq!(v["revision"], json!("1"));
    assert!(v["decisions"].is_object());
    assert_eq!(
        std::fs::read(s.data.join("config/conversation_settings.json")).unwrap(),
        disk
    );

    // Weak form and the body's bare revision both match; no If-Match is accepted.
    let (st, _, v) = post_with(
        &s,
        CS,
        &[("If-Match", "W/\"conversation-settings-1\"")],
        json!({"subtitleEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (st, _, v) = post_with(
        &s,
        CS,
        &[("If-Match", "2")],
        json!({"subtitleEnabled": false}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (st, _, v) = post_with(&s, CS, &[], json!({"mergeMessagesEnabled": true})).await;
    assert_eq!((st, v["revision"].clone()), (200, json!("4")));
    // A no-op write keeps the revision.
    let (st, h, v) = post_with(&s, CS, &[], json!({"mergeMessagesEnabled": true})).await;
    assert_eq!(st, 200);
    assert_eq!(v["changed"], json!(false));
    assert_eq!(h["etag"], "\"conversation-settings-4\"");
    for bad in [
        "*",
        "\"abc\"",
        "conversation-settings-",
        "\"conversation-settings-1",
        "1, 2",
    ] {
        let (st, _, v) = post_with(
            &s,
            CS,
            &[("If-Match", bad)],
            json!({"subtitleEnabled": true}),
        )
        .await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
    // Persisted across a re-read from disk.
    let (_, _, v) = get_with_headers(&s, CS).await;
    assert_eq!(v["revision"], json!("4"));
    assert_eq!(v["settings"]["mergeMessagesEnabled"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_writers_with_the_same_if_match_exactly_one_wins() {
    let s = server().await;
    let (st, _, _) = post_with(&s, CS, &[], json!({"focusModeEnabled": false})).await;
    assert_eq!(st, 200);
    for round in 0..5 {
        let (_, h, _) = get_with_headers(&s, CS).await;
        let etag = h["etag"].to_str().unwrap().to_string();
        let hdrs = [("If-Match", etag.as_str())];
        let a = post_with(
            &s,
            CS,
            &hdrs,
            json!({"focusModeEnabled": round % 2 == 0, "textGuardMaxLength": 100 + round}),
        );
        let b = post_with(
            &s,
            CS,
            &hdrs,
            json!({"focusModeEnabled": round % 2 == 0, "textGuardMaxLength": 200 + round}),
        );
        let ((sa, _, va), (sb, _, vb)) = tokio::join!(a, b);
        let mut statuses = [sa, sb];
        statuses.sort();
        assert_eq!(statuses, [200, 412], "round {round}: {va} {vb}");
        let winner = if sa == 200 { &va } else { &vb };
        let loser = if sa == 200 { &vb } else { &va };
        assert_eq!(loser["settings"], winner["settings"]);
        let (_, _, now) = get_with_headers(&s, CS).await;
        assert_eq!(now["settings"], winner["settings"]);
    }
}

#[tokio::test]
async fn asr_decision_rejects_an_older_window_even_when_it_arrives_last() {
    let s = server().await;
    let hdr = |wid: u64, writer: &str, value: bool| {
        json!({"writeId": wid, "writerId": writer, "value": value}).to_string()
    };
    let asr = "X-Conversation-Settings-ASR-Decision";
    let newer = hdr(2_000, "window-b", true);
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &newer)],
        json!({"independentAsrEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["decisions"]["independentAsrEnabled"],
        json!({"writeId": 2000, "writerId": "window-b", "value": true})
    );
    // The older window's write arrives last: 412 even without If-Match.
    let older = hdr(1_000, "window-a", false);
    let (st, h, v) = post_with(
        &s,
        CS,
        &[(asr, &older)],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 412, "{v}");
    assert_eq!(h["etag"], "\"conversation-settings-1\"");
    assert_eq!(v["settings"]["independentAsrEnabled"], json!(true));
    // Same writeId, writer ordering decides.
    let (st, _, _) = post_with(
        &s,
        CS,
        &[(asr, &hdr(2_000, "window-a", false))],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 412);
    // Same key with another value is a conflict; same key and value is fine.
    let (st, _, _) = post_with(
        &s,
        CS,
        &[(asr, &hdr(2_000, "window-b", false))],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 412);
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &newer)],
        json!({"independentAsrEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["changed"], json!(false));
    // A newer decision wins.
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &hdr(3_000, "window-a", false))],
        json!({"independentAsrEnabled": false}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["settings"]["independentAsrEnabled"], json!(false));
    // A decision whose value disagrees with the body is ignored (legacy path).
    let (st, _, v) = post_with(
        &s,
        CS,
        &[(asr, &hdr(10, "stale", false))],
        json!({"independentAsrEnabled": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["decisions"]["independentAsrEnabled"]["writerId"],
        json!("server-legacy")
    );
    // Invalid headers are 400.
    let max_safe = 9_007_199_254_740_991u64.to_string();
    for bad in [
        "not json".to_string(),
        json!({"writeId": -1, "writerId": "w", "value": true}).to_string(),
        json!({"writeId": true, "writerId": "w", "value": true}).to_string(),
        json!({"writeId": 1, "writerId": "", "value": true}).to_string(),
        json!({"writeId": 1, "writerId": "wé", "value": true}).to_string(),
        json!({"writeId": 1, "writerId": "w", "value": "yes"}).to_string(),
        format!("{{\"writeId\": {max_safe}, \"writerId\": \"w\", \"value\": true}}"),
    ] {
        let (st, _, v) = post_with(
            &s,
            CS,
            &[(asr, &bad)],
            json!({"independentAsrEnabled": true}),
        )
        .await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
}

#[tokio::test]
async fn reset_marker_and_full_snapshot() {
    let s = TestServer::start_with(
        &[companiond_config::FAMILY],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("config")).unwrap();
                std::fs::write(
                    data.join("config/conversation_settings.json"),
                    json!({"settings": {"subtitleEnabled": true}, "revision": 9, "reset": true, "uiLanguage": "ja"}).to_string(),
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let (_, _, v) = get_with_headers(&s, CS).await;
    assert_eq!(v["reset"], json!(true));
    assert_eq!(v["revision"], json!("9"));
    // A partial (pre-hydration) write keeps the marker and bumps the revision.
    let (st, _, v) = post_with(&s, CS, &[], json!({"focusModeEnabled": true})).await;
    assert_eq!(st, 200);
    assert_eq!(v["reset"], json!(true));
    assert_eq!(v["revision"], json!("10"));
    // Only exactly "1" marks a full snapshot.
    let (_, _, v) = post_with(
        &s,
        CS,
        &[("X-Conversation-Settings-Full-Snapshot", "true")],
        json!({"focusModeEnabled": true}),
    )
    .await;
    assert_eq!(v["reset"], json!(true));
    let (st, h, v) = post_with(
        &s,
        CS,
        &[("X-Conversation-Settings-Full-Snapshot", "1")],
        json!({"focusModeEnabled": true}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(v["reset"], json!(false));
    assert_eq!(h["etag"], "\"conversation-settings-11\"");
    // Other keys of the document are kept.
    let (_, pl) = s.get("/api/config/platform_language").await;
    assert_eq!(pl["uiLanguage"], json!("ja"));
}

#[tokio::test]
async fn noise_reduction_is_applied_to_active_sessions_only() {
    let s = server().await;
    let (st, _) = s
        .post("/api/characters/profile", json!({"name": "Idle"}))
        .await;
    assert_eq!(st, 200);
    let mut ws = s.ws("Companion").await;
    wait_active(&s, "Companion").await;
    let (st, _, v) = post_with(&s, CS, &[], json!({"noiseReductionEnabled": false})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["sessions_applied"], json!(1));
    let frame = next_of_type(&mut ws, "settings_changed").await;
    assert_eq!(
        frame,
        json!({"type": "settings_changed", "settings": {"noiseReductionEnabled": false}})
    );
    let active = s.state.sessions.get("Companion").unwrap();
    assert_eq!(
        active.settings().get("noiseReductionEnabled"),
        Some(&json!(false))
    );
    let idle = s.state.sessions.get("Idle").unwrap();
    assert!(idle.settings().get("noiseReductionEnabled").is_none());
    // An invalid value is not applied anywhere.
    let (_, _, v) = post_with(&s, CS, &[], json!({"noiseReductionEnabled": "on"})).await;
    assert_eq!(v["sessions_applied"], json!(0));
    assert_eq!(v["rejected"], json!(["noiseReductionEnabled"]));
}

#[tokio::test]
async fn conversation_settings_bad_bodies() {
    let s = server().await;
    for b in ["[1]", "\"x\"", "{oops"] {
        let (st, v) = post_raw(&s, CS, b).await;
        assert_eq!(st, 400, "{b}: {v}");
        assert_eq!(v["success"], json!(false));
    }
    // A torn document: refused (503), never overwritten; a read sets it aside
    // whole (docs/data.md § Damaged documents) and the next calls start anew.
    std::fs::write(s.data.join("config/conversation_settings.json"), b"[1,2").unwrap();
    let (st, _, v) = post_with(&s, CS, &[], json!({"subtitleEnabled": true})).await;
    assert_eq!(st, 503, "{v}");
    let (st, _) = s.get(CS).await;
    assert_eq!(st, 503);
    let aside: Vec<_> = std::fs::read_dir(s.data.join("config"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("conversation_settings.json.corrupt-")
        })
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(aside[0].path()).unwrap(), b"[1,2");
    let (st, v) = s.get(CS).await;
    assert_eq!(st, 200, "{v}");
    let (st, _, v) = post_with(&s, CS, &[], json!({"subtitleEnabled": true})).await;
    assert_eq!(st, 200, "{v}");
}

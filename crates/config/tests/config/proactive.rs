//! `/api/proactive/mode` and `/api/proactive/settings`.

use crate::common::*;

#[tokio::test]
async fn proactive_every_transition() {
    let s = server().await;
    let (_, v) = s.get("/api/proactive/mode").await;
    assert_eq!(v["mode"], json!("custom"));
    assert_eq!(
        v["available_modes"],
        json!(["off", "normal", "focus", "frequent"])
    );
    assert_eq!(v["settings"], json!({}));
    // The user-owned switch, set through the conversation-settings path only.
    let (st, _, _) = post_with(&s, CS, &[], json!({"proactiveVisionEnabled": true})).await;
    assert_eq!(st, 200);
    let modes = ["off", "normal", "focus", "frequent"];
    // custom → each preset, and each preset → each preset.
    let mut starts: Vec<&str> = vec!["custom"];
    starts.extend(modes);
    for from in &starts {
        for to in modes {
            if *from == "custom" {
                let (_, v) = s.post("/api/proactive/settings", json!({"proactiveChatEnabled": true, "proactiveNewsChatEnabled": false, "proactiveVisionChatEnabled": true, "proactiveChatInterval": 77})).await;
                assert_eq!(v["success"], json!(true), "{v}");
                assert_eq!(mode_of(&s).await, "custom");
            } else {
                let (_, v) = s.post("/api/proactive/mode", json!({"mode": from})).await;
                assert_eq!(v["success"], json!(true), "{v}");
                assert_eq!(mode_of(&s).await, *from);
            }
            let (_, before) = s.get("/api/proactive/settings").await;
            let (st, v) = s.post("/api/proactive/mode", json!({"mode": to})).await;
            assert_eq!(st, 200);
            assert_eq!(v["success"], json!(true), "{from}->{to}: {v}");
            assert_eq!(v["mode"], json!(to));
            assert_eq!(v["applied"], preset(to), "{from}->{to}");
            assert!(v.get("rejected").is_none());
            assert_eq!(mode_of(&s).await, to, "{from}->{to}");
            let (_, after) = s.get("/api/proactive/settings").await;
            // A mode switch never changes proactiveVisionEnabled.
            assert_eq!(after["settings"]["proactiveVisionEnabled"], json!(true));
            if to == "off" {
                // off keeps the intervals.
                assert_eq!(
                    after["settings"]["proactiveChatInterval"],
                    before["settings"]["proactiveChatInterval"]
                );
                assert_eq!(
                    after["settings"]["proactiveVisionInterval"],
                    before["settings"]["proactiveVisionInterval"]
                );
            }
        }
    }
    // A preset → custom by changing fields; back to a preset by matching values.
    let (_, v) = s
        .post("/api/proactive/mode", json!({"mode": "normal"}))
        .await;
    assert_eq!(v["success"], json!(true));
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveMemeEnabled": false}),
        )
        .await;
    assert_eq!(v["applied"], json!({"proactiveMemeEnabled": false}));
    assert_eq!(v["mode"], json!("custom"));
    assert_eq!(mode_of(&s).await, "custom");
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveMemeEnabled": true}),
        )
        .await;
    assert_eq!(v["mode"], json!("normal"));
    // The file holds the preset values.
    let disk: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("config/conversation_settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(disk["settings"]["proactiveChatInterval"], json!(15));
    assert_eq!(disk["settings"]["proactiveVisionEnabled"], json!(true));
}

#[tokio::test]
async fn proactive_settings_rejections_and_user_owned() {
    let s = server().await;
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({
                "proactiveChatEnabled": true,
                "proactiveChatInterval": 0,
                "proactiveVisionInterval": 12.5,
                "proactiveMusicEnabled": 1,
                "proactiveVisionEnabled": false,
                "somethingElse": true
            }),
        )
        .await;
    assert_eq!(v["success"], json!(true), "{v}");
    assert_eq!(v["applied"], json!({"proactiveChatEnabled": true}));
    let mut rejected: Vec<String> = serde_json::from_value(v["rejected"].clone()).unwrap();
    rejected.sort();
    assert_eq!(
        rejected,
        [
            "proactiveChatInterval",
            "proactiveMusicEnabled",
            "proactiveVisionInterval"
        ]
    );
    assert_eq!(v["rejected_user_owned"], json!(["proactiveVisionEnabled"]));
    let (_, g) = s.get("/api/proactive/settings").await;
    assert_eq!(g["settings"], json!({"proactiveChatEnabled": true}));
    // Only the user-owned field: an application error, HTTP 200.
    let (st, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveVisionEnabled": true}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["success"], json!(false));
    assert_eq!(v["rejected_user_owned"], json!(["proactiveVisionEnabled"]));
    let (st, v) = s
        .post("/api/proactive/settings", json!({"unrelated": 1}))
        .await;
    assert_eq!((st, v["success"].clone()), (200, json!(false)));
    // Unknown modes.
    for m in [json!("custom"), json!("turbo"), json!(null)] {
        let (st, v) = s.post("/api/proactive/mode", json!({"mode": m})).await;
        assert_eq!(st, 200);
        assert_eq!(v["success"], json!(false), "{m}: {v}");
        assert!(v["error"].as_str().unwrap().contains("unknown mode"));
    }
    // A mode of another type is refused as a body (200, as every proactive refusal).
    let (st, v) = s
        .post("/api/proactive/mode", json!({"mode": ["off"]}))
        .await;
    assert_eq!(
        (st, v["error_code"].as_str()),
        (200, Some("invalid_body")),
        "{v}"
    );
    // Proactive writes bump the revision: a UI holding the old ETag gets 412.
    let (_, h, _) = get_with_headers(&s, CS).await;
    let etag = h["etag"].to_str().unwrap().to_string();
    let (_, v) = s
        .post("/api/proactive/mode", json!({"mode": "focus"}))
        .await;
    assert_eq!(v["success"], json!(true));
    let (st, _, _) = post_with(
        &s,
        CS,
        &[("If-Match", &etag)],
        json!({"subtitleEnabled": true}),
    )
    .await;
    assert_eq!(st, 412);
    // Strict inference: an int stored where the preset has a bool is not a match.
    std::fs::write(
        s.data.join("config/conversation_settings.json"),
        json!({"settings": {"proactiveChatEnabled": 0, "proactiveVisionChatEnabled": false, "proactiveNewsChatEnabled": false,
            "proactiveVideoChatEnabled": false, "proactivePersonalChatEnabled": false, "proactiveCommunityChatEnabled": false,
            "proactiveMusicEnabled": false, "proactiveMemeEnabled": false, "proactiveMiniGameInviteEnabled": false}, "revision": 3}).to_string(),
    )
    .unwrap();
    assert_eq!(mode_of(&s).await, "custom");
    let (_, v) = s
        .post(
            "/api/proactive/settings",
            json!({"proactiveChatEnabled": false}),
        )
        .await;
    assert_eq!(v["mode"], json!("off"));
}

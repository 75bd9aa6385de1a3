//! `GET|POST /api/config/core_api` (provider settings, masking, notifications).

use crate::common::*;

#[tokio::test]
async fn custom_slots_persist_and_resolve() {
    let s = server().await;
    let mut body = json!({"enableCustomApi": true});
    for slot in [
        "conversation",
        "summary",
        "correction",
        "emotion",
        "vision",
        "agent",
    ] {
        body[format!("{slot}ModelUrl")] = json!("http://127.0.0.1:9/v1");
        body[format!("{slot}ModelId")] = json!(format!("{slot}-model"));
        body[format!("{slot}ModelApiKey")] = json!(format!("sk-{slot}"));
    }
    let (st, v) = s.post("/api/config/core_api", body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["success"], json!(true));
    let stored = core_config(&s);
    assert_eq!(stored["conversationModelApiKey"], json!("sk-conversation"));
    for slot in Slot::ALL {
        let ep = s.state.llm.endpoint(slot).await.expect("resolved");
        assert_eq!(ep.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(ep.model, format!("{}-model", slot.as_str()));
        assert_eq!(ep.api_key, format!("sk-{}", slot.as_str()));
    }
    let (_, h, g) = get_with_headers(&s, "/api/config/core_api").await;
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(g["enableCustomApi"], json!(true));
    assert_eq!(g["conversationModelUrl"], json!("http://127.0.0.1:9/v1"));
    assert_eq!(g["conversationModelApiKey"], json!(MASKED));
    assert!(!g.to_string().contains("sk-conversation"));
}

#[tokio::test]
async fn every_secret_is_masked_and_a_masked_value_never_replaces_it() {
    let s = server().await;
    let (_, cat) = s.get("/api/config/api_providers").await;
    let mut secrets: Vec<String> = vec!["coreApiKey".into(), "mcpToken".into()];
    for p in cat["providers"].as_array().unwrap() {
        let f = cat["api_key_registry"][p["key"].as_str().unwrap()]["config_field"]
            .as_str()
            .unwrap()
            .to_string();
        secrets.push(f);
    }
    for slot in companiond_config::core_api::SLOTS {
        secrets.push(format!("{slot}ModelApiKey"));
    }
    let mut body = json!({"coreApi": "openai", "assistApi": "qwen"});
    for (i, k) in secrets.iter().enumerate() {
        body[k] = json!(format!("secret-value-{i:03}-abcdef"));
    }
    let (st, v) = s.post("/api/config/core_api", body.clone()).await;
    assert_eq!(st, 200, "{v}");
    let stored_before = core_config(&s);

    // GET masks every secret and leaks none.
    let (_, g) = s.get("/api/config/core_api").await;
    let text = g.to_string();
    assert!(
        !text.contains("secret-value-"),
        "a raw secret leaked: {text}"
    );
    for k in &secrets {
        assert_eq!(g[k], json!(MASKED), "{k} not masked");
    }
    assert_eq!(g["api_key"], json!(MASKED));
    assert_eq!(
        g["api_key_display"],
        json!(format!("sec{}def", "*".repeat(17)))
    );

    // The whole GET body posted back changes no secret.
    let (st, v) = s.post("/api/config/core_api", g.clone()).await;
    assert_eq!(st, 200, "{v}");
    let after = core_config(&s);
    for k in &secrets {
        assert_eq!(
            after[k], stored_before[k],
            "{k} changed by a masked round trip"
        );
    }
    assert!(after.get("api_key_display").is_none());

    // Each placeholder shape, for every secret field.
    let display = g["api_key_display"].as_str().unwrap().to_string();
    for placeholder in [MASKED, "****", "••••••••••••", display.as_str()] {
        for k in &secrets {
            let (st, v) = s
                .post("/api/config/core_api", json!({ k.as_str(): placeholder }))
                .await;
            assert_eq!(st, 200, "{k} {placeholder}: {v}");
        }
    }
    let after = core_config(&s);
    for k in &secrets {
        assert_eq!(after[k], stored_before[k], "{k} replaced by a placeholder");
    }

    // A real new value replaces; an empty string clears.
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"mcpToken": "new-token-value", "assistApiKeyQwen": ""}),
        )
        .await;
    assert_eq!(st, 200);
    let after = core_config(&s);
    assert_eq!(after["mcpToken"], json!("new-token-value"));
    assert_eq!(after["assistApiKeyQwen"], json!(""));
    let (_, g) = s.get("/api/config/core_api").await;
    assert_eq!(g["assistApiKeyQwen"], json!(""));
}

#[tokio::test]
async fn core_api_validation_leaves_the_file_untouched() {
    let s = server().await;
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "openai", "coreApiKey": "sk-one"}),
        )
        .await;
    assert_eq!(st, 200);
    let before = std::fs::read(s.data.join("config/core_config.json")).unwrap();
    for bad in [
        json!({}),
        json!({"coreApi": "no-such-provider"}),
        json!({"coreApiKey": "sk-two", "disableTts": "no"}),
        json!({"coreApiKey": "sk-two", "agentModelUrl": "file:///etc/passwd"}),
        json!({"coreApiKey": ["sk"]}),
    ] {
        let (st, v) = s.post("/api/config/core_api", bad.clone()).await;
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["success"], json!(false));
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    assert_eq!(
        std::fs::read(s.data.join("config/core_config.json")).unwrap(),
        before
    );
    // A corrupt file is reported and never overwritten.
    std::fs::write(s.data.join("config/core_config.json"), b"{broken").unwrap();
    let (st, v) = s
        .post("/api/config/core_api", json!({"coreApiKey": "sk-3"}))
        .await;
    assert_eq!(st, 503, "{v}");
    let (st, _) = s.get("/api/config/core_api").await;
    assert_eq!(st, 503);
    assert_eq!(
        std::fs::read(s.data.join("config/core_config.json")).unwrap(),
        b"{broken"
    );
}

#[tokio::test]
async fn provider_change_keeps_old_key_and_notifies_active_sessions() {
    let s = server().await;
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "openai", "coreApiKey": "sk-openai-key"}),
        )
        .await;
    assert_eq!(st, 200);
    let mut ws = s.ws("Companion").await;
    wait_active(&s, "Companion").await;
    let (st, v) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "deepseek", "coreApiKey": "sk-deepseek-key"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["sessions_notified"], json!(1));
    let frame = next_of_type(&mut ws, "provider_changed").await;
    assert_eq!(frame["type"], json!("provider_changed"));
    let cfg = core_config(&s);
    assert_eq!(cfg["coreApi"], json!("deepseek"));
    assert_eq!(cfg["coreApiKey"], json!("sk-deepseek-key"));
    assert_eq!(cfg["assistApiKeyOpenai"], json!("sk-openai-key"));
    // Switching back promotes the Key Book key when the body carries a mask.
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"coreApi": "openai", "coreApiKey": MASKED}),
        )
        .await;
    assert_eq!(st, 200);
    let cfg = core_config(&s);
    assert_eq!(cfg["coreApiKey"], json!("sk-openai-key"));
    let ep = s.state.llm.endpoint(Slot::Conversation).await.unwrap();
    assert_eq!(ep.base_url, "https://api.openai.com/v1");
    assert_eq!(ep.api_key, "sk-openai-key");
}

//! `POST /api/proactive_chat`.

use crate::common::*;

#[tokio::test]
async fn proactive_chat_reason_codes() {
    let s = server().await;
    let (code, v) = s
        .post_csrf("/api/proactive_chat", json!({"lanlan_name": "Ghost"}))
        .await;
    assert_eq!(
        (code, v["reason_code"].as_str(), v["stage"].as_str()),
        (404, Some("ERROR_CHARACTER_NOT_FOUND"), Some("entry_guard"))
    );
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (code, v["action"].as_str(), v["reason_code"].as_str()),
        (200, Some("pass"), Some("DELIVERY_FAILED")),
        "{v}"
    );

    let mut w = ws(&s, "Companion").await;
    let (_, v) = s
        .post_csrf("/api/proactive_chat", json!({"persona_name": "Companion"}))
        .await;
    assert_eq!(v["reason_code"], "PASS_MODEL_UNAVAILABLE");

    let llm = MockLlm::start("default").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text("Hey, how is your afternoon going?".into()));
    let (code, v) = s
        .post_csrf(
            "/api/proactive_chat",
            json!({"persona_name": "Companion", "language": "en"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (
            v["action"].as_str(),
            v["reason_code"].as_str(),
            v["stage"].as_str()
        ),
        (Some("chat"), Some("CHAT_DELIVERED"), Some("delivery"))
    );
    assert_eq!(v["active_channels"], 1);
    assert_eq!(v["source_mode"], "chat");
    let delta = next_of_type(&mut w, "assistant_delta").await;
    assert_eq!(
        (delta["text"].as_str(), delta["proactive"].as_bool()),
        (Some("Hey, how is your afternoon going?"), Some(true))
    );
    assert_eq!(
        next_of_type(&mut w, "turn_end").await["turn_id"],
        v["turn_id"]
    );
    let recent: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("memory/Companion/recent.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        recent.as_array().unwrap().last().unwrap()["data"]["content"],
        "Hey, how is your afternoon going?"
    );
    let totals: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/proactive_chat_totals.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(totals["totals"]["Companion"], 1);
    let sys = llm.chat_requests().pop().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sys.contains("[PASS]") && sys.contains("language with code en"));

    llm.push(MockReply::Text("Hey, how is your afternoon going!".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (v["reason_code"].as_str(), v["stage"].as_str()),
        (Some("PASS_DUPLICATE"), Some("dedup"))
    );
    llm.push(MockReply::Text("[PASS]".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (v["reason_code"].as_str(), v["stage"].as_str()),
        (Some("PASS_MODEL_PASS"), Some("model_decision"))
    );
    llm.push(MockReply::Text("   ".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(v["reason_code"], "PASS_GENERATION_EMPTY");
    let (_, v) = s
        .post_csrf("/api/proactive_chat", json!({"enabled_modes": []}))
        .await;
    assert_eq!(
        (v["reason_code"].as_str(), v["stage"].as_str()),
        (Some("PASS_SOURCE_EMPTY"), Some("source_selection"))
    );
    llm.push(MockReply::Status(500, "down".into()));
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (code, v["success"].as_bool(), v["reason_code"].as_str()),
        (502, Some(false), Some("ERROR_MODEL_FAILED"))
    );

    // Music source, skipped once used, restored by music_played_through.
    let music =
        json!({"enabled_modes": ["music"], "is_playing_music": true, "current_track": "Song A"});
    llm.push(MockReply::Text("Love this song you are playing!".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", music.clone()).await;
    assert_eq!(
        (v["source_mode"].as_str(), v["source_tag"].as_str()),
        (Some("music"), Some("Song A")),
        "{v}"
    );
    assert!(llm.chat_requests().pop().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("Song A"));
    let (_, v) = s.post_csrf("/api/proactive_chat", music.clone()).await;
    assert_eq!(v["reason_code"], "PASS_SOURCE_EMPTY");
    let (code, v) = s
        .post_csrf(
            "/api/proactive/music_played_through",
            json!({"lanlan_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (code, v["cleared"].as_u64(), v["lanlan_name"].as_str()),
        (200, Some(1), Some("Companion"))
    );
    llm.push(MockReply::Text("This track again, nice choice.".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", music).await;
    assert_eq!(v["reason_code"], "CHAT_DELIVERED");
    let (code, v) = s
        .post_csrf(
            "/api/proactive/music_played_through",
            json!({"persona_name": "  "}),
        )
        .await;
    assert_eq!(
        (code, v["cleared"].as_u64()),
        (200, Some(1)),
        "blank falls back to the current character"
    );
}

#[tokio::test]
async fn proactive_chat_busy_while_a_round_runs() {
    use axum::routing::post;
    let slow = Upstream::start(axum::Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            tokio::time::sleep(Duration::from_millis(600)).await;
            axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": "Slow hello there"}, "finish_reason": "stop"}]}))
        }),
    ))
    .await;
    let s = server().await;
    s.configure_llm(&format!("{}/v1", slow.base)).await;
    let _w = ws(&s, "Companion").await;
    let a = s.post_csrf("/api/proactive_chat", json!({}));
    let b = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        s.post_csrf("/api/proactive_chat", json!({})).await
    };
    let ((ca, va), (cb, vb)) = tokio::join!(a, b);
    assert_eq!(
        (ca, va["reason_code"].as_str()),
        (200, Some("CHAT_DELIVERED")),
        "{va}"
    );
    assert_eq!(
        (cb, vb["reason_code"].as_str(), vb["stage"].as_str()),
        (409, Some("PASS_BUSY"), Some("entry_guard")),
        "{vb}"
    );
    assert_eq!(vb["success"], false);
    assert!(vb["state"].is_object());
}

#[tokio::test]
async fn proactive_chat_yields_to_game_routes_and_running_turns() {
    use axum::routing::post;
    use futures::SinkExt;
    let slow = Upstream::start(axum::Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": "Slow answer"}, "finish_reason": "stop"}]}))
        }),
    ))
    .await;
    let s = server().await;
    s.configure_llm(&format!("{}/v1", slow.base)).await;
    let mut w = ws(&s, "Companion").await;
    // The AI is answering a user message: PASS_BUSY (409).
    w.send(Message::Text(
        json!({"type": "user_text", "text": "hello"}).to_string(),
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (code, v["reason_code"].as_str()),
        (409, Some("PASS_BUSY")),
        "{v}"
    );
    assert_eq!(v["state"]["ai_responding"], true);
    next_of_type(&mut w, "turn_end").await;
    // A game route owns the character: PASS_ROUTE_ACTIVE (200 pass).
    s.state
        .hooks
        .set_input_router(std::sync::Arc::new(RoutingEverything));
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (
            code,
            v["action"].as_str(),
            v["reason_code"].as_str(),
            v["stage"].as_str()
        ),
        (
            200,
            Some("pass"),
            Some("PASS_ROUTE_ACTIVE"),
            Some("entry_guard")
        ),
        "{v}"
    );
}

/// Proactive chat takes the character's prompt from the one builder
/// (companiond_core::prompt): card fields and lorebook.
#[tokio::test]
async fn proactive_prompt_comes_from_the_character_card() {
    let s = server().await;
    let card = json!({"spec": "chara_card_v3", "spec_version": "3.0", "data": {
        "name": "Companion", "description": "{{char}} is a fox who loves {{user}}.",
        "scenario": "Late at night.",
        "character_book": {"entries": [
            {"keys": [], "constant": true, "content": "LORE-ALWAYS"},
            {"keys": ["volcano"], "content": "LORE-VOLCANO"}]}}});
    s.state
        .characters
        .mutate(move |doc| {
            doc.characters.insert(
                "Companion".into(),
                json!({"_reserved": {"character_card": card}}),
            );
            Ok(())
        })
        .await
        .unwrap();
    let _w = ws(&s, "Companion").await;
    let llm = MockLlm::start("default").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text("Still up?".into()));
    let (code, v) = s
        .post_csrf("/api/proactive_chat", json!({"persona_name": "Companion"}))
        .await;
    assert_eq!((code, v["action"].as_str()), (200, Some("chat")), "{v}");
    let sys = llm.chat_requests().pop().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    for part in [
        "Companion is a fox who loves User.",
        "Scenario: Late at night.",
        "LORE-ALWAYS",
        "[PASS]",
    ] {
        assert!(sys.contains(part), "{part} missing: {sys}");
    }
    assert!(!sys.contains("LORE-VOLCANO"), "{sys}");
}

//! Mini-game invitations: `POST /api/mini_game/invite/respond` and chatting on.

use crate::common::*;

#[tokio::test]
async fn mini_game_invitation_state_machine() {
    let s = server().await;
    let llm = MockLlm::start("unused").await;
    s.configure_llm(&llm.base()).await;
    let mut w = ws(&s, "Companion").await;
    let (code, v) = s
        .post_csrf(
            "/api/activity_signal",
            json!({"persona_name": "Companion", "idle_seconds": 3, "window_title": "Desk"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    let topics = ["the weather", "your plans", "music", "cats", "tea"];
    let mut invite = None;
    for (i, t) in topics.iter().enumerate() {
        llm.push(MockReply::Text(format!(
            "Round {i}: shall we talk about {t}?"
        )));
        let (code, v) = s
            .post_csrf("/api/proactive_chat", json!({"enabled_modes": ["chat"]}))
            .await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["reason_code"], "CHAT_DELIVERED", "{v}");
        if v["source_mode"] == "mini_game_invite" {
            invite = Some(v);
            break;
        }
    }
    let v = invite.expect("the fourth delivered chat at the latest is an invitation");
    let sid = v["invite"]["session_id"].as_str().unwrap().to_string();
    let game = v["invite"]["game_type"].as_str().unwrap().to_string();
    let frame = next_of_type(&mut w, "mini_game_invite").await;
    assert_eq!(frame["session_id"], sid);
    let totals: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/proactive_chat_totals.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(totals["ever_delivered"]["Companion"], true);

    let (code, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "maybe", "session_id": sid}),
        )
        .await;
    assert_eq!(code, 400, "{v}");
    let (code, _) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": 5, "session_id": sid}),
        )
        .await;
    assert_eq!(code, 400);
    let (code, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "accept", "session_id": "wrong"}),
        )
        .await;
    assert_eq!((code, v["action"].as_str()), (200, Some("expired")));
    let (code, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": " ACCEPT ", "session_id": sid, "lanlan_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (code, v["action"].as_str()),
        (200, Some("open_game")),
        "{v}"
    );
    assert_eq!(v["game_type"], game.as_str());
    let url = v["game_url"].as_str().unwrap();
    assert!(
        url.contains(&format!("session_id={sid}")) && url.contains("lanlan_name=Companion"),
        "{url}"
    );
    let resolved = next_of_type(&mut w, "mini_game_invite_resolved").await;
    assert_eq!(
        (resolved["session_id"].as_str(), resolved["action"].as_str()),
        (Some(sid.as_str()), Some("open_game"))
    );
    let (_, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "decline", "session_id": sid}),
        )
        .await;
    assert_eq!(
        v["action"], "expired",
        "a resolved invitation cannot be answered twice"
    );
    // The body token works on this route too.
    let r = s
        .http
        .post(s.url("/api/mini_game/invite/respond"))
        .json(&json!({"_csrf_token": CSRF, "choice": "later", "session_id": sid}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn chatting_on_dismisses_a_pending_invitation() {
    use futures::SinkExt;
    let s = server().await;
    let llm = MockLlm::start("Nice to hear from you.").await;
    s.configure_llm(&llm.base()).await;
    let mut w = ws(&s, "Companion").await;
    s.post_csrf(
        "/api/activity_signal",
        json!({"persona_name": "Companion", "idle_seconds": 3, "window_title": "Desk"}),
    )
    .await;
    let mut sid = None;
    // Distinct lines (near-duplicates of a recent proactive chat are not delivered).
    let lines = [
        "Did you see the sunset over the hills tonight?",
        "I have been humming a new jazz tune all afternoon.",
        "Cats apparently sleep sixteen hours a day, lucky them!",
        "Want to plan something fun for the weekend together?",
        "Tea or coffee this morning, what did you pick?",
    ];
    for line in lines {
        llm.push(MockReply::Text(line.to_string()));
        let (_, v) = s
            .post_csrf("/api/proactive_chat", json!({"enabled_modes": ["chat"]}))
            .await;
        if v["source_mode"] == "mini_game_invite" {
            sid = v["invite"]["session_id"].as_str().map(str::to_string);
            break;
        }
    }
    let sid = sid.expect("an invitation is delivered by the fourth chat");
    next_of_type(&mut w, "mini_game_invite").await;
    // An ordinary message with a "not now" keyword: resolved as "later" (suppressed).
    w.send(Message::Text(
        json!({"type": "user_text", "text": "not now, thanks"}).to_string(),
    ))
    .await
    .unwrap();
    let resolved = next_of_type(&mut w, "mini_game_invite_resolved").await;
    assert_eq!(
        (resolved["session_id"].as_str(), resolved["action"].as_str()),
        (Some(sid.as_str()), Some("suppress"))
    );
    // The invitation is no longer pending: the button now answers "expired".
    let (_, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "accept", "session_id": sid}),
        )
        .await;
    assert_eq!(v["action"], "expired", "{v}");
}

//! `POST /api/emotion/analysis`.

use crate::common::*;

#[tokio::test]
async fn emotion_model_heuristic_and_failures() {
    let s = server().await;
    // No provider: the heuristic answers.
    let (code, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "I am so happy today haha", "persona_name": "Companion"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (v["emotion"].as_str(), v["source"].as_str()),
        (Some("happy"), Some("heuristic"))
    );
    assert_eq!(v["error_code"], "no_provider");

    let llm = MockLlm::start("{}").await;
    s.configure_llm(&llm.base()).await;
    let mut w = ws(&s, "Companion").await;
    llm.push(MockReply::Text(
        "```json\n{\"emotion\": \"Joyful\", \"confidence\": 0.9}\n```".into(),
    ));
    let (code, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "nice weather", "lanlan_name": "Companion"}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (v["emotion"].as_str(), v["confidence"].as_f64()),
        (Some("happy"), Some(0.9)),
        "{v}"
    );
    let frame = next_of_type(&mut w, "emotion").await;
    assert_eq!(frame["emotion"], "happy");
    let req = llm.chat_requests().pop().unwrap();
    assert_eq!(req["temperature"], 0.3);
    assert_eq!(req["max_tokens"], 40);

    // Model override of key and model.
    llm.push(MockReply::Text(
        r#"{"emotion":"sad","confidence":0.8}"#.into(),
    ));
    let (_, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "meh", "model": "other-model", "api_key": "sk-override"}),
        )
        .await;
    assert_eq!(v["emotion"], "sad");
    let last = llm.upstream.requests_to("/chat/completions").pop().unwrap();
    assert_eq!(last.json()["model"], "other-model");
    assert_eq!(last.headers["authorization"], "Bearer sk-override");

    // Unparsable reply: heuristic.
    llm.push(MockReply::Text("I think the user is sad".into()));
    let (_, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "so sad, crying all day"}),
        )
        .await;
    assert_eq!(
        (v["emotion"].as_str(), v["source"].as_str()),
        (Some("sad"), Some("heuristic")),
        "{v}"
    );

    // Model failure: neutral / 0.0 in a 200 envelope.
    llm.push(MockReply::Status(500, "boom".into()));
    let (code, v) = s
        .post_csrf("/api/emotion/analysis", json!({"text": "so sad"}))
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            v["success"].as_bool(),
            v["emotion"].as_str(),
            v["confidence"].as_f64()
        ),
        (Some(false), Some("neutral"), Some(0.0))
    );
    assert!(v["error"].as_str().unwrap().contains("500"));

    // Blank text: neutral 0.5 without a model call.
    let calls = llm.chat_requests().len();
    let (code, v) = s
        .post_csrf("/api/emotion/analysis", json!({"text": "   "}))
        .await;
    assert_eq!(
        (code, v["emotion"].as_str(), v["confidence"].as_f64()),
        (200, Some("neutral"), Some(0.5))
    );
    assert_eq!(llm.chat_requests().len(), calls);
    let (code, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (400, Some("missing_text"))
    );
    let (code, _) = s
        .post_csrf("/api/emotion/analysis", json!({"text": 5}))
        .await;
    assert_eq!(code, 400);
}

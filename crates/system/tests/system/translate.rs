//! `POST /api/translate` (a loopback "Google", then the model).

use crate::common::upstreams::*;

#[tokio::test]
async fn translate_google_then_model_then_original() {
    let s = server().await;
    let h = hosts();
    let g0 = h.google.requests().len();

    let (code, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "hello world", "target_lang": "ja-JP"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["translated_text"], "[en>ja] hello world");
    assert_eq!(
        (v["source_lang"].as_str(), v["target_lang"].as_str()),
        (Some("en"), Some("ja"))
    );
    assert_eq!(
        (v["success"].as_bool(), v["google_failed"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(h.google.requests().len(), g0 + 1);
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "你好", "target_lang": "english"}),
        )
        .await;
    assert_eq!(v["translated_text"], "[zh-CN>en] 你好");

    // Same language, or nothing to detect: the text comes back untouched.
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "hello", "target_lang": "en-US"}),
        )
        .await;
    assert_eq!(
        (v["translated_text"].as_str(), v["success"].as_bool()),
        (Some("hello"), Some(true))
    );
    assert!(v.get("google_failed").is_none());
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "12345", "target_lang": "en"}),
        )
        .await;
    assert_eq!(v["source_lang"], "unknown");

    // Google fails, no model configured: the original text in the failure envelope.
    let (code, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "google-fail text", "target_lang": "zh"}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (v["success"].as_bool(), v["google_failed"].as_bool()),
        (Some(false), Some(true)),
        "{v}"
    );
    assert_eq!(v["translated_text"], "google-fail text");
    assert_eq!(v["error_code"], "translation_failed");

    let llm = MockLlm::start("模型翻译").await;
    s.configure_llm(&llm.base()).await;
    for text in ["google-fail text", "google-garbage text"] {
        let (_, v) = s
            .post_csrf(
                "/api/translate",
                json!({"text": text, "target_lang": "schinese"}),
            )
            .await;
        assert_eq!(
            (v["translated_text"].as_str(), v["google_failed"].as_bool()),
            (Some("模型翻译"), Some(true)),
            "{v}"
        );
        assert_eq!(v["target_lang"], "zh");
    }
    let req = llm.chat_requests().pop().unwrap();
    assert!(req["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("Simplified Chinese"));
    assert_eq!(req["messages"][1]["content"], "google-garbage text");

    // skip_google goes straight to the model; google_failed stays false.
    let g1 = h.google.requests().len();
    let (_, v) = s
        .post_csrf("/api/translate", json!({"text": "good morning", "target_lang": "zh", "skip_google": true, "source_lang": "en"}))
        .await;
    assert_eq!(
        (
            v["translated_text"].as_str(),
            v["google_failed"].as_bool(),
            v["provider"].as_str()
        ),
        (Some("模型翻译"), Some(false), Some("model"))
    );
    assert_eq!(h.google.requests().len(), g1);
    // A model answer in the wrong script (Chinese for Korean) is no translation.
    let (_, v) = s
        .post_csrf("/api/translate", json!({"text": "good morning", "target_lang": "ko", "skip_google": true, "source_lang": "en"}))
        .await;
    assert_eq!(
        (v["translated_text"].as_str(), v["provider"].as_str()),
        (Some("good morning"), Some("none")),
        "{v}"
    );
    let req = llm.chat_requests().pop().unwrap();
    assert!(
        req["max_tokens"].as_u64().is_some_and(|m| m <= 4096),
        "{req}"
    );

    // Both fail: the original text.
    llm.push(MockReply::Status(503, "overloaded".into()));
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "good night", "target_lang": "ru", "skip_google": true}),
        )
        .await;
    assert_eq!(
        (v["success"].as_bool(), v["translated_text"].as_str()),
        (Some(false), Some("good night"))
    );
    assert!(v["error"].as_str().unwrap().contains("503"));

    let (code, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "   ", "target_lang": "xx"}),
        )
        .await;
    assert_eq!(
        (
            code,
            v["error_code"].as_str(),
            v["translated_text"].as_str()
        ),
        (400, Some("missing_text"), Some(""))
    );
    assert_eq!(v["target_lang"], "xx");
    let (code, _) = s
        .post_csrf("/api/translate", json!({"target_lang": "en"}))
        .await;
    assert_eq!(code, 400);
    let (code, _) = s
        .post(
            "/api/translate",
            json!({"text": "hello", "target_lang": "ja"}),
        )
        .await;
    assert_eq!(code, 403);
}

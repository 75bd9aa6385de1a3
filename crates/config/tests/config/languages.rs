//! Reserved fields and the language routes.

use crate::common::*;

#[tokio::test]
async fn reserved_fields_and_languages() {
    let s = server().await;
    let (_, v) = s.get("/api/config/character_reserved_fields").await;
    assert_eq!(v["success"], json!(true));
    let all = v["all_reserved_fields"].as_array().unwrap();
    assert!(all.contains(&json!("system_prompt")) && all.contains(&json!("name")));
    assert_eq!(
        all.len(),
        v["system_reserved_fields"].as_array().unwrap().len()
            + v["workshop_reserved_fields"].as_array().unwrap().len()
    );
    let (_, v) = s.get("/api/config/platform_language").await;
    assert_eq!(v["success"], json!(true));
    assert!(v["i18n_language"].is_string());
    assert!(v.get("ip_country").is_none());
    let (_, v) = s.get("/api/config/user_language").await;
    assert_eq!(v["success"], json!(true));
    assert!(v["language"].as_str().is_some_and(|l| !l.is_empty()));
    let (st, _, _) = post_with(&s, CS, &[], json!({"userLanguage": "ja-JP"})).await;
    assert_eq!(st, 200);
    let (_, v) = s.get("/api/config/user_language").await;
    assert_eq!(v["language"], json!("ja"));
    assert_eq!(v["source"], json!("conversation_settings"));
}

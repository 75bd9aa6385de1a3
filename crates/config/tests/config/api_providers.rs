//! `GET /api/config/api_providers`.

use crate::common::*;

#[tokio::test]
async fn api_providers_from_builtin_and_bundle() {
    let s = server().await;
    let (st, v) = s.get("/api/config/api_providers").await;
    assert_eq!(st, 200);
    assert_eq!(v["success"], json!(true));
    assert_eq!(v["source"], json!("builtin"));
    let keys: Vec<&str> = v["core_api_providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"openai") && keys.contains(&"gemini"));
    assert_eq!(
        v["api_key_registry"]["openai"]["config_field"],
        json!("assistApiKeyOpenai")
    );
    let s = server_with_catalog(json!({
        "providers": [{"key": "local", "name": "Local", "base_url": "http://127.0.0.1:1/v1", "models": {"conversation": "m"}, "description": "d"}],
        "tts_providers": [{"key": "x"}]
    }))
    .await;
    let (_, v) = s.get("/api/config/api_providers").await;
    assert_eq!(v["source"], json!("bundle"));
    assert_eq!(
        v["core_api_providers"],
        json!([{"key": "local", "name": "Local", "description": "d", "is_free_version": false, "fixed_model": false}])
    );
    assert_eq!(
        v["assist_api_providers_full"]["local"]["base_url"],
        json!("http://127.0.0.1:1/v1")
    );
    assert_eq!(v["tts_providers"], json!([{"key": "x"}]));
}

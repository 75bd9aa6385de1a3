//! `GET /api/config/tts_voices`: the configured speech provider's voices.

use crate::common::*;

#[tokio::test]
async fn lists_the_configured_providers_voices() {
    let s = server().await;
    let (st, b) = s.get("/api/config/tts_voices").await;
    assert_eq!(st, 200);
    assert_eq!(
        b,
        json!({"success": true, "provider": "none", "offered": false, "voices": []})
    );

    let up = Upstream::start(Router::new().route(
        "/v1/audio/voices",
        get(|| async { Json(json!({"voices": ["af_bella", "am_adam"]})) }),
    ))
    .await;
    let (st, _) = s
        .post(
            "/api/config/core_api",
            json!({"ttsModelProvider": "custom", "ttsModelUrl": format!("{}/v1", up.base)}),
        )
        .await;
    assert_eq!(st, 200);
    let (_, b) = s.get("/api/config/tts_voices").await;
    assert_eq!(b["provider"], "openai_compatible");
    assert_eq!(
        b["voices"],
        json!([{"id": "af_bella", "name": "af_bella"}, {"id": "am_adam", "name": "am_adam"}])
    );

    // A server without the list: offered false, no error.
    let bare = Upstream::start(Router::new()).await;
    s.post(
        "/api/config/core_api",
        json!({"ttsModelUrl": format!("{}/v1", bare.base)}),
    )
    .await;
    let (_, b) = s.get("/api/config/tts_voices").await;
    assert_eq!(
        (b["success"].clone(), b["offered"].clone()),
        (json!(true), json!(false))
    );

    // A provider that is down: the cause, in the probe envelope.
    s.post(
        "/api/config/core_api",
        json!({"ttsModelUrl": "http://127.0.0.1:1/v1"}),
    )
    .await;
    let (st, b) = s.get("/api/config/tts_voices").await;
    assert_eq!(st, 200);
    assert_eq!(
        (b["success"].clone(), b["error_code"].clone()),
        (json!(false), json!("tts_unavailable")),
        "{b}"
    );

    // A voice server's list.
    let vs = Upstream::start(Router::new().route(
        "/api/v3/voices",
        get(|| async {
            Json(json!([{"id": "mika", "name": "Mika", "description": "", "version": "v3"}]))
        }),
    ))
    .await;
    s.post(
        "/api/config/core_api",
        json!({"ttsModelUrl": vs.base, "gptsovitsEnabled": true}),
    )
    .await;
    let (_, b) = s.get("/api/config/tts_voices").await;
    assert_eq!(b["provider"], "gptsovits");
    assert_eq!(b["voices"][0]["id"], "mika");
}

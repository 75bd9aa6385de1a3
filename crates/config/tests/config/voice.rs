//! `/api/config/voiceserver/...`.

use crate::common::*;

#[tokio::test]
async fn voice_server_synthesis_flow_by_stage() {
    let s = server().await;
    let (good, seen) = voice_server(Voice::Good).await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{good}/"), "voice_id": "gsv:alice|{\"speed\":1.2}", "test_text": "hello there"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["success"], json!(true));
    assert_eq!(v["audio_chunks"], json!(2));
    assert_eq!(v["audio_bytes"], json!(480));
    assert_eq!(v["sentences"], json!(1));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0]["path"], json!("/api/v3/tts/stream-input"));
    assert_eq!(
        seen[1],
        json!({"cmd": "init", "voice_id": "alice", "speed": 1.2})
    );
    assert_eq!(seen[2], json!({"cmd": "append", "data": "hello there"}));
    assert_eq!(seen[3], json!({"cmd": "end"}));

    let (bad, _) = voice_server(Voice::InitFails).await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{bad}")}),
        )
        .await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["stage"], json!("init"));
    assert!(v["error"].as_str().unwrap().contains("unknown voice"));

    let (silent, _) = voice_server(Voice::Silent).await;
    let t = Instant::now();
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{silent}"), "timeout_seconds": 0.5}),
        )
        .await;
    assert_eq!(st, 504, "{v}");
    assert_eq!(v["error_code"], json!("timeout"));
    assert!(t.elapsed() < Duration::from_secs(5));

    let (synth, _) = voice_server(Voice::SynthesisError).await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{synth}")}),
        )
        .await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["stage"], json!("synthesis"));

    let closed = closed_port().await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/test_connectivity",
            json!({"api_url": format!("http://{closed}")}),
        )
        .await;
    assert_eq!(st, 502, "{v}");
    assert_eq!(v["error_code"], json!("connection_refused"));

    for bad in [
        json!({"api_url": "ftp://127.0.0.1"}),
        json!({"api_url": "http://"}),
        json!({"test_text": "x".repeat(600)}),
    ] {
        let (st, v) = s
            .post("/api/config/voiceserver/test_connectivity", bad.clone())
            .await;
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["success"], json!(false));
    }
}

#[tokio::test]
async fn voice_server_list_voices() {
    let up = Upstream::start(
        Router::new()
            .route(
                "/good/api/v3/voices",
                get(|| async { Json(json!({"voices": [{"id": "alice"}]})) }),
            )
            .route("/html/api/v3/voices", get(|| async { "<html>" }))
            .route(
                "/err/api/v3/voices",
                get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "x").into_response() }),
            )
            .route(
                "/slow/api/v3/voices",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "late"
                }),
            ),
    )
    .await;
    let s = server().await;
    let (st, v) = s
        .post(
            "/api/config/voiceserver/list_voices",
            json!({"api_url": format!("{}/good/", up.base)}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v,
        json!({"success": true, "voices": {"voices": [{"id": "alice"}]}, "api_url": format!("{}/good", up.base)})
    );
    for (p, status) in [("html", 502), ("err", 502), ("missing", 502)] {
        let (st, v) = s
            .post(
                "/api/config/voiceserver/list_voices",
                json!({"api_url": format!("{}/{p}", up.base)}),
            )
            .await;
        assert_eq!(st, status, "{p}: {v}");
        assert_eq!(v["code"], json!("TTS_CONNECTION_FAILED"));
    }
    let (st, v) = s
        .post(
            "/api/config/voiceserver/list_voices",
            json!({"api_url": format!("{}/slow", up.base), "timeout_seconds": 0.3}),
        )
        .await;
    assert_eq!(st, 504, "{v}");
    let (st, v) = s
        .post("/api/config/voiceserver/list_voices", json!({}))
        .await;
    assert_eq!(st, 400);
    assert_eq!(v["error_code"], json!("TTS_GPT_SOVITS_URL_REQUIRED"));
    let before = up.requests().len();
    let (st, v) = s
        .post(
            "/api/config/voiceserver/list_voices",
            json!({"api_url": "file:///etc/passwd"}),
        )
        .await;
    assert_eq!(st, 400);
    assert_eq!(v["error_code"], json!("TTS_GPT_SOVITS_URL_INVALID"));
    assert_eq!(up.requests().len(), before);
}

//! Guide handoff tokens.

use crate::common::*;

#[tokio::test]
async fn guide_handoff_tokens() {
    let s = server().await;
    let origin = format!("http://127.0.0.1:{}", s.addr.port());
    let post = |path: &'static str, body: Value, origin: String| {
        let s = &s;
        async move {
            let r = s
                .http
                .post(s.url(path))
                .header("X-CSRF-Token", CSRF)
                .header("Origin", origin)
                .json(&body)
                .send()
                .await
                .unwrap();
            let cc = r
                .headers()
                .get("cache-control")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            let (code, v) = split(r).await;
            assert!(cc.contains("no-store"), "{path} must be no-store");
            (code, v)
        }
    };
    let (code, v) = post(
        "/api/guide/handoff/create",
        json!({"source_page": "home"}),
        origin.clone(),
    )
    .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (400, Some("invalid_target_page"))
    );
    let (code, v) = post(
        "/api/guide/handoff/create",
        json!({"target_page": "chat", "resume_scene": "intro", "flow_id": 5}),
        origin.clone(),
    )
    .await;
    assert_eq!(code, 400, "a field of another type is refused: {v}");
    let (code, v) = post(
        "/api/guide/handoff/create",
        json!({"target_page": "chat", "resume_scene": "intro", "flow_id": null}),
        origin.clone(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let t = v["token"].clone();
    assert_eq!(t["token"].as_str().unwrap().len(), 32);
    assert_eq!(t["signature"].as_str().unwrap().len(), 64);
    assert_eq!(
        (
            t["flow_id"].as_str(),
            t["source_page"].as_str(),
            t["authority"].as_str()
        ),
        (Some("home_yui_guide_v1"), Some("home"), Some("server"))
    );
    assert_eq!(
        t["expires_at"].as_i64().unwrap() - t["created_at"].as_i64().unwrap(),
        300_000
    );
    assert!(t.get("source_origin").is_none());

    let consume = |body: Value, o: String| post("/api/guide/handoff/consume", body, o);
    let tok = t["token"].as_str().unwrap().to_string();
    let sig = t["signature"].as_str().unwrap().to_string();
    let mut tampered = sig.clone();
    tampered.replace_range(0..1, if sig.starts_with('a') { "b" } else { "a" });
    let cases = [
        (
            json!({"signature": sig, "expected_page": "chat"}),
            400,
            "invalid_handoff_token",
        ),
        (
            json!({"token": tok, "signature": sig}),
            400,
            "invalid_expected_page",
        ),
        (
            json!({"token": "x".repeat(200), "signature": sig, "expected_page": "chat"}),
            400,
            "invalid_handoff_token",
        ),
        (
            json!({"token": "unknown-token", "signature": sig, "expected_page": "chat"}),
            404,
            "handoff_token_not_found",
        ),
        (
            json!({"token": tok, "signature": tampered, "expected_page": "chat"}),
            403,
            "handoff_signature_mismatch",
        ),
        (
            json!({"token": tok, "signature": sig, "expected_page": "settings"}),
            403,
            "handoff_target_mismatch",
        ),
    ];
    for (body, code, err) in cases {
        let (c, v) = consume(body.clone(), origin.clone()).await;
        assert_eq!((c, v["error_code"].as_str()), (code, Some(err)), "{body}");
        assert_eq!(v["ok"], false);
    }
    let (c, v) = consume(
        json!({"token": tok, "signature": sig, "expected_page": "chat"}),
        format!("http://localhost:{}", s.addr.port()),
    )
    .await;
    assert_eq!(
        (c, v["error_code"].as_str()),
        (403, Some("handoff_origin_mismatch"))
    );
    let (c, v) = consume(
        json!({"token": tok, "signature": sig, "expected_page": "chat", "consumer_id": "page-2"}),
        origin.clone(),
    )
    .await;
    assert_eq!(c, 200, "{v}");
    assert_eq!(
        (
            v["token"]["consumed"].as_bool(),
            v["token"]["consumed_by"].as_str()
        ),
        (Some(true), Some("page-2"))
    );
    let (c, v) = consume(
        json!({"token": tok, "signature": sig, "expected_page": "chat"}),
        origin.clone(),
    )
    .await;
    assert_eq!(
        (c, v["error_code"].as_str()),
        (409, Some("handoff_token_consumed"))
    );
    // Another server has another secret and knows nothing of this token.
    let other = server().await;
    let r = other
        .csrf(Method::POST, "/api/guide/handoff/consume")
        .json(&json!({"token": tok, "signature": sig, "expected_page": "chat"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

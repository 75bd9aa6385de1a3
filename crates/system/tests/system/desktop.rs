//! `/api/get_window_title` and the screenshot routes.

use crate::common::*;

#[tokio::test]
async fn window_title_and_screenshot_guards() {
    let s = server().await;
    let (code, v) = s.get("/api/get_window_title").await;
    assert_eq!(code, 200);
    let headless =
        std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none();
    if headless {
        assert_eq!(v, json!({"success": false, "window_title": null}));
    }
    let r = s
        .csrf(Method::POST, "/api/screenshot")
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (code, v) = split(r).await;
    if headless {
        assert_eq!(
            (code, v["error_code"].as_str()),
            (501, Some("capture_unavailable")),
            "{v}"
        );
        assert_eq!(v["success"], false);
    }
    let (code, v) = split(
        s.http
            .post(s.url("/api/screenshot/interactive"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (code, v["fallback"].as_str()),
        (501, Some("frontend")),
        "{v}"
    );
    let (code, v) = split(
        s.http
            .post(s.url("/api/screenshot/interactive"))
            .header("Origin", "https://evil.example")
            .header("X-CSRF-Token", CSRF)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (403, Some("csrf_validation_failed"))
    );
    let (code, _) = split(
        s.http
            .post(s.url("/api/screenshot/interactive"))
            .header("Referer", format!("http://127.0.0.1:{}/", s.addr.port()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 403, "an Origin/Referer requires the token");

    // A remote peer is refused even with a valid token.
    let remote = TestServer::start_with(
        FAMILIES,
        TestOptions {
            fake_peer: Some("192.0.2.7:5555".parse().unwrap()),
            ..Default::default()
        },
    )
    .await;
    for p in ["/api/screenshot", "/api/screenshot/interactive"] {
        let r = remote.csrf(Method::POST, p).send().await.unwrap();
        assert!(r.headers().get("cache-control").is_some());
        let (code, v) = split(r).await;
        assert_eq!(
            (code, v["success"].as_bool()),
            (403, Some(false)),
            "{p}: {v}"
        );
        assert_eq!(v["error_code"], "forbidden");
    }
    let (code, _) = remote.get("/api/get_window_title").await;
    assert_eq!(code, 200);
}

//! `/api/characters`: create, switch, delete, the name rules, and a corrupt
//! characters file kept aside with a notice.

use axum::http::Method;
use companiond_core::testkit::{TestOptions, TestServer};
use serde_json::{json, Value};

#[tokio::test]
async fn characters_crud_and_name_rules() {
    let s = TestServer::start(&[]).await;
    let (st, body) = s.get("/api/characters").await;
    assert_eq!(st, 200);
    assert_eq!(body["current"], "Companion");
    assert_eq!(body["characters"][0]["name"], "Companion");

    let (st, body) = s
        .post(
            "/api/characters/profile",
            json!({"name": "  Mika ", "voice": "soft"}),
        )
        .await;
    assert_eq!((st, body["name"].as_str()), (200, Some("Mika")));
    assert_eq!(
        s.post("/api/characters/profile", json!({"name": "Mika"}))
            .await
            .0,
        409
    );
    let (_, body) = s.get("/api/characters").await;
    assert_eq!(
        body["characters"][1],
        json!({"voice": "soft", "name": "Mika"})
    );
    assert!(
        s.state.sessions.get("Mika").is_some(),
        "a session manager exists from creation on"
    );

    for bad in [
        "a/b",
        "a\\b",
        "..",
        "x.",
        ".",
        "a.b",
        "CON",
        "nul",
        "COM1",
        "lpt3",
        "api",
        "static",
        "ws",
        "jukebox",
        "",
        "  ",
        "a<b",
        "a>b",
        "a:b",
        "a?b",
        "a*b",
        "a|b",
        "a\"b",
        "tab\tname",
        "zero\u{200b}width",
        "new\nline",
    ] {
        let (st, body) = s
            .post("/api/characters/profile", json!({"name": bad}))
            .await;
        assert_eq!(st, 400, "{bad:?} {body}");
        assert_eq!(body["success"], false);
        assert!(body["error_code"].is_string());
    }
    let long = "x".repeat(61);
    assert_eq!(
        s.post("/api/characters/profile", json!({"name": long}))
            .await
            .0,
        400
    );
    // A name of another type is refused as a body.
    assert_eq!(
        s.post("/api/characters/profile", json!({"name": 5}))
            .await
            .0,
        422
    );
    assert_eq!(s.post("/api/characters/profile", json!({})).await.0, 400);

    let (st, body) = s
        .post("/api/characters/current", json!({"name": "Mika"}))
        .await;
    assert_eq!((st, body["current"].as_str()), (200, Some("Mika")));
    assert_eq!(
        s.post("/api/characters/current", json!({"name": "Nobody"}))
            .await
            .0,
        404
    );
    assert_eq!(
        s.send(Method::DELETE, "/api/characters/profile/Nobody", None)
            .await
            .0,
        404
    );
    assert_eq!(
        s.send(Method::DELETE, "/api/characters/profile/Mika", None)
            .await
            .0,
        200
    );
    let (_, body) = s.get("/api/characters").await;
    assert_eq!(
        body["current"], "Companion",
        "deleting the current character selects another"
    );
    let (st, body) = s
        .send(Method::DELETE, "/api/characters/profile/Companion", None)
        .await;
    assert_eq!(st, 409, "the last character is kept: {body}");

    // Persisted atomically in the characters file.
    let file: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("config/characters.json")).unwrap())
            .unwrap();
    assert_eq!(file["current"], "Companion");
    assert!(file["characters"].get("Mika").is_none());
}

#[tokio::test]
async fn corrupt_characters_file_is_kept_aside_with_a_notice() {
    let s = TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("config")).unwrap();
                std::fs::write(data.join("config/characters.json"), b"{\"current\": ").unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let (st, body) = s.get("/api/characters").await;
    assert_eq!(st, 200);
    assert_eq!(body["current"], "Companion");
    let kept: Vec<_> = std::fs::read_dir(s.data.join("config"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("characters.json.corrupt-")
        })
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(std::fs::read(kept[0].path()).unwrap(), b"{\"current\": ");
    assert_eq!(s.state.notices.peek().0.len(), 1);
}

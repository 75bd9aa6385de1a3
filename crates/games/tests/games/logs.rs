//! Game diagnostic logs (`/api/game/logs`, `/logs/view`, `/logs/enable`).

use serde_json::{json, Value};

use crate::common::{server, start};

#[tokio::test]
async fn logs_cursor_retention_csrf_and_html_escaping() {
    let s = server().await;
    // CSRF on both POSTs
    let (st, b) = s.post("/api/game/logs", json!({"session_id": "s1"})).await;
    assert_eq!(
        (st, b["reason"].clone()),
        (403, json!("csrf_validation_failed"))
    );
    let (st, b) = s
        .post("/api/game/logs/enable", json!({"session_id": "s1"}))
        .await;
    assert_eq!(
        (st, b["reason"].clone()),
        (403, json!("csrf_validation_failed"))
    );
    let r = s
        .http
        .post(s.url("/api/game/logs"))
        .header("X-CSRF-Token", companiond_core::testkit::CSRF)
        .header("Origin", "https://evil.example")
        .json(&json!({"session_id": "s1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(s.get("/api/game/logs").await.1["sessions"]
        .as_array()
        .unwrap()
        .is_empty());
    let (_, b) = s.post_csrf("/api/game/logs", json!({"message": "x"})).await;
    assert_eq!(b["reason"], "missing_session_id");
    // enable + ingest with aliases
    let (_, b) = s
        .post_csrf(
            "/api/game/logs/enable",
            json!({"session_id": "s1", "game_type": "soccer", "persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        b,
        json!({"ok": true, "session_id": "s1", "game_type": "soccer", "seq": 1})
    );
    for i in 0..5 {
        let (_, b) = s
            .post_csrf(
                "/api/game/logs",
                json!({"sessionId": "s1", "gameType": "soccer", "personaName": "Companion", "event": "kick", "message": format!("m{i}"), "power": i}),
            )
            .await;
        assert_eq!(b["seq"], i + 2);
    }
    let (_, b) = s
        .get("/api/game/logs?session_id=s1&game_type=soccer&since=4")
        .await;
    let entries = b["log"]["entries"].as_array().unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![5, 6]
    );
    assert_eq!(entries[0]["details"]["power"], 3);
    assert_eq!(entries[0]["category"], "frontend");
    assert_eq!(b["next_since"], 6);
    let (_, b) = s.get("/api/game/logs?session_id=s1&since=1&limit=2").await;
    let seqs: Vec<u64> = b["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        (seqs, b["has_more"].clone(), b["next_since"].clone()),
        (vec![2, 3], json!(true), json!(3))
    );
    let (st, b) = s.get("/api/game/logs?session_id=s1&limit=abc").await;
    assert_eq!((st, b["reason"].clone()), (400, json!("invalid_query")));
    let (_, b) = s.get("/api/game/logs?session_id=nope").await;
    assert_eq!(b["missing"], true);
    // default limit 300; entry cap 1000 per session, oldest dropped first
    for i in 0..1005 {
        s.post_csrf(
            "/api/game/logs",
            json!({"session_id": "big", "message": format!("n{i}")}),
        )
        .await;
    }
    let (_, b) = s.get("/api/game/logs?session_id=big").await;
    let entries = b["log"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 300);
    assert_eq!(entries.last().unwrap()["seq"], 1005);
    assert_eq!(b["log"]["entry_count"], 1000);
    let (_, b) = s
        .get("/api/game/logs?session_id=big&since=0&limit=1000")
        .await;
    assert_eq!(b["log"]["entries"][0]["seq"], 6);
    assert_eq!(b["log"]["game_type"], "game");
    // retained sessions: 8, least recently updated dropped first
    for i in 0..7 {
        s.post_csrf(
            "/api/game/logs",
            json!({"session_id": format!("x{i}"), "message": "m"}),
        )
        .await;
    }
    let (_, b) = s.get("/api/game/logs").await;
    let ids: Vec<&str> = b["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 8);
    assert!(!ids.contains(&"s1"), "{ids:?}");
    assert!(ids.contains(&"big"));
    assert_eq!(b["retention"]["retained_session_limit"], 8);
    // HTML view escapes everything
    let payload = "<script>alert(1)</script>";
    s.post_csrf(
        "/api/game/logs",
        json!({"session_id": "x6", "message": payload, "details": {"k": payload}, "level": "<b>"}),
    )
    .await;
    let r = s
        .http
        .get(s.url("/api/game/logs/view?session_id=x6"))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = r.text().await.unwrap();
    assert!(!html.contains("<script>"), "unescaped payload");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("<b>"));
    let r = s
        .http
        .get(s.url("/api/game/logs/view?session_id=%3Cscript%3E"))
        .send()
        .await
        .unwrap();
    let html = r.text().await.unwrap();
    assert!(!html.contains("<script>"));
    let html = s
        .http
        .get(s.url("/api/game/logs/view"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("?session_id=x6"));
    // route lifecycle notes: soccer route start enables the log, end marks it ended
    start(&s, "soccer", "live").await;
    s.post(
        "/api/game/soccer/route/end",
        json!({"persona_name": "Companion", "session_id": "live"}),
    )
    .await;
    let (_, b) = s
        .get("/api/game/logs?session_id=live&game_type=soccer")
        .await;
    assert_eq!(b["log"]["status"], "ended");
    let events: Vec<&str> = b["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(
        events.contains(&"route_started") && events.contains(&"session_ended"),
        "{events:?}"
    );
    let (_, b) = s
        .post_csrf(
            "/api/game/logs",
            json!({"session_id": "live", "game_type": "soccer"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone(), b["seq"].clone()),
        (json!(false), json!("log_not_active"), Value::Null)
    );
}

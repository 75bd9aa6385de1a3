//! `GET /api/pending-notices` and `POST /api/pending-notices/ack`.

use crate::common::*;

#[tokio::test]
async fn pending_notices_peek_and_cursor_ack() {
    let s = server().await;
    for i in 0..3 {
        s.state
            .notices
            .push(json!({"code": format!("n{i}"), "message": "hello"}));
    }
    let r = s
        .http
        .get(s.url("/api/pending-notices"))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (_, v) = split(r).await;
    assert_eq!(v["notices"].as_array().unwrap().len(), 3);
    let cursor = v["cursor"].as_u64().unwrap();
    let (_, again) = s.get("/api/pending-notices").await;
    assert_eq!(
        again["notices"].as_array().unwrap().len(),
        3,
        "peek must not delete"
    );
    s.state.notices.push(json!({"code": "late"}));
    let (code, v) = s
        .post_csrf("/api/pending-notices/ack", json!({"cursor": "bogus"}))
        .await;
    assert_eq!((code, v["acknowledged"].as_u64()), (200, Some(0)));
    let (code, v) = s
        .post_csrf(
            "/api/pending-notices/ack",
            json!({"cursor": cursor.to_string()}),
        )
        .await;
    assert_eq!((code, v["acknowledged"].as_u64()), (200, Some(3)), "{v}");
    let (_, v) = s.get("/api/pending-notices").await;
    assert_eq!(v["notices"], json!([{"code": "late"}]));
    let (code, _) = s
        .post("/api/pending-notices/ack", json!({"cursor": 100}))
        .await;
    assert_eq!(code, 403);
    let (_, v) = s.get("/api/pending-notices").await;
    assert_eq!(v["notices"].as_array().unwrap().len(), 1);
}

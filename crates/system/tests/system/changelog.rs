//! `GET /api/changelog`.

use crate::common::*;

#[tokio::test]
async fn changelog_filters_and_falls_back() {
    let s = server_with(|_, bundle| {
        let c = bundle.join("changelog");
        write(&c.join("0.1.0.md"), b"base 0.1.0");
        write(&c.join("0.2.0.md"), b"base 0.2.0");
        write(&c.join("0.10.0.md"), b"base 0.10.0");
        write(&c.join("notes.md"), b"not a version");
        write(&c.join("en/0.2.0.md"), b"english 0.2.0");
        write(&c.join("ja/0.10.0.md"), b"japanese 0.10.0");
        write(&bundle.join("secret.md"), b"outside");
    })
    .await;
    let (code, v) = s.get("/api/changelog?since=0.1.0&lang=ja-JP").await;
    assert_eq!(code, 200);
    assert_eq!(v["current_version"], VERSION);
    assert_eq!(
        v["entries"],
        json!([{"version": "0.2.0", "content": "english 0.2.0"}, {"version": "0.10.0", "content": "japanese 0.10.0"}])
    );
    let (_, v) = s.get("/api/changelog?lang=zh-CN").await;
    let contents: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, vec!["base 0.1.0", "base 0.2.0", "base 0.10.0"]);
    let (_, v) = s.get("/api/changelog?since=0.2&lang=..%2F..").await;
    assert_eq!(
        v["entries"],
        json!([{"version": "0.10.0", "content": "base 0.10.0"}])
    );
    let (_, v) = s.get("/api/changelog?since=9.0.0").await;
    assert_eq!(v["entries"], json!([]));
}

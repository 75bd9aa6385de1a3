//! The config answer and its summary: the revision is a stable content hash.

use crate::common::*;

#[tokio::test]
async fn revision_is_a_stable_content_hash_and_summary_matches() {
    let s = plain().await;
    let (_, s0) = s.get(&format!("{J}/config/summary")).await;
    let (_, s0b) = s.get(&format!("{J}/config/summary")).await;
    assert_eq!(s0, s0b);
    assert_eq!(s0["songCount"], 0);
    let r0 = s0["configRevision"].as_str().unwrap().to_string();
    assert!(
        r0.len() >= 12 && r0.chars().all(|c| c.is_ascii_hexdigit()),
        "{r0}"
    );

    let song = upload_ok(&s, "songs", "a.wav", wav(100, 5, None, None)).await;
    let id = song["id"].as_str().unwrap().to_string();
    let c1 = config(&s).await;
    let (_, s1) = s.get(&format!("{J}/config/summary")).await;
    let r1 = s1["configRevision"].as_str().unwrap().to_string();
    assert_ne!(r1, r0);
    assert_eq!(c1["configRevision"], r1);
    assert_eq!(
        s1,
        json!({"configRevision": r1, "songCount": 1, "visibleSongCount": 1, "actionCount": 0})
    );

    let (st, v) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (_, s2) = s.get(&format!("{J}/config/summary")).await;
    assert_eq!(s2["visibleSongCount"], 0);
    assert_ne!(s2["configRevision"], r1);
    // Multipart works for the same form route; the same content gives the same revision.
    let (st, _) = mform(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/visibility"),
        &[("visible", "true")],
    )
    .await;
    assert_eq!(st, 200);
    let (_, s3) = s.get(&format!("{J}/config/summary")).await;
    assert_eq!(s3["configRevision"], r1);

    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/metadata"),
        &[("name", "Renamed")],
    )
    .await;
    assert_eq!(st, 200);
    let (_, s4) = s.get(&format!("{J}/config/summary")).await;
    assert_ne!(s4["configRevision"], r1);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/metadata"),
        &[("name", "a")],
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(
        s.get(&format!("{J}/config/summary")).await.1["configRevision"],
        r1
    );

    // A hand edit of the file is noticed; a corrupt file is an error and is never overwritten.
    let path = s.data.join("jukebox/config.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["songs"][&id]["artist"] = json!("Edited By Hand");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    assert_eq!(config(&s).await["songs"][&id]["artist"], "Edited By Hand");
    std::fs::write(&path, b"{broken").unwrap();
    let (st, e) = s.get(&format!("{J}/config")).await;
    assert_eq!(st, 500);
    assert!(e["detail"].as_str().unwrap().contains("unreadable"));
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 500);
    assert_eq!(std::fs::read(&path).unwrap(), b"{broken");
}

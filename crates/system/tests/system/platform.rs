//! Platform achievements and playtime.

use crate::common::*;

#[tokio::test]
async fn platform_achievements_and_playtime() {
    let none = server().await;
    for (m, p) in [
        (Method::POST, "/api/platform/set-achievement-status/ACH_A"),
        (Method::POST, "/api/platform/update-playtime"),
    ] {
        let (code, v) = send_csrf(&none, m, p, json!({})).await;
        assert_eq!(
            (code, v["error_code"].as_str()),
            (503, Some("platform_unavailable")),
            "{p}"
        );
    }
    let (code, v) = none.get("/api/platform/list-achievements").await;
    assert_eq!((code, v["success"].as_bool()), (503, Some(false)));

    let s = server_with(|_, bundle| {
        write(
            &bundle.join("achievements.json"),
            br#"{"achievements": ["ACH_FIRST", {"name": "ACH_TIME_5MIN", "playtime_seconds": 300}, "bad name!"]}"#,
        )
    })
    .await;
    let (code, v) = s.get("/api/platform/list-achievements").await;
    assert_eq!((code, v["count"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(
        v["achievements"][0],
        json!({"name": "ACH_FIRST", "unlocked": false, "unlocked_at": null, "playtime_seconds": null})
    );
    let (code, v) = s
        .post_csrf("/api/platform/set-achievement-status/ACH_FIRST", json!({}))
        .await;
    assert_eq!(
        (
            code,
            v["newlyUnlocked"].as_bool(),
            v["alreadyUnlocked"].as_bool()
        ),
        (200, Some(true), Some(false))
    );
    let (_, v) = s
        .post_csrf("/api/platform/set-achievement-status/ACH_FIRST", json!({}))
        .await;
    assert_eq!(
        (v["newlyUnlocked"].as_bool(), v["alreadyUnlocked"].as_bool()),
        (Some(false), Some(true))
    );
    let (code, v) = s
        .post_csrf("/api/platform/set-achievement-status/ACH_NOPE", json!({}))
        .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (404, Some("achievement_not_found"))
    );
    let (code, _) = s
        .post_csrf("/api/platform/set-achievement-status/ACH%20X", json!({}))
        .await;
    assert_eq!(code, 400);

    let steps = [
        (json!({"seconds": "12"}), 12),
        (json!({"seconds": 10.7}), 10),
        (json!({}), 10),
        (json!({"seconds": true}), 1),
        (json!({"seconds": 99999}), 3600),
    ];
    let mut total = 0;
    for (body, added) in steps {
        let (code, v) = s
            .post_csrf("/api/platform/update-playtime", body.clone())
            .await;
        total += added;
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            (v["added"].as_i64(), v["totalPlayTime"].as_i64()),
            (Some(added), Some(total)),
            "{body}"
        );
        assert_eq!(v["stat"], "PLAY_TIME_SECONDS");
    }
    let (_, v) = s
        .post_csrf("/api/platform/update-playtime", json!({"seconds": 0}))
        .await;
    assert_eq!(v["progressUnlocked"], json!(["ACH_TIME_5MIN"]));
    for bad in [
        json!({"seconds": -1}),
        json!({"seconds": "soon"}),
        json!({"seconds": [1]}),
    ] {
        let (code, v) = s
            .post_csrf("/api/platform/update-playtime", bad.clone())
            .await;
        assert_eq!(code, 400, "{bad} → {v}");
    }
    let (_, v) = s.get("/api/platform/list-achievements").await;
    assert_eq!(v["achievements"][1]["unlocked"], true);
    assert_eq!(v["totalPlayTime"], total);
    assert!(s.data.join("state/platform_achievements.json").is_file());
}

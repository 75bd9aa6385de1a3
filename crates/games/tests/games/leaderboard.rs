//! The badminton leaderboard (`/api/game/{game_type}/leaderboard`), over real SQLite.

use std::time::Duration;

use companiond_core::testkit::TestServer;
use serde_json::{json, Value};

use crate::common::{fast_start, play_badminton};

#[tokio::test]
async fn leaderboard_is_validated_against_server_totals() {
    let s = TestServer::start(&[companiond_core::server::Family {
        api: companiond_games::api,
        start: fast_start,
    }])
    .await;
    let lb = "/api/game/badminton/leaderboard";
    // other game types: same shape, empty; submissions refused
    let (_, b) = s.get("/api/game/soccer/leaderboard").await;
    assert_eq!(
        b,
        json!({"ok": true, "top": [], "total_players": 0, "total_scores": 0, "limit": 10, "offset": 0, "has_more": false, "your_best": null})
    );
    let (_, b) = s
        .post(
            "/api/game/soccer/leaderboard",
            json!({"persona_name": "Companion", "session_id": "x", "score": 1}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("unsupported_game_type"))
    );
    // unknown session
    let (_, b) = s
        .post(
            lb,
            json!({"persona_name": "Companion", "session_id": "nope", "mode": "duel", "score": 10}),
        )
        .await;
    assert_eq!(b["reason"], "invalid_session");
    // an unknown session with finalScore sent as a number (the score total)
    let (_, b) = s
        .post(
            lb,
            json!({"persona_name": "Companion", "session_id": "nope", "mode": "duel", "finalScore": 10}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("invalid_session"))
    );
    // only a body that is not a JSON object is invalid_body
    for raw in ["[]", "3", "\"x\"", "{not json"] {
        let r = s.http.post(s.url(lb)).body(raw).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.json::<Value>().await.unwrap()["reason"],
            "invalid_body",
            "{raw}"
        );
    }
    // any JSON object goes to the session check: missing or mistyped totals,
    // names or mode, extreme numbers — all invalid_session, never a 5xx
    let objects = [
        json!({}),
        json!({"persona_name": "Companion", "session_id": "r1", "score": "lots"}),
        json!({"persona_name": "Companion", "session_id": "r1"}),
        json!({"persona_name": 5, "session_id": ["r1"], "mode": {}, "score": 1}),
        json!({"persona_name": "Companion", "session_id": "r1", "finalScore": {"score": {"deep": [1]}}}),
    ];
    for body in objects {
        let (st, b) = s.post(lb, body.clone()).await;
        assert_eq!(
            (st, b["reason"].clone()),
            (200, json!("invalid_session")),
            "{body}"
        );
    }
    for v in [
        json!(18446744073709551616.0),
        json!(-1),
        json!(1e308),
        json!(-0.0),
        json!("NaN"),
        json!(1e-320),
        json!("12"),
        json!({"a": {"b": 1}}),
    ] {
        for key in [
            "score",
            "finalScore",
            "streak",
            "max_distance_px",
            "line_in_count",
        ] {
            let mut body =
                json!({"persona_name": "Companion", "session_id": "x", "mode": "duel", "score": 1});
            body[key] = v.clone();
            let (st, b) = s.post(lb, body).await;
            assert_eq!(
                (st, b["reason"].clone()),
                (200, json!("invalid_session")),
                "{key}={v}"
            );
        }
    }

    let score = json!({"score": 120, "streak": 7, "max_distance_px": 393.7008});
    play_badminton(&s, "r1", "duel", score.clone()).await;
    // tampered totals, wrong mode, wrong persona
    let (_, b) = s.post(lb, json!({"persona_name": "Companion", "session_id": "r1", "mode": "duel", "score": 999, "streak": 7, "max_distance_px": 393.7008})).await;
    assert_eq!(b["reason"], "invalid_session");
    let (_, b) = s.post(lb, json!({"persona_name": "Companion", "session_id": "r1", "mode": "duel", "score": 120, "streak": 8, "max_distance_px": 393.7008})).await;
    assert_eq!(b["reason"], "invalid_session");
    let (_, b) = s.post(lb, json!({"persona_name": "Companion", "session_id": "r1", "mode": "spectator", "finalScore": score})).await;
    assert_eq!(b["reason"], "invalid_session");
    let (_, b) = s.post(lb, json!({"persona_name": "Other", "session_id": "r1", "mode": "duel", "finalScore": score})).await;
    assert_eq!(b["reason"], "invalid_session");
    // the real totals (nested finalScore form)
    let (_, b) = s.post(lb, json!({"persona_name": "Companion", "session_id": "r1", "mode": "duel", "finalScore": score})).await;
    assert_eq!(
        b,
        json!({"ok": true, "rank": 1, "total_players": 1, "is_personal_best": true, "score": 120, "mode": "duel"})
    );
    // one submission per round
    let (_, b) = s.post(lb, json!({"persona_name": "Companion", "session_id": "r1", "mode": "duel", "finalScore": score})).await;
    assert_eq!(b["reason"], "invalid_session");
    // a lower second round (flat totals)
    play_badminton(&s, "r2", "duel", json!({"score": 80, "streak": 2})).await;
    let (_, b) = s.post(lb, json!({"persona_name": "Companion", "session_id": "r2", "mode": "duel", "score": 80, "streak": 2})).await;
    assert_eq!(
        (
            b["rank"].clone(),
            b["is_personal_best"].clone(),
            b["total_players"].clone()
        ),
        (json!(2), json!(false), json!(1))
    );
    // an expired score session
    play_badminton(&s, "r3", "duel", json!({"score": 500})).await;
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let (_, b) = s
        .post(
            lb,
            json!({"persona_name": "Companion", "session_id": "r3", "mode": "duel", "score": 500}),
        )
        .await;
    assert_eq!(b["reason"], "invalid_session");
    // the list
    let (_, b) = s.get(&format!("{lb}?persona_name=Companion&limit=1")).await;
    assert_eq!(b["total_scores"], 2);
    assert_eq!(b["total_players"], 1);
    assert_eq!(b["has_more"], true);
    assert_eq!(b["limit"], 1);
    let top = &b["top"][0];
    assert_eq!(
        (
            top["rank"].clone(),
            top["name"].clone(),
            top["score"].clone(),
            top["streak"].clone()
        ),
        (json!(1), json!("Companion"), json!(120), json!(7))
    );
    assert_eq!(top["max_distance_m"], "10.0");
    assert_eq!(top["mode"], "duel");
    assert_eq!(top["date"].as_str().unwrap().len(), 10);
    assert_eq!(b["your_best"], json!({"rank": 1, "score": 120}));
    let (_, b) = s.get(&format!("{lb}?offset=1")).await;
    assert_eq!(
        (
            b["top"][0]["rank"].clone(),
            b["has_more"].clone(),
            b["your_best"].clone()
        ),
        (json!(2), json!(false), Value::Null)
    );
    let (_, b) = s.get(&format!("{lb}?session_id=r2")).await;
    assert_eq!(b["your_best"], json!({"rank": 2, "score": 80}));
    let (st, b) = s.get(&format!("{lb}?limit=x")).await;
    assert_eq!((st, b["reason"].clone()), (400, json!("invalid_query")));
    // extreme query numbers: 400 invalid_query or clamped, never a 5xx
    for v in [
        "18446744073709551616",
        "-1",
        "1e308",
        "-0.0",
        "NaN",
        "1e-320",
        "%7B%7D",
        "-9223372036854775808",
    ] {
        for key in ["limit", "offset"] {
            let (st, b) = s.get(&format!("{lb}?{key}={v}")).await;
            assert!(
                st == 200 || (st == 400 && b["reason"] == "invalid_query"),
                "{key}={v}: {st} {b}"
            );
        }
    }
    let (_, b) = s.get(&format!("{lb}?limit=-1&offset=99999999999")).await;
    assert_eq!(
        (b["limit"].clone(), b["offset"].clone()),
        (json!(0), json!(100000))
    );
    // finalScore sent as a number is the score total of a real round
    play_badminton(&s, "r4", "duel", json!({"score": 42})).await;
    let (_, b) = s
        .post(
            lb,
            json!({"persona_name": "Companion", "session_id": "r4", "mode": "duel", "finalScore": 42}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["score"].clone()),
        (json!(true), json!(42)),
        "{b}"
    );
    assert!(s
        .data
        .join("state/game_scores/badminton_scores.db")
        .is_file());
}

//! Numbers from clients take extreme values on every route without a server error.

use serde_json::{json, Value};

use crate::common::{server, start};

/// The numeric extremes of the robustness checks.
fn extremes() -> Vec<Value> {
    vec![
        json!(18446744073709551616.0),
        json!(18446744073709551615u64),
        json!(-1),
        json!(1e308),
        json!(-1e308),
        json!(-0.0),
        json!("NaN"),
        json!("inf"),
        json!(1e-320),
        json!("12abc"),
        json!({"nested": {"n": 1}}),
        json!([1, 2]),
        json!(true),
    ]
}

#[tokio::test]
async fn numeric_fields_take_extreme_values_without_a_server_error() {
    let s = server().await;
    start(&s, "soccer", "n1").await;
    let body_fields: &[(&str, &[&str])] = &[
        ("/api/game/soccer/route/drain", &["limit"]),
        (
            "/api/game/soccer/route/heartbeat",
            &["gameStartedElapsedMs", "game_started_elapsed_ms"],
        ),
        ("/api/game/soccer/route/voice-transcript", &["request_id"]),
        ("/api/game/soccer/passive-guard", &["stage"]),
        ("/api/game/soccer/leaderboard", &["score"]),
        (
            "/api/game/badminton/leaderboard",
            &["score", "streak", "finalScore"],
        ),
        ("/api/game/logs", &["seq", "ts"]),
    ];
    for (path, keys) in body_fields {
        for key in *keys {
            for v in extremes() {
                let mut body = json!({"persona_name": "Companion", "session_id": "n1",
                    "game_type": "soccer", "transcript": "hi", "gameStarted": true});
                body[*key] = v.clone();
                let r = s
                    .csrf(reqwest::Method::POST, path)
                    .json(&body)
                    .send()
                    .await
                    .expect("an answer, not a dropped connection");
                let st = r.status().as_u16();
                assert!(st < 500, "{path} {key}={v}: {st}");
            }
        }
    }
    // drain: an integer is clamped (reference), anything else is invalid_body
    for (v, reason) in [
        (json!(-5), Value::Null),
        (json!(1e308), json!("invalid_body")),
        (json!("NaN"), json!("invalid_body")),
        (json!(1.5), json!("invalid_body")),
        (json!({"n": 1}), json!("invalid_body")),
        (json!("7"), Value::Null),
    ] {
        let (st, b) = s
            .post(
                "/api/game/soccer/route/drain",
                json!({"persona_name": "Companion", "session_id": "n1", "limit": v}),
            )
            .await;
        assert_eq!(
            (st, b["reason"].clone()),
            (200, reason.clone()),
            "limit={v}: {b}"
        );
        if reason.is_null() {
            assert_eq!(b["ok"], true);
        }
    }
    // a start time from 1e308 ms ago is ignored: the round still ends normally
    let (_, b) = s
        .post(
            "/api/game/soccer/route/end",
            json!({"persona_name": "Companion", "session_id": "n1", "gameStarted": true,
                "gameStartedElapsedMs": 1e308}),
        )
        .await;
    assert_eq!(b["route_closed"], true, "{b}");
    // query numbers: 400 invalid_query or a clamped answer
    for v in [
        "18446744073709551616",
        "-1",
        "1e308",
        "-0.0",
        "NaN",
        "1e-320",
        "%7B%7D",
        "-9223372036854775808",
        "9223372036854775807",
    ] {
        for q in ["since", "limit"] {
            for route in ["/api/game/logs", "/api/game/logs/view"] {
                let url = format!("{route}?session_id=n1&{q}={v}");
                let r = s.http.get(s.url(&url)).send().await.expect("answer");
                let st = r.status().as_u16();
                assert!(st == 200 || st == 400, "{url}: {st}");
            }
        }
    }
    // onboarding numbers
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/start",
            json!({"persona_name": "Companion", "session_id": "i1"}),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    for key in ["day", "seq"] {
        for v in extremes() {
            let mut body = json!({"persona_name": "Companion", "session_id": "i1", "day": 1,
                "node_id": "n", "choice": "A"});
            body[key] = v.clone();
            let r = s
                .csrf(reqwest::Method::POST, "/api/icebreaker/choice")
                .json(&body)
                .send()
                .await
                .expect("answer");
            assert!(r.status().as_u16() < 500, "choice {key}={v}");
        }
    }
    for v in extremes() {
        let r = s
            .http
            .post(s.url("/api/icebreaker/free-text/interpret"))
            .json(
                &json!({"persona_name": "Companion", "session_id": "i1", "user_text": "hm",
                "options": ["a", "b"], "free_text_derail_streak": v}),
            )
            .send()
            .await
            .expect("answer");
        assert!(r.status().as_u16() < 500);
    }
}

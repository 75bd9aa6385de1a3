//! The body rules every route shares: the first present, non-blank spelling of
//! a field wins (aliases included), a mistyped field is `invalid_body` naming
//! the key that was sent, a numeric session id is its text, and a body that is
//! no JSON object is refused before any field is read.

use serde_json::{json, Value};

use crate::common::{server, start};

/// `(reason, error)` of an answer.
fn refusal(b: &Value) -> (Value, Value) {
    (b["reason"].clone(), b["error"].clone())
}

fn invalid(error: &str) -> (Value, Value) {
    (json!("invalid_body"), json!(error))
}

#[tokio::test]
async fn the_first_non_blank_spelling_names_the_character_and_session() {
    let s = server().await;
    let url = "/api/game/soccer/route/start";
    // a blank main spelling counts as absent: the alias names the character
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "  ", "personaName": null, "lanlan_name": "Mika",
                "session_id": "", "sessionId": 42}),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    assert_eq!(
        (b["persona_name"].clone(), b["session_id"].clone()),
        (json!("Mika"), json!("42"))
    );
    // the first present spelling decides, even when a later one is fine
    let (_, b) = s
        .post(url, json!({"persona_name": 5, "lanlan_name": "Mika"}))
        .await;
    assert_eq!(refusal(&b), invalid("persona_name must be a string"));
    let (_, b) = s
        .post(url, json!({"persona_name": "", "personaName": ["x"]}))
        .await;
    assert_eq!(refusal(&b), invalid("personaName must be a string"));
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Mika", "session_id": " ", "sessionId": {"a": 1}}),
        )
        .await;
    assert_eq!(refusal(&b), invalid("sessionId must be a string"));
    // a number is a session's text, never a character's
    let (_, b) = s.post(url, json!({"persona_name": 7})).await;
    assert_eq!(refusal(&b), invalid("persona_name must be a string"));
    // too long, under whichever spelling: named by the main one
    let long = "x".repeat(129);
    let (_, b) = s.post(url, json!({"lanlan_name": long})).await;
    assert_eq!(refusal(&b), invalid("persona_name is too long"));
    let (_, b) = s
        .post(url, json!({"persona_name": "Mika", "sessionId": long}))
        .await;
    assert_eq!(refusal(&b), invalid("session_id is too long"));
    // an empty body is `{}`; one that is no object is refused as a whole
    let r = s.http.post(s.url(url)).send().await.expect("an answer");
    let b: Value = r.json().await.expect("json");
    assert_eq!(b["reason"], "missing_persona_name", "{b}");
    let (_, b) = s.post(url, json!(["persona_name", "Mika"])).await;
    assert_eq!(refusal(&b), invalid("the body must be a JSON object"));
}

#[tokio::test]
async fn mistyped_fields_are_invalid_body_naming_the_field() {
    let s = server().await;
    start(&s, "soccer", "m1").await;
    let call = |extra: Value| {
        let mut body = json!({"persona_name": "Companion", "session_id": "m1"});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    let cases: &[(&str, Value, &str)] = &[
        (
            "/api/game/soccer/route/drain",
            json!({"limit": "lots"}),
            "limit must be an integer from -9007199254740991 to 9007199254740991",
        ),
        (
            "/api/game/soccer/route/start",
            json!({"mode": 3}),
            "mode must be a string",
        ),
        (
            "/api/game/soccer/route/end",
            json!({"reason": false}),
            "reason must be a string",
        ),
        (
            "/api/game/soccer/route/voice-transcript",
            json!({"transcript": "", "text": 5}),
            "text must be a string",
        ),
        (
            "/api/game/soccer/route/voice-transcript",
            json!({"transcript": "hi", "request_id": 9}),
            "request_id must be a string",
        ),
        (
            "/api/game/soccer/speak",
            json!({"line": "hi", "mirror_text": "maybe"}),
            "mirror_text must be a boolean",
        ),
        (
            "/api/game/soccer/speak",
            json!({"line": "hi", "interrupt_audio": 2}),
            "interrupt_audio must be a boolean",
        ),
        (
            "/api/game/soccer/mirror-assistant",
            json!({"line": " ", "text": []}),
            "text must be a string",
        ),
        (
            "/api/game/soccer/realtime-context",
            json!({"state": 1}),
            "state must be an object",
        ),
        (
            "/api/game/soccer/realtime-context",
            json!({"pendingItems": "a"}),
            "pendingItems must be a list",
        ),
    ];
    for (url, extra, error) in cases {
        let (st, b) = s.post_csrf(url, call(extra.clone())).await;
        assert_eq!((st, refusal(&b)), (200, invalid(error)), "{url} {extra}");
    }
    // the readable spellings of a flag and an integer are taken
    let (_, b) = s
        .post(
            "/api/game/soccer/route/drain",
            call(json!({"limit": " 3 "})),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    let (_, b) = s
        .post(
            "/api/game/soccer/speak",
            call(json!({"line": "hi", "mirror_text": "off", "emit_turn_end": 0})),
        )
        .await;
    assert_ne!(b["reason"], "invalid_body", "{b}");
    // the alias of a blank line is read
    let (_, b) = s
        .post(
            "/api/game/soccer/route/voice-transcript",
            call(json!({"transcript": " ", "text": "hello"})),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["handled"].clone()),
        (json!(true), json!(true)),
        "{b}"
    );
}

#[tokio::test]
async fn icebreaker_fields_keep_their_rules() {
    let s = server().await;
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/start",
            json!({"lanlan_name": "Companion", "sessionId": 5}),
        )
        .await;
    assert_eq!(b["state"]["session_id"], "5", "{b}");
    let choice = |extra: Value| {
        let mut body = json!({"persona_name": "Companion", "session_id": "5", "day": 1,
            "node_id": "n1", "choice": "a"});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    let cases: &[(Value, (Value, Value))] = &[
        (json!({"day": "x"}), invalid("day must be an integer")),
        (json!({"day": 1.5}), invalid("day must be an integer")),
        (json!({"day": 10000}), invalid("day is out of range")),
        (json!({"day": " "}), (json!("missing_day"), Value::Null)),
        (json!({"day": null}), (json!("missing_day"), Value::Null)),
        (json!({"seq": "3"}), invalid("seq must be an integer")),
        (
            json!({"handoff": "perhaps"}),
            invalid("handoff must be a boolean"),
        ),
        (json!({"node_id": 4}), invalid("node_id must be a string")),
        (
            json!({"choice": " "}),
            (json!("invalid_choice"), Value::Null),
        ),
    ];
    for (extra, want) in cases {
        let (_, b) = s
            .post_csrf("/api/icebreaker/choice", choice(extra.clone()))
            .await;
        assert_eq!(&refusal(&b), want, "{extra}");
    }
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/choice",
            choice(json!({"day": " 12 ", "seq": 3})),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["day"].clone()),
        (json!(true), json!(12)),
        "{b}"
    );
    // context: the request id may come inside the event, with the same rule
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/context",
            json!({"persona_name": "Companion", "session_id": "5", "role": "user",
                "text": "hi", "event": {"request_id": 5}}),
        )
        .await;
    assert_eq!(refusal(&b), invalid("request_id must be a string"));
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/context",
            json!({"persona_name": "Companion", "session_id": "5", "role": 1, "text": "hi"}),
        )
        .await;
    assert_eq!(refusal(&b), invalid("role must be a string"));
    // free text: options must be a list
    let (_, b) = s
        .post(
            "/api/icebreaker/free-text/interpret",
            json!({"persona_name": "Companion", "session_id": "5", "userText": "hm",
                "options": "a"}),
        )
        .await;
    assert_eq!(refusal(&b), invalid("options must be a list"));
    let (_, b) = s
        .post(
            "/api/icebreaker/free-text/interpret",
            json!({"persona_name": "Companion", "session_id": "5", "user_text": " "}),
        )
        .await;
    assert_eq!(b["reason"], "missing_user_text", "{b}");
    // end: the current character when none is named; a mistyped reason is refused
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/end",
            json!({"session_id": "5", "reason": 1}),
        )
        .await;
    assert_eq!(refusal(&b), invalid("reason must be a string"));
    let (_, b) = s
        .post_csrf("/api/icebreaker/route/end", json!({"session_id": "5"}))
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["persona_name"].clone(),
            b["reason"].clone()
        ),
        (json!(true), json!("Companion"), json!("icebreaker_end")),
        "{b}"
    );
}

#[tokio::test]
async fn a_log_entry_keeps_its_other_fields_as_details() {
    let s = server().await;
    let (_, b) = s
        .post_csrf(
            "/api/game/logs/enable",
            json!({"sessionId": 77, "gameType": " Soccer ", "lanlan_name": "Mika"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["session_id"].clone(),
            b["game_type"].clone()
        ),
        (json!(true), json!("77"), json!("soccer")),
        "{b}"
    );
    let (_, b) = s
        .post_csrf(
            "/api/game/logs",
            json!({"session_id": "77", "game_type": "soccer", "lanlan_name": "Mika",
                "type": "kick", "level": " ", "message": {"m": 1}, "power": 3,
                "sensitivePossible": "yes", "_csrf_token": "t", "where": "left"}),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    let (_, b) = s.get("/api/game/logs?session_id=77&game_type=soccer").await;
    let e = &b["log"]["entries"]
        .as_array()
        .expect("entries")
        .last()
        .cloned()
        .expect("one");
    assert_eq!(
        (
            e["event"].clone(),
            e["level"].clone(),
            e["message"].clone(),
            e["sensitive_possible"].clone()
        ),
        (
            json!("kick"),
            json!("info"),
            json!("{\"m\":1}"),
            json!(true)
        ),
        "{e}"
    );
    assert_eq!(
        e["details"],
        json!({"lanlan_name": "Mika", "power": 3, "where": "left"}),
        "{e}"
    );
    let keys: Vec<&String> = e["details"].as_object().expect("details").keys().collect();
    assert_eq!(keys, ["lanlan_name", "power", "where"]);
    // a details object is kept as sent; a mistyped id is refused
    let (_, b) = s
        .post_csrf(
            "/api/game/logs",
            json!({"session_id": "77", "game_type": "soccer", "details": {"k": 1}, "x": 2}),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    let (_, b) = s
        .post_csrf("/api/game/logs", json!({"session_id": "77", "gameType": 5}))
        .await;
    assert_eq!(refusal(&b), invalid("gameType must be a string"));
    let (_, b) = s
        .post_csrf("/api/game/logs", json!({"session_id": " "}))
        .await;
    assert_eq!(b["reason"], "missing_session_id", "{b}");
}

#[tokio::test]
async fn a_page_signal_is_its_first_spelling_of_the_right_type() {
    let s = server().await;
    start(&s, "soccer", "p1").await;
    let beat = |signals: Value| {
        let mut body = json!({"persona_name": "Companion", "session_id": "p1"});
        for (k, v) in signals.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    let url = "/api/game/soccer/route/heartbeat";
    let (_, b) = s
        .post(
            url,
            beat(json!({"visibilityState": 5, "visibility_state": " HIDDEN "})),
        )
        .await;
    assert_eq!(
        (
            b["state"]["visibility_state"].clone(),
            b["state"]["page_visible"].clone()
        ),
        (json!("hidden"), json!(false)),
        "{b}"
    );
    let (_, b) = s
        .post(
            url,
            beat(json!({"pageVisible": "yes", "page_visible": true})),
        )
        .await;
    assert_eq!(
        (
            b["state"]["visibility_state"].clone(),
            b["state"]["page_visible"].clone()
        ),
        (json!("visible"), json!(true)),
        "{b}"
    );
}

//! Game routes (`/api/game/{game_type}/route/*`, `/end`, `/api/game/route/active`): the
//! per-character state machine, supersession, heartbeats, input routing, voice transcripts.

use std::time::Duration;

use companiond_core::testkit::{MockLlm, TestServer};
use serde_json::{json, Value};

use crate::common::{active, fast_start, frame_of, next_frame, send_text, server, start, ws_open};

#[tokio::test]
async fn route_lifecycle_state_machine() {
    let s = server().await;
    // no route
    assert_eq!(active(&s).await, json!({"ok": true, "active": false}));
    let (_, b) = s
        .get("/api/game/soccer/route/state?persona_name=Companion")
        .await;
    assert_eq!(
        b,
        json!({"ok": true, "state": {"game_route_active": false}})
    );
    let (_, b) = s
        .post(
            "/api/game/soccer/route/heartbeat",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["active"], false);
    assert_eq!(b["state"], json!({"game_route_active": false}));
    assert_eq!(b["heartbeat_interval_seconds"], 2.5);
    assert_eq!(b["heartbeat_timeout_seconds"], 10.0);
    // start: persona required, icebreaker refused with 400, bad body
    let (st, b) = s
        .post("/api/game/soccer/route/start", json!({"session_id": "s1"}))
        .await;
    assert_eq!(
        (st, b["ok"].clone(), b["reason"].clone()),
        (200, json!(false), json!("missing_persona_name"))
    );
    let (st, b) = s
        .post(
            "/api/game/new_user_icebreaker/route/start",
            json!({"persona_name": "Companion", "session_id": "x"}),
        )
        .await;
    assert_eq!(st, 400);
    assert_eq!(b["reason"], "not_a_game_route");
    assert_eq!(b["route"], "/api/icebreaker/route/start");
    let r = s
        .http
        .post(s.url("/api/game/soccer/route/start"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["reason"], "invalid_body");
    let (st, b) = s
        .post(
            "/api/game/so%20ccer/route/start",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!((st, b["reason"].clone()), (200, json!("invalid_game_type")));
    assert_eq!(active(&s).await["active"], false);
    // no route -> active
    let b = start(&s, "soccer", "s1").await;
    assert_eq!(b["state"]["game_route_active"], true);
    assert_eq!(b["game_route_active"], true);
    assert_eq!(b["state"]["session_id"], "s1");
    assert_eq!(
        active(&s).await,
        json!({"ok": true, "active": true, "game_type": "soccer", "session_id": "s1", "persona_name": "Companion"})
    );
    // route/active without persona uses the current character
    assert_eq!(s.get("/api/game/route/active").await.1["active"], true);
    // heartbeat: matching route
    let (_, b) = s
        .post(
            "/api/game/soccer/route/heartbeat",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["ok"], true);
    assert_eq!(b["active"], true);
    assert_eq!(b["state"]["game_route_active"], true);
    // heartbeat: other session / other game type
    let (_, b) = s
        .post(
            "/api/game/soccer/route/heartbeat",
            json!({"persona_name": "Companion", "session_id": "zz"}),
        )
        .await;
    assert_eq!(
        (b["active"].clone(), b["reason"].clone()),
        (json!(false), json!("session_id_mismatch"))
    );
    let (_, b) = s
        .post(
            "/api/game/badminton/route/heartbeat",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["active"], false);
    // other families see that the route owns the character's input
    assert!(s.state.hooks.is_routing("Companion"));
    assert!(!s.state.hooks.is_routing("Nobody"));
    // drain: empty
    let (_, b) = s
        .post(
            "/api/game/soccer/route/drain",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["outputs"], json!([]));
    // end -> cleanup result
    let (_, b) = s
        .post(
            "/api/game/soccer/route/end",
            json!({"persona_name": "Companion", "session_id": "s1", "finalScore": {"player": 2, "ai": 1}}),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    assert_eq!(b["route_closed"], true);
    assert_eq!(b["reason"], "route_end");
    assert_eq!(b["archive"]["finalScore"], json!({"player": 2, "ai": 1}));
    assert_eq!(b["archive"]["exit_reason"], "route_end");
    assert_eq!(b["state"]["game_route_active"], false);
    assert_eq!(b["archive_memory"]["status"], "skipped");
    let a = active(&s).await;
    assert_eq!(a["active"], false);
    assert_eq!(a["ended_route"]["session_id"], "s1");
    assert!(!s.state.hooks.is_routing("Companion"));
    let (_, st) = s
        .get("/api/game/soccer/route/state?persona_name=Companion")
        .await;
    assert_eq!(st["state"]["game_route_active"], false);
    assert_eq!(st["state"]["exit_reason"], "route_end");
    // after end, heartbeat says inactive; a repeated end is idempotent
    let (_, b) = s
        .post(
            "/api/game/soccer/route/heartbeat",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["active"], false);
    let (_, b) = s
        .post(
            "/api/game/soccer/end",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["route_closed"].clone(),
            b["already_ended"].clone()
        ),
        (json!(true), json!(false), json!(true))
    );
    // /end of a live round uses reason game_end and ends the route
    start(&s, "chess", "c1").await;
    let (_, b) = s
        .post(
            "/api/game/chess/end",
            json!({"persona_name": "Companion", "session_id": "c1"}),
        )
        .await;
    assert_eq!(
        (b["route_closed"].clone(), b["reason"].clone()),
        (json!(true), json!("game_end"))
    );
    assert_eq!(active(&s).await["active"], false);
    // end with nothing to end
    let (_, b) = s
        .post(
            "/api/game/chess/route/end",
            json!({"persona_name": "Companion", "session_id": "nope"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["route_closed"].clone(),
            b["archive"].clone()
        ),
        (json!(true), json!(false), Value::Null)
    );
}

#[tokio::test]
async fn a_new_start_supersedes_the_characters_other_route() {
    let s = server().await;
    let mut ws = ws_open(&s, "Companion").await;
    start(&s, "soccer", "s1").await;
    let f = frame_of(&mut ws, "game_window_state_change").await;
    assert_eq!(
        (f["action"].clone(), f["game_type"].clone()),
        (json!("opened"), json!("soccer"))
    );
    let b = start(&s, "badminton", "b1").await;
    assert_eq!(
        b["superseded"],
        json!([{"game_type": "soccer", "session_id": "s1"}])
    );
    let f = frame_of(&mut ws, "game_window_state_change").await;
    assert_eq!(
        (
            f["action"].clone(),
            f["game_type"].clone(),
            f["reason"].clone()
        ),
        (
            json!("closed"),
            json!("soccer"),
            json!("superseded_by_route_start")
        )
    );
    let f = frame_of(&mut ws, "game_window_state_change").await;
    assert_eq!(
        (f["action"].clone(), f["game_type"].clone()),
        (json!("opened"), json!("badminton"))
    );
    let a = active(&s).await;
    assert_eq!(
        (a["game_type"].clone(), a["session_id"].clone()),
        (json!("badminton"), json!("b1"))
    );
    let (_, st) = s
        .get("/api/game/soccer/route/state?persona_name=Companion")
        .await;
    assert_eq!(st["state"]["game_route_active"], false);
    assert_eq!(st["state"]["exit_reason"], "superseded_by_route_start");
    // the same game type again: a new route replaces the old session
    let b = start(&s, "badminton", "b2").await;
    assert_eq!(
        b["superseded"],
        json!([{"game_type": "badminton", "session_id": "b1"}])
    );
    assert_eq!(active(&s).await["session_id"], "b2");
    // another character's route is not touched
    s.state
        .characters
        .create("Other", Default::default())
        .await
        .unwrap();
    s.state.sessions.ensure("Other");
    let (_, b) = s
        .post(
            "/api/game/soccer/route/start",
            json!({"persona_name": "Other", "session_id": "o1"}),
        )
        .await;
    assert_eq!(b["superseded"], json!([]));
    assert_eq!(active(&s).await["session_id"], "b2");
}

#[tokio::test]
async fn a_lapsed_heartbeat_ends_the_route_by_itself() {
    let s = TestServer::start(&[companiond_core::server::Family {
        api: companiond_games::api,
        start: fast_start,
    }])
    .await;
    let mut ws = ws_open(&s, "Companion").await;
    start(&s, "soccer", "s1").await;
    // beats keep it alive well past one timeout
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, b) = s
            .post(
                "/api/game/soccer/route/heartbeat",
                json!({"persona_name": "Companion", "session_id": "s1"}),
            )
            .await;
        assert_eq!(b["active"], true);
        assert_eq!(b["heartbeat_timeout_seconds"], 0.6);
    }
    // a hidden page gets the longer timeout
    let (_, b) = s
        .post(
            "/api/game/soccer/route/heartbeat",
            json!({"persona_name": "Companion", "session_id": "s1", "visibilityState": "hidden"}),
        )
        .await;
    assert_eq!(b["heartbeat_timeout_seconds"], 5.0);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(active(&s).await["active"], true);
    // visible again, then silence
    s.post(
        "/api/game/soccer/route/heartbeat",
        json!({"persona_name": "Companion", "session_id": "s1", "pageVisible": true}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let a = active(&s).await;
    assert_eq!(a["active"], false);
    assert_eq!(a["ended_route"]["exit_reason"], "heartbeat_timeout");
    let f = frame_of(&mut ws, "game_window_state_change").await;
    assert_eq!(f["action"], "opened");
    let f = frame_of(&mut ws, "game_window_state_change").await;
    assert_eq!(
        (f["action"].clone(), f["reason"].clone()),
        (json!("closed"), json!("heartbeat_timeout"))
    );
    let (_, b) = s
        .post(
            "/api/game/soccer/route/heartbeat",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["active"], false);
}

#[tokio::test]
async fn main_chat_input_goes_into_the_active_game() {
    let s = server().await;
    let llm = MockLlm::start("model answer").await;
    s.configure_llm(&llm.base()).await;
    let mut ws = ws_open(&s, "Companion").await;
    start(&s, "soccer", "s1").await;
    send_text(&mut ws, "user_text", "pass me the ball").await;
    let f = frame_of(&mut ws, "game_input").await;
    assert_eq!(f["game_type"], "soccer");
    assert_eq!(f["session_id"], "s1");
    assert_eq!(f["source"], "text");
    assert_eq!(f["text"], "pass me the ball");
    assert_eq!(next_frame(&mut ws).await["type"], "turn_end");
    send_text(&mut ws, "voice_transcript", "shoot now").await;
    let f = frame_of(&mut ws, "game_input").await;
    assert_eq!(f["source"], "voice");
    assert_eq!(next_frame(&mut ws).await["type"], "turn_end");
    assert!(
        llm.chat_requests().is_empty(),
        "the model must not be called"
    );
    // the game drains them in order
    let (_, b) = s
        .post(
            "/api/game/soccer/route/drain",
            json!({"persona_name": "Companion", "session_id": "s1", "limit": 1}),
        )
        .await;
    let outs = b["outputs"].as_array().unwrap();
    assert_eq!(outs.len(), 1);
    assert_eq!(
        (outs[0]["text"].clone(), outs[0]["source"].clone()),
        (json!("pass me the ball"), json!("text"))
    );
    assert_eq!(b["state"]["pending_output_count"], 1);
    // a drain of another session takes nothing
    let (_, b) = s
        .post(
            "/api/game/soccer/route/drain",
            json!({"persona_name": "Companion", "session_id": "other"}),
        )
        .await;
    assert_eq!(b["outputs"], json!([]));
    let (_, b) = s
        .post(
            "/api/game/soccer/route/drain",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["outputs"][0]["text"], "shoot now");
    assert_eq!(b["outputs"][0]["source"], "voice");
    // the recent history was not written while the game held the input
    assert!(!s.data.join("memory/Companion/recent.json").exists());
    // after the route ends the model answers again
    s.post(
        "/api/game/soccer/route/end",
        json!({"persona_name": "Companion", "session_id": "s1"}),
    )
    .await;
    send_text(&mut ws, "user_text", "hello").await;
    let mut text = String::new();
    loop {
        let f = next_frame(&mut ws).await;
        match f["type"].as_str() {
            Some("assistant_delta") => text.push_str(f["text"].as_str().unwrap()),
            Some("turn_end") => break,
            Some("game_input") => panic!("input still routed: {f}"),
            _ => {}
        }
    }
    assert_eq!(text, "model answer");
    assert_eq!(llm.chat_requests().len(), 1);
}

#[tokio::test]
async fn voice_transcript_route() {
    let s = server().await;
    let url = "/api/game/soccer/route/voice-transcript";
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["reason"], "missing_transcript");
    let (_, b) = s.post(url, json!({"transcript": "hi"})).await;
    assert_eq!(b["reason"], "missing_persona_name");
    let (_, b) = s
        .post(url, json!({"persona_name": "Companion", "transcript": 5}))
        .await;
    assert_eq!(b["reason"], "invalid_body");
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "s1", "transcript": "hi"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["handled"].clone(), b["reason"].clone()),
        (json!(false), json!(false), json!("route_not_active"))
    );
    start(&s, "soccer", "s1").await;
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "s2", "transcript": "hi"}),
        )
        .await;
    assert_eq!(
        (b["handled"].clone(), b["reason"].clone()),
        (json!(false), json!("session_id_mismatch"))
    );
    let body = json!({"persona_name": "Companion", "session_id": "s1", "transcript": " left! ", "request_id": "r1"});
    let (_, b) = s.post(url, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["handled"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(b["state"]["game_input_mode"], "voice");
    let (_, b) = s.post(url, body).await;
    assert_eq!(
        (b["ok"].clone(), b["handled"].clone()),
        (json!(true), json!(false))
    );
    let (_, b) = s
        .post(
            "/api/game/soccer/route/drain",
            json!({"persona_name": "Companion", "session_id": "s1"}),
        )
        .await;
    assert_eq!(b["outputs"].as_array().unwrap().len(), 1);
    assert_eq!(b["outputs"][0]["text"], "left!");
}

#[tokio::test]
async fn end_without_a_running_round_and_icebreaker_end_refused() {
    let s = server().await;
    // new_user_icebreaker has its own route family: route/end (and /end) are 400
    for path in [
        "/api/game/new_user_icebreaker/route/end",
        "/api/game/New_User_Icebreaker/end",
    ] {
        let (st, b) = s
            .post(
                path,
                json!({"persona_name": "Companion", "session_id": "x"}),
            )
            .await;
        assert_eq!(
            (st, b["reason"].clone()),
            (400, json!("not_a_game_route")),
            "{path}"
        );
        assert_eq!(b["route"], "/api/icebreaker/route/end");
    }
    // no running round: not an error, with or without persona_name
    let cases = [
        ("/api/game/soccer/end", json!({}), "default"),
        ("/api/game/soccer/end", json!({"session_id": "abc"}), "abc"),
        (
            "/api/game/chess/end",
            json!({"persona_name": "Companion", "session_id": "zzz"}),
            "zzz",
        ),
        (
            "/api/game/soccer/route/end",
            json!({"session_id": "q"}),
            "q",
        ),
        (
            "/api/game/badminton/end",
            json!({"persona_name": "Nobody", "session_id": "n", "finalScore": 3}),
            "n",
        ),
    ];
    for (path, body, sid) in cases {
        let (st, b) = s.post(path, body.clone()).await;
        assert_eq!(st, 200, "{path} {body}");
        assert_eq!(
            b,
            json!({"ok": true, "closed": false, "session_id": sid, "route_closed": false, "archive": null}),
            "{path} {body}"
        );
    }
    // without persona_name a running round of the current character is ended
    start(&s, "soccer", "live").await;
    let (_, b) = s
        .post("/api/game/soccer/end", json!({"session_id": "live"}))
        .await;
    assert_eq!(
        (b["route_closed"].clone(), b["persona_name"].clone()),
        (json!(true), json!("Companion")),
        "{b}"
    );
    assert_eq!(active(&s).await["active"], false);
}

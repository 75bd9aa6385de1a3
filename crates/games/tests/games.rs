//! End-to-end tests of the mini-game (`/api/game`) and onboarding (`/api/icebreaker`)
//! routes over real HTTP and the real chat WebSocket, with a loopback
//! OpenAI-compatible model server and real SQLite.

use std::time::Duration;

use companiond_core::testkit::{MockLlm, MockReply, TestServer};
use companiond_core::AppState;
use companiond_games::GamesConfig;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Short timings for the heartbeat-lapse and score-session-expiry tests.
fn fast_start(s: &AppState) {
    companiond_games::start_with(
        s,
        GamesConfig {
            heartbeat_interval: Duration::from_millis(100),
            heartbeat_timeout: Duration::from_millis(600),
            hidden_heartbeat_timeout: Duration::from_secs(5),
            sweep_period: Duration::from_millis(50),
            score_session_ttl: Duration::from_millis(1500),
            ..GamesConfig::default()
        },
    )
}

async fn server() -> TestServer {
    TestServer::start(&[companiond_games::FAMILY]).await
}

async fn ws_open(s: &TestServer, name: &str) -> Ws {
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url(&format!("/ws/{name}")))
        .await
        .expect("ws connect");
    assert_eq!(next_frame(&mut ws).await["type"], "session_started");
    ws
}

async fn next_frame(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a frame in time")
            .expect("stream open")
            .expect("frame");
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).expect("json frame");
        }
    }
}

/// The next frame whose type is `kind` (other frames are skipped).
async fn frame_of(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let f = next_frame(ws).await;
        if f["type"] == kind {
            return f;
        }
    }
}

/// No frame arrives within `ms`.
async fn silent(ws: &mut Ws, ms: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(ms), ws.next())
        .await
        .is_err()
}

async fn send_text(ws: &mut Ws, kind: &str, text: &str) {
    ws.send(Message::Text(
        json!({"type": kind, "text": text}).to_string(),
    ))
    .await
    .expect("send");
}

async fn start(s: &TestServer, game: &str, session: &str) -> Value {
    let (st, b) = s
        .post(
            &format!("/api/game/{game}/route/start"),
            json!({"persona_name": "Companion", "session_id": session}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["ok"], true, "{b}");
    b
}

async fn active(s: &TestServer) -> Value {
    s.get("/api/game/route/active?persona_name=Companion")
        .await
        .1
}

// ==================================================================== game routes

#[tokio::test]
async fn every_route_is_in_openapi() {
    let s = server().await;
    let (_, doc) = s.get("/openapi.json").await;
    let paths = doc["paths"].as_object().expect("paths");
    let expected: &[(&str, &str)] = &[
        ("/api/game/logs", "get"),
        ("/api/game/logs", "post"),
        ("/api/game/logs/view", "get"),
        ("/api/game/logs/enable", "post"),
        ("/api/game/{game_type}/route/start", "post"),
        ("/api/game/{game_type}/route/state", "get"),
        ("/api/game/route/active", "get"),
        ("/api/game/{game_type}/route/drain", "post"),
        ("/api/game/{game_type}/route/voice-transcript", "post"),
        ("/api/game/{game_type}/route/heartbeat", "post"),
        ("/api/game/{game_type}/route/end", "post"),
        ("/api/game/{game_type}/passive-guard", "post"),
        ("/api/game/{game_type}/chat", "post"),
        ("/api/game/{game_type}/mirror-assistant", "post"),
        ("/api/game/{game_type}/speak", "post"),
        ("/api/game/{game_type}/realtime-context", "post"),
        ("/api/game/{game_type}/quick-lines", "post"),
        ("/api/game/{game_type}/character", "get"),
        ("/api/game/{game_type}/end", "post"),
        ("/api/game/{game_type}/leaderboard", "get"),
        ("/api/game/{game_type}/leaderboard", "post"),
        ("/api/icebreaker/route/start", "post"),
        ("/api/icebreaker/route/end", "post"),
        ("/api/icebreaker/route/state", "get"),
        ("/api/icebreaker/context", "post"),
        ("/api/icebreaker/free-text/interpret", "post"),
        ("/api/icebreaker/choice", "post"),
        ("/api/icebreaker/speak", "post"),
    ];
    for (p, m) in expected {
        assert!(
            paths.get(*p).and_then(|x| x.get(*m)).is_some(),
            "{m} {p} missing"
        );
    }
    assert_eq!(expected.len(), 28);
}

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
async fn game_chat_line_control_and_degraded_envelopes() {
    let s = server().await;
    let url = "/api/game/badminton/chat";
    let ev = json!({"kind": "line_in", "textRaw": "player hit the line"});
    // invalid body
    let r = s.http.post(s.url(url)).body("[1,2]").send().await.unwrap();
    let b: Value = r.json().await.unwrap();
    assert_eq!(
        (b["error"].clone(), b["line"].clone(), b["control"].clone()),
        (json!("invalid_body"), json!(""), json!({}))
    );
    // inactive route
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(
        (
            b["skipped"].clone(),
            b["reason"].clone(),
            b["line"].clone(),
            b["control"].clone()
        ),
        (
            json!("route_inactive"),
            json!("route_not_active"),
            json!(""),
            json!({})
        )
    );
    start(&s, "badminton", "b1").await;
    // stale session
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "zz", "event": ev}),
        )
        .await;
    assert_eq!(
        (b["skipped"].clone(), b["reason"].clone(), b["line"].clone()),
        (
            json!("stale_session"),
            json!("session_id_mismatch"),
            json!("")
        )
    );
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1"}),
        )
        .await;
    assert_eq!(
        (b["error"].clone(), b["line"].clone()),
        (json!("missing_event"), json!(""))
    );
    // no model configured
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(
        (b["error"].clone(), b["reason"].clone(), b["line"].clone()),
        (
            json!("provider_unavailable"),
            json!("no_provider"),
            json!("")
        )
    );
    // with a model
    let llm = MockLlm::start("Again! {\"mood\": \"excited\"}").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text(
        "What a shot!\n{\"mood\": \"happy\", \"expression\": \"cheer\", \"intensity\": \"huge\"}"
            .into(),
    ));
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(b["line"], "What a shot!", "{b}");
    assert_eq!(
        b["control"],
        json!({"mood": "happy", "expression": "cheer"})
    );
    let req = &llm.chat_requests()[0];
    assert!(req["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("player hit the line"));
    let (_, st) = s
        .get("/api/game/badminton/route/state?persona_name=Companion")
        .await;
    assert_eq!(st["state"]["dialog_count"], 1);
    assert_eq!(
        st["state"]["last_dialogues"][0]["result_line"],
        "What a shot!"
    );
    // the round's model session keeps the previous exchange
    s.post(
        url,
        json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
    )
    .await;
    assert_eq!(
        llm.chat_requests()[1]["messages"].as_array().unwrap().len(),
        4
    );
    // upstream failure
    llm.push(MockReply::Status(500, "boom".into()));
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(
        (b["error"].clone(), b["line"].clone()),
        (json!("provider_unavailable"), json!(""))
    );
    // rate limit: 10 calls per 8 s per (character, session)
    let mut limited = None;
    for i in 0..12 {
        let (_, b) = s
            .post(
                url,
                json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
            )
            .await;
        if b["error"] == "rate_limited" {
            limited = Some((i, b));
            break;
        }
    }
    let (i, b) = limited.expect("rate limited");
    assert_eq!(i, 6, "4 calls were made before the loop");
    assert_eq!(
        (b["line"].clone(), b["control"].clone()),
        (json!(""), json!({}))
    );
    assert!(b["retry_after"].as_u64().unwrap() >= 1);
    // /end closes the round's model session
    let (_, b) = s
        .post(
            "/api/game/badminton/end",
            json!({"persona_name": "Companion", "session_id": "b1"}),
        )
        .await;
    assert_eq!(b["closed"], true);
}

#[tokio::test]
async fn mirror_assistant_speak_and_realtime_context() {
    let s = server().await;
    let mut ws = ws_open(&s, "Companion").await;
    let m = "/api/game/soccer/mirror-assistant";
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "line": "<break time=\"1s\"/>"}),
        )
        .await;
    assert_eq!(b["reason"], "missing_line");
    let (_, b) = s.post(m, json!({"line": "hi"})).await;
    assert_eq!(b["reason"], "missing_persona_name");
    let (_, b) = s
        .post(m, json!({"persona_name": "Ghost", "line": "hi"}))
        .await;
    assert_eq!(b["reason"], "no_session_manager");
    // before a route: allowed (opening line)
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "line": "<speak>Ready?</speak>"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["method"].clone(), b["line"].clone()),
        (json!(true), json!("project_text_mirror"), json!("Ready?"))
    );
    let f = frame_of(&mut ws, "assistant_mirror").await;
    assert_eq!(f["text"], "Ready?");
    let hist = s.state.sessions.get("Companion").unwrap().history().await;
    assert_eq!(hist.last().unwrap().content.as_deref(), Some("Ready?"));
    assert_eq!(hist.last().unwrap().role, "assistant");
    start(&s, "soccer", "s1").await;
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "session_id": "old", "line": "x"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["skipped"].clone(), b["reason"].clone()),
        (
            json!(true),
            json!("stale_session"),
            json!("session_id_mismatch")
        )
    );
    let (_, b) = s
        .post(
            "/api/game/badminton/mirror-assistant",
            json!({"persona_name": "Companion", "line": "x"}),
        )
        .await;
    assert_eq!(b["reason"], "route_owned_by_other_game");
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "session_id": "s1", "line": "Goal!"}),
        )
        .await;
    assert_eq!(b["mirrored"], true);
    let (_, st) = s
        .get("/api/game/soccer/route/state?persona_name=Companion")
        .await;
    assert_eq!(st["state"]["dialog_count"], 1);

    // speak
    let sp = "/api/game/soccer/speak";
    let (st, b) = s
        .post(
            "/api/game/new_user_icebreaker/speak",
            json!({"persona_name": "Companion", "line": "x"}),
        )
        .await;
    assert_eq!((st, b["reason"].clone()), (400, json!("not_a_game_route")));
    let (_, b) = s
        .post(sp, json!({"persona_name": "Companion", "session_id": "s1"}))
        .await;
    assert_eq!(b["reason"], "missing_line");
    let (_, b) = s
        .post(
            sp,
            json!({"persona_name": "Companion", "session_id": "s9", "line": "hey"}),
        )
        .await;
    assert_eq!(
        (b["skipped"].clone(), b["audio_committed"].clone()),
        (json!("stale_session"), json!(false))
    );
    assert_eq!(b["voice_source"]["skipped"], "stale_session");
    let (_, b) = s
        .post(
            "/api/game/chess/speak",
            json!({"persona_name": "Companion", "line": "hey"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["audio_sent"].clone()
        ),
        (json!(false), json!("route_not_active"), json!(false))
    );
    let (_, b) = s
        .post(
            sp,
            json!({"persona_name": "Companion", "session_id": "s1", "line": "hey"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("no_voice_provider"))
    );
    assert_eq!(b["tts_pipeline"]["after"]["tts_available"], false);
    assert_eq!(b["audio_sent"], false);

    // realtime-context: CSRF, then no realtime session
    let rc = "/api/game/soccer/realtime-context";
    let body = json!({"persona_name": "Companion", "session_id": "s1", "state": {"round": 2}});
    let (st, b) = s.post(rc, body.clone()).await;
    assert_eq!(
        (st, b["ok"].clone(), b["reason"].clone()),
        (403, json!(false), json!("csrf_validation_failed"))
    );
    let r = s
        .http
        .post(s.url(rc))
        .header("X-CSRF-Token", "wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let (st, b) = s.post_csrf(rc, body.clone()).await;
    assert_eq!(
        (st, b["reason"].clone()),
        (200, json!("no_active_realtime_session"))
    );
    let (_, b) = s.post_csrf(rc, json!({"persona_name": "Ghost"})).await;
    assert_eq!(b["reason"], "no_session_manager");
    let (_, b) = s.post_csrf(rc, json!({"state": {}})).await;
    assert_eq!(b["reason"], "missing_persona_name");
    let (_, b) = s
        .post_csrf(rc, json!({"persona_name": "Companion", "state": "x"}))
        .await;
    assert_eq!(b["reason"], "invalid_body");
    // body token works without the header
    let r = s
        .http
        .post(s.url(rc))
        .json(&json!({"persona_name": "Companion", "_csrf_token": companiond_core::testkit::CSRF}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["reason"],
        "no_active_realtime_session"
    );
}

#[tokio::test]
async fn quick_lines_passive_guard_and_character() {
    let s = server().await;
    // unsupported
    let (st, b) = s
        .post(
            "/api/game/chess/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (st, b["ok"].clone(), b["lines"].clone()),
        (200, json!(false), json!({}))
    );
    // badminton without a model: built-in fallback
    let (_, b) = s
        .post(
            "/api/game/badminton/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["fallback"].clone()),
        (json!(true), json!(true))
    );
    assert!(b["lines"]["game_over"].is_array());
    let (_, b) = s
        .post(
            "/api/game/soccer/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["lines"].clone()),
        (json!(false), json!({}))
    );
    let llm = MockLlm::start("{}").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text(
        "```json\n{\"goal-scored\": [\"Yes!\", \"a line that is far too long for the limit\"], \"bogus\": [\"x\"]}\n```".into(),
    ));
    let (_, b) = s
        .post(
            "/api/game/soccer/quick-lines",
            json!({"persona_name": "Companion", "session_id": "s"}),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    assert_eq!(b["character"], "Companion");
    let gs = b["lines"]["goal-scored"].as_array().unwrap();
    assert_eq!(gs.len(), 2);
    assert!(gs.iter().all(|l| l.as_str().unwrap().chars().count() <= 24));
    assert!(b["lines"].get("bogus").is_none());
    assert_eq!(b["missing"].as_array().unwrap().len(), 11);
    llm.push(MockReply::Text(
        "{\"out\": [\"Out!\"], \"net\": [\"Net!\"]}".into(),
    ));
    let (_, b) = s
        .post(
            "/api/game/badminton/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(b["lines"]["out"], json!(["Out!"]));
    assert!(b.get("cached").is_none());
    let calls = llm.chat_requests().len();
    let (_, b) = s
        .post(
            "/api/game/badminton/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (b["cached"].clone(), b["lines"]["net"].clone()),
        (json!(true), json!(["Net!"]))
    );
    assert_eq!(llm.chat_requests().len(), calls);

    // passive guard
    let pg = "/api/game/soccer/passive-guard";
    let (_, b) = s
        .post(
            "/api/game/badminton/passive-guard",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["recommendedAction"].clone(),
            b["exitPromptType"].clone()
        ),
        (json!(false), json!("observe_more"), json!("none"))
    );
    let (_, b) = s
        .post(pg, json!({"persona_name": "Companion", "session_id": "s1"}))
        .await;
    assert_eq!(
        (b["reason"].clone(), b["recommendedAction"].clone()),
        (json!("route_not_active"), json!("observe_more"))
    );
    start(&s, "soccer", "s1").await;
    llm.push(MockReply::Text(
        "{\"classification\": \"frustrated\", \"confidence\": 0.8, \"recommendedAction\": \"prepare_exit_prompt\", \"evidenceTags\": [\"idle\"]}".into(),
    ));
    let (_, b) = s.post(pg, json!({"persona_name": "Companion", "session_id": "s1", "stage": 9, "promptType": "rest"})).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["recommendedAction"].clone(),
            b["exitPromptType"].clone(),
            b["classification"].clone()
        ),
        (
            json!(true),
            json!("prepare_exit_prompt"),
            json!("rest"),
            json!("frustrated")
        )
    );
    llm.push(MockReply::Text(
        "{\"recommendedAction\": \"prepare_exit_prompt\"}".into(),
    ));
    let (_, b) = s
        .post(
            pg,
            json!({"persona_name": "Companion", "session_id": "s1", "stage": 3}),
        )
        .await;
    assert_eq!(
        (b["recommendedAction"].clone(), b["exitPromptType"].clone()),
        (json!("observe_more"), json!("none"))
    );
    llm.push(MockReply::Status(503, "down".into()));
    let (_, b) = s
        .post(pg, json!({"persona_name": "Companion", "session_id": "s1"}))
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["recommendedAction"].clone(),
            b["exitPromptType"].clone()
        ),
        (
            json!(false),
            json!("exception"),
            json!("observe_more"),
            json!("none")
        )
    );

    // character info: fallback model type, then a profile with an avatar
    let (_, b) = s.get("/api/game/soccer/character").await;
    assert_eq!(
        (b["persona_name"].clone(), b["model_type"].clone()),
        (json!("Companion"), json!("live2d"))
    );
    let mut profile = serde_json::Map::new();
    profile.insert(
        "_reserved".into(),
        json!({"avatar": {"model_type": "live3d", "mmd": {"model_path": "mmd/miku/miku.pmx"}, "vrm": {"model_path": "/user_vrm/a.vrm"}}}),
    );
    s.state.characters.create("Miku", profile).await.unwrap();
    let (_, b) = s.get("/api/game/soccer/character?persona_name=Miku").await;
    assert_eq!(b["model_type"], "live3d");
    assert_eq!(b["live3d_sub_type"], "mmd");
    assert_eq!(b["mmd_path"], "/static/mmd/miku/miku.pmx");
    assert_eq!(b["vrm_path"], "/user_vrm/a.vrm");
    assert_eq!(b["live2d_path"], "");
    // unknown names fall back to the current character
    let (_, b) = s
        .get("/api/game/soccer/character?persona_name=Nobody")
        .await;
    assert_eq!(b["persona_name"], "Companion");
}

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

async fn play_badminton(s: &TestServer, session: &str, mode: &str, score: Value) {
    let (_, b) = s
        .post(
            "/api/game/badminton/route/start",
            json!({"persona_name": "Companion", "session_id": session, "mode": mode}),
        )
        .await;
    assert_eq!(b["state"]["mode"], mode);
    let (_, b) = s
        .post(
            "/api/game/badminton/end",
            json!({"persona_name": "Companion", "session_id": session, "finalScore": score, "round_completed": true}),
        )
        .await;
    assert_eq!(b["score_session_recorded"], true, "{b}");
}

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

// ==================================================================== onboarding

async fn ice_start(s: &TestServer, session: &str) -> Value {
    let (st, b) = s
        .post_csrf(
            "/api/icebreaker/route/start",
            json!({"persona_name": "Companion", "session_id": session}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["ok"], true, "{b}");
    b
}

#[tokio::test]
async fn onboarding_csrf_on_every_mutation_but_free_text() {
    let s = server().await;
    ice_start(&s, "i1").await;
    for path in [
        "/api/icebreaker/route/start",
        "/api/icebreaker/route/end",
        "/api/icebreaker/context",
        "/api/icebreaker/choice",
        "/api/icebreaker/speak",
    ] {
        let body = json!({"persona_name": "Companion", "session_id": "i1", "role": "user", "text": "x", "line": "x", "day": 1, "node_id": "n", "choice": "A"});
        let (st, b) = s.post(path, body.clone()).await;
        assert_eq!(
            (st, b["ok"].clone(), b["reason"].clone()),
            (403, json!(false), json!("csrf_validation_failed")),
            "{path}"
        );
        let r = s
            .http
            .post(s.url(path))
            .header("X-CSRF-Token", "nope")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
    }
    // nothing changed: still active for i1
    let (_, b) = s
        .get("/api/icebreaker/route/state?persona_name=Companion")
        .await;
    assert_eq!(b["state"]["session_id"], "i1");
    assert!(!s.data.join("state/icebreaker_choices.json").exists());
    // free text is not CSRF-guarded
    let (st, b) = s
        .post("/api/icebreaker/free-text/interpret", json!({"persona_name": "Companion", "session_id": "i1", "user_text": "hi", "options": []}))
        .await;
    assert_eq!((st, b["reason"].clone()), (200, json!("missing_options")));
}

#[tokio::test]
async fn onboarding_route_state_machine() {
    let s = server().await;
    let (_, b) = s.get("/api/icebreaker/route/state").await;
    assert_eq!(
        b,
        json!({"ok": true, "state": {"icebreaker_active": false}})
    );
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/start",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(b["reason"], "missing_session_id");
    // persona falls back to the current character
    let (_, b) = s
        .post_csrf("/api/icebreaker/route/start", json!({"session_id": "i1"}))
        .await;
    let st = &b["state"];
    assert_eq!(
        (
            st["icebreaker_active"].clone(),
            st["persona_name"].clone(),
            st["session_id"].clone(),
            st["source"].clone()
        ),
        (
            json!(true),
            json!("Companion"),
            json!("i1"),
            json!("new_user_icebreaker")
        )
    );
    assert!(st["started_at"].is_number() && st["last_activity"].is_number());
    // the game lookup never reports the onboarding route
    assert_eq!(active(&s).await, json!({"ok": true, "active": false}));
    // end with another session: rejected, route kept
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/end",
            json!({"persona_name": "Companion", "session_id": "other"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["handled"].clone(),
            b["method"].clone(),
            b["persona_name"].clone()
        ),
        (
            json!(false),
            json!("session_id_mismatch"),
            json!(false),
            json!("route_end"),
            json!("Companion")
        )
    );
    assert_eq!(b["state"]["session_id"], "i1");
    let (_, b) = s
        .get("/api/icebreaker/route/state?persona_name=Companion")
        .await;
    assert_eq!(b["state"]["icebreaker_active"], true);
    // a new start replaces the session
    ice_start(&s, "i2").await;
    // end without session id (and persona from the current character); default reason
    let (_, b) = s.post_csrf("/api/icebreaker/route/end", json!({})).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone(), b["state"].clone()),
        (
            json!(true),
            json!("icebreaker_end"),
            json!({"icebreaker_active": false})
        )
    );
    assert_eq!(b["ended"]["session_id"], "i2");
    let (_, b) = s.get("/api/icebreaker/route/state").await;
    assert_eq!(b["state"], json!({"icebreaker_active": false}));
    // ending again: inactive, still ok; matching session with an explicit reason
    let (_, b) = s
        .post_csrf("/api/icebreaker/route/end", json!({"session_id": "i2"}))
        .await;
    assert_eq!(
        (b["ok"].clone(), b["ended"].clone()),
        (json!(true), Value::Null)
    );
    ice_start(&s, "i3").await;
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/end",
            json!({"persona_name": "Companion", "session_id": "i3", "reason": "done"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(true), json!("done"))
    );
}

#[tokio::test]
async fn onboarding_context_rules() {
    let s = server().await;
    let c = "/api/icebreaker/context";
    let base = json!({"persona_name": "Companion", "session_id": "i1", "role": "assistant", "text": "Hello there"});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    // rule 4 (validated first)
    let (_, b) = s.post_csrf(c, with("role", json!("system"))).await;
    assert_eq!(b["reason"], "invalid_role");
    let (_, b) = s.post_csrf(c, with("text", json!("   "))).await;
    assert_eq!(b["reason"], "missing_text");
    let (_, b) = s.post_csrf(c, with("text", json!("x".repeat(2001)))).await;
    assert_eq!(b["reason"], "invalid_text_length");
    // no persona fallback
    let mut nb = base.clone();
    nb.as_object_mut().unwrap().remove("persona_name");
    let (_, b) = s.post_csrf(c, nb).await;
    assert_eq!(b["reason"], "missing_persona_name");
    // rule 2
    let (_, b) = s.post_csrf(c, base.clone()).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["persona_name"].clone(),
            b["source"].clone(),
            b["method"].clone()
        ),
        (
            json!(false),
            json!("route_not_active"),
            json!("Companion"),
            json!("new_user_icebreaker"),
            json!("project_session_history")
        )
    );
    ice_start(&s, "i1").await;
    // rule 3
    let (_, b) = s.post_csrf(c, with("session_id", json!("stale"))).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["skipped"].clone(),
            b["reason"].clone(),
            b["handled"].clone(),
            b["method"].clone()
        ),
        (
            json!(true),
            json!("stale_session"),
            json!("session_id_mismatch"),
            json!(false),
            json!("project_session_history")
        )
    );
    assert_eq!(b["state"]["session_id"], "i1");
    // success: 2000 characters is the limit
    let long = "y".repeat(2000);
    let (_, b) = s.post_csrf(c, with("text", json!(long))).await;
    assert_eq!(b["ok"], true, "{b}");
    let (_, b) = s.post_csrf(c, with("request_id", json!("q1"))).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["method"].clone(),
            b["source"].clone(),
            b["session_id"].clone(),
            b["memory_cached"].clone()
        ),
        (
            json!(true),
            json!("project_session_history"),
            json!("new_user_icebreaker"),
            json!("i1"),
            json!(true)
        )
    );
    assert!(b.get("deduped").is_none());
    // duplicate request id (also read from event.request_id)
    let mut dup = base.clone();
    dup["event"] = json!({"request_id": "q1"});
    let (_, b) = s.post_csrf(c, dup).await;
    assert_eq!(
        (b["ok"].clone(), b["deduped"].clone()),
        (json!(true), json!(true))
    );
    let mgr = s.state.sessions.get("Companion").unwrap();
    let hist = mgr.history().await;
    assert_eq!(hist.len(), 2, "the duplicate is not added");
    assert_eq!(hist[1].content.as_deref(), Some("Hello there"));
    assert_eq!(hist[1].role, "assistant");
    let recent: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("memory/Companion/recent.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(recent.as_array().unwrap().len(), 2);
    assert_eq!(recent[1]["data"]["content"], "Hello there");
    // a user line
    let (_, b) = s.post_csrf(c, with("role", json!("user"))).await;
    assert_eq!(b["ok"], true);
    assert_eq!(mgr.history().await.last().unwrap().role, "user");
    // no session manager for a name without a character
    s.post_csrf(
        "/api/icebreaker/route/start",
        json!({"persona_name": "Ghost", "session_id": "g"}),
    )
    .await;
    let (_, b) = s
        .post_csrf(
            c,
            json!({"persona_name": "Ghost", "session_id": "g", "role": "user", "text": "x"}),
        )
        .await;
    assert_eq!(b["reason"], "no_session_manager");
}

#[tokio::test]
async fn onboarding_free_text_interpretation() {
    let s = server().await;
    let f = "/api/icebreaker/free-text/interpret";
    let opts = json!([{"choice": "A", "label": "Cats"}, {"choice": "B", "label": "Dogs"}]);
    let body = json!({"persona_name": "Companion", "session_id": "i1", "user_text": "definitely dogs", "options": opts, "assistant_line": "Cats or dogs?"});
    let (_, b) = s
        .post(
            f,
            json!({"session_id": "i1", "user_text": "x", "options": opts}),
        )
        .await;
    assert_eq!(b["reason"], "missing_persona_name");
    let (_, b) = s
        .post(
            f,
            json!({"persona_name": "Companion", "session_id": "i1", "options": opts}),
        )
        .await;
    assert_eq!(b["reason"], "missing_user_text");
    let (_, b) = s
        .post(
            f,
            json!({"persona_name": "Companion", "user_text": "x", "options": opts}),
        )
        .await;
    assert_eq!(b["reason"], "missing_session_id");
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("route_not_active"))
    );
    ice_start(&s, "i1").await;
    let mut stale = body.clone();
    stale["session_id"] = json!("old");
    let (_, b) = s.post(f, stale).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone(), b["skipped"].clone()),
        (
            json!(false),
            json!("session_id_mismatch"),
            json!("stale_session")
        )
    );
    let mut no_opts = body.clone();
    no_opts["options"] = json!([{"label": "no id"}]);
    let (_, b) = s.post(f, no_opts).await;
    assert_eq!(b["reason"], "missing_options");
    // no model
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("llm_api_not_configured"))
    );
    let llm = MockLlm::start("not json at all").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text("```json\n{\"action\": \"choose\", \"choice\": \"b\", \"reply\": \"ignored\", \"topic_state\": \"on_topic\"}\n```".into()));
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["action"].clone(),
            b["choice"].clone(),
            b["reply"].clone()
        ),
        (json!(true), json!("choose"), json!("B"), json!(""))
    );
    assert_eq!(
        b["selected_option"],
        json!({"choice": "B", "label": "Dogs"})
    );
    let sent = llm.chat_requests()[0]["messages"].to_string();
    assert!(sent.contains("definitely dogs") && sent.contains("Dogs"));
    llm.push(MockReply::Text("{\"action\": \"respond_and_keep_options\", \"reply\": \"Hmm,   tell me more!\", \"topic_state\": \"soft_derail\"}".into()));
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (
            b["action"].clone(),
            b["choice"].clone(),
            b["reply"].clone(),
            b["topic_state"].clone()
        ),
        (
            json!("respond_and_keep_options"),
            json!(""),
            json!("Hmm, tell me more!"),
            json!("soft_derail")
        )
    );
    // parse failure and upstream failure
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("parse_failed"))
    );
    llm.push(MockReply::Status(500, "boom".into()));
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("free_text_interpreter_failed"))
    );
}

#[tokio::test]
async fn onboarding_choice_is_write_only() {
    let s = server().await;
    let llm = MockLlm::start("x").await;
    s.configure_llm(&llm.base()).await;
    let ch = "/api/icebreaker/choice";
    let body = json!({"persona_name": "Companion", "session_id": "i1", "day": 1, "node_id": "intro", "choice": "A", "label": "Cats", "handoff": false, "completed": true, "seq": 3});
    let (_, b) = s.post_csrf(ch, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("route_not_active"))
    );
    ice_start(&s, "i1").await;
    let mut stale = body.clone();
    stale["session_id"] = json!("old");
    let (_, b) = s.post_csrf(ch, stale).await;
    assert_eq!(
        (b["ok"].clone(), b["skipped"].clone()),
        (json!(true), json!("stale_session"))
    );
    let mut nd = body.clone();
    nd.as_object_mut().unwrap().remove("day");
    let (_, b) = s.post_csrf(ch, nd).await;
    assert_eq!(b["reason"], "missing_day");
    let mut nc = body.clone();
    nc["choice"] = json!(" ");
    let (_, b) = s.post_csrf(ch, nc).await;
    assert_eq!(b["reason"], "invalid_choice");
    let mut bad = body.clone();
    bad["handoff"] = json!([1]);
    let (_, b) = s.post_csrf(ch, bad).await;
    assert_eq!(b["reason"], "invalid_body");
    assert!(!s.data.join("state/icebreaker_choices.json").exists());
    let (_, b) = s.post_csrf(ch, body.clone()).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["deduped"].clone(),
            b["source"].clone(),
            b["day"].clone()
        ),
        (
            json!(true),
            json!(false),
            json!("new_user_icebreaker"),
            json!(1)
        )
    );
    let (_, b) = s.post_csrf(ch, body.clone()).await;
    assert_eq!(b["deduped"], true);
    let doc: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/icebreaker_choices.json")).unwrap(),
    )
    .unwrap();
    let day = &doc["characters"]["Companion"]["days"]["1"];
    assert_eq!(day["source"], "new_user_icebreaker");
    assert_eq!(day["completed"], true);
    assert_eq!(day["choices"].as_array().unwrap().len(), 1);
    assert_eq!(day["choices"][0]["label"], "Cats");
    assert_eq!(day["choices"][0]["seq"], 3);
    // write-only: no model call, no session history, no memory
    assert!(llm.chat_requests().is_empty());
    assert!(s
        .state
        .sessions
        .get("Companion")
        .unwrap()
        .history()
        .await
        .is_empty());
    assert!(!s.data.join("memory/Companion/recent.json").exists());
    // a corrupt record is reported and left alone
    std::fs::write(s.data.join("state/icebreaker_choices.json"), b"{broken").unwrap();
    let mut other = body.clone();
    other["node_id"] = json!("n2");
    let (_, b) = s.post_csrf(ch, other).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("choice_write_failed"))
    );
    assert_eq!(
        std::fs::read(s.data.join("state/icebreaker_choices.json")).unwrap(),
        b"{broken"
    );
}

#[tokio::test]
async fn onboarding_speak_rules() {
    let s = server().await;
    let mut ws = ws_open(&s, "Companion").await;
    let sp = "/api/icebreaker/speak";
    let (_, b) = s.post_csrf(sp, json!({"persona_name": "Companion", "session_id": "i1", "line": "<speak><break time=\"1s\"/></speak>"})).await;
    assert_eq!(b["reason"], "missing_line");
    let (_, b) = s
        .post_csrf(
            sp,
            json!({"persona_name": "Companion", "session_id": "i1", "line": "Hi"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["audio_sent"].clone(),
            b["method"].clone(),
            b["source"].clone()
        ),
        (
            json!(false),
            json!("route_not_active"),
            json!(false),
            json!("project_tts"),
            json!("new_user_icebreaker")
        )
    );
    ice_start(&s, "i1").await;
    let (_, b) = s
        .post_csrf(
            sp,
            json!({"persona_name": "Companion", "session_id": "old", "line": "Hi"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["skipped"].clone(),
            b["reason"].clone(),
            b["handled"].clone(),
            b["audio_sent"].clone(),
            b["audio_committed"].clone()
        ),
        (
            json!(true),
            json!("stale_session"),
            json!("session_id_mismatch"),
            json!(false),
            json!(false),
            json!(false)
        )
    );
    assert_eq!(b["voice_source"]["skipped"], "stale_session");
    assert!(silent(&mut ws, 100).await, "a stale speak sends nothing");
    // tags stripped, 240 characters after stripping, persona from the current character
    let line = format!("<prosody rate=\"slow\">{}</prosody>", "a".repeat(300));
    let (_, b) = s
        .post_csrf(sp, json!({"session_id": "i1", "line": line}))
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["persona_name"].clone(),
            b["method"].clone()
        ),
        (json!(true), json!("Companion"), json!("project_tts"))
    );
    assert_eq!(b["line"].as_str().unwrap(), "a".repeat(240));
    assert_eq!(b["voice_source"]["method"], "project_tts");
    assert!(b["voice_source"]["provider"].is_string());
    let f = frame_of(&mut ws, "assistant_mirror").await;
    assert_eq!(f["text"].as_str().unwrap().len(), 240);
    let f = next_frame(&mut ws).await;
    assert_eq!(
        (f["type"].clone(), f["source"].clone()),
        (json!("turn_end"), json!("new_user_icebreaker"))
    );
    // options: no mirror, no turn end, interrupt
    let (_, b) = s
        .post_csrf(sp, json!({"session_id": "i1", "line": "quiet", "mirror_text": false, "emit_turn_end": false, "interrupt_audio": true}))
        .await;
    assert_eq!(
        (b["mirrored"].clone(), b["turn_end_emitted"].clone()),
        (json!(false), json!(false))
    );
    assert_eq!(next_frame(&mut ws).await["type"], "interrupt_audio");
    assert!(silent(&mut ws, 150).await);
    let (_, b) = s
        .post_csrf(
            sp,
            json!({"session_id": "i1", "line": "x", "mirror_text": "maybe"}),
        )
        .await;
    assert_eq!(b["reason"], "invalid_body");
    let hist = s.state.sessions.get("Companion").unwrap().history().await;
    assert_eq!(hist.len(), 1);
}

/// Throughput figures for docs/games.md (run with `--ignored --nocapture`).
#[tokio::test]
#[ignore]
async fn perf_figures() {
    let s = server().await;
    let t = std::time::Instant::now();
    for i in 0..1000 {
        let (_, b) = s
            .post_csrf(
                "/api/game/logs",
                json!({"session_id": "p", "message": format!("m{i}")}),
            )
            .await;
        assert_eq!(b["ok"], true);
    }
    let ingest = t.elapsed();
    start(&s, "soccer", "hb").await;
    let t = std::time::Instant::now();
    for _ in 0..1000 {
        let (_, b) = s
            .post(
                "/api/game/soccer/route/heartbeat",
                json!({"persona_name": "Companion", "session_id": "hb"}),
            )
            .await;
        assert_eq!(b["active"], true);
    }
    let beats = t.elapsed();
    let t = std::time::Instant::now();
    for i in 0..100 {
        let sid = format!("r{i}");
        play_badminton(&s, &sid, "duel", json!({"score": i})).await;
        let (_, b) = s
            .post(
                "/api/game/badminton/leaderboard",
                json!({"persona_name": "Companion", "session_id": sid, "mode": "duel", "score": i}),
            )
            .await;
        assert_eq!(b["ok"], true);
    }
    let rounds = t.elapsed();
    println!("1000 log ingests: {ingest:?}; 1000 heartbeats: {beats:?}; 100 badminton rounds (start+end+submit): {rounds:?}");
}

// ==================================================================== issue 18

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

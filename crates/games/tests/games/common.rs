//! Shared fixtures: the test server (default and fast timings), the chat WebSocket,
//! starting a game route and playing a badminton round.

use std::time::Duration;

use companiond_core::testkit::TestServer;
use companiond_core::AppState;
use companiond_games::GamesConfig;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Short timings for the heartbeat-lapse and score-session-expiry tests.
pub fn fast_start(s: &AppState) {
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

pub async fn server() -> TestServer {
    TestServer::start(&[companiond_games::FAMILY]).await
}

pub async fn ws_open(s: &TestServer, name: &str) -> Ws {
    let (mut ws, _) = tokio_tungstenite::connect_async(s.ws_url(&format!("/ws/{name}")))
        .await
        .expect("ws connect");
    assert_eq!(next_frame(&mut ws).await["type"], "session_started");
    ws
}

pub async fn next_frame(ws: &mut Ws) -> Value {
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
pub async fn frame_of(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let f = next_frame(ws).await;
        if f["type"] == kind {
            return f;
        }
    }
}

/// No frame arrives within `ms`.
pub async fn silent(ws: &mut Ws, ms: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(ms), ws.next())
        .await
        .is_err()
}

pub async fn send_text(ws: &mut Ws, kind: &str, text: &str) {
    ws.send(Message::Text(
        json!({"type": kind, "text": text}).to_string(),
    ))
    .await
    .expect("send");
}

pub async fn start(s: &TestServer, game: &str, session: &str) -> Value {
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

pub async fn active(s: &TestServer) -> Value {
    s.get("/api/game/route/active?persona_name=Companion")
        .await
        .1
}

pub async fn play_badminton(s: &TestServer, session: &str, mode: &str, score: Value) {
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

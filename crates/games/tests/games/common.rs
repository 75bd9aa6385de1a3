//! Shared fixtures: the test server (default and fast timings), the chat WebSocket,
//! starting a game route and playing a badminton round.

use std::time::Duration;

use companiond_core::testkit::TestServer;
use companiond_core::AppState;
use companiond_games::GamesConfig;
use futures::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

pub use companiond_core::testkit::{next_frame, next_of_type as frame_of, quiet as silent, Ws};

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
    s.chat(name).await.0
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

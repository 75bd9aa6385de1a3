//! The OpenAPI document lists every route of both families.

use crate::common::server;

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

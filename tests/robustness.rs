//! Every route of the whole application, fed hostile input: never a 500, never a
//! dropped connection (a panic), and the server keeps answering afterwards.

use companiond_core::testkit::{TestServer, CSRF};
use serde_json::{json, Value};

fn concrete(path: &str, seg: &str) -> String {
    path.split('/')
        .map(|p| {
            if p.starts_with('{') {
                seg.to_string()
            } else {
                p.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_never_yields_a_server_error() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let (_, doc) = s.get("/openapi.json").await;
    let paths = doc["paths"].as_object().expect("paths").clone();
    assert!(paths.len() > 100, "every family is routed: {}", paths.len());

    let bodies: Vec<Value> = vec![
        Value::Null,
        json!([]),
        json!("text"),
        json!(12345678901234567890u64),
        json!({}),
        json!({"persona_name": 5, "session_id": [], "name": {"a": 1}, "text": false, "url": 3,
               "mode": null, "enabled": "yes", "overwrite": "true", "chat": "x", "cursor": -1,
               "filename": "../../etc/passwd", "paths": "nope", "model": "../x", "mapping": [],
               "folder": "..", "songIds": "x", "actionIds": 7, "role": 1, "callback_url": "file:///etc",
               "timeout_seconds": -4, "parameters": "x", "state": 1, "expectedRevision": "z",
               "token": 1, "target_page": [], "line": {}, "transcript": 9, "event": "x", "day": "one"}),
        json!({"persona_name": "../../x", "session_id": "s\u{0000}", "name": "CON", "text": "x".repeat(70_000),
               "url": "http://169.254.169.254/latest", "filename": "recent_../x.json", "model": "a/b",
               "folder": "/etc", "path": "/etc/passwd", "image_path": "../../secret.png"}),
    ];
    let segs = ["nosuch", "..", "%2e%2e", "Companion", "%00", "a%2fb"];
    let mut checked = 0;
    for (path, ops) in &paths {
        for (method, _) in ops.as_object().expect("ops") {
            let m = method.to_ascii_uppercase();
            for seg in segs {
                let url = s.url(&concrete(path, seg));
                if m == "GET" {
                    for q in ["", "?persona_name=..&path=../../etc/passwd&url=file:///etc/passwd&days=-5&limit=-1&since=x&folder=..&model=../x&filename=../x&role=nobody"] {
                        let r = s.http.get(format!("{url}{q}")).send().await.expect("no dropped connection");
                        assert!(r.status().as_u16() < 500 || (501..=504).contains(&r.status().as_u16()),
                            "GET {path} ({seg}{q}) → {}", r.status());
                        checked += 1;
                    }
                    continue;
                }
                for b in &bodies {
                    let req = s
                        .http
                        .request(m.parse().expect("method"), &url)
                        .header("X-CSRF-Token", CSRF)
                        .header("content-type", "application/json")
                        .body(b.to_string());
                    let r = req.send().await.expect("no dropped connection");
                    let st = r.status().as_u16();
                    let text = r.text().await.unwrap_or_default();
                    assert!(
                        st < 500 || st == 501 || st == 502 || st == 503 || st == 504,
                        "{m} {path} ({seg}) with {} → {st}: {}",
                        b.to_string().chars().take(80).collect::<String>(),
                        text.chars().take(200).collect::<String>()
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 2000, "{checked}");
    // Still healthy, and nothing outside the data dir was created.
    let (st, body) = s.get("/api/system/status").await;
    assert_eq!((st, body["status"].as_str()), (200, Some("ready")));
    assert!(!s.data.parent().expect("parent").join("x").exists());
}

/// JSON field and query names that carry numbers somewhere in the interface
/// (timeouts, sizes, counts, offsets, seconds, indexes, scores, revisions).
const NUMERIC_FIELDS: &[&str] = &[
    "timeout_seconds",
    "timeout",
    "limit",
    "offset",
    "days",
    "day",
    "since",
    "seq",
    "cursor",
    "index",
    "idx",
    "order",
    "size",
    "count",
    "revision",
    "expectedRevision",
    "version",
    "score",
    "finalScore",
    "total",
    "totals",
    "seconds",
    "idle_seconds",
    "play_time_seconds",
    "playtime_seconds",
    "duration",
    "foreground_ms",
    "now_ms",
    "ms",
    "x",
    "y",
    "w",
    "h",
    "dx",
    "dy",
    "zindex",
    "temperature",
    "max_tokens",
    "sequence_number",
    "write_id",
    "writeId",
    "started_at",
    "last_activity",
    "ended_at",
    "endedAt",
    "updated_at",
    "at",
    "ts",
    "delta",
    "interval",
    "proactiveChatInterval",
    "proactiveVisionInterval",
    "chat_rate_limit",
    "home_interactions",
    "input_count",
    "net_touch_count",
    "max_distance_px",
    "anim_speed",
    "page",
    "entry_count",
    "retry_after_seconds",
    "minutes",
    "hours",
    "level",
    "round",
    "rounds",
    "hits",
    "misses",
    "combo",
    "streak",
    "bpm",
    "volume",
    "speed",
    "width",
    "height",
    "port",
    "max_bytes",
    "max_entries",
    "confidence",
    "n",
    "value",
    "amount",
];

/// Extreme numbers and number-like values (issue: a client number panicked a worker).
fn extremes() -> Vec<Value> {
    vec![
        serde_json::from_str("18446744073709551616").expect("2^64"),
        json!(u64::MAX),
        json!(-1),
        json!(i64::MIN),
        serde_json::from_str("1e308").expect("1e308"),
        serde_json::from_str("-1e308").expect("-1e308"),
        json!(-0.0),
        serde_json::from_str("1e-320").expect("subnormal"),
        json!("NaN"),
        json!("18446744073709551616"),
        json!({"nested": [1]}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_numbers_never_yield_a_server_error() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let (_, doc) = s.get("/openapi.json").await;
    let paths = doc["paths"].as_object().expect("paths").clone();
    // Fields a route needs before it looks at numbers.
    let base = json!({"persona_name": "Companion", "lanlan_name": "Companion", "name": "Companion",
        "character_name": "Companion", "session_id": "s1", "sessionId": "s1", "text": "hi",
        "game_type": "badminton", "role": "Companion", "mode": "chat"});
    let mut checked = 0;
    let mut failures: Vec<String> = Vec::new();
    for (path, ops) in &paths {
        let url = s.url(&concrete(path, "Companion"));
        for (method, _) in ops.as_object().expect("ops") {
            let m = method.to_ascii_uppercase();
            for v in extremes() {
                if m == "GET" {
                    let q: String = NUMERIC_FIELDS
                        .iter()
                        .map(|f| {
                            let raw = match &v {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            format!("{f}={}", url_escape(&raw))
                        })
                        .collect::<Vec<_>>()
                        .join("&");
                    let r = s
                        .http
                        .get(format!("{url}?{q}"))
                        .send()
                        .await
                        .expect("no dropped connection");
                    let st = r.status().as_u16();
                    if !(st < 500 || (501..=504).contains(&st)) {
                        failures.push(format!("GET {path} with {v} → {st}"));
                    }
                    checked += 1;
                    continue;
                }
                // One field at a time in groups, over a plausible base body.
                for group in NUMERIC_FIELDS.chunks(12) {
                    let mut body = base.clone();
                    for f in group {
                        body[*f] = v.clone();
                    }
                    let r = s
                        .http
                        .request(m.parse().expect("method"), &url)
                        .header("X-CSRF-Token", CSRF)
                        .header("content-type", "application/json")
                        .body(body.to_string())
                        .send()
                        .await
                        .expect("no dropped connection");
                    let st = r.status().as_u16();
                    let text = r.text().await.unwrap_or_default();
                    if !(st < 500 || (501..=504).contains(&st)) {
                        failures.push(format!(
                            "{m} {path} with {group:?} = {v} → {st}: {}",
                            text.chars().take(200).collect::<String>()
                        ));
                    }
                    checked += 1;
                }
            }
        }
    }
    // The report that opened this test: a timeout of 2^64 seconds panicked a worker.
    for body in [
        r#"{"timeout_seconds": 18446744073709551616}"#,
        r#"{"api_url": "ws://127.0.0.1:9/", "voice_id": "v", "timeout_seconds": 18446744073709551616}"#,
        r#"{"api_url": "ws://127.0.0.1:9/", "voice_id": "v", "timeout_seconds": 1e308}"#,
    ] {
        let r = s
            .http
            .post(s.url("/api/config/voiceserver/test_connectivity"))
            .header("X-CSRF-Token", CSRF)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("no dropped connection");
        let st = r.status().as_u16();
        if !(st < 500 || (502..=504).contains(&st)) {
            failures.push(format!("voiceserver test_connectivity {body} → {st}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 5000, "{checked}");
    let (st, body) = s.get("/api/system/status").await;
    assert_eq!((st, body["status"].as_str()), (200, Some("ready")));
}

fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

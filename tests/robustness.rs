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
                        assert!(r.status().as_u16() < 500 || r.status().as_u16() == 501 || r.status().as_u16() == 503,
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

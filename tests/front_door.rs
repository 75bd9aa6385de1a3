//! The front door (docs/security.md, Host and Origin): a foreign
//! `Host` is refused on every route, static mount and the chat socket before any
//! handler runs; a foreign `Origin` cannot open a WebSocket; no answer allows
//! cross-origin reads; crash leftovers are swept at start.

use std::time::Duration;

use companiond_core::testkit::{TestOptions, TestServer, CSRF};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const EVIL: &str = "evil.example";

fn concrete(path: &str) -> String {
    path.split('/')
        .map(|p| if p.starts_with('{') { "Companion" } else { p })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every operation of `/openapi.json` as (METHOD, concrete path).
async fn operations(s: &TestServer) -> Vec<(String, String)> {
    let (_, doc) = s.get("/openapi.json").await;
    let mut out = Vec::new();
    for (path, ops) in doc["paths"].as_object().expect("paths") {
        for (m, _) in ops.as_object().expect("ops") {
            out.push((m.to_ascii_uppercase(), concrete(path)));
        }
    }
    assert!(out.len() > 100, "{}", out.len());
    out
}

/// Send one raw HTTP/1.1 request and return the status code and the whole answer.
async fn raw(s: &TestServer, request: &str) -> (u16, String) {
    let mut tcp = tokio::net::TcpStream::connect(s.addr)
        .await
        .expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_on_every_route_and_mount() {
    let s = TestServer::start(companiond::FAMILIES).await;
    std::fs::write(s.bundle.join("static").join("app.js"), "x").expect("bundle file");
    let port = s.addr.port();
    let host = format!("{EVIL}:{port}");
    let mut targets = operations(&s).await;
    for p in [
        "/",
        "/console/",
        "/openapi.json",
        "/static/app.js",
        "/user_mmd/x.pmx",
        "/user_pngtuber/a/b.png",
        "/workshop/1/x",
        "/no/such/page",
    ] {
        targets.push(("GET".into(), p.into()));
    }
    for (m, path) in &targets {
        let r = s
            .http
            .request(m.parse().expect("method"), s.url(path))
            .header("Host", &host)
            .header("X-CSRF-Token", CSRF)
            .header("content-type", "application/json")
            .body(json!({"name": "Evil", "_csrf_token": CSRF}).to_string())
            .send()
            .await
            .expect("answered, not dropped");
        let st = r.status().as_u16();
        assert!(
            r.headers().get("access-control-allow-origin").is_none(),
            "{m} {path}"
        );
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(st, 403, "{m} {path} with Host {host}: {body}");
        assert!(body.is_object(), "{m} {path}: a JSON error, got {body}");
        assert!(
            !body.to_string().contains(CSRF),
            "{m} {path} leaked the token"
        );
    }
    // Nothing reached a handler: no character was created, the token never left.
    let (_, chars) = s.get("/api/characters").await;
    assert!(!chars.to_string().contains("Evil"), "{chars}");

    // The chat socket, too.
    let mut req = s
        .ws_url("/ws/Companion")
        .into_client_request()
        .expect("req");
    req.headers_mut()
        .insert("host", host.parse().expect("header"));
    let err = tokio_tungstenite::connect_async(req)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_names_and_allowed_hosts_are_served() {
    let s = TestServer::start_with(
        companiond::FAMILIES,
        TestOptions {
            edit: Some(Box::new(|o| {
                o.allowed_hosts = vec!["Companion.Home.Arpa".into()];
            })),
            ..Default::default()
        },
    )
    .await;
    let port = s.addr.port();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost.:{port}"),
        format!("[::1]:{port}"),
        "127.3.4.5".to_string(),
        "localhost".to_string(),
        format!("companion.home.arpa:{port}"),
        "COMPANION.home.arpa.".to_string(),
    ] {
        let r = s
            .http
            .get(s.url("/api/config/page_config"))
            .header("Host", &host)
            .send()
            .await
            .expect("answer");
        assert_eq!(r.status(), 200, "Host {host}");
    }
    for host in [
        "other.home.arpa",
        "companion.home.arpa.evil.example",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "0.0.0.0",
        "10.0.0.1",
    ] {
        let r = s
            .http
            .get(s.url("/api/config/page_config"))
            .header("Host", host)
            .send()
            .await
            .expect("answer");
        assert_eq!(r.status(), 403, "Host {host}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_host_is_refused() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let (st, text) = raw(
        &s,
        "GET /api/config/page_config HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(st, 403, "{text}");
    assert!(!text.contains(CSRF));
    let (st, text) = raw(&s, "GET /api/config/page_config HTTP/1.0\r\n\r\n").await;
    assert_eq!(st, 403, "{text}");
    // A well-formed raw request is served.
    let (st, text) = raw(
        &s,
        "GET /api/system/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(st, 200, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_origin_is_checked() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let port = s.addr.port();
    for origin in [
        "http://evil.example".to_string(),
        format!("http://evil.example:{port}"),
        "null".to_string(),
        format!("http://localhost.evil.example:{port}"),
        "file://".to_string(),
    ] {
        let mut req = s
            .ws_url("/ws/Companion")
            .into_client_request()
            .expect("req");
        req.headers_mut()
            .insert("origin", origin.parse().expect("header"));
        let err = tokio_tungstenite::connect_async(req)
            .await
            .expect_err("a foreign origin is refused");
        assert!(err.to_string().contains("403"), "{origin}: {err}");
    }
    // The session was never opened.
    let (_, status) = s.get("/api/system/status").await;
    assert!(status.is_object());
    for origin in [
        Some(format!("http://127.0.0.1:{port}")),
        Some(format!("http://localhost:{port}")),
        Some(format!("http://[::1]:{port}")),
        None,
    ] {
        let mut req = s
            .ws_url("/ws/Companion")
            .into_client_request()
            .expect("req");
        if let Some(o) = &origin {
            req.headers_mut()
                .insert("origin", o.parse().expect("header"));
        }
        let (mut ws, resp) = tokio_tungstenite::connect_async(req)
            .await
            .unwrap_or_else(|e| panic!("{origin:?} accepted: {e}"));
        assert_eq!(resp.status(), 101);
        let _ = ws.close(None).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_allows_a_cross_origin_read() {
    let s = TestServer::start(companiond::FAMILIES).await;
    for (m, path) in operations(&s).await {
        let pre = s
            .http
            .request(reqwest::Method::OPTIONS, s.url(&path))
            .header("Origin", "https://evil.example")
            .header("Access-Control-Request-Method", m.as_str())
            .header(
                "Access-Control-Request-Headers",
                "x-csrf-token, content-type",
            )
            .send()
            .await
            .expect("answer");
        assert!(
            !pre.status().is_success(),
            "preflight {m} {path}: {}",
            pre.status()
        );
        for h in [
            "access-control-allow-origin",
            "access-control-allow-methods",
            "access-control-allow-headers",
            "access-control-allow-credentials",
        ] {
            assert!(pre.headers().get(h).is_none(), "preflight {m} {path}: {h}");
        }
        if m == "GET" {
            let r = s
                .http
                .get(s.url(&path))
                .header("Origin", "https://evil.example")
                .send()
                .await
                .expect("answer");
            assert!(
                r.headers().get("access-control-allow-origin").is_none(),
                "GET {path}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_leftovers_are_swept_at_start() {
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    let s = TestServer::start_with(
        companiond::FAMILIES,
        TestOptions {
            prepare: Some(Box::new(|data, _bundle| {
                for dir in ["config", "jukebox", "memory/Companion", "state"] {
                    std::fs::create_dir_all(data.join(dir)).expect("dir");
                }
                for f in [
                    format!("config/.core_config.json.{TOKEN}.tmp"),
                    format!("jukebox/.config.json.{TOKEN}.tmp"),
                    format!("memory/Companion/.recent.json.{TOKEN}.tmp"),
                    // Not the store's pattern: left alone.
                    "config/.notes.tmp".to_string(),
                    format!("config/keep.{TOKEN}.tmp"),
                    "state/user-file.json".to_string(),
                ] {
                    std::fs::write(data.join(&f), b"{\"half\":").expect("leftover");
                    // Left by a process that crashed a minute ago.
                    let file = std::fs::File::options()
                        .write(true)
                        .open(data.join(&f))
                        .expect("open");
                    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
                        .expect("mtime");
                }
                // Left just now by a process that died at once: removed too.
                std::fs::write(data.join(format!("state/.fresh.json.{TOKEN}.tmp")), b"{")
                    .expect("fresh");
                // This process's own write in flight: never removed.
                let mine = companiond::core::store::temp_token();
                std::fs::write(data.join(format!("state/.mine.json.{mine}.tmp")), b"{")
                    .expect("mine");
            })),
            ..Default::default()
        },
    )
    .await;
    let gone = |p: &str| !s.data.join(p).exists();
    let mut waited = 0;
    while !(gone(&format!("config/.core_config.json.{TOKEN}.tmp"))
        && gone(&format!("jukebox/.config.json.{TOKEN}.tmp"))
        && gone(&format!("memory/Companion/.recent.json.{TOKEN}.tmp"))
        && gone(&format!("state/.fresh.json.{TOKEN}.tmp")))
    {
        assert!(waited < 100, "leftovers still there after 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    let mine = companiond::core::store::temp_token();
    let mine = std::fs::read_dir(s.data.join("state"))
        .expect("state")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(".mine.json.") && n.contains(&mine[..8]));
    assert!(
        mine.is_some(),
        "this process's own temporary file was removed"
    );
    for kept in [
        "config/.notes.tmp".to_string(),
        format!("config/keep.{TOKEN}.tmp"),
        "state/user-file.json".to_string(),
    ] {
        assert!(s.data.join(&kept).exists(), "{kept} was removed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_cannot_mutate() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let mut open = Vec::new();
    for (m, path) in operations(&s).await {
        if m == "GET" {
            continue;
        }
        for (header, value) in [
            ("Origin", "https://evil.example"),
            ("Referer", "https://evil.example/page"),
        ] {
            let r = s
                .http
                .request(m.parse().expect("method"), s.url(&path))
                .header("X-CSRF-Token", CSRF)
                .header(header, value)
                .header("content-type", "application/json")
                .body(json!({"name": "Evil", "_csrf_token": CSRF}).to_string())
                .send()
                .await
                .expect("answer");
            if r.status() != 403 {
                open.push(format!("{m} {path} with {header} → {}", r.status()));
            }
        }
    }
    assert!(
        open.is_empty(),
        "mutations a foreign page could send:\n{}",
        open.join("\n")
    );
    let (_, chars) = s.get("/api/characters").await;
    assert!(!chars.to_string().contains("Evil"), "{chars}");
}

//! The meme proxy (SSRF table, redirects, limits, cache) and translation (a loopback
//! "Google" and the model). Both read start-up environment variables, so this binary
//! starts its loopback hosts once, on a dedicated runtime, and sets the variables before
//! any server is built:
//! `COMPANIOND_MEME_TRUSTED_HOST` (the one trusted image host:port),
//! `COMPANIOND_MEME_TIMEOUT_MS`, `COMPANIOND_GOOGLE_TRANSLATE_URL`.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use companiond_core::testkit::{split, MockLlm, MockReply, TestServer, Upstream};
use serde_json::json;

const FAMILIES: &[companiond_core::server::Family] = &[companiond_system::FAMILY];

struct Hosts {
    image: Upstream,
    victim: Upstream,
    google: Upstream,
}

fn png() -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    v
}

fn image_router() -> Router {
    Router::new()
        .route(
            "/ok.png",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], png()) }),
        )
        .route(
            "/photo.jpg",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/jpeg; charset=binary")],
                    vec![0xFFu8, 0xD8, 0xFF, 0xE0],
                )
            }),
        )
        .route(
            "/logo.svg",
            get(|| async { ([(header::CONTENT_TYPE, "image/svg+xml")], "<svg/>") }),
        )
        .route(
            "/page",
            get(|| async { ([(header::CONTENT_TYPE, "text/html")], "<html></html>") }),
        )
        .route("/none", get(|| async { Response::new(Body::from(png())) }))
        .route(
            "/declared-big",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/png")],
                    vec![0u8; 11 * 1024 * 1024],
                )
            }),
        )
        .route(
            "/streamed-big",
            get(|| async {
                let chunks = (0..12)
                    .map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![0u8; 1024 * 1024])));
                let mut r = Response::new(Body::from_stream(futures::stream::iter(chunks)));
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, "image/png".parse().unwrap());
                r
            }),
        )
        .route(
            "/r/{n}",
            get(|Path(n): Path<u32>| async move {
                if n == 0 {
                    ([(header::CONTENT_TYPE, "image/png")], png()).into_response()
                } else {
                    (
                        StatusCode::FOUND,
                        [(header::LOCATION, format!("/r/{}", n - 1))],
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/to",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, q.get("u").cloned().unwrap_or_default())],
                )
                    .into_response()
            }),
        )
        .route("/noloc", get(|| async { StatusCode::FOUND }))
        .route(
            "/status/500",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(4)).await;
                ([(header::CONTENT_TYPE, "image/png")], png())
            }),
        )
}

async fn google(Query(q): Query<HashMap<String, String>>) -> Response {
    let text = q.get("q").cloned().unwrap_or_default();
    if text.contains("google-fail") {
        return (StatusCode::INTERNAL_SERVER_ERROR, "nope").into_response();
    }
    if text.contains("google-garbage") {
        return "not json".into_response();
    }
    let out = format!(
        "[{}>{}] {text}",
        q.get("sl").cloned().unwrap_or_default(),
        q.get("tl").cloned().unwrap_or_default()
    );
    axum::Json(json!([[[out, text, null]], null, "en"])).into_response()
}

fn hosts() -> &'static Hosts {
    static HOSTS: OnceLock<Hosts> = OnceLock::new();
    HOSTS.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let image = Upstream::start(image_router()).await;
                let victim = Upstream::start(Router::new().fallback(any(|| async {
                    ([(header::CONTENT_TYPE, "image/png")], png())
                })))
                .await;
                let google =
                    Upstream::start(Router::new().route("/translate_a/single", get(google))).await;
                tx.send(Hosts {
                    image,
                    victim,
                    google,
                })
                .unwrap();
                std::future::pending::<()>().await;
            });
        });
        let h = rx.recv().unwrap();
        std::env::set_var(
            "COMPANIOND_MEME_TRUSTED_HOST",
            format!("127.0.0.1:{}", h.image.addr.port()),
        );
        std::env::set_var("COMPANIOND_MEME_TIMEOUT_MS", "1500");
        std::env::set_var("COMPANIOND_GOOGLE_TRANSLATE_URL", &h.google.base);
        h
    })
}

async fn server() -> TestServer {
    hosts();
    TestServer::start(FAMILIES).await
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn proxy(s: &TestServer, url: &str) -> reqwest::Response {
    s.http
        .get(s.url(&format!("/api/meme/proxy-image?url={}", enc(url))))
        .send()
        .await
        .unwrap()
}

// ------------------------------------------------------------------------- meme

#[tokio::test]
async fn meme_proxy_serves_checked_images_and_caches() {
    let s = server().await;
    let h = hosts();
    let img = &h.image.base;
    let before = h.image.requests().len();
    let r = proxy(&s, &format!("{img}/ok.png")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.headers()["x-cache"], "MISS");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.headers()["cache-control"], "public, max-age=86400");
    assert_eq!(r.bytes().await.unwrap().to_vec(), png());
    let r = proxy(&s, &format!("{img}/ok.png")).await;
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["x-cache"].to_str().unwrap()
        ),
        (200, "HIT")
    );
    assert_eq!(
        h.image.requests().len(),
        before + 1,
        "the hit did not reach the host"
    );
    let sent = h
        .image
        .requests()
        .into_iter()
        .find(|r| r.path == "/ok.png")
        .unwrap();
    assert_eq!(sent.headers["referer"], "http://127.0.0.1/");

    let r = proxy(&s, &format!("{img}/photo.jpg")).await;
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["content-type"].to_str().unwrap()
        ),
        (200, "image/jpeg")
    );

    // Three redirects are followed, a fourth is not.
    let before = h.image.requests_to("/r/0").len();
    assert_eq!(proxy(&s, &format!("{img}/r/3")).await.status(), 200);
    assert_eq!(h.image.requests_to("/r/0").len(), before + 1);
    let cases = [
        ("/r/4", 502, "too_many_redirects"),
        ("/noloc", 502, "invalid_redirect"),
        ("/logo.svg", 403, "unsupported_content_type"),
        ("/page", 403, "unsupported_content_type"),
        ("/none", 403, "unsupported_content_type"),
        ("/declared-big", 413, "too_large"),
        ("/streamed-big", 413, "too_large"),
        ("/status/500", 502, "upstream_status"),
        ("/slow", 504, "upstream_timeout"),
    ];
    for (path, code, err) in cases {
        let (c, v) = split(proxy(&s, &format!("{img}{path}")).await).await;
        assert_eq!(
            (c, v["error_code"].as_str()),
            (code, Some(err)),
            "{path}: {v}"
        );
        assert_eq!(v["success"], false);
    }
    // Failures are never cached.
    let n = h.image.requests_to("/streamed-big").len();
    assert_eq!(
        proxy(&s, &format!("{img}/streamed-big")).await.status(),
        413
    );
    assert_eq!(h.image.requests_to("/streamed-big").len(), n + 1);

    let (c, v) = s.get("/api/meme/proxy-image").await;
    assert_eq!((c, v["error_code"].as_str()), (400, Some("missing_url")));
    let (c, _) = s.get("/api/meme/proxy-image?url=").await;
    assert_eq!(c, 400);
}

#[tokio::test]
async fn meme_proxy_ssrf_table_is_never_fetched() {
    let s = server().await;
    let h = hosts();
    let v = h.victim.addr.port();
    let i = h.image.addr.port();
    let img = &h.image.base;
    let victim_before = h.victim.requests().len();
    let mut table: Vec<String> = [
        "http://127.0.0.1:{V}/x.png",
        "http://localhost:{V}/x.png",
        "http://LOCALHOST:{V}/x.png",
        "http://localhost.:{V}/x.png",
        "http://foo.localhost:{V}/x.png",
        "http://localhost.localdomain:{V}/x.png",
        "http://vm:{V}/x.png",
        "http://[::1]:{V}/x.png",
        "http://[::ffff:127.0.0.1]:{V}/x.png",
        "http://[::ffff:7f00:1]:{V}/x.png",
        "http://[0:0:0:0:0:ffff:127.0.0.1]:{V}/x.png",
        "http://[::127.0.0.1]:{V}/x.png",
        "http://[::]:{V}/x.png",
        "http://0.0.0.0:{V}/x.png",
        "http://0:{V}/x.png",
        "http://2130706433:{V}/x.png",
        "http://0x7f000001:{V}/x.png",
        "http://0x7f.0x0.0x0.0x1:{V}/x.png",
        "http://0177.0.0.1:{V}/x.png",
        "http://017700000001:{V}/x.png",
        "http://127.1:{V}/x.png",
        "http://127.0.1:{V}/x.png",
        "http://127.255.255.254:{V}/x.png",
        "http://10.0.0.1:{V}/x.png",
        "http://172.16.0.1:{V}/x.png",
        "http://192.168.0.1:{V}/x.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1:{V}/x.png",
        "http://224.0.0.1:{V}/x.png",
        "http://255.255.255.255:{V}/x.png",
        "http://[fe80::1]:{V}/x.png",
        "http://[fc00::1]:{V}/x.png",
        "http://[fd00:ec2::254]/x.png",
        "http://[64:ff9b::7f00:1]:{V}/x.png",
        "http://[2002:7f00:1::]:{V}/x.png",
        "http://[ff02::1]:{V}/x.png",
        "http://user:pass@127.0.0.1:{V}/x.png",
        "http://example.com@127.0.0.1:{V}/x.png",
        "http://127.0.0.1:{V}#@example.com/x.png",
        "http://127.0.0.1:{V}\\@example.com/x.png",
        "https://127.0.0.1:{V}/x.png",
        "file:///etc/passwd",
        "ftp://127.0.0.1:{V}/x.png",
        "gopher://127.0.0.1:{V}/_x",
        "javascript:alert(1)",
        "//127.0.0.1:{V}/x.png",
        "http:/127.0.0.1:{V}/x.png",
        // Only the named host:port is trusted.
        "http://localhost:{I}/ok.png",
        "http://[::1]:{I}/ok.png",
        "http://127.0.0.2:{I}/ok.png",
    ]
    .iter()
    .map(|u| {
        u.replace("{V}", &v.to_string())
            .replace("{I}", &i.to_string())
    })
    .collect();
    // Redirects from the trusted host to forbidden targets.
    for target in [
        format!("http://127.0.0.1:{v}/x.png"),
        format!("http://localhost:{v}/x.png"),
        format!("http://[::1]:{v}/x.png"),
        format!("http://2130706433:{v}/x.png"),
        "http://169.254.169.254/".to_string(),
        "file:///etc/passwd".to_string(),
        format!("http://user@127.0.0.1:{v}/"),
    ] {
        table.push(format!("{img}/to?u={}", enc(&target)));
    }
    assert!(table.len() >= 40);
    for u in &table {
        let (code, body) = split(proxy(&s, u).await).await;
        assert!(code == 400 || code == 403, "{u} → {code} {body}");
        assert_eq!(body["success"], false, "{u}");
    }
    assert_eq!(
        h.victim.requests().len(),
        victim_before,
        "a forbidden target was contacted"
    );
}

// ------------------------------------------------------------------------- translate

#[tokio::test]
async fn translate_google_then_model_then_original() {
    let s = server().await;
    let h = hosts();
    let g0 = h.google.requests().len();

    let (code, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "hello world", "target_lang": "ja-JP"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["translated_text"], "[en>ja] hello world");
    assert_eq!(
        (v["source_lang"].as_str(), v["target_lang"].as_str()),
        (Some("en"), Some("ja"))
    );
    assert_eq!(
        (v["success"].as_bool(), v["google_failed"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(h.google.requests().len(), g0 + 1);
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "你好", "target_lang": "english"}),
        )
        .await;
    assert_eq!(v["translated_text"], "[zh-CN>en] 你好");

    // Same language, or nothing to detect: the text comes back untouched.
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "hello", "target_lang": "en-US"}),
        )
        .await;
    assert_eq!(
        (v["translated_text"].as_str(), v["success"].as_bool()),
        (Some("hello"), Some(true))
    );
    assert!(v.get("google_failed").is_none());
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "12345", "target_lang": "en"}),
        )
        .await;
    assert_eq!(v["source_lang"], "unknown");

    // Google fails, no model configured: the original text in the failure envelope.
    let (code, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "google-fail text", "target_lang": "zh"}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (v["success"].as_bool(), v["google_failed"].as_bool()),
        (Some(false), Some(true)),
        "{v}"
    );
    assert_eq!(v["translated_text"], "google-fail text");
    assert_eq!(v["error_code"], "translation_failed");

    let llm = MockLlm::start("模型翻译").await;
    s.configure_llm(&llm.base()).await;
    for text in ["google-fail text", "google-garbage text"] {
        let (_, v) = s
            .post_csrf(
                "/api/translate",
                json!({"text": text, "target_lang": "schinese"}),
            )
            .await;
        assert_eq!(
            (v["translated_text"].as_str(), v["google_failed"].as_bool()),
            (Some("模型翻译"), Some(true)),
            "{v}"
        );
        assert_eq!(v["target_lang"], "zh");
    }
    let req = llm.chat_requests().pop().unwrap();
    assert!(req["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("Simplified Chinese"));
    assert_eq!(req["messages"][1]["content"], "google-garbage text");

    // skip_google goes straight to the model; google_failed stays false.
    let g1 = h.google.requests().len();
    let (_, v) = s
        .post_csrf("/api/translate", json!({"text": "good morning", "target_lang": "ko", "skip_google": true, "source_lang": "en"}))
        .await;
    assert_eq!(
        (
            v["translated_text"].as_str(),
            v["google_failed"].as_bool(),
            v["provider"].as_str()
        ),
        (Some("模型翻译"), Some(false), Some("model"))
    );
    assert_eq!(h.google.requests().len(), g1);

    // Both fail: the original text.
    llm.push(MockReply::Status(503, "overloaded".into()));
    let (_, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "good night", "target_lang": "ru", "skip_google": true}),
        )
        .await;
    assert_eq!(
        (v["success"].as_bool(), v["translated_text"].as_str()),
        (Some(false), Some("good night"))
    );
    assert!(v["error"].as_str().unwrap().contains("503"));

    let (code, v) = s
        .post_csrf(
            "/api/translate",
            json!({"text": "   ", "target_lang": "xx"}),
        )
        .await;
    assert_eq!(
        (
            code,
            v["error_code"].as_str(),
            v["translated_text"].as_str()
        ),
        (400, Some("missing_text"), Some(""))
    );
    assert_eq!(v["target_lang"], "xx");
    let (code, _) = s
        .post_csrf("/api/translate", json!({"target_lang": "en"}))
        .await;
    assert_eq!(code, 400);
    let (code, _) = s
        .post(
            "/api/translate",
            json!({"text": "hello", "target_lang": "ja"}),
        )
        .await;
    assert_eq!(code, 403);
}

//! Loopback upstream hosts of the meme proxy and translation (an image host, a
//! "victim" host that must never be fetched, a "Google"). Both features read
//! start-up environment variables, so the hosts start once, on a dedicated runtime,
//! and the variables are set before the first server that uses them is built:
//! `COMPANIOND_MEME_TRUSTED_HOST` (the one trusted image host:port),
//! `COMPANIOND_MEME_TIMEOUT_MS`, `COMPANIOND_GOOGLE_TRANSLATE_URL`.

pub use std::collections::HashMap;
pub use std::sync::OnceLock;
pub use std::time::Duration;

pub use axum::body::Body;
pub use axum::extract::{Path, Query};
pub use axum::http::{header, StatusCode};
pub use axum::response::{IntoResponse, Response};
pub use axum::routing::{any, get};
pub use axum::Router;
pub use companiond_core::testkit::{split, MockLlm, MockReply, TestServer, Upstream};
pub use serde_json::json;

pub const FAMILIES: &[companiond_core::server::Family] = &[companiond_system::FAMILY];

pub struct Hosts {
    pub image: Upstream,
    pub victim: Upstream,
    pub google: Upstream,
}

pub fn png() -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    v
}

pub fn image_router() -> Router {
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

pub async fn google(Query(q): Query<HashMap<String, String>>) -> Response {
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

pub fn hosts() -> &'static Hosts {
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

pub async fn server() -> TestServer {
    hosts();
    TestServer::start(FAMILIES).await
}

pub fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

pub async fn proxy(s: &TestServer, url: &str) -> reqwest::Response {
    s.http
        .get(s.url(&format!("/api/meme/proxy-image?url={}", enc(url))))
        .send()
        .await
        .unwrap()
}

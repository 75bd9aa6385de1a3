//! Health, readiness, metrics and the request id (docs/operations.md).

use companiond_core::testkit::{next_of_type, MockLlm, TestServer};
use futures::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

async fn metrics_text(s: &TestServer) -> String {
    let r = reqwest::get(s.url("/metrics")).await.expect("metrics");
    assert_eq!(r.status(), 200);
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    r.text().await.expect("text")
}

/// The value of the sample `name{labels…}` whose labels include every `want`.
fn sample(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let scrape = prometheus_parse::Scrape::parse(lines.into_iter().map(Ok)).expect("parses");
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .find(|s| want.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_readyz_answer_a_loopback_client() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let (status, body) = s.get("/healthz").await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "alive");
    let (status, body) = s.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ready"], true);
    assert_eq!(body["writable"], true);
    assert!(body["free_bytes"].as_u64().unwrap_or(0) >= body["min_free_bytes"].as_u64().unwrap());
    // The probe leaves nothing behind.
    let stray: Vec<_> = std::fs::read_dir(&s.data)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("readyz"))
        .collect();
    assert!(stray.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_a_request_id() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let r = reqwest::get(s.url("/api/characters")).await.unwrap();
    let id = r.headers().get("x-request-id").expect("request id");
    assert_eq!(id.to_str().unwrap().len(), 36, "a UUID: {id:?}");
    let r = reqwest::Client::new()
        .get(s.url("/no/such/route"))
        .header("x-request-id", "mine-42")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()["x-request-id"], "mine-42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_sockets_turns_and_model_calls() {
    let llm = MockLlm::start("Hello there.").await;
    let s = TestServer::start(companiond::FAMILIES).await;
    s.configure_llm(&llm.base()).await;
    assert_eq!(s.get("/api/characters").await.0, 200);
    let (mut ws, _) = s.chat("Companion").await;
    let before = metrics_text(&s).await;
    let open = sample(&before, "companiond_chat_sockets_open", &[]).expect("gauge");
    assert!(open >= 1.0, "{open}");
    ws.send(Message::Text(
        json!({"type": "user_text", "text": "hi"}).to_string(),
    ))
    .await
    .unwrap();
    next_of_type(&mut ws, "turn_end").await;

    let text = metrics_text(&s).await;
    assert!(
        text.trim_end().ends_with("# EOF"),
        "OpenMetrics ends with # EOF"
    );
    let listed = sample(
        &text,
        "companiond_http_requests_total",
        &[
            ("route", "/api/characters"),
            ("method", "GET"),
            ("status", "200"),
        ],
    )
    .expect("the characters request is counted");
    assert!(listed >= 1.0);
    assert!(
        sample(&text, "companiond_chat_turns_total", &[]).expect("turns") >= 1.0,
        "{text}"
    );
    let calls = sample(
        &text,
        "companiond_model_calls_total",
        &[("slot", "conversation"), ("outcome", "ok")],
    )
    .unwrap_or_else(|| panic!("model calls: {text}"));
    assert!(calls >= 1.0);
    assert!(sample(&text, "companiond_data_dir_free_bytes", &[]).expect("free") > 0.0);
    assert!(text.contains("companiond_http_request_duration_seconds_bucket"));
    assert!(text.contains("companiond_store_write_duration_seconds_count"));
    // An unmatched path is one label value, never the path itself.
    let _ = reqwest::get(s.url("/no/such/thing-12345")).await.unwrap();
    let text = metrics_text(&s).await;
    assert!(!text.contains("thing-12345"));
    assert!(sample(
        &text,
        "companiond_http_requests_total",
        &[("route", "unmatched")]
    )
    .is_some());
}

//! System routes over real HTTP (everything that needs no outside service except the
//! loopback model server and survey upstream). The meme proxy and translation, which
//! read start-up environment variables, live in `tests/upstreams.rs`.

use std::path::Path;
use std::time::Duration;

use axum::http::Method;
use companiond_core::testkit::{
    split, MockLlm, MockReply, TestOptions, TestServer, Upstream, CSRF,
};
use companiond_core::usage::UsageRow;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const FAMILIES: &[companiond_core::server::Family] = &[companiond_system::FAMILY];
const VERSION: &str = env!("CARGO_PKG_VERSION");

async fn server() -> TestServer {
    TestServer::start(FAMILIES).await
}

async fn server_with(prepare: impl FnOnce(&Path, &Path) + Send + 'static) -> TestServer {
    TestServer::start_with(
        FAMILIES,
        TestOptions {
            prepare: Some(Box::new(prepare)),
            ..Default::default()
        },
    )
    .await
}

async fn send_csrf(s: &TestServer, method: Method, path: &str, body: Value) -> (u16, Value) {
    split(s.csrf(method, path).json(&body).send().await.unwrap()).await
}

fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn png(extra: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend(std::iter::repeat_n(7u8, extra));
    v
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws(s: &TestServer, name: &str) -> Ws {
    let (mut w, _) = tokio_tungstenite::connect_async(s.ws_url(&format!("/ws/{name}")))
        .await
        .unwrap();
    let first = next_of_type(&mut w, "session_started").await;
    assert_eq!(first["persona_name"], name);
    w
}

async fn next_of_type(w: &mut Ws, kind: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let msg = tokio::time::timeout_at(deadline, w.next())
            .await
            .unwrap_or_else(|_| panic!("no {kind} frame"))
            .unwrap()
            .unwrap();
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["type"] == kind {
                return v;
            }
        }
    }
}

// ------------------------------------------------------------------------- basics

#[tokio::test]
async fn openapi_lists_every_system_route() {
    let s = server().await;
    let (code, doc) = s.get("/openapi.json").await;
    assert_eq!(code, 200);
    let routes = [
        ("get", "/api/system/status"),
        ("get", "/api/token-usage"),
        ("get", "/api/pending-notices"),
        ("post", "/api/pending-notices/ack"),
        ("post", "/api/activity_signal"),
        ("get", "/api/changelog"),
        ("get", "/api/survey"),
        ("post", "/api/survey/submit"),
        ("post", "/api/emotion/analysis"),
        ("post", "/api/translate"),
        ("get", "/api/file-exists"),
        ("get", "/api/find-first-image"),
        ("get", "/api/meme/proxy-image"),
        ("get", "/api/platform/proxy-image"),
        ("get", "/api/get_window_title"),
        ("post", "/api/screenshot"),
        ("post", "/api/screenshot/interactive"),
        ("post", "/api/proactive_chat"),
        ("post", "/api/proactive/music_played_through"),
        ("post", "/api/mini_game/invite/respond"),
        ("get", "/api/seven-day-tutorial/state"),
        ("put", "/api/seven-day-tutorial/state"),
        ("get", "/api/autostart-prompt/state"),
        ("post", "/api/autostart-prompt/heartbeat"),
        ("post", "/api/autostart-prompt/shown"),
        ("post", "/api/autostart-prompt/decision"),
        ("post", "/api/platform/set-achievement-status/{name}"),
        ("post", "/api/platform/update-playtime"),
        ("get", "/api/platform/list-achievements"),
        ("post", "/api/guide/handoff/create"),
        ("post", "/api/guide/handoff/consume"),
    ];
    for (m, p) in routes {
        assert!(
            doc["paths"][p][m].is_object(),
            "{m} {p} missing from /openapi.json"
        );
    }
}

#[tokio::test]
async fn status_reports_migration_flags() {
    let s = server().await;
    let r = s
        .http
        .get(s.url("/api/system/status"))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (code, v) = split(r).await;
    assert_eq!(code, 200);
    assert_eq!(v["status"], "ready");
    assert_eq!(v["ready"], true);
    for f in [
        "selection_required",
        "migration_pending",
        "recovery_required",
        "legacy_cleanup_pending",
    ] {
        assert_eq!(v["storage"][f], false, "{f}");
    }
    assert_eq!(v["storage"]["blocking_reason"], "");

    write(
        &s.data.join("state/storage_migration.json"),
        br#"{"pending": true, "legacy_cleanup_pending": true, "reason": "moving_data_dir"}"#,
    );
    let (_, v) = s.get("/api/system/status").await;
    assert_eq!(v["status"], "migration_required");
    assert_eq!(v["ready"], false);
    assert_eq!(v["storage"]["migration_pending"], true);
    assert_eq!(v["storage"]["legacy_cleanup_pending"], true);
    assert_eq!(v["storage"]["blocking_reason"], "moving_data_dir");
    std::fs::remove_file(s.data.join("state/storage_migration.json")).unwrap();

    let core = s.data.join("config/core_config.json");
    write(&core, b"{broken");
    let (_, v) = s.get("/api/system/status").await;
    assert_eq!(v["status"], "migration_required");
    assert_eq!(v["storage"]["recovery_required"], true);
    assert_eq!(v["storage"]["blocking_reason"], "recovery_required");
    assert!(v["storage"]["last_error_summary"]
        .as_str()
        .unwrap()
        .contains("core_config.json"));
    std::fs::remove_file(&core).unwrap();
    let (_, v) = s.get("/api/system/status").await;
    assert_eq!(v["status"], "ready");

    s.state.set_ready(false);
    let (code, v) = s.get("/api/system/status").await;
    assert_eq!(
        (code, v["status"].as_str(), v["ready"].as_bool()),
        (200, Some("starting"), Some(false))
    );
}

#[tokio::test]
async fn csrf_is_enforced_on_every_guarded_route() {
    let s = server().await;
    let guarded: &[(Method, &str, Value)] = &[
        (
            Method::POST,
            "/api/pending-notices/ack",
            json!({"cursor": 99}),
        ),
        (
            Method::POST,
            "/api/activity_signal",
            json!({"persona_name": "Companion", "idle_seconds": 1}),
        ),
        (
            Method::POST,
            "/api/survey/submit",
            json!({"action": "skip"}),
        ),
        (Method::POST, "/api/emotion/analysis", json!({"text": "hi"})),
        (
            Method::POST,
            "/api/translate",
            json!({"text": "hi", "skip_google": true}),
        ),
        (Method::POST, "/api/screenshot", json!({})),
        (Method::POST, "/api/proactive_chat", json!({})),
        (
            Method::POST,
            "/api/proactive/music_played_through",
            json!({}),
        ),
        (
            Method::POST,
            "/api/mini_game/invite/respond",
            json!({"choice": "accept"}),
        ),
        (
            Method::PUT,
            "/api/seven-day-tutorial/state",
            json!({"state": {}, "expectedRevision": 0}),
        ),
        (
            Method::POST,
            "/api/autostart-prompt/heartbeat",
            json!({"foreground_ms_delta": 1000}),
        ),
        (
            Method::POST,
            "/api/autostart-prompt/shown",
            json!({"prompt_token": "x"}),
        ),
        (
            Method::POST,
            "/api/autostart-prompt/decision",
            json!({"decision": "never", "prompt_token": "x"}),
        ),
        (
            Method::POST,
            "/api/platform/set-achievement-status/ACH",
            json!({}),
        ),
        (
            Method::POST,
            "/api/platform/update-playtime",
            json!({"seconds": 5}),
        ),
        (
            Method::POST,
            "/api/guide/handoff/create",
            json!({"target_page": "chat"}),
        ),
        (
            Method::POST,
            "/api/guide/handoff/consume",
            json!({"token": "t", "signature": "s", "expected_page": "p"}),
        ),
    ];
    let origin = format!("http://127.0.0.1:{}", s.addr.port());
    for (m, p, body) in guarded {
        let attempts = [
            s.http.request(m.clone(), s.url(p)).json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", "wrong")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", CSRF)
                .header("Origin", "https://evil.example")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", CSRF)
                .header("Referer", "http://evil.example/page")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("X-CSRF-Token", CSRF)
                .header("Origin", "null")
                .json(body),
            s.http
                .request(m.clone(), s.url(p))
                .header("Origin", origin.clone())
                .json(&json!({"_csrf_token": "nope"})),
        ];
        for (i, a) in attempts.into_iter().enumerate() {
            let r = a.send().await.unwrap();
            let no_store = r.headers().get("cache-control").is_some();
            let (code, v) = split(r).await;
            assert_eq!(code, 403, "{m} {p} attempt {i}: {v}");
            assert_eq!(v["success"], false, "{m} {p}");
            assert_eq!(v["error_code"], "csrf_validation_failed", "{m} {p}");
            if p.contains("handoff") || p.contains("screenshot") {
                assert!(no_store, "{p} 403 must be no-store");
            }
        }
    }
    // Nothing was written by the refused requests.
    for doc in [
        "state/seven_day_tutorial_state.json",
        "state/autostart_prompt_state.json",
        "state/platform_achievements.json",
        "state/survey.json",
    ] {
        assert!(!s.data.join(doc).exists(), "{doc} was written");
    }
    // The token in the JSON body is accepted where the body is JSON.
    let r = s
        .http
        .put(s.url("/api/seven-day-tutorial/state"))
        .json(&json!({"_csrf_token": CSRF, "state": {}, "expectedRevision": 0}))
        .send()
        .await
        .unwrap();
    let (code, v) = split(r).await;
    assert_eq!((code, v["revision"].as_i64()), (200, Some(1)), "{v}");
}

// ------------------------------------------------------------------ usage & notices

#[tokio::test]
async fn token_usage_aggregates_recorded_calls() {
    let s = server().await;
    let llm = MockLlm::start(r#"{"emotion":"happy","confidence":0.9}"#).await;
    s.configure_llm(&llm.base()).await;
    let (code, v) = s
        .post_csrf("/api/emotion/analysis", json!({"text": "a nice day"}))
        .await;
    assert_eq!(code, 200, "{v}");
    let now = companiond_core::now_millis() / 1000;
    let old = UsageRow {
        ts: now - 20 * 86_400,
        slot: "conversation".into(),
        model: "old-model".into(),
        character: "Companion".into(),
        prompt_tokens: 100,
        completion_tokens: 50,
        total_tokens: 150,
        estimated: false,
    };
    s.state.usage.record(&old).unwrap();

    let (code, v) = s.get("/api/token-usage").await;
    assert_eq!(code, 200, "{v}");
    let days = v["daily_stats"].as_object().unwrap();
    assert_eq!(days.len(), 1, "{v}");
    let today = days.values().next().unwrap();
    assert_eq!(today["call_count"], 1);
    assert_eq!(today["total_tokens"], 18);
    assert_eq!(today["by_call_type"]["emotion"]["call_count"], 1);
    assert_eq!(today["by_model"]["test-model"]["prompt_tokens"], 11);
    assert_eq!(v["recent_records"].as_array().unwrap().len(), 2);
    assert_eq!(v["recent_records"][1]["type"], "emotion");

    let (_, v) = s.get("/api/token-usage?days=30").await;
    assert_eq!(v["daily_stats"].as_object().unwrap().len(), 2);
    let (_, v) = s.get("/api/token-usage?days=100000").await;
    assert_eq!(v["days"], 90);
    let (_, v) = s.get("/api/token-usage?days=0").await;
    assert_eq!(v["daily_stats"], json!({}));
    assert_eq!(v["recent_records"].as_array().unwrap().len(), 2);
    let (code, v) = s.get("/api/token-usage?days=abc").await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (400, Some("invalid_days"))
    );
}

#[tokio::test]
async fn pending_notices_peek_and_cursor_ack() {
    let s = server().await;
    for i in 0..3 {
        s.state
            .notices
            .push(json!({"code": format!("n{i}"), "message": "hello"}));
    }
    let r = s
        .http
        .get(s.url("/api/pending-notices"))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (_, v) = split(r).await;
    assert_eq!(v["notices"].as_array().unwrap().len(), 3);
    let cursor = v["cursor"].as_u64().unwrap();
    let (_, again) = s.get("/api/pending-notices").await;
    assert_eq!(
        again["notices"].as_array().unwrap().len(),
        3,
        "peek must not delete"
    );
    s.state.notices.push(json!({"code": "late"}));
    let (code, v) = s
        .post_csrf("/api/pending-notices/ack", json!({"cursor": "bogus"}))
        .await;
    assert_eq!((code, v["acknowledged"].as_u64()), (200, Some(0)));
    let (code, v) = s
        .post_csrf(
            "/api/pending-notices/ack",
            json!({"cursor": cursor.to_string()}),
        )
        .await;
    assert_eq!((code, v["acknowledged"].as_u64()), (200, Some(3)), "{v}");
    let (_, v) = s.get("/api/pending-notices").await;
    assert_eq!(v["notices"], json!([{"code": "late"}]));
    let (code, _) = s
        .post("/api/pending-notices/ack", json!({"cursor": 100}))
        .await;
    assert_eq!(code, 403);
    let (_, v) = s.get("/api/pending-notices").await;
    assert_eq!(v["notices"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn activity_signal_validation_and_rate_limit() {
    let s = server().await;
    let post_raw = |body: &'static str| {
        s.csrf(Method::POST, "/api/activity_signal")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let (code, v) = split(post_raw("{nope").await.unwrap()).await;
    assert_eq!(
        (code, v["error"].as_str()),
        (400, Some("invalid JSON body"))
    );
    let (code, _) = split(post_raw("[1,2]").await.unwrap()).await;
    assert_eq!(code, 400);
    let bad = [
        json!({"idle_seconds": 3}),
        json!({"persona_name": "Companion"}),
        json!({"persona_name": "Companion", "window_title": "   "}),
        json!({"persona_name": "Companion", "cpu_avg_30s": 150}),
        json!({"persona_name": "Companion", "gpu_utilization": -1}),
        json!({"persona_name": "Companion", "idle_seconds": true}),
        json!({"persona_name": "Companion", "idle_seconds": "5"}),
        json!({"persona_name": "Companion", "process_name": 7}),
    ];
    for b in bad {
        let (code, v) = s.post_csrf("/api/activity_signal", b.clone()).await;
        assert_eq!(code, 400, "{b} → {v}");
        assert_eq!(v["success"], false);
    }
    let big = json!({"persona_name": "Companion", "window_title": "x".repeat(20_000)});
    let (code, _) = s.post_csrf("/api/activity_signal", big).await;
    assert_eq!(code, 413);
    let (code, v) = s
        .post_csrf(
            "/api/activity_signal",
            json!({"persona_name": "Ghost", "idle_seconds": 1}),
        )
        .await;
    assert_eq!(code, 404, "{v}");
    let r = s
        .csrf(Method::POST, "/api/activity_signal")
        .json(&json!({"lanlan_name": "Companion", "idle_seconds": 2.5, "window_title": "Editor"}))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (code, v) = split(r).await;
    assert_eq!((code, v), (200, json!({"success": true})));
    let r = s
        .csrf(Method::POST, "/api/activity_signal")
        .json(&json!({"persona_name": "Companion", "idle_seconds": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=6).contains(&retry));
    let (_, v) = split(r).await;
    assert!(v["retry_after_seconds"].as_f64().unwrap() <= 5.0);
}

// ------------------------------------------------------------------ changelog & survey

#[tokio::test]
async fn changelog_filters_and_falls_back() {
    let s = server_with(|_, bundle| {
        let c = bundle.join("changelog");
        write(&c.join("0.1.0.md"), b"base 0.1.0");
        write(&c.join("0.2.0.md"), b"base 0.2.0");
        write(&c.join("0.10.0.md"), b"base 0.10.0");
        write(&c.join("notes.md"), b"not a version");
        write(&c.join("en/0.2.0.md"), b"english 0.2.0");
        write(&c.join("ja/0.10.0.md"), b"japanese 0.10.0");
        write(&bundle.join("secret.md"), b"outside");
    })
    .await;
    let (code, v) = s.get("/api/changelog?since=0.1.0&lang=ja-JP").await;
    assert_eq!(code, 200);
    assert_eq!(v["current_version"], VERSION);
    assert_eq!(
        v["entries"],
        json!([{"version": "0.2.0", "content": "english 0.2.0"}, {"version": "0.10.0", "content": "japanese 0.10.0"}])
    );
    let (_, v) = s.get("/api/changelog?lang=zh-CN").await;
    let contents: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, vec!["base 0.1.0", "base 0.2.0", "base 0.10.0"]);
    let (_, v) = s.get("/api/changelog?since=0.2&lang=..%2F..").await;
    assert_eq!(
        v["entries"],
        json!([{"version": "0.10.0", "content": "base 0.10.0"}])
    );
    let (_, v) = s.get("/api/changelog?since=9.0.0").await;
    assert_eq!(v["entries"], json!([]));
}

fn survey_file() -> Vec<u8> {
    serde_json::to_vec(&json!({"title": "How are we doing?", "survey_version": "9.9.9",
        "questions": [{"id": "q1", "type": "single", "label": "Happy?", "options": [{"value": "y", "label": "Yes"}]}]}))
    .unwrap()
}

#[tokio::test]
async fn survey_delivery_submit_and_upload() {
    let up = Upstream::start(
        axum::Router::new().route("/api/v1/survey", axum::routing::post(|| async { "ok" })),
    )
    .await;
    let upload_url = up.base.clone();
    let s = server_with(move |_, bundle| {
        write(&bundle.join("achievements.json"), br#"["ACH_A"]"#);
        write(
            &bundle.join(format!("surveys/{VERSION}.json")),
            &survey_file(),
        );
        let mut en: Value = serde_json::from_slice(&survey_file()).unwrap();
        en["title"] = json!("English survey");
        write(
            &bundle.join(format!("surveys/en/{VERSION}.json")),
            &serde_json::to_vec(&en).unwrap(),
        );
        write(
            &bundle.join("surveys/config.json"),
            &serde_json::to_vec(&json!({"upload_url": upload_url, "upload_key": "k"})).unwrap(),
        );
    })
    .await;
    let (code, v) = s.get("/api/survey?lang=fr").await;
    assert_eq!(code, 200);
    assert_eq!(v["has_survey"], true, "{v}");
    assert_eq!(v["survey_version"], VERSION);
    assert_eq!(v["survey"]["title"], "English survey");
    assert_eq!(
        v["survey"]["survey_version"], VERSION,
        "the server's own version wins"
    );
    let (_, v) = s.get("/api/survey?lang=zh-CN").await;
    assert_eq!(v["survey"]["title"], "How are we doing?");

    // Opt-out disables delivery.
    write(
        &s.data.join("config/reporting.json"),
        br#"{"do_not_track": true}"#,
    );
    let (_, v) = s.get("/api/survey").await;
    assert_eq!(v["has_survey"], false);
    std::fs::remove_file(s.data.join("config/reporting.json")).unwrap();

    let answers = json!({"q1": "y", "long": "x".repeat(5000), "nested": {"a": 1},
                         "list": (0..80).collect::<Vec<_>>(), "survey_version": "9.9.9"});
    let (code, v) = s
        .post_csrf(
            "/api/survey/submit",
            json!({"action": "submit", "answers": answers, "survey_version": "9.9.9"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["uploaded"], true);
    let reqs = up.requests_to("/api/v1/survey");
    assert_eq!(reqs.len(), 1);
    let sent = reqs[0].json();
    assert_eq!(sent["survey_version"], VERSION);
    assert_eq!(sent["answers"]["q1"], "y");
    assert_eq!(sent["answers"]["long"].as_str().unwrap().len(), 2000);
    assert!(sent["answers"].get("nested").is_none());
    assert_eq!(sent["answers"]["list"].as_array().unwrap().len(), 50);
    assert_eq!(reqs[0].headers["x-survey-signature"].len(), 64);

    // Submitted: no longer delivered.
    let (_, v) = s.get("/api/survey").await;
    assert_eq!(v["has_survey"], false);
    let (code, v) = s
        .post_csrf("/api/survey/submit", json!({"action": "skip"}))
        .await;
    assert_eq!((code, v["uploaded"].as_bool()), (200, Some(true)));
    assert_eq!(
        up.requests_to("/api/v1/survey")[1].json()["answers"],
        json!({})
    );
    let (code, _) = s
        .post_csrf("/api/survey/submit", json!({"answers": "not an object"}))
        .await;
    assert_eq!(code, 200);
    let (code, _) = s
        .csrf(Method::POST, "/api/survey/submit")
        .header("content-type", "application/json")
        .body("[1]")
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(code, 400);
}

#[tokio::test]
async fn survey_offline_filters_and_no_platform() {
    let plain = server_with(|_, bundle| {
        write(
            &bundle.join(format!("surveys/{VERSION}.json")),
            &survey_file(),
        );
    })
    .await;
    let (_, v) = plain.get("/api/survey").await;
    assert_eq!(v["has_survey"], false, "not a platform user");

    let s = server_with(|_, bundle| {
        write(&bundle.join("achievements.json"), br#"["ACH_A"]"#);
        let mut f: Value = serde_json::from_slice(&survey_file()).unwrap();
        f["locales"] = json!(["de"]);
        write(
            &bundle.join(format!("surveys/{VERSION}.json")),
            &serde_json::to_vec(&f).unwrap(),
        );
        f["locales"] = Value::Null;
        f["expires_at"] = json!("2001-01-01");
        write(
            &bundle.join(format!("surveys/fr/{VERSION}.json")),
            &serde_json::to_vec(&f).unwrap(),
        );
        // A closed port: the upload fails, the submit still succeeds.
        write(
            &bundle.join("surveys/config.json"),
            br#"{"upload_url": "http://127.0.0.1:9"}"#,
        );
    })
    .await;
    let (_, v) = s.get("/api/survey?lang=de").await;
    assert_eq!(v["has_survey"], true);
    let (_, v) = s.get("/api/survey?lang=en").await;
    assert_eq!(v["has_survey"], false, "locale filter");
    let (_, v) = s.get("/api/survey?lang=fr").await;
    assert_eq!(v["has_survey"], false, "expired");
    let (code, v) = s
        .post_csrf("/api/survey/submit", json!({"answers": {"q1": "y"}}))
        .await;
    assert_eq!(
        (code, v["ok"].as_bool(), v["uploaded"].as_bool()),
        (200, Some(true), Some(false))
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("state/survey.json")).unwrap()).unwrap();
    assert_eq!(doc["responses"][VERSION]["uploaded"], false);
}

// ------------------------------------------------------------------ emotion

#[tokio::test]
async fn emotion_model_heuristic_and_failures() {
    let s = server().await;
    // No provider: the heuristic answers.
    let (code, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "I am so happy today haha", "persona_name": "Companion"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (v["emotion"].as_str(), v["source"].as_str()),
        (Some("happy"), Some("heuristic"))
    );
    assert_eq!(v["error_code"], "no_provider");

    let llm = MockLlm::start("{}").await;
    s.configure_llm(&llm.base()).await;
    let mut w = ws(&s, "Companion").await;
    llm.push(MockReply::Text(
        "```json\n{\"emotion\": \"Joyful\", \"confidence\": 0.9}\n```".into(),
    ));
    let (code, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "nice weather", "lanlan_name": "Companion"}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (v["emotion"].as_str(), v["confidence"].as_f64()),
        (Some("happy"), Some(0.9)),
        "{v}"
    );
    let frame = next_of_type(&mut w, "emotion").await;
    assert_eq!(frame["emotion"], "happy");
    let req = llm.chat_requests().pop().unwrap();
    assert_eq!(req["temperature"], 0.3);
    assert_eq!(req["max_tokens"], 40);

    // Model override of key and model.
    llm.push(MockReply::Text(
        r#"{"emotion":"sad","confidence":0.8}"#.into(),
    ));
    let (_, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "meh", "model": "other-model", "api_key": "sk-override"}),
        )
        .await;
    assert_eq!(v["emotion"], "sad");
    let last = llm.upstream.requests_to("/chat/completions").pop().unwrap();
    assert_eq!(last.json()["model"], "other-model");
    assert_eq!(last.headers["authorization"], "Bearer sk-override");

    // Unparsable reply: heuristic.
    llm.push(MockReply::Text("I think the user is sad".into()));
    let (_, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"text": "so sad, crying all day"}),
        )
        .await;
    assert_eq!(
        (v["emotion"].as_str(), v["source"].as_str()),
        (Some("sad"), Some("heuristic")),
        "{v}"
    );

    // Model failure: neutral / 0.0 in a 200 envelope.
    llm.push(MockReply::Status(500, "boom".into()));
    let (code, v) = s
        .post_csrf("/api/emotion/analysis", json!({"text": "so sad"}))
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            v["success"].as_bool(),
            v["emotion"].as_str(),
            v["confidence"].as_f64()
        ),
        (Some(false), Some("neutral"), Some(0.0))
    );
    assert!(v["error"].as_str().unwrap().contains("500"));

    // Blank text: neutral 0.5 without a model call.
    let calls = llm.chat_requests().len();
    let (code, v) = s
        .post_csrf("/api/emotion/analysis", json!({"text": "   "}))
        .await;
    assert_eq!(
        (code, v["emotion"].as_str(), v["confidence"].as_f64()),
        (200, Some("neutral"), Some(0.5))
    );
    assert_eq!(llm.chat_requests().len(), calls);
    let (code, v) = s
        .post_csrf(
            "/api/emotion/analysis",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (400, Some("missing_text"))
    );
    let (code, _) = s
        .post_csrf("/api/emotion/analysis", json!({"text": 5}))
        .await;
    assert_eq!(code, 400);
}

// ------------------------------------------------------------------ files & images

#[tokio::test]
async fn file_exists_traversal_table() {
    let s = server_with(|_, bundle| write(&bundle.join("static/app.js"), b"x")).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("real.txt");
    std::fs::write(&file, b"x").unwrap();
    let enc = |p: &str| url::form_urlencoded::byte_serialize(p.as_bytes()).collect::<String>();
    let check = |p: String| {
        let s = &s;
        async move { s.get(&format!("/api/file-exists?path={}", enc(&p))).await }
    };
    assert_eq!(
        check(file.display().to_string()).await,
        (200, json!({"exists": true}))
    );
    assert_eq!(
        check(dir.path().display().to_string()).await,
        (200, json!({"exists": false}))
    );
    assert_eq!(
        check(format!("{}/missing", dir.path().display())).await,
        (200, json!({"exists": false}))
    );
    assert_eq!(
        check("static/app.js".into()).await,
        (200, json!({"exists": true}))
    );
    let hostile = [
        "../etc/passwd".to_string(),
        "/tmp/../etc/passwd".into(),
        format!("{}/../real.txt", dir.path().display()),
        "a/../../b".into(),
        "..".into(),
        "%2e%2e/etc/passwd".into(),
        "/a/%2E%2E/etc/passwd".into(),
        "..\\..\\windows".into(),
        "/a/b/..".into(),
        "static/../../x".into(),
    ];
    for h in hostile {
        let (code, v) = check(h.clone()).await;
        assert_eq!(code, 400, "{h} → {v}");
        assert_eq!(v["exists"], false);
    }
    for bad in [
        "/api/file-exists",
        "/api/file-exists?path=",
        "/api/file-exists?path=a%00b",
    ] {
        let (code, v) = s.get(bad).await;
        assert_eq!((code, v["exists"].as_bool()), (400, Some(false)), "{bad}");
    }
}

#[tokio::test]
async fn find_first_image_in_approved_roots_only() {
    let ws_dir = tempfile::tempdir().unwrap();
    let ws_path = ws_dir.path().to_path_buf();
    write(
        &ws_path.join("12345/preview.jpg"),
        &[0xFF, 0xD8, 0xFF, 0xE0],
    );
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("preview.png"), &png(10));
    let outside_path = outside.path().to_path_buf();
    let s = TestServer::start_with(
        FAMILIES,
        TestOptions {
            edit: Some(Box::new(move |o| o.workshop_dir = Some(ws_path))),
            prepare: Some(Box::new(move |data, bundle| {
                let m = bundle.join("static/live2d/m1");
                write(&m.join("preview.jpg"), &vec![0u8; 2 * 1024 * 1024]);
                write(&m.join("thumbnail.png"), &png(100));
                write(
                    &bundle.join("static/exact/preview.png"),
                    &vec![0u8; 1024 * 1024],
                );
                write(&data.join("user_mmd/model/icon.png"), &png(10));
                std::fs::create_dir_all(bundle.join("static/empty")).unwrap();
                #[cfg(unix)]
                std::os::unix::fs::symlink(&outside_path, bundle.join("static/escape")).unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let get = |folder: String| {
        let s = &s;
        async move {
            let q = url::form_urlencoded::byte_serialize(folder.as_bytes()).collect::<String>();
            s.get(&format!("/api/find-first-image?folder={q}")).await
        }
    };
    let (code, v) = get("static/live2d/m1".into()).await;
    assert_eq!(code, 200);
    assert_eq!(
        v,
        json!({"success": true, "imagePath": "static/live2d/m1/thumbnail.png", "url": "/static/live2d/m1/thumbnail.png"})
    );
    let abs = s.bundle.join("static/live2d/m1").display().to_string();
    assert_eq!(
        get(abs).await.1["imagePath"],
        "static/live2d/m1/thumbnail.png"
    );
    let (_, v) = get("user_mmd/model".into()).await;
    assert_eq!(v["url"], "/user_mmd/model/icon.png");
    let item = ws_dir.path().join("12345").display().to_string();
    let (code, v) = get(item.clone()).await;
    assert_eq!(code, 200, "{v}");
    assert!(v["imagePath"]
        .as_str()
        .unwrap()
        .ends_with("12345/preview.jpg"));
    assert!(v["url"]
        .as_str()
        .unwrap()
        .starts_with("/api/platform/proxy-image?image_path="));
    // The workshop image is then served by the platform proxy.
    let r = s
        .http
        .get(s.url(v["url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/jpeg");

    // Exactly 1 MiB is not "under 1 MiB".
    let (code, v) = get("static/exact".into()).await;
    assert_eq!((code, v["success"].as_bool()), (200, Some(false)));
    let (code, v) = get("static/empty".into()).await;
    assert_eq!((code, v["success"].as_bool()), (200, Some(false)));
    let (code, _) = get("static/live2d/m1/thumbnail.png".into()).await;
    assert_eq!(code, 400, "a file is not a folder");
    let (code, _) = get("static/nothing-here".into()).await;
    assert_eq!(code, 404);
    for h in [
        "../".to_string(),
        "static/../../".into(),
        "static/live2d/../../..".into(),
        "static//live2d".into(),
        outside.path().display().to_string(),
        "/etc".into(),
        "/".into(),
        "static/escape".into(),
        "%2e%2e/%2e%2e".into(),
        format!("{}/../..", s.bundle.join("static").display()),
    ] {
        let (code, v) = get(h.clone()).await;
        assert_eq!(code, 403, "{h} → {v}");
        assert_eq!(v["success"], false);
    }
    let (code, _) = s.get("/api/find-first-image").await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn platform_proxy_image_containment_and_type() {
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("x.png"), &png(10));
    let outside_path = outside.path().to_path_buf();
    let s = server_with(move |_, bundle| {
        write(&bundle.join("static/img/a.png"), &png(5000));
        write(
            &bundle.join("static/img/fake.png"),
            b"<html>not an image</html>",
        );
        write(&bundle.join("static/img/notes.txt"), b"text");
        write(&bundle.join("static/img/pic.svg"), b"<svg/>");
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            outside_path.join("x.png"),
            bundle.join("static/img/link.png"),
        )
        .unwrap();
    })
    .await;
    let get = |p: String| {
        let s = &s;
        async move {
            let q = url::form_urlencoded::byte_serialize(p.as_bytes()).collect::<String>();
            s.http
                .get(s.url(&format!("/api/platform/proxy-image?image_path={q}")))
                .send()
                .await
                .unwrap()
        }
    };
    let r = get("static/img/a.png".into()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().to_vec(), png(5000));
    let abs = s.bundle.join("static/img/a.png").display().to_string();
    assert_eq!(get(abs).await.status(), 200);
    assert_eq!(get("../static/img/a.png".into()).await.status(), 200);
    // Encoded once more (the value is decoded twice).
    assert_eq!(get("static%2Fimg%2Fa.png".into()).await.status(), 200);
    let cases: Vec<(String, u16)> = vec![
        ("http://example.com/a.png".into(), 400),
        ("https://example.com/a.png".into(), 400),
        ("static/img/notes.txt".into(), 400),
        ("static/img/pic.svg".into(), 400),
        ("static/img/fake.png".into(), 400),
        ("static/img/missing.png".into(), 404),
        ("static/img/link.png".into(), 403),
        (outside.path().join("x.png").display().to_string(), 403),
        ("/etc/passwd".into(), 403),
        ("../../etc/passwd".into(), 403),
        ("static/../../etc/passwd".into(), 403),
        ("../static/../../x.png".into(), 403),
        ("static/img/%2e%2e/%2e%2e/x.png".into(), 403),
        ("nowhere/x.png".into(), 403),
        ("".into(), 400),
    ];
    for (p, want) in cases {
        let r = get(p.clone()).await;
        let code = r.status().as_u16();
        let (_, v) = split(r).await;
        assert_eq!(code, want, "{p} → {v}");
        assert_eq!(v["success"], false, "{p}");
    }
}

// ------------------------------------------------------------------ desktop

#[tokio::test]
async fn window_title_and_screenshot_guards() {
    let s = server().await;
    let (code, v) = s.get("/api/get_window_title").await;
    assert_eq!(code, 200);
    let headless =
        std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none();
    if headless {
        assert_eq!(v, json!({"success": false, "window_title": null}));
    }
    let r = s
        .csrf(Method::POST, "/api/screenshot")
        .send()
        .await
        .unwrap();
    assert!(r.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("no-store"));
    let (code, v) = split(r).await;
    if headless {
        assert_eq!(
            (code, v["error_code"].as_str()),
            (501, Some("capture_unavailable")),
            "{v}"
        );
        assert_eq!(v["success"], false);
    }
    let (code, v) = split(
        s.http
            .post(s.url("/api/screenshot/interactive"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (code, v["fallback"].as_str()),
        (501, Some("frontend")),
        "{v}"
    );
    let (code, v) = split(
        s.http
            .post(s.url("/api/screenshot/interactive"))
            .header("Origin", "https://evil.example")
            .header("X-CSRF-Token", CSRF)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (403, Some("csrf_validation_failed"))
    );
    let (code, _) = split(
        s.http
            .post(s.url("/api/screenshot/interactive"))
            .header("Referer", format!("http://127.0.0.1:{}/", s.addr.port()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, 403, "an Origin/Referer requires the token");

    // A remote peer is refused even with a valid token.
    let remote = TestServer::start_with(
        FAMILIES,
        TestOptions {
            fake_peer: Some("192.0.2.7:5555".parse().unwrap()),
            ..Default::default()
        },
    )
    .await;
    for p in ["/api/screenshot", "/api/screenshot/interactive"] {
        let r = remote.csrf(Method::POST, p).send().await.unwrap();
        assert!(r.headers().get("cache-control").is_some());
        let (code, v) = split(r).await;
        assert_eq!(
            (code, v["success"].as_bool()),
            (403, Some(false)),
            "{p}: {v}"
        );
        assert_eq!(v["error_code"], "forbidden");
    }
    let (code, _) = remote.get("/api/get_window_title").await;
    assert_eq!(code, 200);
}

// ------------------------------------------------------------------ proactive

#[tokio::test]
async fn proactive_chat_reason_codes() {
    let s = server().await;
    let (code, v) = s
        .post_csrf("/api/proactive_chat", json!({"lanlan_name": "Ghost"}))
        .await;
    assert_eq!(
        (code, v["reason_code"].as_str(), v["stage"].as_str()),
        (404, Some("ERROR_CHARACTER_NOT_FOUND"), Some("entry_guard"))
    );
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (code, v["action"].as_str(), v["reason_code"].as_str()),
        (200, Some("pass"), Some("DELIVERY_FAILED")),
        "{v}"
    );

    let mut w = ws(&s, "Companion").await;
    let (_, v) = s
        .post_csrf("/api/proactive_chat", json!({"persona_name": "Companion"}))
        .await;
    assert_eq!(v["reason_code"], "PASS_MODEL_UNAVAILABLE");

    let llm = MockLlm::start("default").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text("Hey, how is your afternoon going?".into()));
    let (code, v) = s
        .post_csrf(
            "/api/proactive_chat",
            json!({"persona_name": "Companion", "language": "en"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (
            v["action"].as_str(),
            v["reason_code"].as_str(),
            v["stage"].as_str()
        ),
        (Some("chat"), Some("CHAT_DELIVERED"), Some("delivery"))
    );
    assert_eq!(v["active_channels"], 1);
    assert_eq!(v["source_mode"], "chat");
    let delta = next_of_type(&mut w, "assistant_delta").await;
    assert_eq!(
        (delta["text"].as_str(), delta["proactive"].as_bool()),
        (Some("Hey, how is your afternoon going?"), Some(true))
    );
    assert_eq!(
        next_of_type(&mut w, "turn_end").await["turn_id"],
        v["turn_id"]
    );
    let recent: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("memory/Companion/recent.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        recent.as_array().unwrap().last().unwrap()["data"]["content"],
        "Hey, how is your afternoon going?"
    );
    let totals: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/proactive_chat_totals.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(totals["totals"]["Companion"], 1);
    let sys = llm.chat_requests().pop().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sys.contains("[PASS]") && sys.contains("language with code en"));

    llm.push(MockReply::Text("Hey, how is your afternoon going!".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (v["reason_code"].as_str(), v["stage"].as_str()),
        (Some("PASS_DUPLICATE"), Some("dedup"))
    );
    llm.push(MockReply::Text("[PASS]".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (v["reason_code"].as_str(), v["stage"].as_str()),
        (Some("PASS_MODEL_PASS"), Some("model_decision"))
    );
    llm.push(MockReply::Text("   ".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(v["reason_code"], "PASS_GENERATION_EMPTY");
    let (_, v) = s
        .post_csrf("/api/proactive_chat", json!({"enabled_modes": []}))
        .await;
    assert_eq!(
        (v["reason_code"].as_str(), v["stage"].as_str()),
        (Some("PASS_SOURCE_EMPTY"), Some("source_selection"))
    );
    llm.push(MockReply::Status(500, "down".into()));
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (code, v["success"].as_bool(), v["reason_code"].as_str()),
        (502, Some(false), Some("ERROR_MODEL_FAILED"))
    );

    // Music source, skipped once used, restored by music_played_through.
    let music =
        json!({"enabled_modes": ["music"], "is_playing_music": true, "current_track": "Song A"});
    llm.push(MockReply::Text("Love this song you are playing!".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", music.clone()).await;
    assert_eq!(
        (v["source_mode"].as_str(), v["source_tag"].as_str()),
        (Some("music"), Some("Song A")),
        "{v}"
    );
    assert!(llm.chat_requests().pop().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("Song A"));
    let (_, v) = s.post_csrf("/api/proactive_chat", music.clone()).await;
    assert_eq!(v["reason_code"], "PASS_SOURCE_EMPTY");
    let (code, v) = s
        .post_csrf(
            "/api/proactive/music_played_through",
            json!({"lanlan_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (code, v["cleared"].as_u64(), v["lanlan_name"].as_str()),
        (200, Some(1), Some("Companion"))
    );
    llm.push(MockReply::Text("This track again, nice choice.".into()));
    let (_, v) = s.post_csrf("/api/proactive_chat", music).await;
    assert_eq!(v["reason_code"], "CHAT_DELIVERED");
    let (code, v) = s
        .post_csrf(
            "/api/proactive/music_played_through",
            json!({"persona_name": "  "}),
        )
        .await;
    assert_eq!(
        (code, v["cleared"].as_u64()),
        (200, Some(1)),
        "blank falls back to the current character"
    );
}

#[tokio::test]
async fn proactive_chat_busy_while_a_round_runs() {
    use axum::routing::post;
    let slow = Upstream::start(axum::Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            tokio::time::sleep(Duration::from_millis(600)).await;
            axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": "Slow hello there"}, "finish_reason": "stop"}]}))
        }),
    ))
    .await;
    let s = server().await;
    s.configure_llm(&format!("{}/v1", slow.base)).await;
    let _w = ws(&s, "Companion").await;
    let a = s.post_csrf("/api/proactive_chat", json!({}));
    let b = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        s.post_csrf("/api/proactive_chat", json!({})).await
    };
    let ((ca, va), (cb, vb)) = tokio::join!(a, b);
    assert_eq!(
        (ca, va["reason_code"].as_str()),
        (200, Some("CHAT_DELIVERED")),
        "{va}"
    );
    assert_eq!(
        (cb, vb["reason_code"].as_str(), vb["stage"].as_str()),
        (409, Some("PASS_BUSY"), Some("entry_guard")),
        "{vb}"
    );
    assert_eq!(vb["success"], false);
    assert!(vb["state"].is_object());
}

#[tokio::test]
async fn mini_game_invitation_state_machine() {
    let s = server().await;
    let llm = MockLlm::start("unused").await;
    s.configure_llm(&llm.base()).await;
    let mut w = ws(&s, "Companion").await;
    let (code, v) = s
        .post_csrf(
            "/api/activity_signal",
            json!({"persona_name": "Companion", "idle_seconds": 3, "window_title": "Desk"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    let topics = ["the weather", "your plans", "music", "cats", "tea"];
    let mut invite = None;
    for (i, t) in topics.iter().enumerate() {
        llm.push(MockReply::Text(format!(
            "Round {i}: shall we talk about {t}?"
        )));
        let (code, v) = s
            .post_csrf("/api/proactive_chat", json!({"enabled_modes": ["chat"]}))
            .await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["reason_code"], "CHAT_DELIVERED", "{v}");
        if v["source_mode"] == "mini_game_invite" {
            invite = Some(v);
            break;
        }
    }
    let v = invite.expect("the fourth delivered chat at the latest is an invitation");
    let sid = v["invite"]["session_id"].as_str().unwrap().to_string();
    let game = v["invite"]["game_type"].as_str().unwrap().to_string();
    let frame = next_of_type(&mut w, "mini_game_invite").await;
    assert_eq!(frame["session_id"], sid);
    let totals: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/proactive_chat_totals.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(totals["ever_delivered"]["Companion"], true);

    let (code, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "maybe", "session_id": sid}),
        )
        .await;
    assert_eq!(code, 400, "{v}");
    let (code, _) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": 5, "session_id": sid}),
        )
        .await;
    assert_eq!(code, 400);
    let (code, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "accept", "session_id": "wrong"}),
        )
        .await;
    assert_eq!((code, v["action"].as_str()), (200, Some("expired")));
    let (code, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": " ACCEPT ", "session_id": sid, "lanlan_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (code, v["action"].as_str()),
        (200, Some("open_game")),
        "{v}"
    );
    assert_eq!(v["game_type"], game.as_str());
    let url = v["game_url"].as_str().unwrap();
    assert!(
        url.contains(&format!("session_id={sid}")) && url.contains("lanlan_name=Companion"),
        "{url}"
    );
    let resolved = next_of_type(&mut w, "mini_game_invite_resolved").await;
    assert_eq!(
        (resolved["session_id"].as_str(), resolved["action"].as_str()),
        (Some(sid.as_str()), Some("open_game"))
    );
    let (_, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "decline", "session_id": sid}),
        )
        .await;
    assert_eq!(
        v["action"], "expired",
        "a resolved invitation cannot be answered twice"
    );
    // The body token works on this route too.
    let r = s
        .http
        .post(s.url("/api/mini_game/invite/respond"))
        .json(&json!({"_csrf_token": CSRF, "choice": "later", "session_id": sid}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// A game route that owns every character's input (stands in for the games family).
struct RoutingEverything;

impl companiond_core::state::InputRouter for RoutingEverything {
    fn route(
        &self,
        _c: String,
        _t: String,
        _s: companiond_core::state::InputSource,
    ) -> futures::future::BoxFuture<'static, Option<Value>> {
        Box::pin(async { None })
    }
    fn is_routing(&self, _c: &str) -> bool {
        true
    }
}

#[tokio::test]
async fn proactive_chat_yields_to_game_routes_and_running_turns() {
    use axum::routing::post;
    use futures::SinkExt;
    let slow = Upstream::start(axum::Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": "Slow answer"}, "finish_reason": "stop"}]}))
        }),
    ))
    .await;
    let s = server().await;
    s.configure_llm(&format!("{}/v1", slow.base)).await;
    let mut w = ws(&s, "Companion").await;
    // The AI is answering a user message: PASS_BUSY (409).
    w.send(Message::Text(
        json!({"type": "user_text", "text": "hello"}).to_string(),
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (code, v["reason_code"].as_str()),
        (409, Some("PASS_BUSY")),
        "{v}"
    );
    assert_eq!(v["state"]["ai_responding"], true);
    next_of_type(&mut w, "turn_end").await;
    // A game route owns the character: PASS_ROUTE_ACTIVE (200 pass).
    s.state
        .hooks
        .set_input_router(std::sync::Arc::new(RoutingEverything));
    let (code, v) = s.post_csrf("/api/proactive_chat", json!({})).await;
    assert_eq!(
        (
            code,
            v["action"].as_str(),
            v["reason_code"].as_str(),
            v["stage"].as_str()
        ),
        (
            200,
            Some("pass"),
            Some("PASS_ROUTE_ACTIVE"),
            Some("entry_guard")
        ),
        "{v}"
    );
}

#[tokio::test]
async fn chatting_on_dismisses_a_pending_invitation() {
    use futures::SinkExt;
    let s = server().await;
    let llm = MockLlm::start("Nice to hear from you.").await;
    s.configure_llm(&llm.base()).await;
    let mut w = ws(&s, "Companion").await;
    s.post_csrf(
        "/api/activity_signal",
        json!({"persona_name": "Companion", "idle_seconds": 3, "window_title": "Desk"}),
    )
    .await;
    let mut sid = None;
    // Distinct lines (near-duplicates of a recent proactive chat are not delivered).
    let lines = [
        "Did you see the sunset over the hills tonight?",
        "I have been humming a new jazz tune all afternoon.",
        "Cats apparently sleep sixteen hours a day, lucky them!",
        "Want to plan something fun for the weekend together?",
        "Tea or coffee this morning, what did you pick?",
    ];
    for line in lines {
        llm.push(MockReply::Text(line.to_string()));
        let (_, v) = s
            .post_csrf("/api/proactive_chat", json!({"enabled_modes": ["chat"]}))
            .await;
        if v["source_mode"] == "mini_game_invite" {
            sid = v["invite"]["session_id"].as_str().map(str::to_string);
            break;
        }
    }
    let sid = sid.expect("an invitation is delivered by the fourth chat");
    next_of_type(&mut w, "mini_game_invite").await;
    // An ordinary message with a "not now" keyword: resolved as "later" (suppressed).
    w.send(Message::Text(
        json!({"type": "user_text", "text": "not now, thanks"}).to_string(),
    ))
    .await
    .unwrap();
    let resolved = next_of_type(&mut w, "mini_game_invite_resolved").await;
    assert_eq!(
        (resolved["session_id"].as_str(), resolved["action"].as_str()),
        (Some(sid.as_str()), Some("suppress"))
    );
    // The invitation is no longer pending: the button now answers "expired".
    let (_, v) = s
        .post_csrf(
            "/api/mini_game/invite/respond",
            json!({"choice": "accept", "session_id": sid}),
        )
        .await;
    assert_eq!(v["action"], "expired", "{v}");
}

// ------------------------------------------------------------------ state stores

#[tokio::test]
async fn seven_day_tutorial_revisions() {
    let s = server().await;
    let (code, v) = s.get("/api/seven-day-tutorial/state").await;
    assert_eq!(code, 200);
    assert_eq!(
        v,
        json!({"ok": true, "storeVersion": 1, "initialized": false, "revision": 0, "state": null})
    );
    let state = json!({"firstSeenDate": "2024-05-01", "completedRounds": [2, 1, 1, 9], "skippedRounds": [1, 3], "currentRound": 2, "junk": true});
    let (code, v) = send_csrf(
        &s,
        Method::PUT,
        "/api/seven-day-tutorial/state",
        json!({"state": state, "expectedRevision": 0}),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (v["revision"].as_i64(), v["initialized"].as_bool()),
        (Some(1), Some(true))
    );
    assert_eq!(v["state"]["completedRounds"], json!([1, 2]));
    assert_eq!(v["state"]["skippedRounds"], json!([3]));
    assert!(v["state"].get("junk").is_none());
    let path = s.data.join("state/seven_day_tutorial_state.json");
    let before = std::fs::read(&path).unwrap();

    let (code, v) = send_csrf(
        &s,
        Method::PUT,
        "/api/seven-day-tutorial/state",
        json!({"state": {"completedRounds": [7]}, "expectedRevision": 0}),
    )
    .await;
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["error_code"], "seven_day_tutorial_revision_conflict");
    assert_eq!(v["revision"], 1);
    assert_eq!(v["state"]["completedRounds"], json!([1, 2]));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a stale write changes nothing"
    );
    for bad in [
        json!({"state": {}, "expectedRevision": true}),
        json!({"state": {}, "expectedRevision": -1}),
        json!({"state": {}, "expectedRevision": 1.5}),
        json!({"state": [], "expectedRevision": 1}),
        json!({"expectedRevision": 1}),
    ] {
        let (code, _) = send_csrf(
            &s,
            Method::PUT,
            "/api/seven-day-tutorial/state",
            bad.clone(),
        )
        .await;
        assert_eq!(code, 400, "{bad}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let (code, v) = send_csrf(
        &s,
        Method::PUT,
        "/api/seven-day-tutorial/state",
        json!({"state": {"completedRounds": [7]}, "expectedRevision": 1}),
    )
    .await;
    assert_eq!((code, v["revision"].as_i64()), (200, Some(2)));
    let (_, v) = s.get("/api/seven-day-tutorial/state").await;
    assert_eq!(v["state"]["completedRounds"], json!([7]));

    let legacy = server_with(|data, _| {
        write(
            &data.join("state/tutorial_prompt.json"),
            br#"{"completed": true}"#,
        )
    })
    .await;
    let (_, v) = legacy.get("/api/seven-day-tutorial/state").await;
    assert_eq!(
        (v["revision"].as_i64(), v["initialized"].as_bool()),
        (Some(1), Some(true))
    );
    assert_eq!(v["state"]["completedRounds"], json!([1]));
}

#[tokio::test]
async fn autostart_prompt_flow() {
    let s = server().await;
    let (code, v) = s.get("/api/autostart-prompt/state").await;
    assert_eq!(code, 200);
    assert_eq!(v["state"]["status"], "observing");
    assert!(
        v["state"].get("active_prompt_token").is_none(),
        "GET is the public view"
    );

    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/heartbeat",
            json!({"foreground_ms_delta": 60_000}),
        )
        .await;
    assert_eq!(
        (v["should_prompt"].as_bool(), v["prompt_reason"].as_str()),
        (Some(false), Some("foreground_insufficient"))
    );
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/heartbeat",
            json!({"foreground_ms_delta": 99_999_999}),
        )
        .await;
    assert_eq!(
        v["state"]["foreground_ms"],
        60_000 + 30 * 60_000,
        "delta is capped"
    );
    assert_eq!(
        (v["should_prompt"].as_bool(), v["prompt_reason"].as_str()),
        (Some(true), Some("usage_timeout"))
    );
    let token = v["prompt_token"].as_str().unwrap().to_string();
    let (_, v) = s
        .post_csrf("/api/autostart-prompt/heartbeat", json!({}))
        .await;
    assert_eq!(v["prompt_token"], token.as_str(), "reused within 5 minutes");

    let (code, v) = s
        .post_csrf(
            "/api/autostart-prompt/shown",
            json!({"prompt_token": "bogus"}),
        )
        .await;
    assert_eq!(
        (code, v["error"].as_str()),
        (400, Some("invalid prompt_token"))
    );
    let (code, v) = s
        .post_csrf("/api/autostart-prompt/shown", json!({"token": token}))
        .await;
    assert_eq!(
        (code, v["already_acknowledged"].as_bool()),
        (200, Some(false))
    );
    assert_eq!(v["state"]["shown_count"], 1);
    assert_eq!(v["state"]["status"], "prompted");
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/shown",
            json!({"prompt_token": token}),
        )
        .await;
    assert_eq!(v["already_acknowledged"], true);

    let (code, _) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"decision": "perhaps", "prompt_token": token}),
        )
        .await;
    assert_eq!(code, 400);
    let (code, _) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"decision": "later"}),
        )
        .await;
    assert_eq!(code, 400);
    let (code, v) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"action": "later", "prompt_token": token}),
        )
        .await;
    assert_eq!(
        (code, v["state"]["status"].as_str()),
        (200, Some("deferred")),
        "{v}"
    );
    let deferred = v["state"]["deferred_until"].as_i64().unwrap();
    assert!(deferred > companiond_core::now_millis() + 23 * 3600 * 1000);
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/decision",
            json!({"decision": "never", "prompt_token": token}),
        )
        .await;
    assert_eq!(
        v["state"]["status"], "deferred",
        "a repeated decision is a no-op"
    );
    assert_eq!(v["state"]["never_remind"], false);
    let (_, v) = s
        .post_csrf("/api/autostart-prompt/heartbeat", json!({}))
        .await;
    assert_eq!(
        (v["should_prompt"].as_bool(), v["prompt_reason"].as_str()),
        (Some(false), Some("prompt_pending"))
    );
    let (_, v) = s
        .post_csrf(
            "/api/autostart-prompt/heartbeat",
            json!({"autostart_enabled": true, "provider": "systemd"}),
        )
        .await;
    assert_eq!(v["prompt_reason"], "autostart_enabled");
    let (_, v) = s.get("/api/autostart-prompt/state").await;
    assert_eq!(
        (
            v["state"]["status"].as_str(),
            v["state"]["autostart_enabled"].as_bool()
        ),
        (Some("completed"), Some(true))
    );
    let doc: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/autostart_prompt_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(doc["funnel_counts"]["shown"], 1);
    assert_eq!(doc["enabled_provider"], "systemd");
}

#[tokio::test]
async fn platform_achievements_and_playtime() {
    let none = server().await;
    for (m, p) in [
        (Method::POST, "/api/platform/set-achievement-status/ACH_A"),
        (Method::POST, "/api/platform/update-playtime"),
    ] {
        let (code, v) = send_csrf(&none, m, p, json!({})).await;
        assert_eq!(
            (code, v["error_code"].as_str()),
            (503, Some("platform_unavailable")),
            "{p}"
        );
    }
    let (code, v) = none.get("/api/platform/list-achievements").await;
    assert_eq!((code, v["success"].as_bool()), (503, Some(false)));

    let s = server_with(|_, bundle| {
        write(
            &bundle.join("achievements.json"),
            br#"{"achievements": ["ACH_FIRST", {"name": "ACH_TIME_5MIN", "playtime_seconds": 300}, "bad name!"]}"#,
        )
    })
    .await;
    let (code, v) = s.get("/api/platform/list-achievements").await;
    assert_eq!((code, v["count"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(
        v["achievements"][0],
        json!({"name": "ACH_FIRST", "unlocked": false, "unlocked_at": null, "playtime_seconds": null})
    );
    let (code, v) = s
        .post_csrf("/api/platform/set-achievement-status/ACH_FIRST", json!({}))
        .await;
    assert_eq!(
        (
            code,
            v["newlyUnlocked"].as_bool(),
            v["alreadyUnlocked"].as_bool()
        ),
        (200, Some(true), Some(false))
    );
    let (_, v) = s
        .post_csrf("/api/platform/set-achievement-status/ACH_FIRST", json!({}))
        .await;
    assert_eq!(
        (v["newlyUnlocked"].as_bool(), v["alreadyUnlocked"].as_bool()),
        (Some(false), Some(true))
    );
    let (code, v) = s
        .post_csrf("/api/platform/set-achievement-status/ACH_NOPE", json!({}))
        .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (404, Some("achievement_not_found"))
    );
    let (code, _) = s
        .post_csrf("/api/platform/set-achievement-status/ACH%20X", json!({}))
        .await;
    assert_eq!(code, 400);

    let steps = [
        (json!({"seconds": "12"}), 12),
        (json!({"seconds": 10.7}), 10),
        (json!({}), 10),
        (json!({"seconds": true}), 1),
        (json!({"seconds": 99999}), 3600),
    ];
    let mut total = 0;
    for (body, added) in steps {
        let (code, v) = s
            .post_csrf("/api/platform/update-playtime", body.clone())
            .await;
        total += added;
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            (v["added"].as_i64(), v["totalPlayTime"].as_i64()),
            (Some(added), Some(total)),
            "{body}"
        );
        assert_eq!(v["stat"], "PLAY_TIME_SECONDS");
    }
    let (_, v) = s
        .post_csrf("/api/platform/update-playtime", json!({"seconds": 0}))
        .await;
    assert_eq!(v["progressUnlocked"], json!(["ACH_TIME_5MIN"]));
    for bad in [
        json!({"seconds": -1}),
        json!({"seconds": "soon"}),
        json!({"seconds": [1]}),
    ] {
        let (code, v) = s
            .post_csrf("/api/platform/update-playtime", bad.clone())
            .await;
        assert_eq!(code, 400, "{bad} → {v}");
    }
    let (_, v) = s.get("/api/platform/list-achievements").await;
    assert_eq!(v["achievements"][1]["unlocked"], true);
    assert_eq!(v["totalPlayTime"], total);
    assert!(s.data.join("state/platform_achievements.json").is_file());
}

#[tokio::test]
async fn guide_handoff_tokens() {
    let s = server().await;
    let origin = format!("http://127.0.0.1:{}", s.addr.port());
    let post = |path: &'static str, body: Value, origin: String| {
        let s = &s;
        async move {
            let r = s
                .http
                .post(s.url(path))
                .header("X-CSRF-Token", CSRF)
                .header("Origin", origin)
                .json(&body)
                .send()
                .await
                .unwrap();
            let cc = r
                .headers()
                .get("cache-control")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            let (code, v) = split(r).await;
            assert!(cc.contains("no-store"), "{path} must be no-store");
            (code, v)
        }
    };
    let (code, v) = post(
        "/api/guide/handoff/create",
        json!({"source_page": "home"}),
        origin.clone(),
    )
    .await;
    assert_eq!(
        (code, v["error_code"].as_str()),
        (400, Some("invalid_target_page"))
    );
    let (code, v) = post(
        "/api/guide/handoff/create",
        json!({"target_page": "chat", "resume_scene": "intro", "flow_id": 5}),
        origin.clone(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    let t = v["token"].clone();
    assert_eq!(t["token"].as_str().unwrap().len(), 32);
    assert_eq!(t["signature"].as_str().unwrap().len(), 64);
    assert_eq!(
        (
            t["flow_id"].as_str(),
            t["source_page"].as_str(),
            t["authority"].as_str()
        ),
        (Some("home_yui_guide_v1"), Some("home"), Some("server"))
    );
    assert_eq!(
        t["expires_at"].as_i64().unwrap() - t["created_at"].as_i64().unwrap(),
        300_000
    );
    assert!(t.get("source_origin").is_none());

    let consume = |body: Value, o: String| post("/api/guide/handoff/consume", body, o);
    let tok = t["token"].as_str().unwrap().to_string();
    let sig = t["signature"].as_str().unwrap().to_string();
    let mut tampered = sig.clone();
    tampered.replace_range(0..1, if sig.starts_with('a') { "b" } else { "a" });
    let cases = [
        (
            json!({"signature": sig, "expected_page": "chat"}),
            400,
            "invalid_handoff_token",
        ),
        (
            json!({"token": tok, "signature": sig}),
            400,
            "invalid_expected_page",
        ),
        (
            json!({"token": "x".repeat(200), "signature": sig, "expected_page": "chat"}),
            400,
            "invalid_handoff_token",
        ),
        (
            json!({"token": "unknown-token", "signature": sig, "expected_page": "chat"}),
            404,
            "handoff_token_not_found",
        ),
        (
            json!({"token": tok, "signature": tampered, "expected_page": "chat"}),
            403,
            "handoff_signature_mismatch",
        ),
        (
            json!({"token": tok, "signature": sig, "expected_page": "settings"}),
            403,
            "handoff_target_mismatch",
        ),
    ];
    for (body, code, err) in cases {
        let (c, v) = consume(body.clone(), origin.clone()).await;
        assert_eq!((c, v["error_code"].as_str()), (code, Some(err)), "{body}");
        assert_eq!(v["ok"], false);
    }
    let (c, v) = consume(
        json!({"token": tok, "signature": sig, "expected_page": "chat"}),
        format!("http://localhost:{}", s.addr.port()),
    )
    .await;
    assert_eq!(
        (c, v["error_code"].as_str()),
        (403, Some("handoff_origin_mismatch"))
    );
    let (c, v) = consume(
        json!({"token": tok, "signature": sig, "expected_page": "chat", "consumer_id": "page-2"}),
        origin.clone(),
    )
    .await;
    assert_eq!(c, 200, "{v}");
    assert_eq!(
        (
            v["token"]["consumed"].as_bool(),
            v["token"]["consumed_by"].as_str()
        ),
        (Some(true), Some("page-2"))
    );
    let (c, v) = consume(
        json!({"token": tok, "signature": sig, "expected_page": "chat"}),
        origin.clone(),
    )
    .await;
    assert_eq!(
        (c, v["error_code"].as_str()),
        (409, Some("handoff_token_consumed"))
    );
    // Another server has another secret and knows nothing of this token.
    let other = server().await;
    let r = other
        .csrf(Method::POST, "/api/guide/handoff/consume")
        .json(&json!({"token": tok, "signature": sig, "expected_page": "chat"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// Timing figures for docs/system.md:
/// `cargo test -p companiond-system --test system -- --ignored --nocapture perf_`
#[tokio::test]
#[ignore]
async fn perf_token_usage_and_status() {
    let s = server().await;
    let now = companiond_core::now_millis() / 1000;
    let rows = 20_000;
    let started = std::time::Instant::now();
    for i in 0..rows {
        s.state
            .usage
            .record(&UsageRow {
                ts: now - (i % (60 * 86_400)),
                slot: ["conversation", "emotion", "summary"][(i % 3) as usize].into(),
                model: format!("model-{}", i % 4),
                character: "Companion".into(),
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                estimated: false,
            })
            .unwrap();
    }
    println!("recorded {rows} usage rows in {:?}", started.elapsed());
    let started = std::time::Instant::now();
    for _ in 0..20 {
        let (code, _) = s.get("/api/token-usage?days=90").await;
        assert_eq!(code, 200);
    }
    println!(
        "GET /api/token-usage?days=90 over {rows} rows: {:?} per call",
        started.elapsed() / 20
    );
    let started = std::time::Instant::now();
    for _ in 0..500 {
        let (code, _) = s.get("/api/system/status").await;
        assert_eq!(code, 200);
    }
    println!(
        "GET /api/system/status: {:?} per call",
        started.elapsed() / 500
    );
}

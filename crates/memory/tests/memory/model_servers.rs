//! Extraction against what real model servers do (docs/models.md): JSON asked
//! with a schema, the forms a server refuses skipped, answers with trailing
//! commas, capped answers, a batch cut to the context window.

use crate::common::*;

use companiond_memory::extract::MARK_EXTRACT;

async fn set_config(s: &TestServer, extra: Value) {
    s.merge_core_config(extra).await;
}

fn extraction_requests(llm: &MockLlm) -> Vec<Value> {
    llm.chat_requests()
        .into_iter()
        .filter(|r| r.to_string().contains(MARK_EXTRACT))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extraction_asks_for_a_schema_and_falls_back_when_a_server_refuses_it() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    turn(&s, C, "My dog is called Pixel.").await;
    // llama.cpp's Python server answers an unknown form with a 500.
    llm.push_matching(
        MARK_EXTRACT,
        MockReply::Status(500, "Internal Server Error".into()),
    );
    // The answer has trailing commas.
    llm.push_matching(
        MARK_EXTRACT,
        MockReply::Text(
            "{\"facts\": [{\"text\": \"The user has a dog called Pixel\", \"entity\": \"master\", \"importance\": 7, \"evidence\": [1,],},],}".into(),
        ),
    );
    let (st, b) = s
        .post_csrf("/api/memory/extract", json!({"character": C}))
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["added"], 1, "{b}");
    let reqs = extraction_requests(&llm);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["response_format"]["type"], "json_schema");
    assert_eq!(
        reqs[0]["response_format"]["json_schema"]["schema"]["required"],
        json!(["facts"])
    );
    assert_eq!(reqs[1]["response_format"]["type"], "json_object");
    assert!(reqs[1]["response_format"]["schema"].is_object());
    for r in &reqs {
        let cap = r["max_tokens"].as_u64().unwrap();
        assert!((128..=1024).contains(&cap), "{cap}");
    }
    // The form that worked is used next time without asking again.
    turn(&s, C, "Pixel is a beagle.").await;
    llm.push_matching(MARK_EXTRACT, MockReply::Text("{\"facts\": []}".into()));
    let (st, b) = s
        .post_csrf("/api/memory/extract", json!({"character": C}))
        .await;
    assert_eq!(st, 200, "{b}");
    let reqs = extraction_requests(&llm);
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[2]["response_format"]["type"], "json_object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extraction_batch_fits_a_small_context_and_the_rest_follows() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    set_config(&s, json!({"contextWindow": 1024})).await;
    // 12 lines of about 900 characters (300 tokens each): 4096 tokens in all.
    let lines: Vec<Value> = (0..12)
        .map(|i| {
            msg(
                if i % 2 == 0 { "human" } else { "ai" },
                &format!("line {i} {}", "blah ".repeat(180)),
            )
        })
        .collect();
    write_history(&s, C, &Value::Array(lines));
    for _ in 0..12 {
        llm.push_matching(MARK_EXTRACT, MockReply::Text("{\"facts\": []}".into()));
    }
    let (st, b) = s
        .post_csrf("/api/memory/extract", json!({"character": C}))
        .await;
    assert_eq!(st, 200, "{b}");
    // One line a batch fits; a run makes at most ten batches, the next run
    // reads the rest.
    assert_eq!(b["lines_read"], 10, "{b}");
    let (st, b) = s
        .post_csrf("/api/memory/extract", json!({"character": C}))
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["lines_read"], 2, "{b}");
    let reqs = extraction_requests(&llm);
    assert_eq!(reqs.len(), 12);
    for r in &reqs {
        let size: usize = r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap_or("").len() / 3)
            .sum();
        let cap = r["max_tokens"].as_u64().unwrap() as usize;
        assert!(size + cap <= 1024, "{size} + {cap}");
    }
}

#[test]
fn background_extraction_backs_off_after_failures() {
    use companiond_memory::extract::backoff;
    assert_eq!(backoff(1), Duration::ZERO);
    assert_eq!(backoff(2), Duration::from_secs(60));
    assert_eq!(backoff(3), Duration::from_secs(120));
    assert_eq!(backoff(40), Duration::from_secs(3600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_extraction_waits_for_a_quiet_chat_on_the_same_server() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    // Every line is worth an extraction at once (no quiet period of its own).
    s.state
        .provided::<companiond_memory::MemoryRuntime>()
        .unwrap()
        .extract
        .configure(Duration::from_millis(10), 1);
    llm.push_matching(MARK_EXTRACT, MockReply::Text("{\"facts\": []}".into()));
    turn(&s, C, "I like tea.").await;
    let ended = Instant::now();
    // A second turn a second later moves the start again.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(extraction_requests(&llm).is_empty());
    turn(&s, C, "Green tea.").await;
    let second = Instant::now();
    wait_for("the background extraction", || {
        !extraction_requests(&llm).is_empty()
    })
    .await;
    let quiet = companiond_core::llm::CHAT_QUIET;
    assert!(second.elapsed() >= quiet - Duration::from_millis(300));
    assert!(ended.elapsed() >= quiet + Duration::from_millis(700));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_said_long_ago_is_recalled_without_extraction_after_a_restart() {
    // A model that extracts nothing: every memory call answers no facts.
    let llm = MockLlm::start("{\"facts\": []}").await;
    let first = memory_server(None).await;
    first.configure_llm(&llm.base()).await;
    turn(&first, C, "My grandmother's village is called Zwiesel.").await;
    for i in 0..30 {
        turn(
            &first,
            C,
            &format!("Small talk number {i} about the weather."),
        )
        .await;
    }
    let (st, b) = first
        .post_csrf("/api/memory/extract", json!({"character": C}))
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["added"], 0, "{b}");
    // A restart over the same data.
    let dir = tempfile::tempdir().unwrap();
    first.stop();
    copy_dir(&first.data, dir.path());
    drop(first);
    let s = memory_server(Some(dir.path())).await;
    s.configure_llm(&llm.base()).await;
    turn(&s, C, "Where does my grandmother live, which village?").await;
    let reqs: Vec<Value> = llm
        .chat_requests()
        .into_iter()
        .filter(|r| r["stream"] == true)
        .collect();
    let last = reqs.last().unwrap();
    let history_has_it = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .any(|m| m["content"].as_str().unwrap_or("").contains("Zwiesel"));
    assert!(!history_has_it, "the line is still in the history window");
    let system = last["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("Zwiesel"), "{system}");
    assert!(system.contains("the user: My grandmother"), "{system}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extraction_failures_and_successes_show_in_its_status() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    let b = extraction_status(&s).await;
    assert_eq!(b["enabled"], true, "{b}");
    assert_eq!(b["failures"], 0, "{b}");
    assert!(
        b["last_error"].is_null() && b["last_success_at"].is_null(),
        "{b}"
    );

    turn(&s, C, "My cat is called Mochi.").await;
    for n in 1..=2u64 {
        llm.push_matching(MARK_EXTRACT, MockReply::Text("no JSON here at all".into()));
        let (st, b) = s
            .post_csrf("/api/memory/extract", json!({"character": C}))
            .await;
        assert_ne!(st, 200, "{b}");
        let b = extraction_status(&s).await;
        assert_eq!(b["failures"], n, "{b}");
        assert!(
            b["last_error"].as_str().is_some_and(|e| !e.is_empty()),
            "{b}"
        );
        assert!(b["last_error_at"].as_i64().is_some(), "{b}");
        // No wait after the first failure; a minute after the second.
        let wait = b["retry_in_ms"].as_u64().unwrap_or(0);
        assert!(if n == 1 { wait == 0 } else { wait > 50_000 }, "{b}");
    }
    llm.push_matching(MARK_EXTRACT, MockReply::Text("{\"facts\": []}".into()));
    let (st, b) = s
        .post_csrf("/api/memory/extract", json!({"character": C}))
        .await;
    assert_eq!(st, 200, "{b}");
    let b = extraction_status(&s).await;
    assert_eq!(b["failures"], 0, "{b}");
    assert!(b["last_error"].is_null(), "{b}");
    assert!(b["last_success_at"].as_i64().is_some(), "{b}");
    assert_eq!(b["running"], false, "{b}");

    let (st, _) = s.get("/api/memory/extraction?character=Nobody").await;
    assert_eq!(st, 404);
    let (st, b) = s.get("/api/memory/extraction").await;
    assert_eq!(st, 400, "{b}");
}

async fn extraction_status(s: &TestServer) -> Value {
    let (st, b) = s
        .get(&format!("/api/memory/extraction?character={C}"))
        .await;
    assert_eq!(st, 200, "{b}");
    b
}

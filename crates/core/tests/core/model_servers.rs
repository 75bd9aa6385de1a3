//! What real model servers do that a friendly stub does not (docs/models.md):
//! a context that must fit, empty replies, refusals of a too-long prompt, a
//! stream that breaks off, tools that need `tool_choice`, the round cap.

use std::time::Duration;

use axum::routing::post;
use axum::Router;
use companiond_core::testkit::{Message, MockLlm, MockReply, TestOptions, TestServer, Upstream};
use companiond_core::tools::RegisteredTool;
use futures::SinkExt;
use serde_json::{json, Value};

use crate::common::*;

/// Frames of one turn on a fresh socket, up to `turn_end`.
async fn turn_frames(s: &TestServer, text: &str) -> Vec<Value> {
    let (mut ws, _) = s.chat("Companion").await;
    ws.send(Message::Text(
        json!({"type": "user_text", "text": text}).to_string(),
    ))
    .await
    .unwrap();
    let mut out = Vec::new();
    loop {
        let f = next_frame(&mut ws).await;
        let end = f["type"] == "turn_end";
        out.push(f);
        if end {
            break;
        }
    }
    let _ = ws.close(None).await;
    out
}

fn stored(s: &TestServer) -> Vec<Value> {
    serde_json::from_slice(&std::fs::read(s.data.join("memory/Companion/recent.json")).unwrap())
        .unwrap()
}

async fn set_config(s: &TestServer, extra: Value) {
    s.merge_core_config(extra).await;
}

/// A server whose history holds `n` lines of about 600 characters each.
async fn with_long_history(n: usize) -> TestServer {
    TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(move |data, _| {
                std::fs::create_dir_all(data.join("memory/Companion")).unwrap();
                let lines: Vec<Value> = (0..n)
                    .map(|i| {
                        let kind = if i % 2 == 0 { "human" } else { "ai" };
                        json!({"type": kind, "data": {"content": format!("line {i}: {}", "words and more words ".repeat(30))}})
                    })
                    .chain([json!({"type": "ai", "data": {"content": "  "}})])
                    .collect();
                std::fs::write(
                    data.join("memory/Companion/recent.json"),
                    Value::Array(lines).to_string(),
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await
}

fn estimate(req: &Value) -> usize {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").len() / 3 + 8)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_fits_the_context_window_dropping_the_oldest_history() {
    let llm = MockLlm::start("fine").await;
    let s = with_long_history(30).await;
    s.configure_llm(&llm.base()).await;
    set_config(&s, json!({"conversationContextWindow": 2048})).await;
    assert_eq!(one_turn(&s, "hello there").await, "fine");
    let req = &llm.chat_requests()[0];
    let conv = conversation(req);
    // The newest line and the input are there, the oldest and the empty one are not.
    assert_eq!(conv.last().unwrap(), &("user".into(), "hello there".into()));
    assert!(conv.iter().any(|(_, c)| c.starts_with("line 29:")));
    assert!(!conv.iter().any(|(_, c)| c.starts_with("line 0:")));
    assert!(!conv.iter().any(|(_, c)| c.trim().is_empty()));
    assert!(conv.len() < 31, "{} messages", conv.len());
    // Prompt plus the reply's cap fit 2048 tokens.
    let max_tokens = req["max_tokens"].as_u64().unwrap() as usize;
    assert!(estimate(req) + max_tokens <= 2048, "{}", estimate(req));

    // With the default window (4096) more history fits.
    set_config(&s, json!({"conversationContextWindow": null})).await;
    assert_eq!(one_turn(&s, "again").await, "fine");
    let bigger = conversation(&llm.chat_requests()[1]);
    assert!(bigger.len() > conv.len());
    assert!(estimate(&llm.chat_requests()[1]) <= 4096);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_length_refusal_is_retried_once_with_less_history() {
    let llm = MockLlm::start("short enough").await;
    let s = with_long_history(10).await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Status(
        400,
        "{\"error\":{\"message\":\"This model's maximum context length is 1024 tokens. However, you requested 3000 tokens\",\"code\":\"context_length_exceeded\"}}".into(),
    ));
    assert_eq!(one_turn(&s, "still there?").await, "short enough");
    let reqs = llm.chat_requests();
    assert_eq!(reqs.len(), 2);
    let (a, b) = (conversation(&reqs[0]).len(), conversation(&reqs[1]).len());
    assert!(b < a, "{b} < {a}");
    // Refused twice: an error, once retried only.
    llm.push(MockReply::Status(400, "context window exceeded".into()));
    llm.push(MockReply::Status(400, "context window exceeded".into()));
    let frames = turn_frames(&s, "and now?").await;
    assert_eq!(frames[0]["code"], "upstream_error");
    assert_eq!(llm.chat_requests().len(), 4);
    // The refused input is kept in the history.
    let h = stored(&s);
    assert_eq!(h.last().unwrap()["data"]["content"], "and now?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_reply_is_an_error_and_never_stored() {
    let llm = MockLlm::start("x").await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text(String::new()));
    let frames = turn_frames(&s, "hi").await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0]["type"], "error");
    assert_eq!(frames[0]["code"], "empty_reply");
    assert_eq!(frames[0]["partial"], false);
    assert_eq!(
        stored(&s),
        vec![json!({"type": "human", "data": {"content": "hi"}})]
    );
    // With history, an empty answer is retried once with less of it.
    llm.push(MockReply::Text("   ".into()));
    assert_eq!(one_turn(&s, "hello?").await.trim(), "x");
    assert_eq!(llm.chat_requests().len(), 3);
    let h = stored(&s);
    assert_eq!(h.len(), 3);
    assert_eq!(h[2]["data"]["content"], "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_breaks_off_keeps_the_input_and_the_marked_partial_reply() {
    let upstream = Upstream::start(Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            (
                [("content-type", "text/event-stream")],
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"I was saying\"}}]}\n\ndata: {\"choices\": [oops\n\n",
            )
        }),
    ))
    .await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&format!("{}/v1", upstream.base)).await;
    let frames = turn_frames(&s, "tell me").await;
    assert_eq!(frames[0]["type"], "assistant_delta");
    let err = &frames[1];
    assert_eq!(err["type"], "error");
    assert_eq!(err["code"], "protocol_error");
    assert_eq!(err["partial"], true);
    assert!(err["error"].as_str().unwrap().contains("midway"), "{err}");
    assert_eq!(
        stored(&s),
        vec![
            json!({"type": "human", "data": {"content": "tell me"}}),
            json!({"type": "ai", "data": {"content": "I was saying"}, "source": "partial"}),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_without_its_end_is_a_failure_not_a_reply() {
    // A server killed mid-reply: the body just ends, no finish reason, no [DONE].
    let upstream = Upstream::start(Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            (
                [("content-type", "text/event-stream")],
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Once upon\"}}]}\n\n",
            )
        }),
    ))
    .await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&format!("{}/v1", upstream.base)).await;
    let frames = turn_frames(&s, "a story").await;
    assert_eq!(frames[1]["code"], "connection_failed", "{frames:?}");
    assert_eq!(frames[1]["partial"], true);
    assert_eq!(
        stored(&s),
        vec![
            json!({"type": "human", "data": {"content": "a story"}}),
            json!({"type": "ai", "data": {"content": "Once upon"}, "source": "partial"}),
        ]
    );
}

fn register_double(s: &TestServer, plugin: &Upstream) {
    s.state
        .sessions
        .ensure("Companion")
        .register_tool(RegisteredTool {
            name: "double".into(),
            description: "doubles n".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            callback_url: format!("{}/tool", plugin.base),
            source: "plugin:test".into(),
            timeout: Duration::from_secs(5),
        });
}

async fn doubling_plugin() -> Upstream {
    Upstream::start(Router::new().route(
        "/tool",
        post(|body: axum::Json<Value>| async move {
            let n = body["arguments"]["n"].as_i64().unwrap_or(0);
            axum::Json(json!({"output": {"doubled": n * 2}, "is_error": false}))
        }),
    ))
    .await
}

fn call(id: &str) -> MockReply {
    MockReply::ToolCalls(vec![(id.into(), "double".into(), "{\"n\": 2}".into())])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_sent_with_tool_choice_and_a_failed_stream_is_retried_whole() {
    let llm = MockLlm::start("done").await;
    let plugin = doubling_plugin().await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    register_double(&s, &plugin);
    // The streamed round with tools fails (a server that cannot stream tool
    // calls); the same round is asked again without streaming.
    llm.push(MockReply::Status(
        500,
        "streaming with tools is unsupported".into(),
    ));
    llm.push(call("c1"));
    assert_eq!(one_turn_with_tools(&s, "double 2").await, "done");
    let reqs = llm.chat_requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["tool_choice"], "auto");
    assert_eq!(reqs[0]["stream"], true);
    assert_eq!(reqs[1]["stream"], false);
    assert_eq!(reqs[1]["tool_choice"], "auto");
    let asked = reqs[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(asked["content"], "", "content is \"\", not null");
    assert_eq!(asked["tool_calls"][0]["id"], "c1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_stream_with_tools_is_asked_whole_for_the_rest_of_the_turn() {
    // llama.cpp's Python server cannot stream with tool_choice "auto": it
    // answers 200 with an empty stream.
    let llm = MockLlm::start("done").await;
    let plugin = doubling_plugin().await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    register_double(&s, &plugin);
    llm.push(MockReply::Text(String::new()));
    llm.push(call("c1"));
    llm.push(MockReply::Text("four".into()));
    assert_eq!(one_turn_with_tools(&s, "double 2").await, "four");
    let streams: Vec<Value> = llm
        .chat_requests()
        .iter()
        .map(|r| r["stream"].clone())
        .collect();
    assert_eq!(streams, vec![json!(true), json!(false), json!(false)]);
    assert_eq!(plugin.requests_to("/tool").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_tool_support_gets_no_tools() {
    let llm = MockLlm::start("plain").await;
    let plugin = doubling_plugin().await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    register_double(&s, &plugin);
    set_config(&s, json!({"conversationTools": false})).await;
    assert_eq!(one_turn(&s, "hi").await, "plain");
    let req = &llm.chat_requests()[0];
    assert!(req.get("tools").is_none() && req.get("tool_choice").is_none());
    set_config(&s, json!({"conversationTools": true})).await;
    assert_eq!(one_turn(&s, "hi").await, "plain");
    assert_eq!(
        llm.chat_requests()[1]["tools"][0]["function"]["name"],
        "double"
    );
}

async fn one_turn_with_tools(s: &TestServer, text: &str) -> String {
    turn_frames(s, text)
        .await
        .iter()
        .filter(|f| f["type"] == "assistant_delta")
        .map(|f| f["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_round_cap_ends_the_turn_with_an_error() {
    let llm = MockLlm::start("never reached").await;
    let plugin = doubling_plugin().await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    register_double(&s, &plugin);
    for i in 0..companiond_core::turn::MAX_TOOL_ROUNDS {
        llm.push(call(&format!("c{i}")));
    }
    let frames = turn_frames(&s, "loop forever").await;
    let err = &frames[frames.len() - 2];
    assert_eq!(err["type"], "error");
    assert_eq!(err["code"], "tool_round_limit");
    let reqs = llm.chat_requests();
    assert_eq!(reqs.len(), companiond_core::turn::MAX_TOOL_ROUNDS);
    // The last round offers no tools, so a model can only answer in words.
    assert_eq!(reqs[0]["tools"][0]["function"]["name"], "double");
    assert!(reqs[reqs.len() - 1].get("tools").is_none());
    assert_eq!(
        stored(&s),
        vec![json!({"type": "human", "data": {"content": "loop forever"}})]
    );
}

/// A model server that answers Ollama's `POST {base}/api/show` with `show` (status,
/// body, delay) and `/v1/models` with a 1024-token `context_length`, the next
/// source after Ollama's.
async fn ollama_like(status: u16, show: &'static str, delay: Duration) -> MockLlm {
    let router = Router::new()
        .route(
            "/api/show",
            post(move || async move {
                tokio::time::sleep(delay).await;
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    [("content-type", "application/json")],
                    show,
                )
            }),
        )
        .route(
            "/v1/models",
            axum::routing::get(|| async {
                axum::Json(json!({"object": "list", "data": [{"id": "test-model", "context_length": 1024}]}))
            }),
        );
    MockLlm::start_with("fine", router).await
}

/// The `max_tokens` of a turn's request: a quarter of the window it was built in.
async fn reserve_with(s: &TestServer, llm: &MockLlm) -> u64 {
    s.configure_llm(&llm.base()).await;
    assert_eq!(one_turn(s, "hello").await, "fine");
    llm.chat_requests()[0]["max_tokens"].as_u64().unwrap()
}

// The shape of Ollama's answer (its API reference, "Show Model Information"),
// shortened: `parameters` is Modelfile text, `model_info` the GGUF metadata.
const SHOW_NUM_CTX: &str = r#"{"modelfile": "FROM /models/llama3.2\nPARAMETER num_ctx 8192\n",
  "parameters": "num_ctx                        8192\nstop                           \"<|eot_id|>\"",
  "template": "{{ .Prompt }}",
  "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
              "parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
  "model_info": {"general.architecture": "llama", "general.parameter_count": 3212749888,
                 "llama.block_count": 28, "llama.context_length": 131072,
                 "llama.embedding_length": 3072},
  "capabilities": ["completion", "tools"], "modified_at": "2025-05-01T10:00:00Z"}"#;
const SHOW_DEFAULT: &str = r#"{"parameters": "stop \"<|eot_id|>\"",
  "details": {"format": "gguf", "family": "llama"},
  "model_info": {"general.architecture": "llama", "llama.context_length": 131072}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollamas_show_gives_the_window_and_garbage_falls_back() {
    let s = TestServer::start(&[]).await;
    // num_ctx set: that window (8192, max_tokens 2048), not /v1/models' 1024.
    let llm = ollama_like(200, SHOW_NUM_CTX, Duration::ZERO).await;
    assert_eq!(reserve_with(&s, &llm).await, 2048);
    let asked = llm.upstream.requests_to("/api/show");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].method, "POST");
    assert_eq!(asked[0].json(), json!({"model": "test-model"}));
    // Asked once per server and model.
    assert_eq!(one_turn(&s, "again").await, "fine");
    assert_eq!(llm.upstream.requests_to("/api/show").len(), 1);

    // No num_ctx: the model's 131072 capped to Ollama's default run (4096).
    let llm = ollama_like(200, SHOW_DEFAULT, Duration::ZERO).await;
    assert_eq!(reserve_with(&s, &llm).await, 1024);

    // Not Ollama, an error, garbage: the next source (/v1/models: 1024, max_tokens 256).
    for (status, body) in [
        (404, "404 page not found"),
        (500, r#"{"error": "model requires more system memory"}"#),
        (200, "this is not json"),
        (200, r#"{"model_info": {"llama.context_length": 81"#),
        (
            200,
            r#"{"model_info": "llama", "parameters": ["num_ctx", 8192]}"#,
        ),
        (
            200,
            r#"{"parameters": "num_ctx lots", "model_info": {"llama.context_length": "big"}}"#,
        ),
        (
            200,
            r#"{"model_info": {"general.architecture": "llama", "llama.context_length": -4}}"#,
        ),
        (200, "[]"),
        (200, "null"),
    ] {
        let llm = ollama_like(status, body, Duration::ZERO).await;
        assert_eq!(reserve_with(&s, &llm).await, 256, "{status} {body}");
    }

    // An Ollama show route that never answers costs the 2 s probe timeout, then the next source.
    let llm = ollama_like(200, SHOW_NUM_CTX, Duration::from_secs(30)).await;
    let t = std::time::Instant::now();
    assert_eq!(reserve_with(&s, &llm).await, 256);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

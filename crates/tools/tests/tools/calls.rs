//! Tool calls by the model over the chat WebSocket: a registered tool is
//! offered, called and answered; registrations reach open sessions; every
//! dispatch outcome reaches the model; dispatch overhead (ignored measurement).

use std::time::{Duration, Instant};

use companiond_core::testkit::MockReply;
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn model_calls_a_registered_tool_and_answers_with_its_output() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let params =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let (st, b) = register(
        &s,
        json!({
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": params,
            "callback_url": format!("{}/weather", plug.base),
            "source": "plugin:weather",
        }),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["ok"], true);
    assert_eq!(b["registered"], "get_weather");
    assert_eq!(b["affected_roles"], json!(["Companion"]));
    assert_eq!(b["failed_roles"], json!([]));

    let raw_args = r#"{"city": "Paris"}"#;
    llm.push(MockReply::ToolCalls(vec![(
        "call_1".into(),
        "get_weather".into(),
        raw_args.into(),
    )]));
    llm.push(MockReply::Text("It is 21 degrees in Paris.".into()));

    let mut ws = connect(&s, "Companion").await;
    let frames = turn(&mut ws, "What's the weather in Paris?").await;

    let calls = of_type(&frames, "tool_call");
    assert_eq!(calls.len(), 1, "{frames:?}");
    assert_eq!(calls[0]["name"], "get_weather");
    assert_eq!(calls[0]["call_id"], "call_1");
    let results = of_type(&frames, "tool_result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["is_error"], false);
    assert_eq!(spoken(&frames), "It is 21 degrees in Paris.");
    assert!(of_type(&frames, "error").is_empty(), "{frames:?}");

    // The callback got exactly the documented body.
    let cb = plug.requests_to("/weather");
    assert_eq!(cb.len(), 1);
    let body = cb[0].json();
    assert_eq!(body["name"], "get_weather");
    assert_eq!(body["arguments"], json!({"city": "Paris"}));
    assert_eq!(body["call_id"], "call_1");
    assert_eq!(body["raw_arguments"], raw_args);

    // The model was offered the tool with its definition, then got the output back.
    let reqs = llm.chat_requests();
    assert_eq!(reqs.len(), 2);
    let tools = reqs[0]["tools"].as_array().expect("tools offered");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["function"]["name"], "get_weather");
    assert_eq!(
        tools[0]["function"]["description"],
        "Current weather of a city"
    );
    assert_eq!(tools[0]["function"]["parameters"], params);
    let tm = tool_messages(&reqs[1]);
    assert_eq!(tm.len(), 1, "{}", reqs[1]);
    assert_eq!(tm[0]["tool_call_id"], "call_1");
    let content: Value =
        serde_json::from_str(tm[0]["content"].as_str().expect("string content")).expect("JSON");
    assert_eq!(content, json!({"city": "Paris", "temp_c": 21}));
    // The assistant message with the call precedes the tool message.
    let msgs = reqs[1]["messages"].as_array().expect("messages");
    let asst = msgs
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .expect("assistant tool-call message");
    assert_eq!(asst["tool_calls"][0]["id"], "call_1");
    assert_eq!(asst["tool_calls"][0]["function"]["arguments"], raw_args);
}

#[tokio::test]
async fn registrations_reach_an_already_open_session() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let mut ws = connect(&s, "Companion").await;

    turn(&mut ws, "hello").await;
    assert!(llm.chat_requests()[0].get("tools").is_none());

    let url = format!("{}/echo", plug.base);
    let (st, _) = register(
        &s,
        json!({"name": "echo", "description": "v1", "callback_url": url}),
    )
    .await;
    assert_eq!(st, 200);
    turn(&mut ws, "again").await;
    let r = &llm.chat_requests()[1];
    assert_eq!(offered(r), vec!["echo"]);
    assert_eq!(r["tools"][0]["function"]["description"], "v1");
    // The default parameters are the empty object schema.
    assert_eq!(
        r["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );

    // Same name replaces (one definition, new description).
    let (st, _) = register(
        &s,
        json!({"name": "echo", "description": "v2", "callback_url": url}),
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = register(&s, json!({"name": "other", "callback_url": url})).await;
    assert_eq!(st, 200);
    turn(&mut ws, "third").await;
    let r = &llm.chat_requests()[2];
    assert_eq!(offered(r), vec!["echo", "other"]);
    assert_eq!(r["tools"][0]["function"]["description"], "v2");

    let (st, b) = s
        .post("/api/tools/unregister", json!({"name": "echo"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], true);
    assert_eq!(b["ok"], true);
    assert_eq!(b["affected_roles"], json!(["Companion"]));
    turn(&mut ws, "fourth").await;
    assert_eq!(offered(&llm.chat_requests()[3]), vec!["other"]);

    let (st, b) = s
        .post("/api/tools/clear", json!({"source": "external"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], 1);
    turn(&mut ws, "fifth").await;
    assert!(llm.chat_requests()[4].get("tools").is_none());

    // A tool the model calls that is not registered (any more) is a tool error.
    llm.push(MockReply::ToolCalls(vec![(
        "c9".into(),
        "echo".into(),
        "{}".into(),
    )]));
    llm.push(MockReply::Text("ok".into()));
    let frames = turn(&mut ws, "sixth").await;
    assert_eq!(of_type(&frames, "tool_result")[0]["is_error"], true);
    assert!(plug.requests_to("/echo").is_empty());
}

#[tokio::test]
async fn each_dispatch_outcome_reaches_the_model() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let dead = closed_port();
    let tools = [
        ("is_error", format!("{}/is_error", plug.base), 30.0),
        ("http500", format!("{}/http500", plug.base), 30.0),
        ("text", format!("{}/text", plug.base), 30.0),
        ("slow", format!("{}/slow", plug.base), 0.3),
        ("refused", format!("http://127.0.0.1:{dead}/cb"), 30.0),
        ("echo", format!("{}/echo", plug.base), 30.0),
    ];
    for (name, url, timeout) in &tools {
        let (st, b) = register(
            &s,
            json!({"name": name, "callback_url": url, "timeout_seconds": timeout}),
        )
        .await;
        assert_eq!(st, 200, "{b}");
    }
    let mut ws = connect(&s, "Companion").await;

    // (tool, arguments, expected is_error, check on the tool message content)
    type Check = fn(&str) -> bool;
    let cases: [(&str, &str, bool, Check); 6] = [
        ("is_error", "{}", true, |c| c.contains("city not found")),
        ("http500", "{}", true, |c| {
            c.contains("500") && c.contains("boom from plugin")
        }),
        ("text", "{}", false, |c| c == "plain words, not JSON"),
        ("slow", "{}", true, |c| c.contains("timed out")),
        ("refused", "{}", true, |c| c.contains("tool error")),
        // Non-object arguments are wrapped; the callback sees them as {value}.
        ("echo", "[1,2]", false, |c| {
            serde_json::from_str::<Value>(c).is_ok_and(|v| {
                v["arguments"] == json!({"value": [1, 2]}) && v["raw_arguments"] == "[1,2]"
            })
        }),
    ];
    for (i, (name, args, is_error, check)) in cases.iter().enumerate() {
        let call_id = format!("call_{i}");
        llm.push(MockReply::ToolCalls(vec![(
            call_id.clone(),
            name.to_string(),
            args.to_string(),
        )]));
        llm.push(MockReply::Text(format!("after {name}")));
        let started = Instant::now();
        let frames = turn(&mut ws, &format!("use {name}")).await;
        let r = of_type(&frames, "tool_result");
        assert_eq!(r.len(), 1, "{name}: {frames:?}");
        assert_eq!(r[0]["is_error"], *is_error, "{name}");
        assert_eq!(r[0]["call_id"], call_id.as_str());
        // The model continued the turn with the result.
        assert_eq!(spoken(&frames), format!("after {name}"), "{name}");
        let reqs = llm.chat_requests();
        let last = reqs.last().expect("request");
        let tm = tool_messages(last);
        let msg = tm
            .iter()
            .find(|m| m["tool_call_id"] == call_id.as_str())
            .expect("tool message for this call");
        let content = msg["content"].as_str().expect("content");
        assert!(
            check(content),
            "{name}: unexpected tool content {content:?}"
        );
        if *name == "slow" {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "the tool timeout was not applied"
            );
        }
    }
    // Nothing above is a plugin source: no tool was evicted.
    assert_eq!(listed(&s, "Companion").await.len(), 6);
}

/// Dispatch overhead against a local callback server. Run with
/// `cargo test -p companiond-tools --release --test tools -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_dispatch() {
    let (s, llm) = server_with_llm().await;
    let plug = plugin().await;
    let url = format!("{}/echo", plug.base);
    let (st, _) = register(&s, json!({"name": "echo", "callback_url": url})).await;
    assert_eq!(st, 200);
    let tool = s
        .state
        .sessions
        .get("Companion")
        .and_then(|m| m.tool("echo"))
        .expect("tool");

    // 1. ToolHub::dispatch alone: callback request + reply handling.
    let n = 2000;
    for _ in 0..50 {
        s.state
            .tools
            .dispatch(&s.state.sessions, &tool, "w", "{}")
            .await;
    }
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        let r = s
            .state
            .tools
            .dispatch(&s.state.sessions, &tool, &format!("c{i}"), r#"{"x":1}"#)
            .await;
        assert!(!r.is_error);
        lat.push(t.elapsed());
    }
    let total = t0.elapsed();
    lat.sort();
    println!(
        "dispatch: n={n} mean={:?} p50={:?} p99={:?} ({:.0}/s)",
        total / n as u32,
        lat[n / 2],
        lat[n * 99 / 100],
        n as f64 / total.as_secs_f64()
    );

    // 2. Whole WebSocket turns with and without one tool call.
    let mut ws = connect(&s, "Companion").await;
    let turns = 200;
    let t0 = Instant::now();
    for _ in 0..turns {
        llm.push(MockReply::Text("plain".into()));
        turn(&mut ws, "hi").await;
    }
    let plain = t0.elapsed() / turns;
    let t0 = Instant::now();
    for _ in 0..turns {
        llm.push(MockReply::ToolCalls(vec![(
            "c".into(),
            "echo".into(),
            "{}".into(),
        )]));
        llm.push(MockReply::Text("plain".into()));
        turn(&mut ws, "hi").await;
    }
    let with_tool = t0.elapsed() / turns;
    println!("turn without tool: {plain:?}; turn with one tool call: {with_tool:?}");
}

//! End-to-end tests of long-term memory: extraction by a loopback model that
//! plays the conversation and the memory roles, recall into chat turns over
//! the real WebSocket, the routes, restart, rename and a cloud-save round trip.

use crate::common::*;

use companiond_memory::extract::{MARK_EXTRACT, MARK_RECONCILE};

fn facts_reply(facts: Value) -> MockReply {
    MockReply::Text(format!("```json\n{}\n```", json!({ "facts": facts })))
}

async fn extract(s: &TestServer, name: &str) -> (u16, Value) {
    s.post_csrf("/api/memory/extract", json!({"character": name}))
        .await
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn mem(s: &TestServer, name: &str, file: &str) -> Value {
    read_json(&s.data.join("memory").join(name).join(file))
}

async fn search(s: &TestServer, query: &str) -> Vec<Value> {
    let (st, b) = s.get(&format!("/api/memory/search?{query}")).await;
    assert_eq!(st, 200, "{b}");
    b["items"].as_array().unwrap().clone()
}

/// Tell the character something and let the model extract `facts` from it.
async fn learn(s: &TestServer, llm: &MockLlm, name: &str, said: &str, facts: Value) -> Value {
    turn(s, name, said).await;
    llm.push_matching(MARK_EXTRACT, facts_reply(facts));
    let (st, b) = extract(s, name).await;
    assert_eq!(st, 200, "{b}");
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_told_in_one_session_are_recalled_in_a_new_session_after_a_restart() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    let b = learn(
        &s,
        &llm,
        C,
        "My cat is called Miso and I live in Berlin.",
        json!([
            {"text": "The user has a cat called Miso", "entity": "master", "importance": 8, "evidence": [1]},
            {"text": "The user lives in Berlin", "importance": 6, "evidence": [1]},
        ]),
    )
    .await;
    assert_eq!(b["added"], 2, "{b}");
    assert_eq!(b["lines_read"], 2, "{b}");

    // Stored in the original's shape, with evidence.
    let facts = mem(&s, C, "facts.json");
    let f = &facts[0];
    assert!(f["id"].as_str().unwrap().starts_with("fact_"), "{f}");
    assert_eq!(f["entity"], "master");
    assert_eq!(f["importance"], 8);
    assert_eq!(f["hash"].as_str().unwrap().len(), 16);
    assert_eq!(f["schema_version"], 2);
    assert_eq!(f["absorbed"], false);
    assert_eq!(f["evidence_count"], 1);
    assert_eq!(f["evidence"][0]["speaker"], "human");
    assert!(f["evidence"][0]["text"].as_str().unwrap().contains("Miso"));
    assert!(f["created_at"].as_str().unwrap().len() >= 19);
    // Nothing new: a second extraction reads no line and asks no model.
    let before = llm.chat_requests().len();
    let (_, b) = extract(&s, C).await;
    assert_eq!(b["lines_read"], 0, "{b}");
    assert_eq!(llm.chat_requests().len(), before);

    // Restart: a second server on a copy of the data dir.
    s.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s2 = memory_server(Some(&s.data)).await;
    let (reply, frames) = turn(&s2, C, "Do you remember my cat's name?").await;
    assert_eq!(reply, "ok", "{frames:?}");
    let system = last_system_prompt(&llm);
    assert!(
        system.contains("The user has a cat called Miso"),
        "{system}"
    );
    assert!(system.contains("recall_memory"), "{system}");
    let last = llm.chat_requests().last().cloned().unwrap();
    let tools: Vec<&str> = last["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(tools, vec!["recall_memory"]);
    let hits = search(&s2, "character=Companion&q=cat").await;
    assert_eq!(hits[0]["text"], "The user has a cat called Miso");
    assert_eq!(hits[0]["kind"], "fact");

    // The model looks further back with the built-in tool, shown as tool frames.
    llm.push(MockReply::ToolCalls(vec![(
        "c1".into(),
        "recall_memory".into(),
        r#"{"query": "Berlin"}"#.into(),
    )]));
    llm.push(MockReply::Text("You live in Berlin.".into()));
    let (reply, frames) = turn(&s2, C, "Where do I live again?").await;
    assert_eq!(reply, "You live in Berlin.");
    let call = frames.iter().find(|f| f["type"] == "tool_call").unwrap();
    assert_eq!(call["name"], "recall_memory");
    let result = frames.iter().find(|f| f["type"] == "tool_result").unwrap();
    assert_eq!(result["is_error"], false, "{result}");
    let req = llm.chat_requests().last().cloned().unwrap();
    let tool_msg = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    let content = tool_msg["content"].as_str().unwrap();
    assert!(content.contains("The user lives in Berlin"), "{content}");
    assert!(content.contains("conversation"), "{content}");

    // A time window with no words: the lines of that day.
    llm.push(MockReply::ToolCalls(vec![(
        "c2".into(),
        "recall_memory".into(),
        json!({"since": "1999-01-01", "until": "1999-12-31"}).to_string(),
    )]));
    llm.push(MockReply::Text("Nothing then.".into()));
    turn(&s2, C, "What did we talk about in 1999?").await;
    let req = llm.chat_requests().last().cloned().unwrap();
    let tool_msg = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool_msg["content"], "No memory matches.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contradiction_replaces_the_old_fact() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    learn(
        &s,
        &llm,
        C,
        "I live in Berlin.",
        json!([{"text": "The user lives in Berlin", "importance": 6, "evidence": [1]}]),
    )
    .await;
    let old_id = mem(&s, C, "facts.json")[0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    turn(&s, C, "I moved to Paris last week!").await;
    llm.push_matching(
        MARK_EXTRACT,
        facts_reply(json!([{"text": "The user lives in Paris", "importance": 6, "evidence": [1]}])),
    );
    llm.push_matching(
        MARK_RECONCILE,
        MockReply::Text(
            json!({"decisions": [{"candidate": 1, "action": "contradicts", "target": "F1"}]})
                .to_string(),
        ),
    );
    let (st, b) = extract(&s, C).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["replaced"], 1, "{b}");
    // The reconciliation saw the old fact.
    let rec = llm
        .chat_requests()
        .into_iter()
        .find(|r| r.to_string().contains(MARK_RECONCILE))
        .unwrap();
    assert!(rec.to_string().contains("F1: The user lives in Berlin"));

    let facts = mem(&s, C, "facts.json");
    assert_eq!(facts.as_array().unwrap().len(), 1);
    assert_eq!(facts[0]["text"], "The user lives in Paris");
    assert_eq!(facts[0]["supersedes"], old_id.as_str());
    let archive = mem(&s, C, "facts_archive.json");
    assert_eq!(archive[0]["id"], old_id.as_str());
    assert_eq!(archive[0]["arbitration_reason"], "contradiction");
    assert_eq!(archive[0]["superseded_by"], facts[0]["id"]);

    assert!(search(&s, "character=Companion&q=Berlin").await.is_empty());
    assert_eq!(search(&s, "character=Companion&q=Paris").await.len(), 1);
    let (_, listed) = s
        .get("/api/memory/facts?character=Companion&archived=true")
        .await;
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["items"][0]["text"], "The user lives in Berlin");

    turn(&s, C, "Where do I live?").await;
    let system = last_system_prompt(&llm);
    assert!(system.contains("The user lives in Paris"), "{system}");
    assert!(!system.contains("Berlin"), "{system}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_removes_a_fact_from_search_and_from_the_next_prompt() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    learn(
        &s,
        &llm,
        C,
        "Please remember: my sister is called Anna. I also like green tea.",
        json!([
            {"text": "The user's sister is called Anna", "importance": 9, "evidence": [1]},
            {"text": "The user likes green tea", "importance": 4, "evidence": [1]},
        ]),
    )
    .await;
    // Very important: it joined the persona.
    let (_, p) = s.get("/api/memory/persona?character=Companion").await;
    assert_eq!(
        p["persona"]["master"]["facts"][0]["text"], "The user's sister is called Anna",
        "{p}"
    );
    turn(&s, C, "Who is Anna?").await;
    let system = last_system_prompt(&llm);
    assert!(
        system.contains("About the user:\n- The user's sister is called Anna"),
        "{system}"
    );

    let facts = mem(&s, C, "facts.json");
    let anna = facts
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["text"].as_str().unwrap().contains("Anna"))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // A mutation needs the CSRF token.
    let (st, _) = s
        .post("/api/memory/forget", json!({"character": C, "id": anna}))
        .await;
    assert_eq!(st, 403);
    let (st, b) = s
        .post_csrf("/api/memory/forget", json!({"character": C, "id": anna}))
        .await;
    assert_eq!(st, 200, "{b}");
    let kinds: Vec<&str> = b["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(kinds, vec!["fact", "persona"]);

    assert!(search(
        &s,
        "character=Companion&q=Anna&kinds=fact,reflection,persona"
    )
    .await
    .is_empty());
    let (_, listed) = s.get("/api/memory/facts?character=Companion").await;
    assert_eq!(listed["total"], 1);
    let (_, p) = s.get("/api/memory/persona?character=Companion").await;
    assert_eq!(p["persona"]["master"]["facts"], json!([]));
    // (Other facts from the same line keep it as their evidence.)
    assert!(mem(&s, C, "facts.json")
        .as_array()
        .unwrap()
        .iter()
        .all(|f| !f["text"].as_str().unwrap().contains("Anna")));
    turn(&s, C, "Who is Anna?").await;
    let system = last_system_prompt(&llm);
    assert!(!system.contains("Anna"), "{system}");
    assert!(system.contains("green tea"), "{system}");
    let (st, b) = s
        .post_csrf("/api/memory/forget", json!({"character": C, "id": anna}))
        .await;
    assert_eq!(st, 404, "{b}");

    // Correcting keeps the old version in the archive.
    let tea = mem(&s, C, "facts.json")[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, b) = s
        .post_csrf(
            "/api/memory/correct",
            json!({"character": C, "id": tea, "text": "The user likes jasmine tea", "importance": 5}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["kind"], "fact");
    assert_eq!(b["item"]["corrected_from"], tea.as_str());
    let archive = mem(&s, C, "facts_archive.json");
    assert_eq!(archive[0]["arbitration_reason"], "user_correction");
    assert_eq!(search(&s, "character=Companion&q=jasmine").await.len(), 1);
    assert!(search(&s, "character=Companion&q=green").await.is_empty());
}

async fn set_toggle(s: &TestServer, path: &str, on: bool) {
    let (st, b) = s.post(path, json!({"enabled": on})).await;
    assert_eq!(st, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_toggles_stop_extraction_and_quiet_conversations_are_extracted() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    s.state
        .provided::<companiond_memory::MemoryRuntime>()
        .unwrap()
        .extract
        .configure(Duration::from_millis(200), 50);
    let extraction_requests = |llm: &MockLlm| {
        llm.chat_requests()
            .iter()
            .filter(|r| r.to_string().contains(MARK_EXTRACT))
            .count()
    };

    for (off, on) in [
        (
            "/api/memory/powerful_memory_config",
            "/api/memory/review_config",
        ),
        (
            "/api/memory/review_config",
            "/api/memory/powerful_memory_config",
        ),
    ] {
        set_toggle(&s, off, false).await;
        set_toggle(&s, on, true).await;
        let (st, b) = extract(&s, C).await;
        assert_eq!(st, 409, "{b}");
        assert_eq!(b["code"], "MEMORY_EXTRACTION_DISABLED");
        turn(&s, C, "I play the violin.").await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(extraction_requests(&llm), 0);
        assert_eq!(mem(&s, C, "facts.json"), json!([]));
    }

    // Both on: the conversation goes quiet and its facts are extracted.
    set_toggle(&s, "/api/memory/review_config", true).await;
    set_toggle(&s, "/api/memory/powerful_memory_config", true).await;
    llm.push_matching(
        MARK_EXTRACT,
        facts_reply(
            json!([{"text": "The user plays the violin", "importance": 6, "evidence": [1]}]),
        ),
    );
    let t = Instant::now();
    turn(&s, C, "Also the piano, a little.").await;
    assert!(t.elapsed() < Duration::from_millis(2000));
    wait_for("the quiet extraction", || {
        mem(&s, C, "facts.json")
            .as_array()
            .is_some_and(|a| a.len() == 1)
    })
    .await;
    assert_eq!(extraction_requests(&llm), 1);
    // The lines of the switched-off period were read too (they were not lost).
    let req = llm
        .chat_requests()
        .into_iter()
        .find(|r| r.to_string().contains(MARK_EXTRACT))
        .unwrap();
    assert!(req.to_string().contains("I play the violin."));
    assert!(req.to_string().contains("Also the piano"));

    // A failing memory model: the chat goes on; the lines are read again later.
    llm.push_matching(MARK_EXTRACT, MockReply::Status(500, "boom".into()));
    s.state
        .provided::<companiond_memory::MemoryRuntime>()
        .unwrap()
        .extract
        .configure(Duration::from_secs(3600), 50);
    let (reply, _) = turn(&s, C, "My birthday is on May 3rd.").await;
    assert_eq!(reply, "ok");
    let (st, b) = extract(&s, C).await;
    assert_eq!(st, 502, "{b}");
    assert_eq!(b["code"], "MEMORY_MODEL_FAILED");
    llm.push_matching(
        MARK_EXTRACT,
        facts_reply(json!([{"text": "The user's birthday is on May 3rd", "importance": 8, "evidence": [1]}])),
    );
    let (st, b) = extract(&s, C).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["lines_read"], 2, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_follows_a_rename() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    learn(
        &s,
        &llm,
        C,
        "My cat is called Miso.",
        json!([{"text": "The user has a cat called Miso", "importance": 7, "evidence": [1]}]),
    )
    .await;
    let (st, b) = s
        .post(
            "/api/characters/profile/Companion/rename",
            json!({"new_name": "Mika"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(search(&s, "character=Mika&q=Miso").await.len(), 1);
    let (st, _) = s.get("/api/memory/search?character=Companion&q=Miso").await;
    assert_eq!(st, 404);
    turn(&s, "Mika", "Remember my cat?").await;
    assert!(last_system_prompt(&llm).contains("Miso"));
    // The index keeps its lines after the move (and the renamed history).
    let lines = search(&s, "character=Mika&q=Miso&kinds=line").await;
    assert!(!lines.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_save_round_trip_keeps_the_memory_and_reindexes_it() {
    let families: &[companiond_core::server::Family] =
        &[companiond_memory::FAMILY, companiond_cloudsave::FAMILY];
    let llm = MockLlm::start("ok").await;
    let s = server_with(families, None).await;
    s.configure_llm(&llm.base()).await;
    learn(
        &s,
        &llm,
        C,
        "My cat is called Miso.",
        json!([{"text": "The user has a cat called Miso", "importance": 7, "evidence": [1]}]),
    )
    .await;
    let (st, b) = s
        .post("/api/cloudsave/character/Companion/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{b}");

    // Another device with its own memory of a character of the same name.
    let cloud = s.data.join("cloud").to_string_lossy().into_owned();
    let other = TestServer::start_with(
        families,
        TestOptions {
            edit: Some(Box::new(move |o| o.cloud = cloud)),
            ..Default::default()
        },
    )
    .await;
    other.configure_llm(&llm.base()).await;
    learn(
        &other,
        &llm,
        C,
        "I have a dog named Rex.",
        json!([{"text": "The user has a dog named Rex", "importance": 7, "evidence": [1]}]),
    )
    .await;
    assert_eq!(search(&other, "character=Companion&q=Rex").await.len(), 1);
    let (st, b) = other
        .post(
            "/api/cloudsave/character/Companion/download",
            json!({"overwrite": true, "force": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        mem(&other, C, "facts.json")[0]["text"],
        "The user has a cat called Miso"
    );
    assert!(search(&other, "character=Companion&q=Rex").await.is_empty());
    assert_eq!(search(&other, "character=Companion&q=Miso").await.len(), 1);
    turn(&other, C, "Do you know my pet?").await;
    let system = last_system_prompt(&llm);
    assert!(system.contains("Miso"), "{system}");
    assert!(!system.contains("Rex"), "{system}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_check_their_input_and_page() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    let facts: Vec<Value> = (1..=7)
        .map(|i| json!({"text": format!("The user owns plant number {i}"), "evidence": [1]}))
        .collect();
    let b = learn(&s, &llm, C, "I have seven plants.", Value::Array(facts)).await;
    assert_eq!(b["added"], 7, "{b}");

    let (st, b) = s
        .get("/api/memory/facts?character=Companion&limit=3&offset=2")
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["total"], 7);
    assert_eq!(b["items"].as_array().unwrap().len(), 3);
    let (_, b) = s
        .get("/api/memory/facts?character=Companion&q=plant&limit=2")
        .await;
    assert_eq!(b["total"], 7);
    assert_eq!(b["items"].as_array().unwrap().len(), 2);
    let (_, b) = s
        .get("/api/memory/facts?character=Companion&until=2000-01-01")
        .await;
    assert_eq!(b["total"], 0);
    let (_, b) = s
        .get("/api/memory/facts?character=Companion&since=2000-01-01")
        .await;
    assert_eq!(b["total"], 7);
    let (st, b) = s.get("/api/memory/reflections?character=Companion").await;
    assert_eq!(st, 200, "{b}");

    for bad in [
        "/api/memory/facts",
        "/api/memory/facts?character=Companion&limit=0",
        "/api/memory/facts?character=Companion&limit=201",
        "/api/memory/facts?character=Companion&limit=abc",
        "/api/memory/facts?character=Companion&offset=-1",
        "/api/memory/facts?character=Companion&offset=100001",
        "/api/memory/facts?character=Companion&since=yesterday",
        "/api/memory/facts?character=Companion&since=2024-02-01&until=2024-01-01",
        "/api/memory/facts?character=Companion&archived=maybe",
        "/api/memory/search?character=Companion&kinds=bogus",
        "/api/memory/search?character=Companion&limit=101",
        "/api/memory/search?character=Companion&since=1e400",
    ] {
        let (st, b) = s.get(bad).await;
        assert_eq!(st, 400, "{bad}: {b}");
        assert_eq!(b["success"], false, "{bad}");
    }
    let long = "x".repeat(1001);
    let (st, _) = s
        .get(&format!("/api/memory/search?character=Companion&q={long}"))
        .await;
    assert_eq!(st, 400);
    for unknown in [
        "/api/memory/facts?character=Nobody",
        "/api/memory/search?character=Nobody&q=x",
        "/api/memory/persona?character=..%2Fconfig",
    ] {
        let (st, _) = s.get(unknown).await;
        assert_eq!(st, 404, "{unknown}");
    }
    for (path, body) in [
        ("/api/memory/forget", json!({"character": C})),
        ("/api/memory/forget", json!({"character": C, "id": 5})),
        (
            "/api/memory/correct",
            json!({"character": C, "id": "x", "text": ""}),
        ),
        (
            "/api/memory/correct",
            json!({"character": C, "id": "x", "text": "y", "importance": 11}),
        ),
        (
            "/api/memory/correct",
            json!({"character": C, "id": "x", "text": "y", "entity": "cat"}),
        ),
        (
            "/api/memory/correct",
            json!({"character": C, "id": "x", "text": "y".repeat(2001)}),
        ),
        ("/api/memory/extract", json!([])),
        ("/api/memory/extract", json!({})),
    ] {
        let (st, b) = s.post_csrf(path, body.clone()).await;
        assert_eq!(st, 400, "{path} {body}: {b}");
    }
    let (st, _) = s
        .post_csrf(
            "/api/memory/correct",
            json!({"character": C, "id": "nope", "text": "y"}),
        )
        .await;
    assert_eq!(st, 404);
    let (st, _) = s
        .post_csrf("/api/memory/extract", json!({"character": "Nobody"}))
        .await;
    assert_eq!(st, 404);

    let (_, doc) = s.get("/openapi.json").await;
    for p in [
        "/api/memory/facts",
        "/api/memory/reflections",
        "/api/memory/persona",
        "/api/memory/search",
        "/api/memory/correct",
        "/api/memory/forget",
        "/api/memory/extract",
    ] {
        assert!(doc["paths"][p].is_object(), "{p} missing from openapi");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflections_summarise_several_facts() {
    let llm = MockLlm::start("ok").await;
    let s = memory_server(None).await;
    s.configure_llm(&llm.base()).await;
    llm.push_matching(
        companiond_memory::extract::MARK_REFLECT,
        MockReply::Text(
            json!({"reflections": [
                {"text": "The user loves being outdoors", "entity": "master", "facts": [1, 2, 3]},
                {"text": "Unsupported", "facts": [1]},
            ]})
            .to_string(),
        ),
    );
    let facts: Vec<Value> = ["hiking", "climbing", "camping", "cycling", "kayaking"]
        .iter()
        .map(|h| json!({"text": format!("The user enjoys {h}"), "evidence": [1]}))
        .collect();
    let b = learn(
        &s,
        &llm,
        C,
        "I do a lot of sports outside.",
        Value::Array(facts),
    )
    .await;
    assert_eq!(b["reflections"], 1, "{b}");
    let r = mem(&s, C, "reflections.json");
    assert_eq!(r[0]["text"], "The user loves being outdoors");
    assert_eq!(r[0]["status"], "pending");
    assert_eq!(r[0]["source_fact_ids"].as_array().unwrap().len(), 3);
    let absorbed = mem(&s, C, "facts.json")
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["absorbed"] == true)
        .count();
    assert_eq!(absorbed, 3);
    let hits = search(&s, "character=Companion&q=outdoors&kinds=reflection").await;
    assert_eq!(hits.len(), 1);
    // Forgetting a source fact removes it from the reflection's sources.
    let src = r[0]["source_fact_ids"][0].as_str().unwrap().to_string();
    let (st, _) = s
        .post_csrf("/api/memory/forget", json!({"character": C, "id": src}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        mem(&s, C, "reflections.json")[0]["source_fact_ids"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

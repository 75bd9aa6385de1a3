//! Issue 22's heavy-user rows, on the real binary (bench profile).
//!
//! `cargo bench --bench heavy [-- ROW ...]` writes the heavy-user data dir
//! (benches/heavy_user), starts `companiond serve` on it and, per row, prints
//! the median / p90 of ≥ 30 calls, the first call and the answer size.
//! Rows: cloudsave_summary, tools, pngtuber_models, recent_files, token_usage,
//! leaderboard, history_append, recent_save, restart. `HEAVY_BIN=/path/to/companiond` measures another
//! build (e.g. the previous release) on the same data; `HEAVY_CALLS=n` sets the
//! number of calls (default 30).
//!
//! Caches keep values only for files unchanged for 2 s (the racy window of
//! file clocks), so the rows start 2.5 s after the data dir was written, once
//! the server's start-up background work (index catch-up) has settled, and
//! after a `sync` has written the generated data back ([`write_back`]).

#[path = "heavy_user/mod.rs"]
mod heavy_user;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROWS: &[&str] = &[
    "cloudsave_summary",
    "tools",
    "pngtuber_models",
    "recent_files",
    "token_usage",
    "leaderboard",
    "history_append",
    "recent_save",
    "restart",
];

/// The CSRF token the server is started with (guarded routes need it).
const CSRF: &str = "heavy-bench-token";

fn bin() -> String {
    std::env::var("HEAVY_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_companiond").to_string())
}

fn calls() -> usize {
    std::env::var("HEAVY_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

/// One HTTP/1.1 request on a fresh connection: (status, body bytes).
fn request(addr: &str, method: &str, path: &str, body: Option<&str>) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    let _ = s.set_nodelay(true);
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nX-CSRF-Token: {CSRF}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("send");
    s.write_all(body.as_bytes()).expect("send");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
        .unwrap_or(out.len());
    let status = std::str::from_utf8(&out[..split.min(12)])
        .ok()
        .and_then(|h| h.get(9..12))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out[split..].to_vec())
}

struct Server {
    child: Child,
    addr: String,
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

fn start(data: &Path, bundle: &Path) -> Server {
    let mut child = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--csrf-token", CSRF])
        .arg("--data-dir")
        .arg(data)
        .arg("--bundle-dir")
        .arg(bundle)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("line");
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_string();
    Server { child, addr }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Time `n` GETs of `path` after one first (cold) call; prints the row.
fn row(name: &str, size: &str, addr: &str, path: &str) {
    let t = Instant::now();
    let (st, body) = request(addr, "GET", path, None);
    let first = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(st, 200, "{path}: {}", String::from_utf8_lossy(&body));
    let mut ms = Vec::new();
    for _ in 0..calls() {
        let t = Instant::now();
        let (st, b) = request(addr, "GET", path, None);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(st, 200);
        assert_eq!(b.len(), body.len(), "{path}: the answer changed");
    }
    let n = ms.len();
    println!(
        "{name:<18} {size:<46} GET {path:<52} median {:>7.2} ms  p90 {:>7.2} ms  first {:>8.2} ms  ({n} calls, {} bytes)",
        pct(&mut ms, 0.5),
        pct(&mut ms, 0.9),
        first,
        body.len()
    );
}

/// One POST that must answer 200 (setting up a row).
fn post_ok(addr: &str, path: &str, body: &serde_json::Value) {
    let (st, b) = request(addr, "POST", path, Some(&body.to_string()));
    assert_eq!(st, 200, "{path}: {}", String::from_utf8_lossy(&b));
}

/// Time `calls()` POSTs of the bodies `body(i)` to `path`; prints the row.
fn post_row(name: &str, size: &str, addr: &str, path: &str, body: impl Fn(usize) -> String) {
    let mut ms = Vec::new();
    for i in 0..calls() {
        let b = body(i);
        let t = Instant::now();
        let (st, answer) = request(addr, "POST", path, Some(&b));
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(st, 200, "{path}: {}", String::from_utf8_lossy(&answer));
    }
    let n = ms.len();
    println!(
        "{name:<18} {size:<46} POST {path:<51} median {:>7.2} ms  p90 {:>7.2} ms  ({n} calls)",
        pct(&mut ms, 0.5),
        pct(&mut ms, 0.9),
    );
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
}

fn rchar(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    s.lines()
        .find(|l| l.starts_with("rchar:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU seconds the process has used.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Wait until the server's start-up background work (the memory index
/// catch-up: it writes every character's time index, which changes the
/// cloud-save answer) is over: < 5 % of a core over 500 ms; at most 10 min.
fn settle(s: &Server) {
    let pid = s.child.id();
    let t = Instant::now();
    let first = cpu_seconds(pid).unwrap_or(0.0);
    let mut last = first;
    while t.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(500));
        let Some(now) = cpu_seconds(pid) else { break };
        let busy = now - last;
        last = now;
        if busy < 0.025 {
            break;
        }
    }
    println!(
        "start-up background work: settled after {:.1} s ({:.1} s of CPU)",
        t.elapsed().as_secs_f64(),
        last - first
    );
}

/// Write back what the generator and the start-up work left in the page
/// cache: on ext4 (data=ordered) an fsync commits the journal, which first
/// writes out every file's newly allocated dirty data, so without this the
/// first rows that sync (history_append, recent_save) would pay for writing
/// out hundreds of megabytes of generated library.
fn write_back() {
    let t = Instant::now();
    let ok = Command::new("sync").status().is_ok_and(|s| s.success());
    println!(
        "write-back of the generated data: {:.1} s{}",
        t.elapsed().as_secs_f64(),
        if ok { "" } else { " (sync failed)" }
    );
}

fn restart(data: &Path, bundle: &Path) {
    let mut ms = Vec::new();
    let mut read = Vec::new();
    for _ in 0..calls().max(20) {
        let t = Instant::now();
        let s = start(data, bundle);
        loop {
            if request_ok(&s.addr) {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        if let Some(r) = rchar(s.child.id()) {
            read.push(r as f64 / 1024.0);
        }
    }
    let n = ms.len();
    println!(
        "{:<18} {:<46} spawn → first 200 of /api/system/status   median {:>7.2} ms  p90 {:>7.2} ms  max {:>7.2} ms  ({n} runs; read at start: median {:.0} KiB)",
        "restart",
        "3,000 characters + the rest of the library",
        pct(&mut ms, 0.5),
        pct(&mut ms, 0.9),
        pct(&mut ms, 1.0),
        if read.is_empty() { 0.0 } else { pct(&mut read, 0.5) },
    );
}

fn request_ok(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = write!(
        s,
        "GET /api/system/status HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if std::env::args().any(|a| a == "--list") {
        for r in ROWS {
            println!("heavy::{r}: benchmark");
        }
        return;
    }
    let want = |r: &str| args.is_empty() || args.iter().any(|a| r.contains(a.as_str()));
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let bundle = dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).expect("bundle");
    let sizes = heavy_user::Sizes::ISSUE_22;
    let written = Instant::now();
    heavy_user::generate(&data, sizes);
    println!("binary: {}", bin());
    println!("load before: {}", load().trim());
    if want("restart") {
        // A first start migrates the stores of earlier releases; then restarts.
        drop(start(&data, &bundle));
        restart(&data, &bundle);
    }
    let s = start(&data, &bundle);
    if let Some(wait) = Duration::from_millis(2_500).checked_sub(written.elapsed()) {
        std::thread::sleep(wait);
    }
    settle(&s);
    write_back();
    let chars = format!("{} characters", sizes.characters);
    if want("cloudsave_summary") {
        row(
            "cloudsave_summary",
            &format!("{chars}, {} cloud units", sizes.cloud_units),
            &s.addr,
            "/api/cloudsave/summary",
        );
    }
    if want("tools") {
        let description = "Looks things up for the user. ".repeat(77);
        let body = serde_json::json!({
            "name": "lookup", "description": description, "source": "plugin:bench",
            "callback_url": "http://127.0.0.1:9/cb", "role": null,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        });
        post_ok(&s.addr, "/api/tools/register", &body);
        row(
            "tools",
            &format!("one role-less tool over {chars}"),
            &s.addr,
            "/api/tools",
        );
    }
    if want("pngtuber_models") {
        row(
            "pngtuber_models",
            &format!("{} packages", sizes.pngtuber_packages),
            &s.addr,
            "/api/model/pngtuber/models",
        );
    }
    if want("recent_files") {
        row("recent_files", &chars, &s.addr, "/api/memory/recent_files");
    }
    if want("token_usage") {
        row(
            "token_usage",
            &format!("{} calls over {} days", sizes.usage_calls, sizes.usage_days),
            &s.addr,
            "/api/token-usage?days=7",
        );
    }
    if want("leaderboard") {
        let n = sizes.leaderboard_rows;
        row(
            "leaderboard top 10",
            &format!("{n} scores"),
            &s.addr,
            "/api/game/badminton/leaderboard?limit=10",
        );
        row(
            "leaderboard page",
            &format!("{n} scores, offset 20,000"),
            &s.addr,
            "/api/game/badminton/leaderboard?limit=10&offset=20000",
        );
        row(
            "leaderboard +best",
            &format!("{n} scores, with the caller's best"),
            &s.addr,
            "/api/game/badminton/leaderboard?limit=10&persona_name=Character%200007",
        );
    }
    if want("history_append") {
        // One character's history at 10 lines, at the fold's bound (a folded
        // history never holds more: docs/memory.md § Folding) and grown to
        // 10,000 lines (a history before the fold); each icebreaker context
        // line is one append (the chat turn's append path).
        let bound = companiond_memory::fold::MAX_ENTRIES;
        for (k, lines) in [(0, 10), (2, bound), (3, 10_000)] {
            let name = heavy_user::character_name(k);
            let path = data.join("memory").join(&name).join("recent.json");
            std::fs::write(&path, heavy_user::long_history(lines)).expect("history");
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let session = format!("bench-{k}");
            let start = serde_json::json!({"persona_name": name, "session_id": session});
            post_ok(&s.addr, "/api/icebreaker/route/start", &start);
            post_row(
                "history_append",
                &format!("{lines} lines ({size} bytes)"),
                &s.addr,
                "/api/icebreaker/context",
                |i| {
                    serde_json::json!({"persona_name": name, "session_id": session, "role": "user",
                        "text": format!("bench line {i}"), "request_id": format!("bench-{k}-{i}")})
                    .to_string()
                },
            );
            let stored: Vec<serde_json::Value> =
                serde_json::from_slice(&std::fs::read(&path).expect("read back")).expect("json");
            assert_eq!(stored.len(), lines + calls(), "every append landed");
        }
    }
    if want("recent_save") {
        // The memory browser's save of a 10,000-entry history: read the
        // tokens (not timed), then post the edited history with them.
        let name = heavy_user::character_name(1);
        let path = data.join("memory").join(&name).join("recent.json");
        std::fs::write(&path, heavy_user::long_history(10_000)).expect("history");
        let file = format!("recent_{name}.json");
        let read_url = format!(
            "/api/memory/recent_file?filename={}",
            file.replace(' ', "%20")
        );
        let mut ms = Vec::new();
        let mut body_len = 0;
        for round in 0..calls() {
            let (st, b) = request(&s.addr, "GET", &read_url, None);
            assert_eq!(st, 200, "{}", String::from_utf8_lossy(&b));
            let tokens: serde_json::Value = serde_json::from_slice(&b).expect("json");
            let chat: Vec<serde_json::Value> = (0..10_000)
                .map(|i| {
                    serde_json::json!({"role": if i % 2 == 0 { "human" } else { "ai" },
                        "text": format!("{round:02}{i:05} {}", "so how was your day? ".repeat(9)),
                        "source_index": i})
                })
                .collect();
            let body = serde_json::json!({"filename": file, "chat": chat,
                "fingerprint": tokens["fingerprint"], "identity_token": tokens["identity_token"]})
            .to_string();
            body_len = body.len();
            let t = Instant::now();
            let (st, answer) =
                request(&s.addr, "POST", "/api/memory/recent_file/save", Some(&body));
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(st, 200, "{}", String::from_utf8_lossy(&answer));
        }
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        println!(
            "{:<18} {:<46} POST {:<51} median {:>7.2} ms  p90 {:>7.2} ms  ({} calls, body {body_len} bytes)",
            "recent_save",
            format!("10,000 entries ({size} bytes stored)"),
            "/api/memory/recent_file/save",
            pct(&mut ms, 0.5),
            pct(&mut ms, 0.9),
            ms.len(),
        );
    }
    println!("load after: {}", load().trim());
}

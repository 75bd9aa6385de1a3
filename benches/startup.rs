//! Cold start and idle memory of the real binary.
//!
//! `cargo bench --bench startup` builds companiond in the bench (release) profile,
//! then N times: spawns `companiond serve --listen 127.0.0.1:0` on a fresh data dir,
//! measures the time from spawn to the first `200` of `GET /api/system/status`,
//! reads the idle RSS from /proc after one second, and stops it with SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_companiond");
const RUNS: usize = 20;

fn status_200(addr: &str) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
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

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("startup: benchmark");
        return;
    }
    let mut dir: Option<tempfile::TempDir> = None;
    let mut starts = Vec::new();
    let mut warm = Vec::new();
    let mut rss = Vec::new();
    for run in 0..RUNS * 2 {
        // Even runs start on a fresh data dir, odd runs restart on the previous one.
        if run % 2 == 0 {
            dir = Some(tempfile::tempdir().expect("tempdir"));
        }
        let Some(dir) = dir.as_ref() else { return };
        let t0 = Instant::now();
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--bundle-dir")
            .arg(dir.path())
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
        while !status_200(&addr) {
            std::thread::sleep(Duration::from_micros(200));
        }
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        if run % 2 == 0 {
            starts.push(ms);
        } else {
            warm.push(ms);
        }
        std::thread::sleep(Duration::from_secs(1));
        if let Some(k) = rss_kib(child.id()) {
            rss.push(k as f64 / 1024.0);
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let _ = child.wait();
    }
    println!("cold start to first 200 of /api/system/status, {RUNS} runs each:");
    println!(
        "  fresh data dir (creates the config and Companion's memory unit): median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        percentile(&mut starts, 0.5),
        percentile(&mut starts, 0.9),
        percentile(&mut starts, 1.0)
    );
    println!(
        "  existing data dir: median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        percentile(&mut warm, 0.5),
        percentile(&mut warm, 0.9),
        percentile(&mut warm, 1.0)
    );
    if !rss.is_empty() {
        println!(
            "idle RSS after 1 s: median {:.1} MiB, max {:.1} MiB",
            percentile(&mut rss, 0.5),
            percentile(&mut rss, 1.0)
        );
    }
}

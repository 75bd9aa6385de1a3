//! Heavy-user jukebox benchmark (harness = false):
//!
//!   cargo bench -p companiond-jukebox --bench heavy
//!
//! Writes a library of `JUKEBOX_HEAVY_SONGS` (50,000) songs and `JUKEBOX_HEAVY_ACTIONS`
//! (2,500) actions directly in the on-disk format of the current release
//! (`<data>/jukebox/config.json`, every song bound to one action; the action files
//! exist), then runs the server in a child process (this executable with
//! `JUKEBOX_BENCH_CHILD` set) so that its RSS is the server's alone, and measures,
//! each as a median over `JUKEBOX_HEAVY_CALLS` (30) calls:
//!
//! 1. each edit: add song, add action, edit metadata, bind, delete;
//! 2. the server's RSS: peak under that load, and 2 s after it ends;
//! 3. restart: the first `GET /config/summary` of a new process on that data dir;
//! 4. `GET /config` cached, and the first `GET /config` after a change;
//! 5. a `JUKEBOX_HEAVY_UPLOAD_MB` (512) MiB song upload vs `md5sum`, peak RSS of a
//!    fresh server (medians of 3).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use companiond_core::testkit::{TestOptions, TestServer};
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn pct(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[(((v.len() - 1) as f64) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A field of /proc/<pid>/status in MiB.
fn proc_mib(pid: u32, key: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// A tiny valid WAV whose content (and MD5) depends on `seed`.
fn small_wav(seed: u64) -> Vec<u8> {
    let data: Vec<u8> = (0..64u64)
        .flat_map(|i| (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i).to_le_bytes())
        .collect();
    let mut h = Vec::new();
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&((data.len() + 36) as u32).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&44100u32.to_le_bytes());
    h.extend_from_slice(&(44100u32 * 4).to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&(data.len() as u32).to_le_bytes());
    h.extend_from_slice(&data);
    h
}

fn md5_of(i: u64, salt: u64) -> String {
    format!(
        "{:016x}{:016x}",
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt,
        i ^ 0x5555
    )
}

/// Write the heavy user's library in the current release's format (fast: one
/// serialisation, no requests). Returns the size of config.json.
fn generate(data: &Path, songs: u64, actions: u64) -> u64 {
    let root = data.join("jukebox");
    std::fs::create_dir_all(root.join("songs")).unwrap();
    std::fs::create_dir_all(root.join("actions")).unwrap();
    let mut song_map = serde_json::Map::new();
    let mut action_map = serde_json::Map::new();
    let mut bindings = serde_json::Map::new();
    let mut song_idx = serde_json::Map::new();
    let mut action_idx = serde_json::Map::new();
    for a in 0..actions {
        let id = format!("dance_{a:05}");
        let fmt = if a % 5 == 0 { "bvh" } else { "vmd" };
        let md5 = md5_of(a, 0xAAAA);
        std::fs::write(
            root.join(format!("actions/{id}.{fmt}")),
            b"Vocaloid Motion Data",
        )
        .unwrap();
        action_map.insert(
            id.clone(),
            json!({"id": id, "name": format!("Dance number {a}"), "file": format!("actions/{id}.{fmt}"),
                "fileMd5": md5, "format": fmt, "uploadDate": "2025-01-01T00:00:00Z",
                "visible": true, "missing": false, "isBuiltin": false}),
        );
        action_idx.insert(md5, json!(id));
    }
    for i in 0..songs {
        let id = format!("song_{i:05}");
        let md5 = md5_of(i, 0x1234);
        let action = format!("dance_{:05}", i % actions.max(1));
        song_map.insert(
            id.clone(),
            json!({"id": id, "name": format!("Song number {i}"), "artist": format!("Artist {}", i % 997),
                "audio": format!("songs/{id}.mp3"), "audioMd5": md5, "audioFormat": "mp3",
                "visible": i % 10 != 0, "uploadDate": "2025-01-01T00:00:00Z",
                "defaultAction": if actions > 0 { action.clone() } else { String::new() },
                "isBuiltin": false}),
        );
        if actions > 0 {
            bindings.insert(id.clone(), json!({action: {"offset": (i % 100) as i64}}));
        }
        song_idx.insert(md5, json!(id));
    }
    let doc = json!({"version": "1.0", "songs": song_map, "actions": action_map, "bindings": bindings,
        "md5Index": {"songs": song_idx, "actions": action_idx},
        "builtinOverrides": {"songs": {}, "actions": {}}});
    let bytes = serde_json::to_vec_pretty(&doc).unwrap();
    std::fs::write(root.join("config.json"), &bytes).unwrap();
    bytes.len() as u64
}

// ------------------------------------------------------------------ child server

/// The jukebox with the idle unload after `JUKEBOX_HEAVY_IDLE_SECS` (3 s;
/// the product's default is 120 s) so that the idle figure comes quickly.
fn start_idle(s: &companiond_core::AppState) {
    let idle = env_num("JUKEBOX_HEAVY_IDLE_SECS", 3);
    companiond_jukebox::start_with(
        s,
        companiond_jukebox::Limits::default(),
        Duration::from_secs(idle),
    )
}

fn child_main(spec: &str) {
    let (data, bundle) = spec.split_once('|').expect("data|bundle");
    let (data, bundle) = (PathBuf::from(data), PathBuf::from(bundle));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let s = TestServer::start_with(
            &[companiond_core::server::Family {
                api: companiond_jukebox::api,
                start: start_idle,
            }],
            TestOptions {
                edit: Some(Box::new(move |o| {
                    o.data_dir = data;
                    o.bundle_dir = bundle;
                })),
                ..TestOptions::default()
            },
        )
        .await;
        println!("{}", s.base);
        std::io::stdout().flush().unwrap();
        // Serve until the parent closes stdin.
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        })
        .await;
        drop(s);
    });
}

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(data: &Path, bundle: &Path) -> Server {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(
                "JUKEBOX_BENCH_CHILD",
                format!("{}|{}", data.display(), bundle.display()),
            )
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        Server {
            child,
            base: line.trim().to_string(),
        }
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn url(&self, p: &str) -> String {
        format!("{}/api/jukebox{p}", self.base)
    }
    fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------ measurements

async fn upload_song(http: &reqwest::Client, s: &Server, name: &str, bytes: Vec<u8>) -> Value {
    let form = Form::new().part("files", Part::bytes(bytes).file_name(name.to_string()));
    let r = http
        .post(s.url("/songs"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn upload_action(http: &reqwest::Client, s: &Server, name: &str, bytes: Vec<u8>) -> Value {
    let form = Form::new().part("files", Part::bytes(bytes).file_name(name.to_string()));
    let r = http
        .post(s.url("/actions"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

fn report(label: &str, mut v: Vec<Duration>) {
    let p90 = pct(&v, 0.9);
    let max = pct(&v, 1.0);
    let med = median(&mut v);
    println!(
        "  {label:<28} median {:>8.2} ms  p90 {:>8.2} ms  max {:>8.2} ms  (n={})",
        ms(med),
        ms(p90),
        ms(max),
        v.len()
    );
}

async fn run() {
    let songs = env_num("JUKEBOX_HEAVY_SONGS", 50_000);
    let actions = env_num("JUKEBOX_HEAVY_ACTIONS", 2_500);
    let calls = env_num("JUKEBOX_HEAVY_CALLS", 30) as usize;
    let upload_mb = env_num("JUKEBOX_HEAVY_UPLOAD_MB", 512);
    let work = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let data = work.path().join("data");
    let bundle = work.path().join("bundle");
    std::fs::create_dir_all(bundle.join("static")).unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("heavy jukebox bench: {songs} songs, {actions} actions, {calls} calls per figure; loadavg {}", load.trim());
    let t = Instant::now();
    let size = generate(&data, songs, actions);
    println!(
        "generated config.json: {:.1} MiB in {:.2} s",
        size as f64 / (1 << 20) as f64,
        t.elapsed().as_secs_f64()
    );
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // 3 (first): restart on the fresh old-format data dir: the first start migrates.
    let s = Server::start(&data, &bundle);
    let t = Instant::now();
    let r = http.get(s.url("/config/summary")).send().await.unwrap();
    let first: Value = r.json().await.unwrap();
    println!(
        "first summary on the current release's data dir (migration included): {:.1} ms, {} songs; RSS {:.1} MiB",
        ms(t.elapsed()),
        first["songCount"],
        proc_mib(s.pid(), "VmRSS:")
    );
    let songs_before = first["songCount"].as_u64().unwrap_or(0);

    // 1. edits, each a median over `calls`.
    reset_peak(s.pid());
    println!(
        "edits at {songs_before} songs / {} actions:",
        first["actionCount"]
    );
    let mut add_song = Vec::new();
    let mut new_songs = Vec::new();
    for i in 0..calls as u64 {
        let t = Instant::now();
        let v = upload_song(
            &http,
            &s,
            &format!("bench_new_{i}.wav"),
            small_wav(1_000_000 + i),
        )
        .await;
        add_song.push(t.elapsed());
        new_songs.push(v["song"]["id"].as_str().unwrap().to_string());
    }
    report("add song (POST /songs)", add_song);
    let mut add_action = Vec::new();
    let mut new_actions = Vec::new();
    for i in 0..calls as u64 {
        let mut vmd = b"Vocaloid Motion Data 0002".to_vec();
        vmd.extend_from_slice(&(2_000_000 + i).to_le_bytes());
        let t = Instant::now();
        let v = upload_action(&http, &s, &format!("bench_new_{i}.vmd"), vmd).await;
        add_action.push(t.elapsed());
        new_actions.push(v["action"]["id"].as_str().unwrap().to_string());
    }
    report("add action (POST /actions)", add_action);
    let mut meta = Vec::new();
    for i in 0..calls {
        let id = format!("song_{:05}", (i * 997) as u64 % songs.max(1));
        let t = Instant::now();
        let r = http
            .put(s.url(&format!("/songs/{id}/metadata")))
            .form(&[("name", format!("Renamed {i}")), ("artist", "Bench".into())])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        meta.push(t.elapsed());
    }
    report("edit metadata (PUT)", meta);
    let mut bind = Vec::new();
    for (i, sid) in new_songs.iter().enumerate() {
        let aid = &new_actions[i % new_actions.len()];
        let t = Instant::now();
        let r = http
            .post(s.url("/bind"))
            .form(&[
                ("songId", sid.as_str()),
                ("actionId", aid.as_str()),
                ("offset", "5"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        bind.push(t.elapsed());
    }
    report("bind (POST /bind)", bind);
    let mut del = Vec::new();
    for sid in &new_songs {
        let t = Instant::now();
        let r = http
            .delete(s.url(&format!("/songs/{sid}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        del.push(t.elapsed());
    }
    report("delete song (DELETE)", del);
    let mut del_a = Vec::new();
    for aid in &new_actions {
        let t = Instant::now();
        let r = http
            .delete(s.url(&format!("/actions/{aid}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        del_a.push(t.elapsed());
    }
    report("delete action (DELETE)", del_a);

    // 4. GET /config cached, then after a change.
    let mut cached = Vec::new();
    let mut body_len = 0;
    for _ in 0..calls {
        let t = Instant::now();
        let r = http.get(s.url("/config")).send().await.unwrap();
        body_len = r.bytes().await.unwrap().len();
        cached.push(t.elapsed());
    }
    println!(
        "GET /config ({:.1} MiB answer):",
        body_len as f64 / (1 << 20) as f64
    );
    report("cached", cached);
    let mut after = Vec::new();
    let mut change = Vec::new();
    for i in 0..calls {
        let t = Instant::now();
        let r = http
            .put(s.url(&format!("/songs/song_{:05}/visibility", i * 7)))
            .form(&[("visible", if i % 2 == 0 { "false" } else { "true" })])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        change.push(t.elapsed());
        let t = Instant::now();
        let r = http.get(s.url("/config")).send().await.unwrap();
        let _ = r.bytes().await.unwrap();
        after.push(t.elapsed());
    }
    report("first GET after a change", after);
    report("(the change: visibility PUT)", change);

    // 2. RSS.
    let peak = proc_mib(s.pid(), "VmHWM:");
    let idle = env_num("JUKEBOX_HEAVY_IDLE_SECS", 3);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after2 = proc_mib(s.pid(), "VmRSS:");
    tokio::time::sleep(Duration::from_secs(idle + 2)).await;
    println!(
        "server RSS: peak under the edit and config load {:.1} MiB; 2 s after {:.1} MiB; idle ({} s unload + 2 s) {:.1} MiB",
        peak,
        after2,
        idle,
        proc_mib(s.pid(), "VmRSS:")
    );
    // What the unload costs: the summary stays fast, the next change reloads.
    let t = Instant::now();
    let r = http.get(s.url("/config/summary")).send().await.unwrap();
    let _ = r.bytes().await;
    let sum_idle = t.elapsed();
    let t = Instant::now();
    let r = http
        .put(s.url("/songs/song_00003/metadata"))
        .form(&[("artist", "After Idle")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await;
    println!(
        "after the idle unload: summary {:.2} ms; first change (reloads the library) {:.1} ms; RSS then {:.1} MiB",
        ms(sum_idle),
        ms(t.elapsed()),
        proc_mib(s.pid(), "VmRSS:")
    );
    s.stop();

    // 3. Restarts: first GET /config/summary of a new process.
    let mut firsts = Vec::new();
    let mut rss = Vec::new();
    let mut starts = Vec::new();
    for _ in 0..calls {
        let t0 = Instant::now();
        let s = Server::start(&data, &bundle);
        starts.push(t0.elapsed());
        let t = Instant::now();
        let r = http.get(s.url("/config/summary")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        firsts.push(t.elapsed());
        rss.push(proc_mib(s.pid(), "VmRSS:"));
        s.stop();
    }
    rss.sort_by(|a, b| a.total_cmp(b));
    println!("restart:");
    report("first GET /config/summary", firsts);
    report("(process start to listening)", starts);
    println!(
        "  RSS after the first summary: median {:.1} MiB",
        rss[rss.len() / 2]
    );
    let mut first_config = Vec::new();
    for _ in 0..5 {
        let s = Server::start(&data, &bundle);
        let t = Instant::now();
        let r = http.get(s.url("/config")).send().await.unwrap();
        let _ = r.bytes().await;
        first_config.push(t.elapsed());
        s.stop();
    }
    report("first GET /config (loads)", first_config);

    // 5. Upload to a fresh server.
    if upload_mb > 0 {
        upload_row(&http, work.path(), upload_mb).await;
    }
}

async fn upload_row(http: &reqwest::Client, work: &Path, mb: u64) {
    let data = work.join("updata");
    let bundle = work.join("upbundle");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(bundle.join("static")).unwrap();
    let song = work.join("big.wav");
    {
        let mut f =
            std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&song).unwrap());
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut buf = vec![0u8; 1 << 20];
        buf[..4].copy_from_slice(b"RIFF");
        for _ in 0..mb {
            for c in buf.chunks_mut(8).skip(1) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
            }
            f.write_all(&buf).unwrap();
        }
        f.flush().unwrap();
    }
    let bytes = mb << 20;
    let _ = Command::new("md5sum").arg(&song).output();
    let mut md5sum = Vec::new();
    let mut expected = String::new();
    for _ in 0..3 {
        let t = Instant::now();
        let out = Command::new("md5sum").arg(&song).output().unwrap();
        md5sum.push(t.elapsed());
        expected = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
    }
    let s = Server::start(&data, &bundle);
    let base = proc_mib(s.pid(), "VmRSS:");
    reset_peak(s.pid());
    let mut times = Vec::new();
    for _ in 0..3 {
        let file = std::fs::File::open(&song).unwrap();
        let chunks = futures::stream::unfold(file, |mut f| async move {
            let mut buf = Vec::with_capacity(1 << 20);
            match std::io::Read::read_to_end(&mut std::io::Read::take(&mut f, 1 << 20), &mut buf) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), f)),
            }
        });
        let part = Part::stream_with_length(reqwest::Body::wrap_stream(chunks), bytes)
            .file_name("big.wav");
        let t = Instant::now();
        let r = http
            .post(s.url("/songs"))
            .multipart(Form::new().part("files", part))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        times.push(t.elapsed());
        assert_eq!(v["song"]["audioMd5"], json!(expected), "{v}");
        let id = v["song"]["id"].as_str().unwrap().to_string();
        let r = http
            .delete(s.url(&format!("/songs/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let peak = proc_mib(s.pid(), "VmHWM:");
    let up = median(&mut times);
    let m = median(&mut md5sum);
    let rate = |d: Duration| bytes as f64 / (1 << 20) as f64 / d.as_secs_f64();
    println!(
        "upload {mb} MiB: {:.0} MiB/s = {:.0} % of md5sum ({:.0} MiB/s), medians of 3; server RSS {:.1} MiB before, peak {:.1} MiB",
        rate(up),
        100.0 * m.as_secs_f64() / up.as_secs_f64(),
        rate(m),
        base,
        peak
    );
    s.stop();
}

fn main() {
    if let Ok(spec) = std::env::var("JUKEBOX_BENCH_CHILD") {
        child_main(&spec);
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

//! Jukebox benchmark (harness = false):
//!
//!   cargo bench -p companiond-jukebox --bench jukebox
//!
//! Environment: `JUKEBOX_BENCH_MB` (size of the uploaded song, default 300),
//! `JUKEBOX_BENCH_SONGS` (library size for the config timing, default 10000),
//! `JUKEBOX_BENCH_REQUESTS` (GET /config requests, default 500),
//! `JUKEBOX_BENCH_LIBRARY_SONGS` (songs of that size in the exported and imported
//! library, default 1: e.g. 3 × 1024 MiB for a multi-GB import),
//! `JUKEBOX_BENCH_ONLY=upload` (stop after the upload figures).
//!
//! Measures, in one process (server and client share it, so the RSS figures
//! include the client):
//! 1. three pairs of `md5sum` of the file then a streamed multipart upload of it
//!    (throughput, the median ratio of the pairs,
//!    peak RSS growth);
//! 2. an export of the library (streamed to a file) and its import into a
//!    second server (time, peak RSS growth);
//! 3. GET /config and GET /config/summary with a 10,000-song library
//!    (requests/s, p50, p99).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use companiond_core::testkit::TestServer;
use futures::StreamExt;
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};

/// Runs of md5sum and of the upload; the medians are reported.
const ROUNDS: usize = 3;

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak resident set size (VmHWM) in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Current resident set size (VmRSS) in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Reset the peak RSS counter (Linux: write 5 to clear_refs).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn write_pseudo_random(path: &Path, mb: u64, seed: u64) {
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    // A real WAV header (16-bit stereo 44.1 kHz PCM) so the tag reader sees a WAV.
    let data_len = (mb << 20) - 44;
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&((data_len + 36) as u32).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&44100u32.to_le_bytes());
    h.extend_from_slice(&(44100u32 * 4).to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&(data_len as u32).to_le_bytes());
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ seed.wrapping_mul(0x2545_F491_4F6C_DD1D);
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mb {
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        if !h.is_empty() {
            buf[..h.len()].copy_from_slice(&h);
            h.clear();
        }
        f.write_all(&buf).unwrap();
    }
    f.flush().unwrap();
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn stream_file_part(path: &Path, name: &str) -> Part {
    let mut file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    // 1 MiB reads into spare capacity (no zero-filling, no extra copy), as a
    // browser would hand the file over.
    let chunks = std::iter::from_fn(move || {
        let mut buf = Vec::with_capacity(1 << 20);
        match std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, 1 << 20), &mut buf) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(Ok::<_, std::io::Error>(bytes::Bytes::from(buf))),
        }
    });
    let body = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
    Part::stream_with_length(body, len).file_name(name.to_string())
}

/// POST `path` as a multipart body with `file` streamed as part `field`.
async fn post_file(
    s: &TestServer,
    path: &str,
    field: &str,
    file: &Path,
    name: &str,
) -> (reqwest::StatusCode, Value) {
    let form = Form::new().part(field.to_string(), stream_file_part(file, name).await);
    let r = s
        .http
        .post(s.url(path))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

async fn time_gets(s: &TestServer, path: &str, n: u64) -> (f64, Duration, Duration, usize) {
    let mut lat = Vec::with_capacity(n as usize);
    let mut size = 0;
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        let r = s.http.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        size = r.bytes().await.unwrap().len();
        lat.push(t.elapsed());
    }
    let total = start.elapsed();
    lat.sort();
    (
        n as f64 / total.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        size,
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    let mb = env_num("JUKEBOX_BENCH_MB", 300);
    let songs = env_num("JUKEBOX_BENCH_SONGS", 10_000);
    let requests = env_num("JUKEBOX_BENCH_REQUESTS", 500);
    let work = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let song = work.path().join("big.wav");
    write_pseudo_random(&song, mb, 0);
    let bytes = mb << 20;
    println!("jukebox bench: {mb} MiB song, {songs} songs for config, {requests} requests");

    // 1. md5sum vs upload, ROUNDS pairs run back to back (md5sum, then the
    //    upload) so that each ratio compares the two at the same moment of a
    //    machine whose load changes; the medians are reported (the song is
    //    deleted between uploads; the last one stays for the export).
    let _ = std::process::Command::new("md5sum").arg(&song).output(); // warm the page cache
    let a = TestServer::start(&[companiond_jukebox::FAMILY]).await;
    let base_rss = rss_mib();
    reset_peak();
    let (mut md5sum_times, mut upload_times, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let t = Instant::now();
        let out = std::process::Command::new("md5sum")
            .arg(&song)
            .output()
            .unwrap();
        let md5sum_took = t.elapsed();
        let expected = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let t = Instant::now();
        let (status, body) = post_file(&a, "/api/jukebox/songs", "files", &song, "big.wav").await;
        let upload_took = t.elapsed();
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["song"]["audioMd5"],
            json!(expected),
            "MD5 matches md5sum"
        );
        md5sum_times.push(md5sum_took);
        upload_times.push(upload_took);
        ratios.push(md5sum_took.as_secs_f64() / upload_took.as_secs_f64());
        if round + 1 < ROUNDS {
            let id = body["song"]["id"].as_str().unwrap_or_default().to_string();
            let r = a
                .http
                .delete(a.url(&format!("/api/jukebox/songs/{id}")))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        }
    }
    let md5sum_time = median(&mut md5sum_times);
    let upload_time = median(&mut upload_times);
    ratios.sort_by(f64::total_cmp);
    let peak = peak_rss_mib();
    println!(
        "md5sum:           {:>8.1} MiB/s ({:.2} s, median of {ROUNDS})",
        mbps(bytes, md5sum_time),
        md5sum_time.as_secs_f64()
    );
    println!(
        "upload:           {:>8.1} MiB/s ({:.2} s, median of {ROUNDS}); {:.0} % of md5sum (median of the {ROUNDS} back-to-back pairs: {}); RSS before {:.1} MiB, peak {:.1} MiB (+{:.1})",
        mbps(bytes, upload_time),
        upload_time.as_secs_f64(),
        100.0 * ratios[ratios.len() / 2],
        ratios
            .iter()
            .map(|r| format!("{:.0} %", 100.0 * r))
            .collect::<Vec<_>>()
            .join(", "),
        base_rss,
        peak,
        peak - base_rss
    );
    if std::env::var("JUKEBOX_BENCH_ONLY").as_deref() == Ok("upload") {
        return;
    }

    // More songs of the same size for a multi-GB export / import.
    let library_songs = env_num("JUKEBOX_BENCH_LIBRARY_SONGS", 1).max(1);
    for i in 1..library_songs {
        let extra = work.path().join(format!("extra{i}.wav"));
        write_pseudo_random(&extra, mb, i);
        let name = format!("extra{i}.wav");
        let (status, body) = post_file(&a, "/api/jukebox/songs", "files", &extra, &name).await;
        assert_eq!(status, 200, "{body}");
        std::fs::remove_file(&extra).unwrap();
    }

    // 2. Export (streamed to disk) and import into a second server.
    let zip_path = work.path().join("export.zip");
    let base_rss = rss_mib();
    reset_peak();
    let t = Instant::now();
    let r = a
        .http
        .post(a.url("/api/jukebox/export"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut out = tokio::fs::File::create(&zip_path).await.unwrap();
    let mut stream = r.bytes_stream();
    let mut zip_len = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        zip_len += chunk.len() as u64;
        tokio::io::AsyncWriteExt::write_all(&mut out, &chunk)
            .await
            .unwrap();
    }
    tokio::io::AsyncWriteExt::flush(&mut out).await.unwrap();
    let export_time = t.elapsed();
    let peak = peak_rss_mib();
    println!(
        "export:           {:>8.1} MiB/s ({:.2} s, {:.0} MiB zip); peak RSS {:.1} MiB (+{:.1})",
        mbps(zip_len, export_time),
        export_time.as_secs_f64(),
        zip_len as f64 / (1 << 20) as f64,
        peak,
        peak - base_rss
    );

    let b = TestServer::start(&[companiond_jukebox::FAMILY]).await;
    let base_rss = rss_mib();
    reset_peak();
    let t = Instant::now();
    let (status, body) = post_file(
        &b,
        "/api/jukebox/import",
        "file",
        &zip_path,
        "jukebox_export.zip",
    )
    .await;
    let import_time = t.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stats"]["songsAdded"], library_songs, "{body}");
    let peak = peak_rss_mib();
    println!(
        "import:           {:>8.1} MiB/s ({:.2} s); peak RSS {:.1} MiB (+{:.1})",
        mbps(zip_len, import_time),
        import_time.as_secs_f64(),
        peak,
        peak - base_rss
    );
    drop(a);
    drop(b);

    // 3. GET /config with a large library.
    let c = TestServer::start(&[companiond_jukebox::FAMILY]).await;
    let mut lib = serde_json::Map::new();
    let mut idx = serde_json::Map::new();
    for i in 0..songs {
        let id = format!("song_{i:05}");
        let md5 = format!("{:032x}", i as u128 * 0x9E37_79B9_7F4A_7C15);
        lib.insert(
            id.clone(),
            json!({"id": id, "name": format!("Song number {i}"), "artist": "Bench Artist",
                "audio": format!("songs/{id}.mp3"), "audioMd5": md5, "audioFormat": "mp3",
                "visible": i % 10 != 0, "uploadDate": "2025-01-01T00:00:00Z", "defaultAction": ""}),
        );
        idx.insert(md5, json!(id));
    }
    let doc = json!({"version": "1.0", "songs": lib, "actions": {}, "bindings": {},
        "md5Index": {"songs": idx, "actions": {}}, "builtinOverrides": {"songs": {}, "actions": {}}});
    std::fs::create_dir_all(c.data.join("jukebox")).unwrap();
    std::fs::write(
        c.data.join("jukebox/config.json"),
        serde_json::to_vec(&doc).unwrap(),
    )
    .unwrap();
    let t = Instant::now();
    let r = c
        .http
        .get(c.url("/api/jukebox/config/summary"))
        .send()
        .await
        .unwrap();
    let first: Value = r.json().await.unwrap();
    println!(
        "first load of {} songs (merge + revision): {:.1} ms",
        first["songCount"],
        t.elapsed().as_secs_f64() * 1e3
    );
    let (rps, p50, p99, size) = time_gets(&c, "/api/jukebox/config", requests).await;
    println!(
        "GET /config:         {rps:>8.0} req/s, p50 {:.2} ms, p99 {:.2} ms ({:.1} MiB body)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        size as f64 / (1 << 20) as f64
    );
    let (rps, p50, p99, _) = time_gets(&c, "/api/jukebox/config/summary", requests).await;
    println!(
        "GET /config/summary: {rps:>8.0} req/s, p50 {:.2} ms, p99 {:.2} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    // One change then one read: the rebuild cost a client sees after a write.
    let t = Instant::now();
    let r = c
        .http
        .put(c.url("/api/jukebox/songs/song_00001/visibility"))
        .form(&[("visible", "false")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let change = t.elapsed();
    let t = Instant::now();
    let r = c
        .http
        .get(c.url("/api/jukebox/config"))
        .send()
        .await
        .unwrap();
    let _ = r.bytes().await.unwrap();
    println!(
        "visibility change: {:.1} ms; next GET /config: {:.1} ms",
        change.as_secs_f64() * 1e3,
        t.elapsed().as_secs_f64() * 1e3
    );
}

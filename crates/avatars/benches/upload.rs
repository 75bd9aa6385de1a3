//! Throughput and peak memory of the streaming uploads.
//!
//! `cargo bench -p companiond-avatars --bench upload` (sizes in MiB through
//! `AVATARS_BENCH_MB`, default 200, and `AVATARS_BENCH_ZIP_MB`, default 512).
//!
//! For each case it times a plain `std::fs::copy` of the same number of bytes on
//! the same disk, then the real HTTP route (an in-process server, a streamed
//! multipart body), and reports the peak resident set size of the process
//! during the upload (`VmHWM`, reset before each case).

use std::io::Write;
use std::time::Instant;

use bytes::Bytes;
use companiond_core::testkit::{split, TestServer};

const MIB: usize = 1024 * 1024;
const ROUNDS: usize = 3;
const BOUNDARY: &str = "----avatarsBenchBoundary";

fn env_mb(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn reset_peak() {
    // Linux: writing 5 resets VmHWM to the current RSS.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn copy_speed(src: &std::path::Path, dst: &std::path::Path) -> f64 {
    let t = Instant::now();
    let n = std::fs::copy(src, dst).expect("copy");
    std::fs::File::open(dst).unwrap().sync_all().unwrap();
    let s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(dst);
    n as f64 / MIB as f64 / s
}

fn body_of_named(field: &str, filename: &str, payload: Vec<Bytes>) -> reqwest::Body {
    let mut items: Vec<Result<Bytes, std::io::Error>> = vec![Ok(Bytes::from(format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n\r\n"
    )))];
    items.extend(payload.into_iter().map(Ok));
    items.push(Ok(Bytes::from(format!("\r\n--{BOUNDARY}--\r\n"))));
    reqwest::Body::wrap_stream(futures::stream::iter(items))
}

/// A multipart body: the part header, `payload` streamed in 1 MiB chunks, the trailer.
fn body_of(filename: &str, payload: Vec<Bytes>) -> reqwest::Body {
    let mut items: Vec<Result<Bytes, std::io::Error>> = vec![Ok(Bytes::from(format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )))];
    items.extend(payload.into_iter().map(Ok));
    items.push(Ok(Bytes::from(format!("\r\n--{BOUNDARY}--\r\n"))));
    reqwest::Body::wrap_stream(futures::stream::iter(items))
}

/// Like [`body_of`], pulling the payload lazily from an iterator.
fn body_of_iter(
    filename: &str,
    payload: impl Iterator<Item = Bytes> + Send + Sync + 'static,
) -> reqwest::Body {
    let head = Bytes::from(format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    ));
    let tail = Bytes::from(format!("\r\n--{BOUNDARY}--\r\n"));
    let items = std::iter::once(head)
        .chain(payload)
        .chain(std::iter::once(tail))
        .map(Ok::<Bytes, std::io::Error>);
    reqwest::Body::wrap_stream(futures::stream::iter(items))
}

async fn post(s: &TestServer, path: &str, body: reqwest::Body) -> (u16, serde_json::Value) {
    let r = s
        .http
        .post(s.url(path))
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await
        .expect("request");
    split(r).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mb = env_mb("AVATARS_BENCH_MB", 200);
    let zip_mb = env_mb("AVATARS_BENCH_ZIP_MB", 512);
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let scratch = s.data.parent().unwrap().join("bench");
    std::fs::create_dir_all(&scratch).unwrap();

    // ---- model upload
    let chunk = {
        let mut c = vec![0x42u8; MIB];
        c[..4].copy_from_slice(b"PMX ");
        Bytes::from(c)
    };
    let plain = Bytes::from(vec![0x42u8; MIB]);
    let src = scratch.join("src.bin");
    {
        let mut f = std::fs::File::create(&src).unwrap();
        for _ in 0..mb {
            f.write_all(&plain).unwrap();
        }
        f.sync_all().unwrap();
    }
    let mut copies = Vec::new();
    let mut ups = Vec::new();
    let mut peak = 0;
    let mut rss0 = 0;
    for round in 0..ROUNDS {
        copies.push(copy_speed(&src, &scratch.join("copy.bin")));
        let mut payload = vec![chunk.clone()];
        payload.extend(std::iter::repeat_n(plain.clone(), mb - 1));
        reset_peak();
        rss0 = rss0.max(status_kib("VmRSS:"));
        let t = Instant::now();
        let name = format!("bench{round}.pmx");
        let (st, b) = post(&s, "/api/model/mmd/upload", body_of(&name, payload)).await;
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(st, 200, "{b}");
        peak = peak.max(status_kib("VmHWM:"));
        ups.push(mb as f64 / secs);
        std::fs::remove_file(s.data.join("user_mmd").join(&name)).unwrap();
    }
    let (copy, up) = (median(&mut copies), median(&mut ups));
    // Transport only: the same body to a route that reads and discards it.
    let mut raw = Vec::new();
    for _ in 0..ROUNDS {
        let payload: Vec<Bytes> = std::iter::repeat_n(plain.clone(), mb).collect();
        let body = body_of_named("ignored", "x.bin", payload);
        let t = Instant::now();
        let (st, _) = post(&s, "/api/model/pngtuber/upload_model", body).await;
        assert_eq!(st, 400);
        raw.push(mb as f64 / t.elapsed().as_secs_f64());
    }
    let raw = median(&mut raw);
    // Userspace write baseline: the same bytes written from memory, 1 MiB per write, fsync.
    let mut writes = Vec::new();
    for _ in 0..ROUNDS {
        let p = scratch.join("write.bin");
        let t = Instant::now();
        let mut f = std::fs::File::create(&p).unwrap();
        for _ in 0..mb {
            f.write_all(&plain).unwrap();
        }
        f.sync_all().unwrap();
        writes.push(mb as f64 / t.elapsed().as_secs_f64());
        std::fs::remove_file(&p).unwrap();
    }
    let wr = median(&mut writes);
    println!(
        "write from memory + fsync (userspace baseline): {wr:.0} MiB/s; upload is {:.0} % of it",
        up / wr * 100.0
    );
    println!("transport only (HTTP + multipart parsing, body discarded): {raw:.0} MiB/s");
    println!(
        "model upload {mb} MiB (median of {ROUNDS}): {up:.0} MiB/s via HTTP vs {copy:.0} MiB/s plain copy ({:.0} %); peak RSS {} MiB (RSS before {} MiB)",
        up / copy * 100.0,
        peak / 1024,
        rss0 / 1024
    );
    std::fs::remove_file(&src).unwrap();

    // ---- ZIP import (stored entries, so extraction is pure I/O)
    let zip_path = scratch.join("bench.zip");
    {
        let f = std::fs::File::create(&zip_path).unwrap();
        let mut w = zip::ZipWriter::new(std::io::BufWriter::new(f));
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(true);
        w.start_file("Bench/bench.pmx", o).unwrap();
        w.write_all(&chunk).unwrap();
        let per = 64;
        for i in 0..zip_mb.div_ceil(per) {
            w.start_file(format!("Bench/tex/{i}.bin"), o).unwrap();
            for _ in 0..per.min(zip_mb - i * per) {
                w.write_all(&plain).unwrap();
            }
        }
        w.finish()
            .unwrap()
            .into_inner()
            .unwrap()
            .sync_all()
            .unwrap();
    }
    let zip_bytes = std::fs::metadata(&zip_path).unwrap().len();
    let mut copies = Vec::new();
    let mut rates = Vec::new();
    let mut peak = 0;
    let mut rss0 = 0;
    let mut files = serde_json::Value::Null;
    let total_mb = zip_bytes as f64 / MIB as f64;
    for _ in 0..ROUNDS {
        copies.push(copy_speed(&zip_path, &scratch.join("copy.zip")));
        reset_peak();
        rss0 = rss0.max(status_kib("VmRSS:"));
        let t = Instant::now();
        // The client reads the archive from disk chunk by chunk while sending.
        let mut file = std::fs::File::open(&zip_path).unwrap();
        // `read_to_end` into spare capacity: no zero-filling of each buffer.
        let chunks = std::iter::from_fn(move || {
            let mut buf = Vec::with_capacity(MIB);
            match std::io::Read::read_to_end(
                &mut std::io::Read::take(&mut file, MIB as u64),
                &mut buf,
            ) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(Bytes::from(buf)),
            }
        });
        let (st, b) = post(
            &s,
            "/api/model/mmd/upload_zip",
            body_of_iter("bench.zip", chunks),
        )
        .await;
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(st, 200, "{b}");
        peak = peak.max(status_kib("VmHWM:"));
        rates.push(total_mb / secs);
        files = b["file_count"].clone();
        std::fs::remove_dir_all(s.data.join("user_mmd").join("Bench")).unwrap();
    }
    std::fs::remove_file(&zip_path).unwrap();
    let (copy, rate) = (median(&mut copies), median(&mut rates));
    // The import extracts while the archive streams in (each byte written once)
    // and syncs the extracted files, like the copy it is compared with.
    println!(
        "zip import {total_mb:.0} MiB ({} files, median of {ROUNDS}): {rate:.0} MiB/s end to end (extracted while streaming, synced) vs {copy:.0} MiB/s plain copy + fsync ({:.0} %); peak RSS {} MiB (RSS before {} MiB)",
        files,
        rate / copy * 100.0,
        peak / 1024,
        rss0 / 1024
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

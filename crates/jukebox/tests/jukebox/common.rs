//! Fixtures shared by every resource's tests: media made by hand (WAV, MP3,
//! FLAC, VMD, BVH), servers with and without a bundle or with small limits,
//! and the request helpers.

pub use std::collections::BTreeMap;
pub use std::io::{Cursor, Read, Write};
pub use std::path::Path;

pub use companiond_core::testkit::{TestOptions, TestServer};
pub use companiond_core::AppState;
pub use companiond_jukebox::Limits;
pub use md5::{Digest, Md5};
pub use reqwest::multipart::{Form, Part};
pub use reqwest::Method;
pub use serde_json::{json, Value};

// ------------------------------------------------------------------ media made by hand

pub fn md5_hex(b: &[u8]) -> String {
    hex::encode(Md5::digest(b))
}

pub fn riff_chunk(id: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut v = id.to_vec();
    v.extend_from_slice(&(data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    if data.len() % 2 == 1 {
        v.push(0);
    }
    v
}

/// A short PCM WAV; with a RIFF INFO list (INAM title, IART artist) when given.
pub fn wav(samples: usize, seed: u8, title: Option<&str>, artist: Option<&str>) -> Vec<u8> {
    let mut fmt = Vec::new();
    fmt.extend_from_slice(&1u16.to_le_bytes()); // PCM
    fmt.extend_from_slice(&1u16.to_le_bytes()); // mono
    fmt.extend_from_slice(&8000u32.to_le_bytes());
    fmt.extend_from_slice(&16000u32.to_le_bytes());
    fmt.extend_from_slice(&2u16.to_le_bytes());
    fmt.extend_from_slice(&16u16.to_le_bytes());
    let data: Vec<u8> = (0..samples * 2)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect();
    let mut body = b"WAVE".to_vec();
    body.extend(riff_chunk(b"fmt ", &fmt));
    body.extend(riff_chunk(b"data", &data));
    if title.is_some() || artist.is_some() {
        let mut info = b"INFO".to_vec();
        for (id, v) in [(b"INAM", title), (b"IART", artist)] {
            if let Some(v) = v {
                let mut s = v.as_bytes().to_vec();
                s.push(0);
                info.extend(riff_chunk(id, &s));
            }
        }
        body.extend(riff_chunk(b"LIST", &info));
    }
    riff_chunk(b"RIFF", &body)
}

pub fn syncsafe(n: usize) -> [u8; 4] {
    [
        ((n >> 21) & 0x7f) as u8,
        ((n >> 14) & 0x7f) as u8,
        ((n >> 7) & 0x7f) as u8,
        (n & 0x7f) as u8,
    ]
}

/// An MP3: an ID3v2.3 tag (TIT2, TPE1) and a few MPEG-1 layer III frames.
pub fn mp3(title: &str, artist: &str, seed: u8) -> Vec<u8> {
    let mut frames = Vec::new();
    for (id, text) in [(b"TIT2", title), (b"TPE1", artist)] {
        let mut payload = vec![0u8]; // ISO-8859-1
        payload.extend_from_slice(text.as_bytes());
        frames.extend_from_slice(id);
        frames.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frames.extend_from_slice(&[0, 0]);
        frames.extend(payload);
    }
    let mut v = b"ID3\x03\x00\x00".to_vec();
    v.extend_from_slice(&syncsafe(frames.len()));
    v.extend(frames);
    for i in 0..4u8 {
        // 128 kbit/s, 44.1 kHz, no padding: 417 bytes per frame.
        let mut frame = vec![0xFF, 0xFB, 0x90, 0x00];
        frame.extend(std::iter::repeat_n(seed.wrapping_add(i), 413));
        v.extend(frame);
    }
    v
}

/// A FLAC: STREAMINFO and a VORBIS_COMMENT block with TITLE (and ARTIST).
pub fn flac(title: &str, artist: Option<&str>) -> Vec<u8> {
    let mut v = b"fLaC".to_vec();
    let mut si = Vec::new();
    si.extend_from_slice(&4096u16.to_be_bytes());
    si.extend_from_slice(&4096u16.to_be_bytes());
    si.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    let packed: u64 = (44100u64 << 44) | (1u64 << 41) | (15u64 << 36) | 1000;
    si.extend_from_slice(&packed.to_be_bytes());
    si.extend_from_slice(&[7u8; 16]);
    v.push(0x00);
    v.extend_from_slice(&(si.len() as u32).to_be_bytes()[1..]);
    v.extend(si);
    let mut vc = Vec::new();
    let vendor = b"test";
    vc.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    vc.extend_from_slice(vendor);
    let mut comments = vec![format!("TITLE={title}")];
    if let Some(a) = artist {
        comments.push(format!("ARTIST={a}"));
    }
    vc.extend_from_slice(&(comments.len() as u32).to_le_bytes());
    for c in comments {
        vc.extend_from_slice(&(c.len() as u32).to_le_bytes());
        vc.extend_from_slice(c.as_bytes());
    }
    v.push(0x80 | 4);
    v.extend_from_slice(&(vc.len() as u32).to_be_bytes()[1..]);
    v.extend(vc);
    v.extend_from_slice(&[0xFF, 0xF8, 0x69, 0x08, 0x00, 0x00]);
    v
}

/// A minimal VMD (no keyframes) for a model name.
pub fn vmd(model: &str) -> Vec<u8> {
    let mut v = b"Vocaloid Motion Data 0002".to_vec();
    v.resize(30, 0);
    let mut name = model.as_bytes().to_vec();
    name.resize(20, 0);
    v.extend(name);
    for _ in 0..5 {
        v.extend_from_slice(&0u32.to_le_bytes());
    }
    v
}

pub fn bvh(root: &str) -> Vec<u8> {
    format!(
        "HIERARCHY\nROOT {root}\n{{\n  OFFSET 0 0 0\n  CHANNELS 3 Xposition Yposition Zposition\n  End Site\n  {{\n    OFFSET 0 1 0\n  }}\n}}\nMOTION\nFrames: 1\nFrame Time: 0.033333\n0 0 0\n"
    )
    .into_bytes()
}

// ------------------------------------------------------------------ helpers

pub const J: &str = "/api/jukebox";

/// The jukebox with small size limits.
pub fn small_start(s: &AppState) {
    companiond_jukebox::start_with(
        s,
        Limits {
            file: 1 << 20,
            archive: 4 << 20,
            archive_entries: 50,
            archive_config: 1 << 20,
        },
        companiond_jukebox::DEFAULT_IDLE_UNLOAD,
    )
}

pub const BUILTIN_SONG: &str = "builtin_song";
pub const BUILTIN_ACTION: &str = "builtin_dance";

pub fn builtin_wav() -> Vec<u8> {
    wav(400, 3, Some("Bundled"), None)
}

pub fn builtin_vmd() -> Vec<u8> {
    vmd("bundled-model")
}

/// Fill the bundle with one built-in song, one built-in action and their binding.
pub fn bundle_prepare(_data: &Path, bundle: &Path) {
    let root = bundle.join("jukebox");
    std::fs::create_dir_all(root.join("songs")).unwrap();
    std::fs::create_dir_all(root.join("actions")).unwrap();
    std::fs::write(root.join("songs/builtin.wav"), builtin_wav()).unwrap();
    std::fs::write(root.join("actions/builtin.vmd"), builtin_vmd()).unwrap();
    let cfg = json!({
        "version": "1.0",
        "songs": {BUILTIN_SONG: {"id": BUILTIN_SONG, "name": "Built-in Song", "artist": "Band",
            "audio": "songs/builtin.wav", "audioMd5": md5_hex(&builtin_wav()), "audioFormat": "wav",
            "visible": true, "uploadDate": "2024-01-01T00:00:00", "defaultAction": BUILTIN_ACTION}},
        "actions": {BUILTIN_ACTION: {"id": BUILTIN_ACTION, "name": "Built-in Dance",
            "file": "actions/builtin.vmd", "fileMd5": md5_hex(&builtin_vmd()), "format": "vmd",
            "uploadDate": "2024-01-01T00:00:00", "visible": true},
            "ghost": {"name": "Ghost", "file": "actions/ghost.vmd", "fileMd5": "0123", "format": "vmd"}},
        "bindings": {BUILTIN_SONG: {BUILTIN_ACTION: {"offset": 0}}},
    });
    std::fs::write(
        root.join("config.json"),
        serde_json::to_vec_pretty(&cfg).unwrap(),
    )
    .unwrap();
}

pub async fn with_bundle() -> TestServer {
    TestServer::start_with(
        &[companiond_jukebox::FAMILY],
        TestOptions {
            prepare: Some(Box::new(bundle_prepare)),
            ..TestOptions::default()
        },
    )
    .await
}

pub async fn plain() -> TestServer {
    TestServer::start(&[companiond_jukebox::FAMILY]).await
}

pub async fn small() -> TestServer {
    TestServer::start(&[companiond_core::server::Family {
        api: companiond_jukebox::api,
        start: small_start,
    }])
    .await
}

pub async fn split(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let bytes = r.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

pub async fn upload(
    s: &TestServer,
    kind: &str,
    files: &[(&str, Vec<u8>)],
    metadata: Option<Value>,
) -> (u16, Value) {
    let mut form = Form::new();
    for (name, bytes) in files {
        form = form.part(
            "files",
            Part::bytes(bytes.clone()).file_name(name.to_string()),
        );
    }
    if let Some(m) = metadata {
        form = form.text("metadata", m.to_string());
    }
    let r = s
        .http
        .post(s.url(&format!("{J}/{kind}")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    split(r).await
}

pub async fn upload_ok(s: &TestServer, kind: &str, name: &str, bytes: Vec<u8>) -> Value {
    let (st, body) = upload(s, kind, &[(name, bytes)], None).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["success"], true, "{body}");
    body[if kind == "songs" { "song" } else { "action" }].clone()
}

/// A url-encoded form request.
pub async fn form(
    s: &TestServer,
    method: Method,
    path: &str,
    fields: &[(&str, &str)],
) -> (u16, Value) {
    let r = s
        .http
        .request(method, s.url(path))
        .form(fields)
        .send()
        .await
        .unwrap();
    split(r).await
}

/// The same as a multipart form.
pub async fn mform(
    s: &TestServer,
    method: Method,
    path: &str,
    fields: &[(&str, &str)],
) -> (u16, Value) {
    let mut f = Form::new();
    for (k, v) in fields {
        f = f.text(k.to_string(), v.to_string());
    }
    let r = s
        .http
        .request(method, s.url(path))
        .multipart(f)
        .send()
        .await
        .unwrap();
    split(r).await
}

pub async fn config(s: &TestServer) -> Value {
    let (st, c) = s.get(&format!("{J}/config")).await;
    assert_eq!(st, 200, "{c}");
    c
}

/// Regular files in a folder (names), hidden staging files included.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn unzip(bytes: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut z = zip::ZipArchive::new(Cursor::new(bytes.to_vec())).unwrap();
    let mut out = BTreeMap::new();
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        let mut b = Vec::new();
        f.read_to_end(&mut b).unwrap();
        out.insert(f.name().to_string(), b);
    }
    out
}

pub fn make_zip(entries: &[(&str, Vec<u8>)], method: zip::CompressionMethod) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        w.start_file(name.to_string(), opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

pub async fn export(
    s: &TestServer,
    fields: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let r = s
        .http
        .post(s.url(&format!("{J}/export")))
        .form(fields)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    let h = r.headers().clone();
    (st, h, r.bytes().await.unwrap().to_vec())
}

pub async fn import(s: &TestServer, zip: Vec<u8>) -> (u16, Value) {
    let form = Form::new().part("file", Part::bytes(zip).file_name("jukebox_export.zip"));
    let r = s
        .http
        .post(s.url(&format!("{J}/import")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    split(r).await
}

/// A raw HTTP/1.1 GET (no URL normalisation by the client).
pub async fn raw_get(s: &TestServer, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    c.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

pub fn detail(v: &Value) -> String {
    v["detail"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v["detail"].to_string())
}

/// Every file under `dir` (recursive, hidden staging files included), relative.
pub fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// A multipart body with one file part whose file name is sent byte for byte.
pub fn raw_multipart(part: &str, filename: &str, data: &[u8]) -> (String, Vec<u8>) {
    let b = "----jukeboxRawBoundary9f3";
    let mut body = format!(
        "--{b}\r\nContent-Disposition: form-data; name=\"{part}\"; filename=\"{filename}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={b}"), body)
}

pub async fn send_raw(s: &TestServer, path: &str, (ct, body): (String, Vec<u8>)) -> (u16, Value) {
    let r = s
        .http
        .post(s.url(path))
        .header("Content-Type", ct)
        .body(body)
        .send()
        .await
        .expect("an answer");
    split(r).await
}

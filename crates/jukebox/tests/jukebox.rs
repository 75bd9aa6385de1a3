//! End-to-end tests of /api/jukebox over real HTTP with real media files,
//! real multipart bodies and real ZIP archives.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::Path;

use companiond_core::testkit::{TestOptions, TestServer};
use companiond_core::AppState;
use companiond_jukebox::Limits;
use md5::{Digest, Md5};
use reqwest::multipart::{Form, Part};
use reqwest::Method;
use serde_json::{json, Value};

// ------------------------------------------------------------------ media made by hand

fn md5_hex(b: &[u8]) -> String {
    hex::encode(Md5::digest(b))
}

fn riff_chunk(id: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut v = id.to_vec();
    v.extend_from_slice(&(data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    if data.len() % 2 == 1 {
        v.push(0);
    }
    v
}

/// A short PCM WAV; with a RIFF INFO list (INAM title, IART artist) when given.
fn wav(samples: usize, seed: u8, title: Option<&str>, artist: Option<&str>) -> Vec<u8> {
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

fn syncsafe(n: usize) -> [u8; 4] {
    [
        ((n >> 21) & 0x7f) as u8,
        ((n >> 14) & 0x7f) as u8,
        ((n >> 7) & 0x7f) as u8,
        (n & 0x7f) as u8,
    ]
}

/// An MP3: an ID3v2.3 tag (TIT2, TPE1) and a few MPEG-1 layer III frames.
fn mp3(title: &str, artist: &str, seed: u8) -> Vec<u8> {
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
fn flac(title: &str, artist: Option<&str>) -> Vec<u8> {
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
fn vmd(model: &str) -> Vec<u8> {
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

fn bvh(root: &str) -> Vec<u8> {
    format!(
        "HIERARCHY\nROOT {root}\n{{\n  OFFSET 0 0 0\n  CHANNELS 3 Xposition Yposition Zposition\n  End Site\n  {{\n    OFFSET 0 1 0\n  }}\n}}\nMOTION\nFrames: 1\nFrame Time: 0.033333\n0 0 0\n"
    )
    .into_bytes()
}

// ------------------------------------------------------------------ helpers

const J: &str = "/api/jukebox";

/// The jukebox with small size limits.
fn small_start(s: &AppState) {
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

const BUILTIN_SONG: &str = "builtin_song";
const BUILTIN_ACTION: &str = "builtin_dance";

fn builtin_wav() -> Vec<u8> {
    wav(400, 3, Some("Bundled"), None)
}

fn builtin_vmd() -> Vec<u8> {
    vmd("bundled-model")
}

/// Fill the bundle with one built-in song, one built-in action and their binding.
fn bundle_prepare(_data: &Path, bundle: &Path) {
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

async fn with_bundle() -> TestServer {
    TestServer::start_with(
        &[companiond_jukebox::FAMILY],
        TestOptions {
            prepare: Some(Box::new(bundle_prepare)),
            ..TestOptions::default()
        },
    )
    .await
}

async fn plain() -> TestServer {
    TestServer::start(&[companiond_jukebox::FAMILY]).await
}

async fn small() -> TestServer {
    TestServer::start(&[companiond_core::server::Family {
        api: companiond_jukebox::api,
        start: small_start,
    }])
    .await
}

async fn split(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let bytes = r.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn upload(
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

async fn upload_ok(s: &TestServer, kind: &str, name: &str, bytes: Vec<u8>) -> Value {
    let (st, body) = upload(s, kind, &[(name, bytes)], None).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["success"], true, "{body}");
    body[if kind == "songs" { "song" } else { "action" }].clone()
}

/// A url-encoded form request.
async fn form(s: &TestServer, method: Method, path: &str, fields: &[(&str, &str)]) -> (u16, Value) {
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
async fn mform(
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

async fn config(s: &TestServer) -> Value {
    let (st, c) = s.get(&format!("{J}/config")).await;
    assert_eq!(st, 200, "{c}");
    c
}

/// Regular files in a folder (names), hidden staging files included.
fn files_in(dir: &Path) -> Vec<String> {
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

fn unzip(bytes: &[u8]) -> BTreeMap<String, Vec<u8>> {
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

fn make_zip(entries: &[(&str, Vec<u8>)], method: zip::CompressionMethod) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        w.start_file(name.to_string(), opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

async fn export(
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

async fn import(s: &TestServer, zip: Vec<u8>) -> (u16, Value) {
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
async fn raw_get(s: &TestServer, path: &str) -> (u16, String) {
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

fn detail(v: &Value) -> String {
    v["detail"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v["detail"].to_string())
}

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn uploads_take_names_from_metadata_tags_then_filename() {
    let s = plain().await;
    let songs_dir = s.data.join("jukebox/songs");

    // One file: its RIFF INFO tags name it; the MD5 is the file's.
    let w = wav(800, 7, Some("Wave Title"), Some("Wave Artist"));
    let song = upload_ok(&s, "songs", "first take.wav", w.clone()).await;
    assert_eq!(song["name"], "Wave Title");
    assert_eq!(song["artist"], "Wave Artist");
    assert_eq!(song["audioFormat"], "wav");
    assert_eq!(song["audioMd5"], md5_hex(&w));
    assert_eq!(song["id"], "first_take");
    assert_eq!(song["audio"], "songs/first take.wav");
    assert_eq!(song["visible"], true);
    assert_eq!(song["defaultAction"], "");
    assert_eq!(song["isBuiltin"], false);
    assert_eq!(std::fs::read(songs_dir.join("first take.wav")).unwrap(), w);

    // A batch: metadata by position, then ID3v2 / Vorbis tags, then the file name;
    // an unsupported type fails inside the successful batch.
    let (st, body) = upload(
        &s,
        "songs",
        &[
            ("tagged.mp3", mp3("Mp3 Title", "Mp3 Artist", 1)),
            ("tune.flac", flac("Flac Title", Some("Flac Artist"))),
            ("plain.ogg", b"OggS-not-really-ogg-data".to_vec()),
            ("notes.txt", b"hello".to_vec()),
        ],
        Some(json!([{"name": "Given Name"}, {}, {"artist": "Given Artist"}])),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["success"], true);
    let r = body["results"].as_array().unwrap();
    assert_eq!(r.len(), 4);
    assert_eq!(r[0]["song"]["name"], "Given Name");
    assert_eq!(r[0]["song"]["artist"], "Mp3 Artist");
    assert_eq!(r[1]["song"]["name"], "Flac Title");
    assert_eq!(r[1]["song"]["artist"], "Flac Artist");
    assert_eq!(r[2]["song"]["name"], "plain");
    assert_eq!(r[2]["song"]["artist"], "Given Artist");
    assert_eq!(r[3]["success"], false);
    assert!(
        r[3]["error"].as_str().unwrap().contains("unsupported"),
        "{}",
        r[3]
    );

    // Duplicate MD5 under another name: refused, nothing left behind.
    let before = files_in(&songs_dir);
    let (st, dup) = upload(&s, "songs", &[("again.wav", w.clone())], None).await;
    assert_eq!(st, 409, "{dup}");
    assert_eq!(dup["success"], false);
    assert!(
        dup["error"].as_str().unwrap().contains("first_take"),
        "{dup}"
    );
    assert_eq!(files_in(&songs_dir), before);
    // Inside a batch it is a per-item failure.
    let (st, b) = upload(
        &s,
        "songs",
        &[("x.wav", w.clone()), ("y.wav", wav(50, 9, None, None))],
        None,
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b["results"][0]["success"], false);
    assert_eq!(b["results"][1]["success"], true);

    // Same file name, other content: stored beside it, named after the stored file.
    let other = upload_ok(&s, "songs", "first take.wav", wav(60, 11, None, None)).await;
    assert_eq!(other["audio"], "songs/first take_1.wav");
    assert_eq!(other["name"], "first take_1");
    assert_eq!(other["id"], "first_take_1");

    // Actions: metadata name or file name; type checked.
    let (st, b) = upload(
        &s,
        "actions",
        &[("dance.vmd", vmd("m1")), ("walk.bvh", bvh("Hips"))],
        Some(json!([{"name": "Dance One"}])),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["results"][0]["action"]["name"], "Dance One");
    assert_eq!(b["results"][0]["action"]["format"], "vmd");
    assert_eq!(b["results"][0]["action"]["file"], "actions/dance.vmd");
    assert_eq!(b["results"][0]["action"]["missing"], false);
    assert_eq!(b["results"][1]["action"]["name"], "walk");
    let (st, bad) = upload(&s, "actions", &[("song.mp3", mp3("a", "b", 2))], None).await;
    assert_eq!(st, 400, "{bad}");
    assert_eq!(bad["success"], false);

    // Request errors in {detail}: no files, bad metadata (nothing stored), not multipart.
    let before = files_in(&songs_dir);
    let (st, e) = upload(&s, "songs", &[], Some(json!([]))).await;
    assert_eq!(st, 400);
    assert!(detail(&e).contains("no files"), "{e}");
    let r = s
        .http
        .post(s.url(&format!("{J}/songs")))
        .multipart(
            Form::new()
                .part(
                    "files",
                    Part::bytes(wav(10, 1, None, None)).file_name("m.wav"),
                )
                .text("metadata", "{not json"),
        )
        .send()
        .await
        .unwrap();
    let (st, e) = split(r).await;
    assert_eq!(st, 400);
    assert_eq!(detail(&e), "metadata format error");
    assert_eq!(files_in(&songs_dir), before);
    let (st, e) = s.post(&format!("{J}/songs"), json!({"files": []})).await;
    assert_eq!(st, 400, "{e}");
    assert!(e["detail"].is_string());

    // Concurrent uploads and binds serialise on the library lock: none is lost.
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let client = s.http.clone();
        let url = s.url(&format!("{J}/actions"));
        tasks.push(tokio::spawn(async move {
            let form = Form::new().part(
                "files",
                Part::bytes(vmd(&format!("c{i}"))).file_name(format!("c{i}.vmd")),
            );
            client
                .post(url)
                .multipart(form)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let mut binds = Vec::new();
    for i in 0..8u8 {
        let client = s.http.clone();
        let url = s.url(&format!("{J}/bind"));
        binds.push(tokio::spawn(async move {
            let off = i.to_string();
            let fields = [
                ("songId", "first_take"),
                ("actionId", &format!("c{i}")),
                ("offset", off.as_str()),
            ];
            client
                .post(url)
                .form(&fields)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in binds {
        assert_eq!(t.await.unwrap(), 200);
    }
    let c = config(&s).await;
    assert_eq!(c["actionCount"], 10);
    assert_eq!(c["bindings"]["first_take"].as_object().unwrap().len(), 8);
    assert_eq!(c["bindings"]["first_take"]["c7"]["offset"], 7);

    let c = config(&s).await;
    assert_eq!(c["songCount"], 6);
    assert_eq!(c["actionCount"], 10);
    assert_eq!(c["md5Index"]["songs"][md5_hex(&w)], "first_take");
    assert_eq!(c["songs"].as_object().unwrap().len(), 6);
}

#[tokio::test]
async fn revision_is_a_stable_content_hash_and_summary_matches() {
    let s = plain().await;
    let (_, s0) = s.get(&format!("{J}/config/summary")).await;
    let (_, s0b) = s.get(&format!("{J}/config/summary")).await;
    assert_eq!(s0, s0b);
    assert_eq!(s0["songCount"], 0);
    let r0 = s0["configRevision"].as_str().unwrap().to_string();
    assert!(
        r0.len() >= 12 && r0.chars().all(|c| c.is_ascii_hexdigit()),
        "{r0}"
    );

    let song = upload_ok(&s, "songs", "a.wav", wav(100, 5, None, None)).await;
    let id = song["id"].as_str().unwrap().to_string();
    let c1 = config(&s).await;
    let (_, s1) = s.get(&format!("{J}/config/summary")).await;
    let r1 = s1["configRevision"].as_str().unwrap().to_string();
    assert_ne!(r1, r0);
    assert_eq!(c1["configRevision"], r1);
    assert_eq!(
        s1,
        json!({"configRevision": r1, "songCount": 1, "visibleSongCount": 1, "actionCount": 0})
    );

    let (st, v) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (_, s2) = s.get(&format!("{J}/config/summary")).await;
    assert_eq!(s2["visibleSongCount"], 0);
    assert_ne!(s2["configRevision"], r1);
    // Multipart works for the same form route; the same content gives the same revision.
    let (st, _) = mform(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/visibility"),
        &[("visible", "true")],
    )
    .await;
    assert_eq!(st, 200);
    let (_, s3) = s.get(&format!("{J}/config/summary")).await;
    assert_eq!(s3["configRevision"], r1);

    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/metadata"),
        &[("name", "Renamed")],
    )
    .await;
    assert_eq!(st, 200);
    let (_, s4) = s.get(&format!("{J}/config/summary")).await;
    assert_ne!(s4["configRevision"], r1);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/metadata"),
        &[("name", "a")],
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(
        s.get(&format!("{J}/config/summary")).await.1["configRevision"],
        r1
    );

    // A hand edit of the file is noticed; a corrupt file is an error and is never overwritten.
    let path = s.data.join("jukebox/config.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["songs"][&id]["artist"] = json!("Edited By Hand");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    assert_eq!(config(&s).await["songs"][&id]["artist"], "Edited By Hand");
    std::fs::write(&path, b"{broken").unwrap();
    let (st, e) = s.get(&format!("{J}/config")).await;
    assert_eq!(st, 500);
    assert!(e["detail"].as_str().unwrap().contains("unreadable"));
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 500);
    assert_eq!(std::fs::read(&path).unwrap(), b"{broken");
}

#[tokio::test]
async fn builtin_resources_are_hidden_user_resources_deleted() {
    let s = with_bundle().await;
    let c = config(&s).await;
    assert_eq!(c["songs"][BUILTIN_SONG]["isBuiltin"], true);
    assert_eq!(c["actions"][BUILTIN_ACTION]["isBuiltin"], true);
    assert_eq!(c["actions"][BUILTIN_ACTION]["missing"], false);
    assert_eq!(
        c["actions"]["ghost"]["missing"], true,
        "no file in either folder"
    );
    assert_eq!(c["actions"]["ghost"]["id"], "ghost");
    assert_eq!(c["bindings"][BUILTIN_SONG][BUILTIN_ACTION]["offset"], 0);
    assert_eq!(c["songs"][BUILTIN_SONG]["defaultAction"], BUILTIN_ACTION);
    assert_eq!(
        c["md5Index"]["songs"][md5_hex(&builtin_wav())],
        BUILTIN_SONG
    );
    assert!(
        !s.data.join("jukebox/config.json").exists(),
        "reading writes nothing"
    );

    // Built-in delete hides; the bundled file stays; only the override is stored.
    let (st, b) = s
        .send(Method::DELETE, &format!("{J}/songs/{BUILTIN_SONG}"), None)
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["hidden"], true);
    assert!(b["message"].is_string());
    assert!(s.bundle.join("jukebox/songs/builtin.wav").exists());
    let c = config(&s).await;
    assert_eq!(c["songs"][BUILTIN_SONG]["visible"], false);
    assert_eq!(c["visibleSongCount"], 0);
    let stored: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("jukebox/config.json")).unwrap())
            .unwrap();
    assert_eq!(stored["songs"], json!({}));
    assert_eq!(stored["actions"], json!({}));
    assert_eq!(
        stored["builtinOverrides"]["songs"][BUILTIN_SONG],
        json!({"visible": false})
    );
    let r = s
        .http
        .get(s.url(&format!("{J}/file/songs/builtin.wav")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    assert_eq!(r.bytes().await.unwrap().to_vec(), builtin_wav());

    // A user action bound to the built-in song, then deleted: file, bindings, default gone.
    let act = upload_ok(&s, "actions", "mine.vmd", vmd("mine")).await;
    let aid = act["id"].as_str().unwrap().to_string();
    let (st, b) = form(
        &s,
        Method::POST,
        &format!("{J}/bind"),
        &[("songId", BUILTIN_SONG), ("actionId", &aid)],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{BUILTIN_SONG}/default-action"),
        &[("action_id", &aid)],
    )
    .await;
    assert_eq!(st, 200);
    let action_file = s.data.join("jukebox/actions/mine.vmd");
    assert!(action_file.exists());
    let (st, b) = s
        .send(Method::DELETE, &format!("{J}/actions/{aid}"), None)
        .await;
    assert_eq!(st, 200, "{b}");
    assert_ne!(b["hidden"], true);
    assert!(!action_file.exists());
    let c = config(&s).await;
    assert!(c["actions"].get(&aid).is_none());
    assert_eq!(c["songs"][BUILTIN_SONG]["defaultAction"], "");
    assert!(c["bindings"][BUILTIN_SONG].get(&aid).is_none());
    assert!(c["md5Index"]["actions"]
        .get(md5_hex(&vmd("mine")))
        .is_none());

    // A user song: file, bindings and index entry removed.
    let song = upload_ok(&s, "songs", "user.wav", wav(90, 2, None, None)).await;
    let sid = song["id"].as_str().unwrap().to_string();
    let (st, _) = form(
        &s,
        Method::POST,
        &format!("{J}/bind"),
        &[("songId", &sid), ("actionId", BUILTIN_ACTION)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, b) = s
        .send(Method::DELETE, &format!("{J}/songs/{sid}"), None)
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(!s.data.join("jukebox/songs/user.wav").exists());
    let c = config(&s).await;
    assert!(c["songs"].get(&sid).is_none());
    assert!(c["bindings"].get(&sid).is_none());
    assert!(c["md5Index"]["songs"]
        .get(md5_hex(&wav(90, 2, None, None)))
        .is_none());
    let (st, e) = s
        .send(Method::DELETE, &format!("{J}/songs/{sid}"), None)
        .await;
    assert_eq!(st, 404);
    assert!(e["detail"].is_string());

    // Batch delete: exact result shape; a missing id changes nothing.
    let u1 = upload_ok(&s, "songs", "one.wav", wav(30, 4, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let u2 = upload_ok(&s, "songs", "two.wav", wav(31, 4, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = config(&s).await;
    let (st, e) = s
        .post(
            &format!("{J}/songs/batch-delete"),
            json!({"songIds": [u1, "nope"]}),
        )
        .await;
    assert_eq!(st, 404, "{e}");
    assert_eq!(e["detail"]["songIds"], json!(["nope"]));
    assert_eq!(config(&s).await, before);
    let (st, b) = s
        .post(
            &format!("{J}/songs/batch-delete"),
            json!({"songIds": [u1, BUILTIN_SONG, u2, u1, ""]}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        b,
        json!({"success": true, "partial": false, "requestedCount": 3, "deletedCount": 2, "hiddenCount": 1,
            "failedCount": 0,
            "deleted": [{"songId": u1, "name": "one"}, {"songId": u2, "name": "two"}],
            "hidden": [{"songId": BUILTIN_SONG, "name": "Built-in Song"}], "failed": []})
    );
    assert_eq!(
        files_in(&s.data.join("jukebox/songs")),
        Vec::<String>::new()
    );
    let (st, _) = s
        .post(&format!("{J}/songs/batch-delete"), json!({"songIds": []}))
        .await;
    assert_eq!(st, 400);
    let (st, e) = s
        .post(&format!("{J}/songs/batch-delete"), json!({"songIds": "x"}))
        .await;
    assert_eq!(st, 422);
    assert!(e["detail"].is_string());

    let a2 = upload_ok(&s, "actions", "two.bvh", bvh("Root")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, b) = s
        .post(
            &format!("{J}/actions/batch-delete"),
            json!({"actionIds": [BUILTIN_ACTION, a2]}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        b["hidden"],
        json!([{"actionId": BUILTIN_ACTION, "name": "Built-in Dance"}])
    );
    assert_eq!(b["deleted"], json!([{"actionId": a2, "name": "two"}]));
    assert!(s.bundle.join("jukebox/actions/builtin.vmd").exists());
    let c = config(&s).await;
    assert_eq!(c["actions"][BUILTIN_ACTION]["visible"], false);
    // Hiding keeps the built-in binding.
    assert_eq!(c["bindings"][BUILTIN_SONG][BUILTIN_ACTION]["offset"], 0);
}

#[tokio::test]
async fn bind_unbind_and_default_action_transitions() {
    let s = plain().await;
    let sid = upload_ok(&s, "songs", "song.wav", wav(70, 8, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let v1 = upload_ok(&s, "actions", "v1.vmd", vmd("v1")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let v2 = upload_ok(&s, "actions", "v2.vmd", vmd("v2")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bh = upload_ok(&s, "actions", "b.bvh", bvh("B")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let v3 = upload_ok(&s, "actions", "v3.vmd", vmd("v3")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bind = format!("{J}/bind");
    let def = format!("{J}/songs/{sid}/default-action");

    // First binding becomes the default; same type keeps it; another type takes over.
    let (st, b) = form(
        &s,
        Method::POST,
        &bind,
        &[("songId", &sid), ("actionId", &v1), ("offset", "5")],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["defaultAction"], v1);
    let (st, b) = mform(
        &s,
        Method::POST,
        &bind,
        &[("songId", &sid), ("actionId", &v2)],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["defaultAction"], v1);
    let (_, b) = form(
        &s,
        Method::POST,
        &bind,
        &[("songId", &sid), ("actionId", &bh), ("offset", "-30")],
    )
    .await;
    assert_eq!(b["defaultAction"], bh);
    let c = config(&s).await;
    assert_eq!(c["bindings"][&sid][&v1], json!({"offset": 5}));
    assert_eq!(c["bindings"][&sid][&v2], json!({"offset": 0}));
    assert_eq!(c["bindings"][&sid][&bh], json!({"offset": -30}));
    assert_eq!(c["songs"][&sid]["defaultAction"], bh);

    // Bad binds.
    for (fields, status) in [
        (
            vec![
                ("songId", sid.as_str()),
                ("actionId", v1.as_str()),
                ("offset", "1.5"),
            ],
            400,
        ),
        (
            vec![
                ("songId", sid.as_str()),
                ("actionId", v1.as_str()),
                ("offset", "abc"),
            ],
            400,
        ),
        (vec![("actionId", v1.as_str())], 400),
        (vec![("songId", "nope"), ("actionId", v1.as_str())], 404),
        (vec![("songId", sid.as_str()), ("actionId", "nope")], 404),
    ] {
        let (st, e) = form(&s, Method::POST, &bind, &fields).await;
        assert_eq!(st, status, "{fields:?} {e}");
        assert!(e["detail"].is_string(), "{e}");
    }

    // Default action: must be bound; unknown ids 404; empty clears.
    let (st, b) = form(&s, Method::PUT, &def, &[("action_id", &v2)]).await;
    assert_eq!((st, b["defaultAction"].clone()), (200, json!(v2)));
    let (st, e) = form(&s, Method::PUT, &def, &[("action_id", &v3)]).await;
    assert_eq!(st, 400, "{e}");
    let (st, _) = form(&s, Method::PUT, &def, &[("action_id", "nope")]).await;
    assert_eq!(st, 404);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/nope/default-action"),
        &[("action_id", &v1)],
    )
    .await;
    assert_eq!(st, 404);
    let (st, _) = form(&s, Method::PUT, &def, &[]).await;
    assert_eq!(st, 400);
    let (st, b) = form(&s, Method::PUT, &def, &[("action_id", "")]).await;
    assert_eq!(
        (st, b),
        (200, json!({"success": true, "defaultAction": ""}))
    );
    let (_, b) = form(&s, Method::PUT, &def, &[("action_id", &v2)]).await;
    assert_eq!(b["defaultAction"], v2);

    // Unbinding the default clears it; unbinding another keeps it; a missing binding is 404.
    let (st, b) = form(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", &sid), ("actionId", &v1)],
    )
    .await;
    assert_eq!((st, b["defaultAction"].clone()), (200, json!(v2)));
    let (st, b) = mform(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", &sid), ("actionId", &v2)],
    )
    .await;
    assert_eq!((st, b["defaultAction"].clone()), (200, json!("")));
    let (st, e) = form(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", &sid), ("actionId", &v2)],
    )
    .await;
    assert_eq!(st, 404);
    assert!(e["detail"].as_str().unwrap().contains("binding"));
    let (st, _) = form(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", "nope"), ("actionId", &v2)],
    )
    .await;
    assert_eq!(st, 404);
    let c = config(&s).await;
    assert_eq!(c["bindings"][&sid].as_object().unwrap().len(), 1);
    assert_eq!(c["songs"][&sid]["defaultAction"], "");

    // Visibility and metadata forms.
    for bad in ["maybe", ""] {
        let (st, e) = form(
            &s,
            Method::PUT,
            &format!("{J}/songs/{sid}/visibility"),
            &[("visible", bad)],
        )
        .await;
        assert_eq!(st, 400, "{bad}: {e}");
    }
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/actions/{v1}/visibility"),
        &[("visible", "0")],
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(config(&s).await["actions"][&v1]["visible"], false);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/actions/nope/visibility"),
        &[("visible", "1")],
    )
    .await;
    assert_eq!(st, 404);
    let (st, b) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{sid}/metadata"),
        &[("artist", "Someone")],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let c = config(&s).await;
    assert_eq!(c["songs"][&sid]["artist"], "Someone");
    assert_eq!(c["songs"][&sid]["name"], "song");
    let (st, _) = form(&s, Method::PUT, &format!("{J}/actions/{v1}/metadata"), &[]).await;
    assert_eq!(st, 400);
    let (st, _) = mform(
        &s,
        Method::PUT,
        &format!("{J}/actions/{v1}/metadata"),
        &[("name", "Wave")],
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(config(&s).await["actions"][&v1]["name"], "Wave");
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/nope/metadata"),
        &[("name", "x")],
    )
    .await;
    assert_eq!(st, 404);
}

/// Songs and bindings keyed by MD5, for comparing libraries across servers.
fn by_md5(c: &Value) -> Value {
    let songs = c["songs"].as_object().unwrap();
    let actions = c["actions"].as_object().unwrap();
    let amd5 = |id: &str| actions[id]["fileMd5"].as_str().unwrap().to_string();
    let mut out = serde_json::Map::new();
    for (id, s) in songs {
        if s["isBuiltin"] == true {
            continue;
        }
        let mut b = serde_json::Map::new();
        if let Some(m) = c["bindings"].get(id).and_then(Value::as_object) {
            for (aid, v) in m {
                b.insert(amd5(aid), v["offset"].clone());
            }
        }
        let default = s["defaultAction"]
            .as_str()
            .filter(|d| !d.is_empty())
            .map(amd5);
        out.insert(
            s["audioMd5"].as_str().unwrap().to_string(),
            json!({"name": s["name"], "artist": s["artist"], "visible": s["visible"],
                "bindings": b, "default": default}),
        );
    }
    let mut acts = serde_json::Map::new();
    for a in actions.values() {
        if a["isBuiltin"] != true {
            acts.insert(
                a["fileMd5"].as_str().unwrap().to_string(),
                json!({"name": a["name"], "format": a["format"]}),
            );
        }
    }
    json!({"songs": out, "actions": acts})
}

#[tokio::test]
async fn export_then_import_round_trips_on_another_server() {
    let a = with_bundle().await;
    let w = wav(300, 13, Some("Round Trip"), Some("Artist A"));
    let m = mp3("Second", "Artist B", 9);
    let s1 = upload_ok(&a, "songs", "one.wav", w.clone()).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let s2 = upload_ok(&a, "songs", "two.mp3", m.clone()).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let s3 = upload_ok(&a, "songs", "hidden.flac", flac("Hidden", None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let a1 = upload_ok(&a, "actions", "one.vmd", vmd("one")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let a2 = upload_ok(&a, "actions", "two.bvh", bvh("Two")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (sid, aid, off) in [
        (&s1, &a1, "12"),
        (&s1, &a2, "-4"),
        (&s2, &a1, "0"),
        (&s2, &BUILTIN_ACTION.to_string(), "7"),
        (&s3, &a2, "3"),
    ] {
        let (st, b) = form(
            &a,
            Method::POST,
            &format!("{J}/bind"),
            &[("songId", sid), ("actionId", aid), ("offset", off)],
        )
        .await;
        assert_eq!(st, 200, "{b}");
    }
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s2}/default-action"),
        &[("action_id", BUILTIN_ACTION)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s1}/default-action"),
        &[("action_id", &a2)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s3}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s1}/metadata"),
        &[("name", "Renamed One")],
    )
    .await;
    assert_eq!(st, 200);
    let ca = config(&a).await;

    // Full export: streamed zip, built-in song skipped, built-in action by id and MD5 only.
    let (st, h, zip) = export(&a, &[]).await;
    assert_eq!(st, 200);
    assert_eq!(h["content-type"], "application/zip");
    assert!(h["content-disposition"]
        .to_str()
        .unwrap()
        .contains("jukebox_export.zip"));
    assert_eq!(h["content-length"].to_str().unwrap(), zip.len().to_string());
    let entries = unzip(&zip);
    let names: Vec<&str> = entries.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "actions/one.vmd",
            "actions/two.bvh",
            "config.json",
            "songs/hidden.flac",
            "songs/one.wav",
            "songs/two.mp3"
        ]
    );
    assert_eq!(entries["songs/one.wav"], w);
    let cfg: Value = serde_json::from_slice(&entries["config.json"]).unwrap();
    assert!(cfg["songs"].get(BUILTIN_SONG).is_none());
    assert_eq!(
        cfg["actions"][BUILTIN_ACTION],
        json!({"id": BUILTIN_ACTION, "name": "Built-in Dance", "fileMd5": md5_hex(&builtin_vmd()), "isBuiltin": true})
    );
    assert_eq!(
        cfg["bindings"][md5_hex(&w)][md5_hex(&vmd("one"))],
        json!({"offset": 12})
    );
    assert_eq!(
        cfg["bindings"][md5_hex(&m)][md5_hex(&builtin_vmd())],
        json!({"offset": 7})
    );
    assert!(
        cfg["bindings"].get(md5_hex(&builtin_wav())).is_none(),
        "built-in song bindings are not exported"
    );

    // includeHidden=false drops the hidden song and its bindings; a selection adds bound actions.
    let (_, _, z) = export(&a, &[("includeHidden", "false")]).await;
    let e = unzip(&z);
    assert!(!e.contains_key("songs/hidden.flac"));
    let c: Value = serde_json::from_slice(&e["config.json"]).unwrap();
    assert!(c["songs"].get(&s3).is_none());
    assert!(c["bindings"].get(md5_hex(&flac("Hidden", None))).is_none());
    let sel = serde_json::to_string(&[&s2]).unwrap();
    let (_, _, z) = export(&a, &[("songIds", &sel), ("actionIds", "[]")]).await;
    let e = unzip(&z);
    assert_eq!(
        e.keys().cloned().collect::<Vec<_>>(),
        vec!["actions/one.vmd", "config.json", "songs/two.mp3"]
    );
    let c: Value = serde_json::from_slice(&e["config.json"]).unwrap();
    assert_eq!(c["actions"].as_object().unwrap().len(), 2, "{c}");
    let (st, err) = {
        let (st, _, body) = export(&a, &[("songIds", "not json")]).await;
        (st, serde_json::from_slice::<Value>(&body).unwrap())
    };
    assert_eq!(st, 400);
    assert!(err["detail"].is_string());
    let (st, _, _) = export(&a, &[("includeHidden", "perhaps")]).await;
    assert_eq!(st, 400);

    // Import on a second server with the same bundle.
    let b = with_bundle().await;
    let (st, r) = import(&b, zip.clone()).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        r["stats"],
        json!({"songsAdded": 3, "songsMerged": 0, "actionsAdded": 2, "actionsMerged": 2, "bindingsAdded": 5})
    );
    let cb = config(&b).await;
    assert_eq!(by_md5(&cb), by_md5(&ca));
    assert_eq!(cb["songCount"], ca["songCount"]);
    for f in ["songs/one.wav", "songs/two.mp3", "actions/one.vmd"] {
        assert_eq!(
            std::fs::read(b.data.join("jukebox").join(f)).unwrap(),
            entries[f]
        );
    }
    // Importing again merges everything and adds nothing.
    let (st, r) = import(&b, zip.clone()).await;
    assert_eq!(st, 200);
    assert_eq!(
        r["stats"],
        json!({"songsAdded": 0, "songsMerged": 3, "actionsAdded": 0, "actionsMerged": 4, "bindingsAdded": 0})
    );
    assert_eq!(config(&b).await["configRevision"], cb["configRevision"]);

    // Delete everything on the first server, import: the same library again.
    let (st, _) = a
        .post(
            &format!("{J}/songs/batch-delete"),
            json!({"songIds": [s1, s2, s3]}),
        )
        .await;
    assert_eq!(st, 200);
    let (st, _) = a
        .post(
            &format!("{J}/actions/batch-delete"),
            json!({"actionIds": [a1, a2]}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        files_in(&a.data.join("jukebox/songs")),
        Vec::<String>::new()
    );
    let (st, r) = import(&a, zip).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(by_md5(&config(&a).await), by_md5(&ca));
}

#[tokio::test]
async fn hostile_archives_and_oversized_uploads_are_refused() {
    let s = small().await;
    let songs = s.data.join("jukebox/songs");
    let tmp = s.data.join("jukebox/.tmp");
    let outside = s.data.join("evil.txt");
    let clean = config(&s).await;
    let song_cfg = |file: &str| {
        serde_json::to_vec(
            &json!({"songs": {"x": {"id": "x", "name": "X", "audio": format!("songs/{file}")}}}),
        )
        .unwrap()
    };

    // Zip-slip entries: refused whole, nothing written anywhere.
    for evil in [
        "../evil.txt",
        "../../evil.txt",
        "/tmp/evil.txt",
        "songs/../../evil.txt",
        "..\\evil.txt",
    ] {
        let z = make_zip(
            &[
                ("config.json", song_cfg("a.wav")),
                ("songs/a.wav", wav(10, 1, None, None)),
                (evil, b"pwned".to_vec()),
            ],
            zip::CompressionMethod::Stored,
        );
        let (st, e) = import(&s, z).await;
        assert_eq!(st, 400, "{evil}: {e}");
        assert!(detail(&e).contains("unsafe"), "{e}");
        assert!(!outside.exists());
    }
    // Record paths pointing outside songs/ are skipped, never followed.
    let z = make_zip(
        &[(
            "config.json",
            serde_json::to_vec(&json!({"songs": {"x": {"audio": "../config.json"}, "y": {"audio": "songs/../../../x.wav"}}})).unwrap(),
        )],
        zip::CompressionMethod::Stored,
    );
    let (st, r) = import(&s, z).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["stats"]["songsAdded"], 0);

    // A bomb: 20 MB of zeros deflated to a few KB, over the 1 MB file limit.
    let bomb = make_zip(
        &[
            ("config.json", song_cfg("bomb.wav")),
            ("songs/bomb.wav", vec![0u8; 20 << 20]),
        ],
        zip::CompressionMethod::Deflated,
    );
    assert!(bomb.len() < 200_000);
    let (st, e) = import(&s, bomb).await;
    assert_eq!(st, 413, "{e}");
    // Many entries each under the file limit, together over the 4 MB archive limit.
    let mut cfg = serde_json::Map::new();
    let mut ents: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..6 {
        cfg.insert(format!("s{i}"), json!({"audio": format!("songs/s{i}.wav")}));
        let mut data = vec![0u8; 900 << 10];
        data[0] = i;
        ents.push((format!("songs/s{i}.wav"), data));
    }
    ents.push((
        "config.json".into(),
        serde_json::to_vec(&json!({"songs": cfg})).unwrap(),
    ));
    let refs: Vec<(&str, Vec<u8>)> = ents.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    let (st, e) = import(&s, make_zip(&refs, zip::CompressionMethod::Deflated)).await;
    assert_eq!(st, 413, "{e}");
    assert_eq!(files_in(&songs), Vec::<String>::new(), "no partial files");

    // More records than the entry limit (50 in this server).
    let many: serde_json::Map<String, Value> = (0..60)
        .map(|i| (format!("s{i}"), json!({"audio": "songs/a.wav"})))
        .collect();
    let z = make_zip(
        &[
            (
                "config.json",
                serde_json::to_vec(&json!({"songs": many})).unwrap(),
            ),
            ("songs/a.wav", wav(5, 1, None, None)),
        ],
        zip::CompressionMethod::Stored,
    );
    let (st, e) = import(&s, z).await;
    assert_eq!(st, 400, "{e}");
    // One entry named by many records is extracted once and added once.
    let few: serde_json::Map<String, Value> = (0..20)
        .map(|i| {
            (
                format!("s{i}"),
                json!({"audio": "songs/a.wav", "name": format!("N{i}")}),
            )
        })
        .collect();
    let z = make_zip(
        &[
            (
                "config.json",
                serde_json::to_vec(&json!({"songs": few})).unwrap(),
            ),
            ("songs/a.wav", wav(5, 1, None, None)),
        ],
        zip::CompressionMethod::Stored,
    );
    let (st, r) = import(&s, z).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["stats"]["songsAdded"], 1);
    assert_eq!(r["stats"]["songsMerged"], 19);
    let id = config(&s).await["md5Index"]["songs"][md5_hex(&wav(5, 1, None, None))]
        .as_str()
        .unwrap()
        .to_string();
    let (st, _) = s
        .send(Method::DELETE, &format!("{J}/songs/{id}"), None)
        .await;
    assert_eq!(st, 200);

    // Not a zip, no config.json, bad config.json, an archive over the limit.
    let (st, e) = import(&s, b"definitely not a zip".to_vec()).await;
    assert_eq!(st, 400, "{e}");
    let (st, e) = import(
        &s,
        make_zip(
            &[("songs/a.wav", wav(5, 1, None, None))],
            zip::CompressionMethod::Stored,
        ),
    )
    .await;
    assert_eq!(st, 400);
    assert!(detail(&e).contains("config.json"));
    let (st, _) = import(
        &s,
        make_zip(
            &[("config.json", b"[1,2".to_vec())],
            zip::CompressionMethod::Stored,
        ),
    )
    .await;
    assert_eq!(st, 400);
    let (st, e) = import(&s, vec![7u8; 5 << 20]).await;
    assert_eq!(st, 413, "{e}");
    let r = s
        .http
        .post(s.url(&format!("{J}/import")))
        .multipart(Form::new().text("other", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // Uploads over the 1 MB file limit: 413 while streaming, nothing kept, even the
    // smaller file of the same request.
    let big = vec![1u8; (1 << 20) + 1];
    let (st, e) = upload(&s, "songs", &[("big.wav", big.clone())], None).await;
    assert_eq!(st, 413, "{e}");
    assert!(e["detail"].is_string());
    let (st, _) = upload(
        &s,
        "songs",
        &[("ok.wav", wav(20, 1, None, None)), ("big.wav", big)],
        None,
    )
    .await;
    assert_eq!(st, 413);
    let (st, _) = upload(&s, "actions", &[("big.vmd", vec![2u8; 3 << 20])], None).await;
    assert_eq!(st, 413);
    assert_eq!(files_in(&songs), Vec::<String>::new());
    assert_eq!(
        files_in(&s.data.join("jukebox/actions")),
        Vec::<String>::new()
    );
    assert_eq!(files_in(&tmp), Vec::<String>::new());
    assert_eq!(config(&s).await, clean);
    // Exactly at the limit is fine.
    let (st, b) = upload(&s, "songs", &[("edge.wav", vec![3u8; 1 << 20])], None).await;
    assert_eq!(st, 200, "{b}");
}

#[tokio::test]
async fn file_route_serves_ranges_prefers_user_files_and_blocks_traversal() {
    let s = with_bundle().await;
    let w = wav(500, 21, None, None);
    let song = upload_ok(&s, "songs", "track.wav", w.clone()).await;
    let url = format!("{J}/file/{}", song["audio"].as_str().unwrap());
    let r = s.http.get(s.url(&url)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    assert_eq!(r.bytes().await.unwrap().to_vec(), w);

    // Range requests (audio seeking).
    let r = s
        .http
        .get(s.url(&url))
        .header("Range", "bytes=0-3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes 0-3/{}", w.len()).as_str()
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"RIFF");
    let r = s
        .http
        .get(s.url(&url))
        .header("Range", "bytes=100-")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap().to_vec(), w[100..].to_vec());
    let r = s
        .http
        .get(s.url(&url))
        .header("Range", "bytes=999999-")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);

    let mp = upload_ok(&s, "songs", "x.mp3", mp3("t", "a", 3)).await;
    let r = s
        .http
        .get(s.url(&format!("{J}/file/{}", mp["audio"].as_str().unwrap())))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "audio/mpeg");
    let r = s
        .http
        .get(s.url(&format!("{J}/file/actions/builtin.vmd")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    assert_eq!(r.bytes().await.unwrap().to_vec(), builtin_vmd());

    // The user folder wins over the bundled one.
    std::fs::create_dir_all(s.data.join("jukebox/actions")).unwrap();
    std::fs::write(s.data.join("jukebox/actions/builtin.vmd"), b"user copy").unwrap();
    let r = s
        .http
        .get(s.url(&format!("{J}/file/actions/builtin.vmd")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"user copy");
    let r = s
        .http
        .get(s.url(&format!("{J}/file/songs/nothing.wav")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let (_, body) = split(r).await;
    assert!(body["detail"].is_string());

    // Traversal: secrets outside the library folders are never served.
    std::fs::write(s.data.join("secret.txt"), b"TOPSECRET").unwrap();
    std::fs::write(s.bundle.join("secret.txt"), b"TOPSECRET").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        s.data.join("secret.txt"),
        s.data.join("jukebox/songs/link.wav"),
    )
    .unwrap();
    let table = [
        "/api/jukebox/file/../secret.txt",
        "/api/jukebox/file/songs/../../secret.txt",
        "/api/jukebox/file/songs/../../../data/secret.txt",
        "/api/jukebox/file/%2e%2e/secret.txt",
        "/api/jukebox/file/songs/%2e%2e/%2e%2e/secret.txt",
        "/api/jukebox/file/songs%2f..%2f..%2fsecret.txt",
        "/api/jukebox/file/songs/..%5c..%5csecret.txt",
        "/api/jukebox/file/songs/%252e%252e/%252e%252e/secret.txt",
        "/api/jukebox/file//etc/passwd",
        "/api/jukebox/file/C:/Windows/win.ini",
        "/api/jukebox/file/songs/%00.wav",
        "/api/jukebox/file/static/jukebox/../../secret.txt",
        "/api/jukebox/file/config.json",
        "/api/jukebox/file/songs/link.wav",
        "/api/jukebox/file/songs",
    ];
    for path in table {
        let (st, text) = raw_get(&s, path).await;
        assert!(st == 400 || st == 404, "{path}: {st}\n{text}");
        assert!(!text.contains("TOPSECRET"), "{path} leaked");
        assert!(!text.contains("root:"), "{path} leaked");
    }
}

#[tokio::test]
async fn pack_folder_streams_a_zip_of_relative_paths_and_routes_are_documented() {
    let s = plain().await;
    let files = [
        ("My Dance/motion.vmd", vmd("pack")),
        ("My Dance/audio/song.wav", wav(40, 6, None, None)),
        ("My Dance/readme.txt", b"hello".to_vec()),
    ];
    let mut f = Form::new();
    for (name, data) in &files {
        f = f.part(
            "files",
            Part::bytes(data.clone()).file_name(name.to_string()),
        );
    }
    let r = s
        .http
        .post(s.url(&format!("{J}/pack-folder")))
        .multipart(f)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/zip");
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("packed.zip"));
    let entries = unzip(&r.bytes().await.unwrap());
    assert_eq!(entries.len(), 3);
    for (name, data) in &files {
        assert_eq!(&entries[*name], data, "{name}");
    }

    for bad in [
        vec!["../x.vmd"],
        vec!["/abs/x.vmd"],
        vec!["a/../../x"],
        vec!["a.vmd", "a.vmd"],
        vec![],
    ] {
        let mut f = Form::new().text("note", "x");
        for name in &bad {
            f = f.part(
                "files",
                Part::bytes(b"data".to_vec()).file_name(name.to_string()),
            );
        }
        let r = s
            .http
            .post(s.url(&format!("{J}/pack-folder")))
            .multipart(f)
            .send()
            .await
            .unwrap();
        let (st, e) = split(r).await;
        assert_eq!(st, 400, "{bad:?}: {e}");
        assert!(e["detail"].is_string());
    }
    assert_eq!(files_in(&s.data.join("jukebox/.tmp")), Vec::<String>::new());

    // Every route is in the OpenAPI document.
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    let paths = doc["paths"].as_object().unwrap();
    let mut ops = 0;
    for (p, item) in paths {
        if p.starts_with("/api/jukebox/") {
            ops += item
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "delete"].contains(&k.as_str()))
                .count();
        }
    }
    assert_eq!(ops, 19);
    for (method, path) in [
        ("get", "/api/jukebox/file/{file_path}"),
        ("delete", "/api/jukebox/bind"),
        ("post", "/api/jukebox/bind"),
        ("put", "/api/jukebox/songs/{song_id}/default-action"),
        ("post", "/api/jukebox/pack-folder"),
    ] {
        assert!(paths[path].get(method).is_some(), "{method} {path}");
    }
}

// ------------------------------------------------------------------ issue 18

/// Every file under `dir` (recursive, hidden staging files included), relative.
fn tree(dir: &Path) -> Vec<String> {
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
fn raw_multipart(part: &str, filename: &str, data: &[u8]) -> (String, Vec<u8>) {
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

async fn send_raw(s: &TestServer, path: &str, (ct, body): (String, Vec<u8>)) -> (u16, Value) {
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

#[tokio::test]
async fn over_long_and_odd_file_names_are_refused_on_every_upload_route() {
    let s = plain().await;
    let lib = s.data.join("jukebox");
    let long_ascii = format!("{}.wav", "a".repeat(252)); // 256 bytes
    let long_cjk = format!("{}.wav", "曲".repeat(84)); // 256 bytes, 88 characters
    let bad: Vec<(String, &str)> = vec![
        (long_ascii.clone(), "too long"),
        (long_cjk.clone(), "too long"),
        ("..".into(), "dots or spaces"),
        ("...".into(), "dots or spaces"),
        ("   ".into(), "dots or spaces"),
        (". . .".into(), "dots or spaces"),
        // a C1 control character passes the multipart parser and is named
        ("a\u{85}b.wav".into(), "refuses"),
    ];
    let before = tree(&lib);
    for kind in ["songs", "actions"] {
        for (name, why) in &bad {
            let name = if kind == "actions" {
                name.replace(".wav", ".vmd")
            } else {
                name.clone()
            };
            let data = if kind == "songs" {
                wav(20, 3, None, None)
            } else {
                vmd("x")
            };
            let (st, b) = upload(&s, kind, &[(name.as_str(), data)], None).await;
            assert_eq!(st, 400, "{kind} {name:?}: {b}");
            assert!(detail(&b).contains(why), "{kind} {name:?}: {b}");
            assert_eq!(tree(&lib), before, "{kind} {name:?} left files");
        }
    }
    // The same names sent raw (no client re-encoding), and NUL: 400, nothing written.
    for name in [long_cjk.as_str(), "..", "a\0b.wav", "a\u{1}b.wav"] {
        let (st, b) = send_raw(
            &s,
            &format!("{J}/songs"),
            raw_multipart("files", name, &wav(20, 4, None, None)),
        )
        .await;
        assert_eq!(st, 400, "{name:?}: {b}");
        assert_eq!(tree(&lib), before, "{name:?} left files");
    }
    // Several files: the bad one fails alone, naming the problem.
    let (st, b) = upload(
        &s,
        "songs",
        &[
            (long_ascii.as_str(), wav(20, 5, None, None)),
            ("fine.wav", wav(20, 6, None, None)),
        ],
        None,
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["results"][0]["success"], false);
    assert!(
        b["results"][0]["error"]
            .as_str()
            .unwrap()
            .contains("256 bytes"),
        "{b}"
    );
    assert_eq!(b["results"][1]["success"], true);

    // A 60-character CJK name works; a 253-byte name that clashes gets a suffix
    // that still fits in 255 bytes.
    let cjk60 = format!("{}.wav", "歌".repeat(60));
    let song = upload_ok(&s, "songs", &cjk60, wav(20, 7, None, None)).await;
    assert_eq!(song["audio"], format!("songs/{cjk60}"));
    let name253 = format!("{}.wav", "歌".repeat(83));
    let first = upload_ok(&s, "songs", &name253, wav(20, 8, None, None)).await;
    let second = upload_ok(&s, "songs", &name253, wav(20, 9, None, None)).await;
    assert_eq!(first["audio"], format!("songs/{name253}"));
    let stored = second["audio"]
        .as_str()
        .unwrap()
        .trim_start_matches("songs/");
    assert!(
        stored.len() <= 255 && stored.ends_with("_1.wav"),
        "{stored}"
    );
    assert!(lib.join("songs").join(stored).is_file());

    // pack-folder: every component is checked.
    let before = tree(&lib);
    for path in [
        format!("Dance/{}", long_ascii.replace(".wav", ".vmd")),
        format!("{}/x.vmd", "d".repeat(256)),
        "Dance/ . /x.vmd".to_string(),
    ] {
        let form = Form::new().part("files", Part::bytes(vmd("x")).file_name(path.clone()));
        let r = s
            .http
            .post(s.url(&format!("{J}/pack-folder")))
            .multipart(form)
            .send()
            .await
            .unwrap();
        let (st, b) = split(r).await;
        assert_eq!(st, 400, "{path}: {b}");
    }
    // import: an entry with an over-long or dot-only component refuses the archive.
    for entry in [
        format!("songs/{long_ascii}"),
        format!("{}/a.wav", "s".repeat(300)),
    ] {
        let file = entry.clone();
        let cfg = json!({"songs": {"x": {"id": "x", "name": "X", "audio": file}}});
        let z = make_zip(
            &[
                ("config.json", serde_json::to_vec(&cfg).unwrap()),
                (entry.as_str(), wav(10, 11, None, None)),
            ],
            zip::CompressionMethod::Stored,
        );
        let (st, e) = import(&s, z).await;
        assert_eq!(st, 400, "{e}");
        assert!(detail(&e).contains("too long"), "{e}");
        let after: Vec<String> = tree(&lib)
            .into_iter()
            .filter(|p| !p.starts_with(".tmp"))
            .collect();
        let want: Vec<String> = before
            .iter()
            .filter(|p| !p.starts_with(".tmp"))
            .cloned()
            .collect();
        assert_eq!(after, want, "import left files");
    }
}

#[tokio::test]
async fn bind_offsets_are_range_checked_and_hidden_defaults_are_not_exported() {
    let s = with_bundle().await;
    let sid = upload_ok(&s, "songs", "one.wav", wav(40, 21, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = upload_ok(&s, "actions", "shown.vmd", vmd("shown")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let hidden = upload_ok(&s, "actions", "hidden.vmd", vmd("hidden")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    // offsets: integers within the 32-bit range; anything else 400, never a 5xx
    for off in [
        "18446744073709551616",
        "9223372036854775807",
        "2147483648",
        "-2147483649",
        "1e308",
        "-0.0",
        "NaN",
        "1e-320",
        "1.5",
        "{}",
    ] {
        let (st, b) = form(
            &s,
            Method::POST,
            &format!("{J}/bind"),
            &[("songId", &sid), ("actionId", &shown), ("offset", off)],
        )
        .await;
        assert_eq!(st, 400, "offset={off}: {b}");
    }
    for v in [
        json!(18446744073709551616.0),
        json!(-1e308),
        json!(-0.0),
        json!("NaN"),
        json!(1e-320),
        json!({"n": {"m": 1}}),
        json!([1]),
    ] {
        let r = s
            .http
            .post(s.url(&format!("{J}/bind")))
            .json(&json!({"songId": sid, "actionId": shown, "offset": v}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "offset={v}");
    }
    for (aid, off) in [(&shown, "2147483647"), (&hidden, "-2147483647")] {
        let (st, b) = form(
            &s,
            Method::POST,
            &format!("{J}/bind"),
            &[("songId", &sid), ("actionId", aid), ("offset", off)],
        )
        .await;
        assert_eq!(st, 200, "{b}");
    }
    // the default action is the hidden one
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{sid}/default-action"),
        &[("action_id", &hidden)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/actions/{hidden}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _, z) = export(&s, &[("includeHidden", "false")]).await;
    assert_eq!(st, 200);
    let c: Value = serde_json::from_slice(&unzip(&z)["config.json"]).unwrap();
    assert!(c["actions"].get(&hidden).is_none());
    assert_eq!(c["songs"][&sid]["defaultAction"], "", "{c}");
    assert_eq!(
        c["bindings"][md5_hex(&wav(40, 21, None, None))][md5_hex(&vmd("shown"))],
        json!({"offset": 2147483647})
    );
    // the library keeps its default; a full export keeps it too
    assert_eq!(config(&s).await["songs"][&sid]["defaultAction"], hidden);
    let (_, _, z) = export(&s, &[]).await;
    let c: Value = serde_json::from_slice(&unzip(&z)["config.json"]).unwrap();
    assert_eq!(c["songs"][&sid]["defaultAction"], hidden);
    // an exported default that is exported stays
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{sid}/default-action"),
        &[("action_id", &shown)],
    )
    .await;
    assert_eq!(st, 200);
    let (_, _, z) = export(&s, &[("includeHidden", "false")]).await;
    let c: Value = serde_json::from_slice(&unzip(&z)["config.json"]).unwrap();
    assert_eq!(c["songs"][&sid]["defaultAction"], shown);
}

//! Fixtures shared by every memory test: servers, history files, HTTP helpers
//! and one chat turn over the real WebSocket.

pub use std::collections::BTreeMap;
pub use std::path::{Path, PathBuf};
pub use std::sync::Arc;
pub use std::time::{Duration, Instant};

pub use companiond_core::testkit::{MockLlm, MockReply, TestOptions, TestServer, Upstream};
pub use futures::{SinkExt, StreamExt};
pub use serde_json::{json, Value};
pub use tokio_tungstenite::tungstenite::Message;

/// The character the long-term memory tests talk to.
pub const C: &str = "Companion";

pub async fn server() -> TestServer {
    TestServer::start(&[companiond_memory::FAMILY]).await
}

pub fn recent_path(s: &TestServer, name: &str) -> PathBuf {
    s.data.join("memory").join(name).join("recent.json")
}

pub fn write_history(s: &TestServer, name: &str, v: &Value) {
    let p = recent_path(s, name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

pub fn msg(t: &str, c: &str) -> Value {
    json!({"type": t, "data": {"content": c}})
}

pub fn theater_msg(c: &str) -> Value {
    json!({"type": "system", "data": {"content": c, "metadata": {
        "source": companiond_core::history::line::THEATER_SOURCE, "memory_tier": "episode_summary", "story_id": "st-1", "run_index": 2}}})
}

pub async fn read(s: &TestServer, filename: &str) -> (u16, Value) {
    let url = format!("/api/memory/recent_file?filename={}", url_encode(filename));
    s.get(&url).await
}

pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub async fn save(s: &TestServer, body: Value) -> (u16, Value) {
    s.post("/api/memory/recent_file/save", body).await
}

pub async fn post_raw(s: &TestServer, path: &str, body: Vec<u8>) -> (u16, Value) {
    let r = s
        .http
        .post(s.url(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    companiond_core::testkit::split(r).await
}

pub fn sha(b: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(b))
}

pub fn texts(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["content"].as_str().unwrap_or("").to_string())
        .collect()
}

pub fn stored(s: &TestServer, name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(recent_path(s, name)).unwrap()).unwrap()
}

/// Every file (bytes) and directory below `dir`.
pub fn tree(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let m = p.symlink_metadata().unwrap();
            if m.is_dir() {
                out.insert(rel + "/", None);
                walk(base, &p, out);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

pub async fn server_with(
    families: &[companiond_core::server::Family],
    copy_from: Option<&Path>,
) -> TestServer {
    let prepare: Option<companiond_core::testkit::PrepareDirs> = copy_from.map(|src| {
        let src = src.to_path_buf();
        Box::new(move |data: &Path, _: &Path| copy_dir(&src, data)) as _
    });
    TestServer::start_with(
        families,
        TestOptions {
            prepare,
            ..Default::default()
        },
    )
    .await
}

pub async fn memory_server(copy_from: Option<&Path>) -> TestServer {
    server_with(&[companiond_memory::FAMILY], copy_from).await
}

pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
}

pub use companiond_core::testkit::next_frame;

/// One chat turn on a fresh socket: the streamed reply and every frame.
pub async fn turn(s: &TestServer, name: &str, text: &str) -> (String, Vec<Value>) {
    let (mut ws, _) = s.chat(name).await;
    ws.send(Message::Text(
        json!({"type": "user_text", "text": text}).to_string(),
    ))
    .await
    .unwrap();
    let mut reply = String::new();
    let mut frames = Vec::new();
    loop {
        let f = next_frame(&mut ws).await;
        if f["type"] == "assistant_delta" {
            reply.push_str(f["text"].as_str().unwrap_or(""));
        }
        let end = f["type"] == "turn_end";
        frames.push(f);
        if end {
            break;
        }
    }
    let _ = ws.close(None).await;
    (reply, frames)
}

/// The system prompt of the last conversation request.
pub fn last_system_prompt(llm: &MockLlm) -> String {
    let reqs: Vec<Value> = llm
        .chat_requests()
        .into_iter()
        .filter(|r| r["stream"] == true)
        .collect();
    let last = reqs.last().expect("a conversation request");
    last["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

pub async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

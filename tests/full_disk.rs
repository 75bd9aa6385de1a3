//! A full disk and a read-only data folder (docs/data.md § When the disk is
//! full): the data folder lives on a small tmpfs this test mounts (it runs as
//! root in CI; elsewhere it says why it did nothing). The disk is filled, then
//! every kind of write answers its family's envelope with `storage_full` (507),
//! no stored file changes, a chat turn streams its reply and says it was not
//! saved, reads go on — and once space is freed the same writes succeed,
//! without a restart.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use companiond_core::testkit::{files_under, turn_frames, MockLlm, TestServer};
use futures::SinkExt;
use reqwest::Method;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// A tmpfs mounted for the test, unmounted when dropped.
struct Mount {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Mount {
    fn new(size: &str) -> Result<Mount, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(Mount { _dir: dir, path })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// A 16 MiB tmpfs for the data folder; `None` (the test says why and does
/// nothing) when not root, and a failure when root cannot mount one.
fn tmpfs_or_skip() -> Option<Mount> {
    match Mount::new("16m") {
        Ok(m) => Some(m),
        Err(e) if !is_root() => {
            eprintln!("skipped: mounting a tmpfs needs root ({e})");
            None
        }
        Err(e) => panic!("cannot mount a tmpfs as root: {e}"),
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Fill the disk under `dir` to its last byte; the filler's path.
fn fill(dir: &Path) -> PathBuf {
    let p = dir.join("filler");
    let mut f = std::fs::File::create(&p).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).and_then(|_| f.sync_data()).is_ok() {}
    // The last partial block too.
    while f.write_all(&[0u8]).is_ok() && f.sync_data().is_ok() {}
    p
}

/// One write of every family: (what, method, path, body).
fn writes() -> Vec<(&'static str, Method, &'static str, Value)> {
    vec![
        (
            "config: the model settings",
            Method::POST,
            "/api/config/core_api",
            json!({"coreApiKey": "sk-full-disk"}),
        ),
        (
            "config: the conversation settings",
            Method::POST,
            "/api/config/conversation-settings",
            json!({"noiseReductionEnabled": true}),
        ),
        (
            "frontend: a new character",
            Method::POST,
            "/api/characters/catgirl",
            json!({"档案名": "Bo"}),
        ),
        (
            "characters: a new character",
            Method::POST,
            "/api/characters/profile",
            json!({"name": "Mika"}),
        ),
        (
            "memory: the review setting",
            Method::POST,
            "/api/memory/review_config",
            json!({"enabled": false}),
        ),
        (
            "system: the tutorial state",
            Method::PUT,
            "/api/seven-day-tutorial/state",
            json!({"state": {"day": 2}, "expectedRevision": 0}),
        ),
        (
            "mcp: a server",
            Method::POST,
            "/api/mcp/servers",
            json!({"name": "notes", "server": {"command": "true"}}),
        ),
        (
            "cloudsave: an upload",
            Method::POST,
            "/api/cloudsave/character/Companion/upload",
            json!({}),
        ),
    ]
}

/// The `error_code` of an answer, in whichever envelope its family uses
/// (cloud save's codes are upper case).
fn code_of(body: &Value) -> Option<String> {
    body.get("error_code")
        .or_else(|| body.get("reason"))
        .or_else(|| body.get("code"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_cleanly_and_writes_resume_once_space_is_freed() {
    let Some(disk) = tmpfs_or_skip() else {
        return;
    };
    let data = disk.path.join("data");
    let llm = MockLlm::start("the reply that stays on the socket").await;
    let s = TestServer::start_in(companiond::FAMILIES, &data).await;
    s.configure_llm(&llm.base()).await;

    // Some life first: a turn, so the history exists.
    let (mut ws, _) = s.chat("Companion").await;
    ws.send(Message::text(
        json!({"type": "user_text", "text": "hello"}).to_string(),
    ))
    .await
    .unwrap();
    let frames = turn_frames(&mut ws).await;
    assert!(
        !frames.iter().any(|f| f["type"] == "error"),
        "a turn with room on the disk: {frames:?}"
    );

    let filler = fill(&disk.path);
    let before = files_under(&data);

    for (what, method, path, body) in writes() {
        let (status, answer) = send(&s, method, path, body).await;
        assert_eq!(status, 507, "{what}: {answer}");
        assert_eq!(
            code_of(&answer).as_deref(),
            Some("storage_full"),
            "{what}: {answer}"
        );
        let text = answer.to_string();
        assert!(!text.contains("os error"), "{what}: no OS message: {text}");
    }
    // A multipart upload of the jukebox, bigger than what is left.
    let mut form = b"--b0undary\r\nContent-Disposition: form-data; name=\"files\"; filename=\"song.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\n".to_vec();
    form.extend(vec![7u8; 256 * 1024]);
    form.extend(b"\r\n--b0undary--\r\n");
    let r = s
        .csrf(Method::POST, "/api/jukebox/songs")
        .header("Content-Type", "multipart/form-data; boundary=b0undary")
        .body(form)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let answer: Value = r.json().await.unwrap();
    let refused = status == 507
        || answer["results"]
            .as_array()
            .is_some_and(|r| r.iter().all(|x| x["success"] == false));
    assert!(refused, "the jukebox upload: {status} {answer}");

    // A chat turn: the reply reaches the socket, then an error says it was not saved.
    ws.send(Message::text(
        json!({"type": "user_text", "text": "are you there?"}).to_string(),
    ))
    .await
    .unwrap();
    let frames = turn_frames(&mut ws).await;
    let reply: String = frames
        .iter()
        .filter(|f| f["type"] == "assistant_delta")
        .filter_map(|f| f["text"].as_str())
        .collect();
    assert_eq!(reply, "the reply that stays on the socket", "{frames:?}");
    let error = frames
        .iter()
        .find(|f| f["type"] == "error")
        .unwrap_or_else(|| panic!("an error frame: {frames:?}"));
    assert_eq!(error["code"], "storage_full", "{error}");

    // Reads go on.
    let (status, _) = s.get("/api/characters").await;
    assert_eq!(status, 200);
    let (status, _) = s.get("/api/config/core_api").await;
    assert_eq!(status, 200);
    let (status, ready) = s.get("/readyz").await;
    assert_eq!(status, 503, "{ready}");

    // Nothing stored changed, nothing was left behind.
    let after = files_under(&data);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (rel, bytes) in &before {
        assert!(after.get(rel) == Some(bytes), "{rel} changed");
    }

    // Space freed: the same writes succeed, without a restart.
    std::fs::remove_file(&filler).unwrap();
    for (what, method, path, body) in writes() {
        let (status, answer) = send(&s, method, path, body).await;
        assert!(
            (200..300).contains(&status),
            "{what} after space was freed: {status} {answer}"
        );
    }
    ws.send(Message::text(
        json!({"type": "user_text", "text": "and now?"}).to_string(),
    ))
    .await
    .unwrap();
    let frames = turn_frames(&mut ws).await;
    assert!(!frames.iter().any(|f| f["type"] == "error"), "{frames:?}");
    let history: Vec<Value> =
        serde_json::from_slice(&std::fs::read(data.join("memory/Companion/recent.json")).unwrap())
            .unwrap();
    assert!(history.len() >= 4, "{history:?}");
}

/// `method path` with the CSRF header and a JSON body.
async fn send(s: &TestServer, method: Method, path: &str, body: Value) -> (u16, Value) {
    companiond_core::testkit::split(s.csrf(method, path).json(&body).send().await.unwrap()).await
}

/// Run `cmd args`, panicking with its stderr when it fails.
fn sh(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_folder_refuses_writes_cleanly_and_writes_resume_when_writable_again() {
    let Some(disk) = tmpfs_or_skip() else {
        return;
    };
    let data = disk.path.join("data");
    let s = TestServer::start_in(companiond::FAMILIES, &data).await;
    let (status, _) = send(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Aki"}),
    )
    .await;
    assert_eq!(status, 200);

    // The settings and memory folders become read-only (as a folder on a
    // read-only mount): a read-only copy is mounted over each.
    let mut covers = Vec::new();
    for sub in ["config", "memory"] {
        let copy = Mount::new("4m").unwrap();
        let from = data.join(sub);
        sh(
            "cp",
            &[
                "-a",
                &format!("{}/.", from.display()),
                &copy.path.display().to_string(),
            ],
        );
        sh(
            "mount",
            &["-o", "remount,ro", &copy.path.display().to_string()],
        );
        sh(
            "mount",
            &[
                "--bind",
                &copy.path.display().to_string(),
                &from.display().to_string(),
            ],
        );
        covers.push((from, copy));
    }
    let before = files_under(&data);
    let refused = [
        (
            "config",
            Method::POST,
            "/api/config/core_api",
            json!({"coreApiKey": "sk-ro"}),
        ),
        (
            "frontend",
            Method::POST,
            "/api/characters/catgirl",
            json!({"档案名": "Bo"}),
        ),
        (
            "characters",
            Method::POST,
            "/api/characters/profile",
            json!({"name": "Mika"}),
        ),
        (
            "memory",
            Method::POST,
            "/api/memory/review_config",
            json!({"enabled": false}),
        ),
    ];
    for (what, method, path, body) in refused.clone() {
        let (status, answer) = send(&s, method, path, body).await;
        assert_eq!(status, 503, "{what}: {answer}");
        assert_eq!(
            code_of(&answer).as_deref(),
            Some("storage_read_only"),
            "{what}: {answer}"
        );
    }
    let (status, _) = s.get("/api/characters").await;
    assert_eq!(status, 200, "reads go on");
    assert_eq!(files_under(&data), before, "nothing changed");

    // Writable again: the same writes succeed without a restart.
    for (from, _copy) in &covers {
        sh("umount", &[&from.display().to_string()]);
    }
    for (what, method, path, body) in refused {
        let (status, answer) = send(&s, method, path, body).await;
        assert!((200..300).contains(&status), "{what}: {status} {answer}");
    }
}

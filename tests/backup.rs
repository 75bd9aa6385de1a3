//! Whole backups and restores (docs/data.md § Backup and restore): the real
//! binary's `companiond backup --out FILE` and `companiond restore FILE`, and
//! the streamed `GET /api/backup` / `POST /api/backup/restore`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use companiond_core::testkit::{files_under as tree, next_of_type, MockLlm, TestServer, CSRF};
use futures::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const BIN: &str = env!("CARGO_BIN_EXE_companiond");

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("COMPANIOND_") {
            c.env_remove(k);
        }
    }
    c.env("RUST_LOG", "warn");
    c
}

fn run(args: &[&str]) -> Output {
    command(args).output().expect("run companiond")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The rows of every ordinary table of a SQLite database, as text.
fn db_rows(p: &Path) -> BTreeMap<String, Vec<String>> {
    let c = rusqlite::Connection::open(p).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok", "{}", p.display());
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type='table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = BTreeMap::new();
    for t in tables {
        let mut st = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = st.column_count();
        let mut rows: Vec<String> = st
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.insert(t, rows);
    }
    out
}

/// `restored` holds what `live` holds: documents byte for byte, databases row
/// for row.
fn assert_equal_folders(live: &Path, restored: &Path) {
    let (a, b) = (tree(live), tree(restored));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "the same files"
    );
    for (rel, bytes) in &a {
        if rel.ends_with(".db") {
            assert_eq!(
                db_rows(&live.join(rel)),
                db_rows(&restored.join(rel)),
                "{rel}"
            );
        } else {
            assert!(bytes == &b[rel], "{rel} differs");
        }
    }
}

fn restore_into(archive: &Path, dir: &Path) -> Output {
    run(&[
        "restore",
        archive.to_str().unwrap(),
        "--data-dir",
        dir.to_str().unwrap(),
    ])
}

fn backup(data: &Path, out: &Path, secrets: bool) -> Output {
    let mut args = vec![
        "backup",
        "--out",
        out.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ];
    if secrets {
        args.push("--with-secrets");
    }
    run(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_during_a_chat_restores_to_an_equal_folder() {
    let llm = MockLlm::start("a reply of the companion").await;
    let s = TestServer::start(companiond::FAMILIES).await;
    s.configure_llm(&llm.base()).await;
    let t = tempfile::tempdir().unwrap();
    let (mut ws, _) = s.chat("Companion").await;
    let say = |i: usize| {
        Message::text(json!({"type": "user_text", "text": format!("message {i}")}).to_string())
    };
    ws.send(say(0)).await.unwrap();
    next_of_type(&mut ws, "turn_end").await;

    // Turns go on, one after the other, for as long as the backups are
    // taken (by another process, as a user would run it beside the server).
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_chat = done.clone();
    let chatting = tokio::spawn(async move {
        let mut turns = 1;
        while !stop_chat.load(std::sync::atomic::Ordering::SeqCst) || turns < 4 {
            ws.send(say(turns)).await.unwrap();
            next_of_type(&mut ws, "turn_end").await;
            turns += 1;
        }
        (ws, turns)
    });
    let mut during = Vec::new();
    for k in 0..3 {
        let (data, out) = (s.data.clone(), t.path().join(format!("during-{k}.zip")));
        let o = tokio::task::spawn_blocking(move || (backup(&data, &out, true), out))
            .await
            .unwrap();
        assert!(o.0.status.success(), "{}", text(&o.0.stderr));
        during.push(o.1);
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (_ws, turns) = chatting.await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let history = |root: &Path| -> Vec<Value> {
        serde_json::from_slice(&std::fs::read(root.join("memory/Companion/recent.json")).unwrap())
            .unwrap()
    };
    let live_history = history(&s.data);
    assert_eq!(live_history.len(), 2 * turns, "every turn's two lines");
    for (k, a) in during.iter().enumerate() {
        let dir = t.path().join(format!("restored-{k}"));
        let o = restore_into(a, &dir);
        assert!(o.status.success(), "{}", text(&o.stderr));
        // The history of one moment: whole entries, a prefix of what followed.
        let h = history(&dir);
        assert!(h.len() <= live_history.len() && h.len() >= 2);
        assert_eq!(h[..], live_history[..h.len()]);
        // Every other document as it is, every database readable.
        let (live, restored) = (tree(&s.data), tree(&dir));
        for (rel, bytes) in &live {
            if rel.ends_with(".db") {
                db_rows(&dir.join(rel));
            } else if rel != "memory/Companion/recent.json" {
                assert!(restored.get(rel) == Some(bytes), "{rel}");
            }
        }
    }

    // A deleted character's trash, kept by a backup asked to.
    let (st, _) = s
        .post("/api/characters/profile", json!({"name": "Mika"}))
        .await;
    assert_eq!(st, 200);
    let (st, _) = s
        .send(
            reqwest::Method::DELETE,
            "/api/characters/profile/Mika",
            None,
        )
        .await;
    assert_eq!(st, 200);
    let snapshots = |root: &Path| -> BTreeMap<String, Vec<u8>> {
        let p = root.join("snapshots");
        if p.exists() {
            tree(&p)
        } else {
            BTreeMap::new()
        }
    };
    assert!(!snapshots(&s.data).is_empty());

    // Taken once the chat is quiet: the restored folder equals the live one.
    let out = t.path().join("quiet.zip");
    let o = run(&[
        "backup",
        "--out",
        out.to_str().unwrap(),
        "--data-dir",
        s.data.to_str().unwrap(),
        "--with-secrets",
        "--with-snapshots",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("secrets included, snapshots included"));
    let dir = t.path().join("restored-quiet");
    let o = restore_into(&out, &dir);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_equal_folders(&s.data, &dir);
    assert_eq!(snapshots(&dir), snapshots(&s.data), "the trash came along");

    // Without --with-secrets, every *ApiKey is empty and nothing else differs.
    let out = t.path().join("no-secrets.zip");
    assert!(backup(&s.data, &out, false).status.success());
    let dir = t.path().join("restored-no-secrets");
    assert!(restore_into(&out, &dir).status.success());
    assert!(snapshots(&dir).is_empty(), "snapshots only when asked");
    let cfg = |root: &Path| -> Value {
        serde_json::from_slice(&std::fs::read(root.join("config/core_config.json")).unwrap())
            .unwrap()
    };
    let (mut live, restored) = (cfg(&s.data), cfg(&dir));
    assert_eq!(live["conversationModelApiKey"], "sk-test-key");
    for (k, v) in live.as_object_mut().unwrap() {
        if k.ends_with("ApiKey") {
            *v = json!("");
        }
    }
    assert_eq!(live, restored);
}

/// Start the binary on `data`; the child and its base URL.
fn serve(data: &Path, bundle: &Path) -> (Child, String) {
    let mut child = command(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
        "--bundle-dir",
        bundle.to_str().unwrap(),
        "--csrf-token",
        CSRF,
    ])
    .spawn()
    .expect("spawn");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .expect("listening line")
        .to_string();
    (child, base)
}

fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

fn siblings(data: &Path, infix: &str) -> Vec<PathBuf> {
    let name = data.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::read_dir(data.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(&format!("{name}.{infix}"))
        })
        .collect()
}

fn newer_archive(p: &Path) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(p).unwrap());
    let o = zip::write::SimpleFileOptions::default();
    z.start_file("companiond-backup.json", o).unwrap();
    z.write_all(br#"{"format": 2, "app": "companiond", "version": "9.0.0", "created_at": "2030-01-01T00:00:00Z", "secrets": false}"#)
        .unwrap();
    z.start_file("config/characters.json", o).unwrap();
    z.write_all(b"{}").unwrap();
    z.finish().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_waits_for_the_server_refuses_newer_archives_and_keeps_the_replaced_folder() {
    let t = tempfile::tempdir().unwrap();
    let (data, bundle) = (t.path().join("data"), t.path().join("bundle"));
    std::fs::create_dir_all(&bundle).unwrap();
    let (mut child, base) = serve(&data, &bundle);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = http
        .post(format!("{base}/api/characters/profile"))
        .json(&json!({"name": "Mika", "voice": "soft"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let with_mika = std::fs::read(data.join("config/characters.json")).unwrap();

    // The command backs up beside the running server; restore is refused.
    let archive = t.path().join("b.zip");
    let o = backup(&data, &archive, false);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = restore_into(&archive, &data);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("in use by another companiond"),
        "{}",
        text(&o.stderr)
    );
    assert!(siblings(&data, "replaced-").is_empty());

    // The route streams the same archive (CSRF-guarded).
    let r = http.get(format!("{base}/api/backup")).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .get(format!("{base}/api/backup"))
        .header("X-CSRF-Token", CSRF)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/zip");
    let zipped = r.bytes().await.unwrap();
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(zipped.to_vec())).unwrap();
    let mut chars = Vec::new();
    std::io::Read::read_to_end(
        &mut z.by_name("config/characters.json").unwrap(),
        &mut chars,
    )
    .unwrap();
    assert_eq!(chars, with_mika);
    assert!(z.by_name("companiond.lock").is_err());

    // A newer archive is refused by the route and by the command.
    let newer = t.path().join("newer.zip");
    newer_archive(&newer);
    let r = http
        .post(format!("{base}/api/backup/restore"))
        .header("X-CSRF-Token", CSRF)
        .body(std::fs::read(&newer).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["error_code"], "backup_format_newer", "{b}");
    let r = http
        .post(format!("{base}/api/backup/restore"))
        .header("X-CSRF-Token", CSRF)
        .body("not a zip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let b: Value = r.json().await.unwrap();
    let said = b["error"].as_str().unwrap_or_default();
    assert!(said.starts_with("the file is not a ZIP archive"), "{b}");
    assert!(
        !said.contains(".restore-pending"),
        "no server path in the answer: {b}"
    );

    // Mika is deleted; the archive uploaded through the route brings her
    // back at the next start, the replaced folder kept aside.
    let r = http
        .delete(format!("{base}/api/characters/profile/Mika"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let without_mika = std::fs::read(data.join("config/characters.json")).unwrap();
    let r = http
        .post(format!("{base}/api/backup/restore"))
        .header("X-CSRF-Token", CSRF)
        .body(zipped.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["restart_required"], true, "{b}");
    stop(&mut child);
    let (mut child, _) = serve(&data, &bundle);
    assert_eq!(
        std::fs::read(data.join("config/characters.json")).unwrap(),
        with_mika
    );
    let aside = siblings(&data, "replaced-");
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        std::fs::read(aside[0].join("config/characters.json")).unwrap(),
        without_mika
    );
    stop(&mut child);

    // The command: newer refused, then the archive restored.
    let o = restore_into(&newer, &data);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("newer"), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&aside[0]).unwrap();
    let before = tree(&data);
    let o = restore_into(&archive, &data);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("the replaced files are in"));
    let aside = siblings(&data, "replaced-");
    assert_eq!(aside.len(), 1);
    assert_eq!(tree(&aside[0]), before, "the replaced folder kept whole");
    assert_eq!(
        std::fs::read(data.join("config/characters.json")).unwrap(),
        with_mika
    );
}

#[test]
fn a_backup_of_a_missing_folder_or_into_a_missing_one_fails_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("nothing");
    let o = backup(&missing, &t.path().join("b.zip"), false);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("companiond: data directory"), "{err}");
    std::fs::create_dir_all(t.path().join("data/config")).unwrap();
    let o = backup(
        &t.path().join("data"),
        &t.path().join("no/such/dir/b.zip"),
        false,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).starts_with("companiond: cannot write the backup"));
    assert!(!t.path().join("no").exists());
}

//! The journaled storage: migration of a data dir written by the first format
//! (a fixture made by the previous release's code), crash states of the
//! migration and of compaction, and real `kill -9`s of a process that migrates
//! or edits (the test binary re-runs itself as that process).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use companiond_core::store::Store;
use companiond_core::testkit::{TestOptions, TestServer};
use companiond_jukebox::{Jukebox, Kind, Limits};
use reqwest::Method;
use serde_json::{json, Value};

const J: &str = "/api/jukebox";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// A data dir and a bundle dir holding the fixture (first format).
fn fixture_dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let bundle = dir.path().join("bundle");
    copy_dir(&fixture().join("data"), &data);
    copy_dir(&fixture().join("bundle"), &bundle);
    std::fs::create_dir_all(bundle.join("static")).unwrap();
    (dir, data, bundle)
}

async fn server_on(data: &Path, bundle: &Path) -> TestServer {
    let (data, bundle) = (data.to_path_buf(), bundle.to_path_buf());
    TestServer::start_with(
        &[companiond_jukebox::FAMILY],
        TestOptions {
            edit: Some(Box::new(move |o| {
                o.data_dir = data;
                o.bundle_dir = bundle;
            })),
            ..TestOptions::default()
        },
    )
    .await
}

fn without_revision(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("configRevision");
    v
}

fn expected_config() -> Value {
    serde_json::from_slice(&std::fs::read(fixture().join("expected_config.json")).unwrap()).unwrap()
}

fn jukebox(data: &Path, bundle: &Path) -> Arc<Jukebox> {
    Arc::new(Jukebox::new(
        data,
        bundle,
        Store::new(data.to_path_buf()),
        Limits::default(),
    ))
}

#[tokio::test]
async fn a_first_format_library_is_migrated_once_without_loss() {
    let (_dir, data, bundle) = fixture_dirs();
    let original = std::fs::read(data.join("jukebox/config.json")).unwrap();
    let s = server_on(&data, &bundle).await;
    let (st, sum) = s.get(&format!("{J}/config/summary")).await;
    assert_eq!(st, 200, "{sum}");
    let (st, c) = s.get(&format!("{J}/config")).await;
    assert_eq!(st, 200, "{c}");
    // Everything the previous release showed, the `missing` flag included.
    assert_eq!(
        without_revision(c.clone()),
        without_revision(expected_config())
    );
    let old_sum: Value =
        serde_json::from_slice(&std::fs::read(fixture().join("expected_summary.json")).unwrap())
            .unwrap();
    assert_eq!(without_revision(sum.clone()), without_revision(old_sum));
    assert_eq!(c["configRevision"], sum["configRevision"]);
    // The first-format file is kept as it was; the base now carries the format.
    assert_eq!(
        std::fs::read(data.join("jukebox/config.v1-backup.json")).unwrap(),
        original
    );
    let base: Value =
        serde_json::from_slice(&std::fs::read(data.join("jukebox/config.json")).unwrap()).unwrap();
    assert_eq!(base["storage"]["format"], 2);
    let old: Value = serde_json::from_slice(&original).unwrap();
    for key in ["songs", "bindings", "builtinOverrides", "md5Index"] {
        assert_eq!(base[key], old[key], "{key}");
    }
    // Actions too, `missing` apart: it is derived from the files when loading
    // (the previous release also stored it as computed at its next save).
    let mut actions = base["actions"].clone();
    for a in actions.as_object_mut().unwrap().values_mut() {
        a["missing"] = json!(false);
    }
    assert_eq!(actions, old["actions"]);
    assert!(data.join("jukebox/config.journal").exists());

    // An edit is one journal line; a restart reads base + journal; the backup
    // is never touched again.
    let (st, b) = s
        .http
        .put(s.url(&format!("{J}/songs/two/metadata")))
        .form(&[("artist", "After Migration")])
        .send()
        .await
        .map(|r| (r.status().as_u16(), r))
        .unwrap();
    assert_eq!(st, 200, "{:?}", b.text().await);
    let rev = s.get(&format!("{J}/config/summary")).await.1["configRevision"].clone();
    drop(s);
    let s = server_on(&data, &bundle).await;
    // The summary after a restart comes from the journal's tail.
    assert_eq!(
        s.get(&format!("{J}/config/summary")).await.1["configRevision"],
        rev
    );
    let (_, c2) = s.get(&format!("{J}/config")).await;
    assert_eq!(c2["songs"]["two"]["artist"], "After Migration");
    assert_eq!(c2["configRevision"], rev);
    let mut expect = c.clone();
    expect["songs"]["two"]["artist"] = json!("After Migration");
    assert_eq!(without_revision(c2), without_revision(expect));
    assert_eq!(
        std::fs::read(data.join("jukebox/config.v1-backup.json")).unwrap(),
        original
    );
}

/// The states a crash can leave during a migration or a compaction all load to
/// the same library.
#[tokio::test]
async fn every_crash_state_of_migration_and_compaction_loads() {
    let expected = without_revision(expected_config());
    let check = |data: &Path, bundle: &Path, what: &str| {
        let (data, bundle, what) = (data.to_path_buf(), bundle.to_path_buf(), what.to_string());
        let expected = expected.clone();
        async move {
            let s = server_on(&data, &bundle).await;
            let (st, c) = s.get(&format!("{J}/config")).await;
            assert_eq!(st, 200, "{what}: {c}");
            assert_eq!(without_revision(c), expected, "{what}");
            let leftovers: Vec<String> = std::fs::read_dir(data.join("jukebox"))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect();
            assert!(leftovers.is_empty(), "{what}: {leftovers:?}");
        }
    };
    // 1. Killed after the backup link and a partly written new base (not renamed).
    let (_d1, data, bundle) = fixture_dirs();
    std::fs::hard_link(
        data.join("jukebox/config.json"),
        data.join("jukebox/config.v1-backup.json"),
    )
    .unwrap();
    std::fs::write(
        data.join("jukebox/.config.json.compact-abc.tmp"),
        b"{\"version\": \"1.0\", \"songs\": {",
    )
    .unwrap();
    std::fs::write(data.join("jukebox/.config.journal.xyz.tmp"), b"{\"jour").unwrap();
    check(&data, &bundle, "before the rename").await;

    // 2. Killed after the new base, before its journal: a stale journal of another
    //    generation (whose records must not be replayed) is ignored.
    let (_d2, data, bundle) = fixture_dirs();
    let s = server_on(&data, &bundle).await;
    let _ = s.get(&format!("{J}/config/summary")).await;
    drop(s);
    std::fs::write(
        data.join("jukebox/config.journal"),
        concat!(
            "{\"journal\":1,\"generation\":0,\"base\":null,\"bundle\":null,\"summary\":null}\n",
            "{\"ops\":[{\"s\":\"one\",\"del\":true}],\"summary\":{\"configRevision\":\"x\",\"songCount\":0,\"visibleSongCount\":0,\"actionCount\":0}}\n"
        ),
    )
    .unwrap();
    check(&data, &bundle, "stale journal").await;

    // 3. Killed while appending: a torn last line is ignored and cut off.
    let (_d3, data, bundle) = fixture_dirs();
    let s = server_on(&data, &bundle).await;
    let _ = s.get(&format!("{J}/config/summary")).await;
    drop(s);
    let journal = data.join("jukebox/config.journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes.extend_from_slice(b"{\"ops\":[{\"s\":\"one\",\"set\":{\"name\":\"TORN");
    std::fs::write(&journal, &bytes).unwrap();
    check(&data, &bundle, "torn line").await;
    let s = server_on(&data, &bundle).await;
    let r = s
        .http
        .request(Method::PUT, s.url(&format!("{J}/songs/one/visibility")))
        .form(&[("visible", "false")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(s);
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(!text.contains("TORN"), "{text}");
    let s = server_on(&data, &bundle).await;
    assert_eq!(
        s.get(&format!("{J}/config")).await.1["songs"]["one"]["visible"],
        false
    );

    // 4. A corrupt line in the middle of the journal is an error, never overwritten.
    let mut lines: Vec<String> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.insert(1, "garbage".into());
    let corrupt = lines.join("\n") + "\n";
    std::fs::write(&journal, &corrupt).unwrap();
    drop(s);
    let s = server_on(&data, &bundle).await;
    let (st, e) = s.get(&format!("{J}/config")).await;
    assert_eq!(st, 500, "{e}");
    let r = s
        .http
        .request(Method::PUT, s.url(&format!("{J}/songs/one/visibility")))
        .form(&[("visible", "true")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), corrupt);
}

// ------------------------------------------------------------------ real kill -9

/// Run as a child process by the tests below (ignored when run directly).
#[test]
#[ignore]
fn child_process() {
    let Ok(spec) = std::env::var("JUKEBOX_CRASH_CHILD") else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (mode, data, bundle) = (parts[0], Path::new(parts[1]), Path::new(parts[2]));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let j = jukebox(data, bundle);
        match mode {
            "migrate" => {
                let _ = j.summary().await;
                println!("done");
            }
            _ => {
                for n in 0u64.. {
                    j.set_metadata(
                        Kind::Song,
                        "song_00007".into(),
                        Some(format!("step {n}")),
                        None,
                    )
                    .await
                    .unwrap();
                    println!("{n}");
                }
            }
        }
    });
}

fn spawn_child(mode: &str, data: &Path, bundle: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "storage::child_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "JUKEBOX_CRASH_CHILD",
            format!("{mode}|{}|{}", data.display(), bundle.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A first-format library of `n` songs (each bound to one of 10 actions).
fn big_library(data: &Path, n: usize) -> Value {
    let mut songs = serde_json::Map::new();
    let mut bindings = serde_json::Map::new();
    for i in 0..n {
        let id = format!("song_{i:05}");
        songs.insert(
            id.clone(),
            json!({"id": id, "name": format!("Song {i}"), "artist": "A", "audio": format!("songs/{id}.mp3"),
                "audioMd5": format!("{i:032x}"), "audioFormat": "mp3", "visible": true,
                "uploadDate": "2025-01-01T00:00:00Z", "defaultAction": format!("a{}", i % 10), "isBuiltin": false}),
        );
        bindings.insert(id, json!({format!("a{}", i % 10): {"offset": i % 7}}));
    }
    let mut actions = serde_json::Map::new();
    for a in 0..10 {
        let id = format!("a{a}");
        actions.insert(
            id.clone(),
            json!({"id": id, "name": id, "file": format!("actions/{id}.vmd"), "fileMd5": format!("f{a:031x}"),
                "format": "vmd", "visible": true, "missing": true, "isBuiltin": false}),
        );
    }
    let doc = json!({"version": "1.0", "songs": songs, "actions": actions, "bindings": bindings});
    std::fs::create_dir_all(data.join("jukebox")).unwrap();
    std::fs::write(
        data.join("jukebox/config.json"),
        serde_json::to_vec_pretty(&doc).unwrap(),
    )
    .unwrap();
    doc
}

fn load_view(data: &Path, bundle: &Path) -> Value {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let j = jukebox(data, bundle);
        let body = j.config_body().await.unwrap();
        let bytes: Vec<u8> = body.chunks.iter().flat_map(|c| c.to_vec()).collect();
        serde_json::from_slice(&bytes).unwrap()
    })
}

#[test]
fn kill_9_during_migration_leaves_the_old_or_the_new_state() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let reference = dir.path().join("reference");
    let doc = big_library(&reference, 5_000);
    let expected = without_revision(load_view(&reference, &bundle));
    assert_eq!(expected["songCount"], 5_000);
    let original = serde_json::to_vec_pretty(&doc).unwrap();
    let mut states = (0, 0);
    for (round, delay_ms) in [0u64, 10, 30, 60, 100, 150, 200, 300, 500]
        .into_iter()
        .enumerate()
    {
        let data = dir.path().join(format!("data{round}"));
        big_library(&data, 5_000);
        let mut child = spawn_child("migrate", &data, &bundle);
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        let _ = child.wait();
        let base: Value =
            serde_json::from_slice(&std::fs::read(data.join("jukebox/config.json")).unwrap())
                .unwrap();
        let migrated = base.get("storage").is_some();
        // Either state loads to the same library; the backup, when made, is the old file.
        assert_eq!(
            without_revision(load_view(&data, &bundle)),
            expected,
            "round {round} (killed after {delay_ms} ms, migrated: {migrated})"
        );
        if let Ok(b) = std::fs::read(data.join("jukebox/config.v1-backup.json")) {
            assert_eq!(b, original, "round {round}");
        }
        if migrated {
            states.1 += 1;
        } else {
            states.0 += 1;
        }
    }
    eprintln!(
        "killed before the migration's rename: {}, after: {}",
        states.0, states.1
    );
}

#[test]
fn kill_9_during_edits_and_compactions_keeps_every_acknowledged_edit() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let data = dir.path().join("data");
    // Small enough that compactions happen every hundred edits or so.
    big_library(&data, 40);
    let mut last_name = None;
    for (round, delay_ms) in [30u64, 90, 150, 250, 400, 600].into_iter().enumerate() {
        let mut child = spawn_child("edit", &data, &bundle);
        let stdout = child.stdout.take().unwrap();
        let acked = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => last = l.trim().parse::<u64>().ok().or(last),
                    Err(_) => break,
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        let _ = child.wait();
        let acked = acked.join().unwrap();
        let view = load_view(&data, &bundle);
        let name = view["songs"]["song_00007"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        if let Some(n) = acked {
            // The acknowledged edit, or the one in flight when killed.
            assert!(
                name == format!("step {n}") || name == format!("step {}", n + 1),
                "round {round}: acknowledged {n}, found {name:?}"
            );
        } else {
            assert!(name.starts_with("step ") || name == "Song 7", "{name}");
        }
        assert_eq!(view["songCount"], 40);
        last_name = Some(name);
    }
    assert!(last_name.is_some());
    // The journal was compacted at least once along the way.
    let base: Value =
        serde_json::from_slice(&std::fs::read(data.join("jukebox/config.json")).unwrap()).unwrap();
    assert!(
        base["storage"]["generation"].as_u64().unwrap() > 1,
        "{}",
        base["storage"]
    );
    let _ = Kind::Song;
}

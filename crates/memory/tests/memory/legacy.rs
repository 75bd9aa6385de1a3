//! Scan and purge of legacy memory roots.

use crate::common::*;

fn legacy_server_opts(big: bool) -> TestOptions {
    TestOptions {
        edit: Some(Box::new(|o| {
            let base = o.data_dir.parent().unwrap().to_path_buf();
            o.legacy_memory_roots = vec![
                base.join("legacy1"),
                base.join("legacy2").join("."),
                base.join("missing-root"),
                o.data_dir.join("memory"),
                base.join("legacy1"),
            ];
        })),
        prepare: Some(Box::new(move |data, _| {
            let base = data.parent().unwrap();
            let l1 = base.join("legacy1");
            std::fs::create_dir_all(l1.join("Companion")).unwrap();
            std::fs::write(l1.join("Companion/recent.json"), vec![b'x'; 100]).unwrap();
            std::fs::write(l1.join("Companion/facts.json"), vec![b'y'; 23]).unwrap();
            std::fs::create_dir_all(l1.join("Ghost/sub")).unwrap();
            std::fs::write(l1.join("Ghost/sub/a.json"), b"12345").unwrap();
            std::fs::write(l1.join("recent_Flat.json"), b"[]").unwrap();
            std::fs::write(l1.join(".hidden"), b"h").unwrap();
            std::fs::create_dir_all(l1.join("_private")).unwrap();
            let outside = base.join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("secret.txt"), b"do not delete").unwrap();
            #[cfg(unix)]
            std::os::unix::fs::symlink(&outside, l1.join("link")).unwrap();
            let l2 = base.join("legacy2");
            std::fs::create_dir_all(l2.join("Big")).unwrap();
            if big {
                for i in 0..50_001 {
                    std::fs::File::create(l2.join("Big").join(format!("{i}"))).unwrap();
                }
            }
        })),
        ..Default::default()
    }
}

#[tokio::test]
async fn legacy_scan_reports_without_changing_anything() {
    let s = TestServer::start_with(&[companiond_memory::FAMILY], legacy_server_opts(true)).await;
    let base = s.data.parent().unwrap().to_path_buf();
    let before = tree(&base.join("legacy1"));
    let (st, b) = s.get("/api/memory/legacy/scan").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(
        b["runtime_memory_dir"],
        s.data.join("memory").to_string_lossy().as_ref()
    );
    let roots = b["legacy_roots"].as_array().unwrap();
    assert_eq!(roots.len(), 3, "deduplicated, runtime dir dropped: {b}");
    assert_eq!(roots[2]["exists"], false);
    assert_eq!(roots[2]["entries"], json!([]));
    let l1 = &roots[0];
    assert_eq!(l1["exists"], true);
    let names: Vec<&str> = l1["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["Companion", "Ghost", "recent_Flat.json"],
        "hidden, _ and symlinks skipped"
    );
    let e0 = &l1["entries"][0];
    assert_eq!(e0["is_dir"], true);
    assert_eq!(e0["size_bytes"], 123);
    assert_eq!(e0["is_unlinked"], false);
    assert_eq!(e0["runtime_has_same_name"], true);
    assert_eq!(
        e0["path"],
        base.join("legacy1/Companion").to_string_lossy().as_ref()
    );
    let e1 = &l1["entries"][1];
    assert_eq!(
        (e1["size_bytes"].clone(), e1["is_unlinked"].clone()),
        (json!(5), json!(true))
    );
    assert_eq!(e1["runtime_has_same_name"], false);
    assert_eq!(l1["entries"][2]["is_dir"], false);
    let big = &roots[1]["entries"][0];
    assert_eq!(big["name"], "Big");
    assert_eq!(big["size_bytes"], -1, "over the safety scan limit");
    assert_eq!(b["total_entries"], 4);
    assert_eq!(b["total_size_bytes"], 123 + 5 + 2);
    assert_eq!(tree(&base.join("legacy1")), before);
}

#[tokio::test]
async fn legacy_purge_never_leaves_a_recognised_root() {
    let s = TestServer::start_with(&[companiond_memory::FAMILY], legacy_server_opts(false)).await;
    let base = s.data.parent().unwrap().to_path_buf();
    let l1 = base.join("legacy1");
    let p = |x: &Path| x.to_string_lossy().into_owned();
    let outside_before = tree(&base.join("outside"));
    let runtime_before = tree(&s.data);
    let hostile: Vec<Value> = vec![
        json!("legacy1/Ghost"),
        json!("./Ghost"),
        json!(""),
        json!("   "),
        json!(42),
        json!(null),
        json!(p(&l1)),
        json!(format!("{}/", p(&l1))),
        json!(format!("{}/.", p(&l1))),
        json!(format!("{}/Ghost/../../outside", p(&l1))),
        json!(format!("{}/..", p(&l1))),
        json!(format!("{}\\..\\outside", p(&l1))),
        json!(p(&l1.join("link").join("secret.txt"))),
        json!(p(&base.join("outside"))),
        json!(p(&base.join("outside/secret.txt"))),
        json!(p(&s.data.join("memory"))),
        json!(p(&s.data.join("memory/Companion"))),
        json!(p(&s.data)),
        json!(p(&base)),
        json!("/"),
        json!(format!("{}/Gh\0ost", p(&l1))),
        json!(p(&base.join("legacy1-evil"))),
    ];
    let n = hostile.len();
    let (st, b) = s
        .post("/api/memory/legacy/purge", json!({"paths": hostile}))
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["removed"], json!([]), "{b}");
    assert_eq!(b["errors"].as_array().unwrap().len(), n, "{b}");
    assert_eq!(tree(&base.join("outside")), outside_before);
    assert_eq!(tree(&s.data), runtime_before);
    assert!(l1.join("Ghost/sub/a.json").exists());

    // Legitimate targets: a directory, a file, a symlink entry (removed itself,
    // never followed) and a missing target (counts as removed).
    let (st, b) = s
        .post(
            "/api/memory/legacy/purge",
            json!({"paths": [p(&l1.join("Ghost")), p(&l1.join("recent_Flat.json")),
                              p(&l1.join("link")), p(&l1.join("never-existed")),
                              format!("{}/./Companion", p(&l1))]}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["errors"], json!([]), "{b}");
    assert_eq!(b["removed"].as_array().unwrap().len(), 5);
    assert!(!l1.join("Ghost").exists());
    assert!(!l1.join("recent_Flat.json").exists());
    assert!(l1.join("link").symlink_metadata().is_err());
    assert!(!l1.join("Companion").exists());
    assert_eq!(
        tree(&base.join("outside")),
        outside_before,
        "link target untouched"
    );
    assert!(l1.exists(), "the root itself stays");
    assert_eq!(tree(&s.data), runtime_before);

    // Malformed bodies → 400.
    for raw in [
        &b"{broken"[..],
        b"",
        b"{}",
        br#"{"paths": []}"#,
        br#"{"paths": "x"}"#,
        b"[]",
    ] {
        let (st, b) = post_raw(&s, "/api/memory/legacy/purge", raw.to_vec()).await;
        assert_eq!(st, 400, "{raw:?} {b}");
    }
}

#[tokio::test]
async fn legacy_purge_without_recognised_roots_is_409() {
    let s = TestServer::start_with(
        &[companiond_memory::FAMILY],
        TestOptions {
            edit: Some(Box::new(|o| {
                o.legacy_memory_roots = vec![
                    o.data_dir.join("memory"),
                    PathBuf::from("/nonexistent/legacy"),
                ];
            })),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = s
        .post(
            "/api/memory/legacy/purge",
            json!({"paths": ["/nonexistent/legacy/x"]}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["success"], false);
    let (st, b) = s.get("/api/memory/legacy/scan").await;
    assert_eq!(st, 200);
    assert_eq!(b["legacy_roots"].as_array().unwrap().len(), 1);
    assert_eq!(b["total_entries"], 0);
}

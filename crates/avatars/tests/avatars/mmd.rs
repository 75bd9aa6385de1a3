//! MMD models and animations: uploads, listings, deletes, emotion mappings.

use super::common::*;

#[tokio::test]
async fn mmd_model_and_animation_uploads() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let data = pmx(1000);
    let (st, b) = upload(&s, "/api/model/mmd/upload", "ミク.pmx", &data).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["model_name"], "ミク");
    assert_eq!(b["model_url"], "/user_mmd/ミク.pmx");
    assert_eq!(b["file_size"], data.len());
    assert_eq!(std::fs::read(user_mmd(&s).join("ミク.pmx")).unwrap(), data);
    // Served by the core static route.
    let r = s
        .http
        .get(s.url("/user_mmd/ミク.pmx"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().as_ref(), data.as_slice());

    // Same name again: existing destination.
    let (st, b) = upload(&s, "/api/model/mmd/upload", "ミク.pmx", &data).await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["success"], false);

    // PMD works; a renamed PNG is refused by its header; wrong extension refused.
    let (st, b) = upload(&s, "/api/model/mmd/upload", "old.PMD", &pmd()).await;
    assert_eq!(st, 200, "{b}");
    let (st, b) = upload(
        &s,
        "/api/model/mmd/upload",
        "fake.pmx",
        &png(2, 2, [1, 2, 3, 4]),
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "invalid_file_content");
    let (st, b) = upload(&s, "/api/model/mmd/upload", "fake.pmd", &pmx(10)).await;
    assert_eq!(st, 400, "{b}");
    let (st, b) = upload(&s, "/api/model/mmd/upload", "model.fbx", &pmx(10)).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "unsupported_file_type");
    let (st, b) = upload(&s, "/api/model/mmd/upload", "..", &pmx(10)).await;
    assert_eq!(st, 400, "{b}");
    // Browser-style folder prefixes are dropped, never followed.
    let (st, b) = upload(&s, "/api/model/mmd/upload", "../../escape.pmx", &pmx(10)).await;
    assert_eq!(st, 200, "{b}");
    assert!(user_mmd(&s).join("escape.pmx").is_file());
    assert!(
        !s.data.join("escape.pmx").exists()
            && !s.data.parent().unwrap().join("escape.pmx").exists()
    );
    // No file part at all.
    let (st, b) = send_multipart(
        &s,
        "/api/model/mmd/upload",
        multipart(&[("other", None, b"x")]),
    )
    .await;
    assert_eq!(st, 400, "{b}");
    // Not multipart.
    let (st, b) = s.post("/api/model/mmd/upload", json!({})).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["success"], false);
    let names = tree(&user_mmd(&s));
    assert!(
        !names
            .iter()
            .any(|n| n.contains("fake") || n.starts_with('.')),
        "{names:?}"
    );

    // Animations.
    let (st, b) = upload(&s, "/api/model/mmd/upload_animation", "dance.vmd", &vmd()).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["filename"], "dance.vmd");
    assert_eq!(b["file_path"], "/user_mmd/animation/dance.vmd");
    assert!(user_mmd(&s).join("animation/dance.vmd").is_file());
    let (st, b) = upload(&s, "/api/model/mmd/upload_animation", "bad.vmd", &pmx(40)).await;
    assert_eq!(st, 400, "{b}");
    let (st, _) = upload(&s, "/api/model/mmd/upload_animation", "dance.pmx", &vmd()).await;
    assert_eq!(st, 400);
    assert!(!user_mmd(&s).join("animation/bad.vmd").exists());

    std::fs::create_dir_all(s.bundle.join("static/mmd/motions")).unwrap();
    std::fs::write(s.bundle.join("static/mmd/motions/idle.vmd"), vmd()).unwrap();
    let (st, b) = s.get("/api/model/mmd/animations").await;
    assert_eq!(st, 200);
    let anims = b["animations"].as_array().unwrap();
    let urls: Vec<&str> = anims.iter().map(|a| a["url"].as_str().unwrap()).collect();
    assert_eq!(
        urls,
        [
            "/static/mmd/motions/idle.vmd",
            "/user_mmd/animation/dance.vmd"
        ]
    );
    assert_eq!(anims[1]["type"], "vmd");
    assert_eq!(anims[1]["name"], "dance");
    assert_eq!(anims[1]["size"], vmd().len());
    let (_, b) = s.get("/api/model/mmd/animations/list").await;
    assert_eq!(
        b["animations"],
        json!([{"name": "dance", "filename": "dance.vmd", "url": "/user_mmd/animation/dance.vmd", "path": "animation/dance.vmd"}])
    );

    // Delete animation: rules, then success.
    let del = |url: &str| {
        let url = url.to_string();
        let s = &s;
        async move {
            s.send(
                Method::DELETE,
                "/api/model/mmd/animation",
                Some(json!({"url": url})),
            )
            .await
        }
    };
    assert_eq!(del("/static/mmd/motions/idle.vmd").await.0, 400);
    assert_eq!(del("/user_mmd/animation/../ミク.pmx").await.0, 400);
    assert_eq!(del("/user_mmd/animation/missing.vmd").await.0, 404);
    assert_eq!(del("/user_mmd/ミク.pmx").await.0, 400);
    let (st, b) = s
        .send(Method::DELETE, "/api/model/mmd/animation", None)
        .await;
    assert_eq!(st, 400, "{b}");
    let (st, b) = del("/user_mmd/animation/dance.vmd").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert!(!user_mmd(&s).join("animation/dance.vmd").exists());
    assert!(s.bundle.join("static/mmd/motions/idle.vmd").exists());
    assert!(user_mmd(&s).join("ミク.pmx").exists());
}

#[tokio::test]
async fn mmd_upload_limits_and_client_abort() {
    let s = TestServer::start(&[SMALL]).await;
    let (st, b) = upload(&s, "/api/model/mmd/upload", "big.pmx", &pmx(70 * 1024)).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large");
    let (st, b) = upload(&s, "/api/model/mmd/upload_animation", "big.vmd", &{
        let mut v = vmd();
        v.resize(65 * 1024, 1);
        v
    })
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large");
    // Exactly at the limit is fine.
    let (st, b) = upload(&s, "/api/model/mmd/upload", "edge.pmx", &pmx(64 * 1024 - 8)).await;
    assert_eq!(st, 200, "{b}");
    std::fs::remove_file(user_mmd(&s).join("edge.pmx")).unwrap();
    assert_user_mmd_clean(&s);

    // A client that goes away mid-upload leaves nothing behind.
    let body = streamed_part(
        "file",
        "gone.pmx",
        pmx(0),
        40 * 1024 * 1024,
        Some(1024 * 1024),
    );
    let s2 = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let r = s2
        .http
        .post(s2.url("/api/model/mmd/upload"))
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await;
    assert!(r.is_err() || r.unwrap().status() != 200);
    let clean = eventually(|| {
        tree(&user_mmd(&s2))
            .iter()
            .all(|p| p == "animation" || p == "emotion_config")
    })
    .await;
    assert!(clean, "partial upload left: {:?}", tree(&user_mmd(&s2)));
}

#[tokio::test]
async fn mmd_listing_delete_rules_and_emotion_mappings() {
    let opts = TestOptions {
        prepare: Some(Box::new(|data: &Path, bundle: &Path| {
            let p = bundle.join("static/mmd/Builtin");
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("builtin.pmx"), pmx(10)).unwrap();
            let ws = data.parent().unwrap().join("workshop");
            std::fs::create_dir_all(ws.join("123456/models")).unwrap();
            std::fs::write(ws.join("123456/models/shop.pmx"), pmx(20)).unwrap();
            std::fs::write(ws.join("123456/readme.txt"), b"x").unwrap();
            let u = data.join("user_mmd");
            std::fs::create_dir_all(u.join("Alice/tex")).unwrap();
            std::fs::write(u.join("Alice/alice.pmx"), pmx(30)).unwrap();
            std::fs::write(u.join("Alice/tex/a.png"), b"png").unwrap();
            std::fs::create_dir_all(u.join("Leftover/tex")).unwrap();
            std::fs::write(u.join("Leftover/tex/b.png"), b"12345").unwrap();
            std::fs::write(u.join("solo.pmx"), pmx(40)).unwrap();
        })),
        edit: Some(Box::new(|o| {
            o.workshop_dir = Some(o.data_dir.parent().unwrap().join("workshop"));
        })),
        ..Default::default()
    };
    let s = TestServer::start_with(&[companiond_avatars::FAMILY], opts).await;

    let (st, b) = s.get("/api/model/mmd/config").await;
    assert_eq!(st, 200);
    assert_eq!(
        b,
        json!({"success": true, "paths": {"user_mmd": "/user_mmd", "static_mmd": "/static/mmd"}})
    );

    let (st, b) = s.get("/api/model/mmd/models").await;
    assert_eq!(st, 200, "{b}");
    let models = b["models"].as_array().unwrap();
    let find = |url: &str| models.iter().find(|m| m["url"] == url).cloned();
    let builtin = find("/static/mmd/Builtin/builtin.pmx").expect("project model");
    assert_eq!(builtin["location"], "project");
    assert_eq!(builtin["rel_path"], "Builtin/builtin.pmx");
    assert_eq!(builtin["type"], "pmx");
    assert_eq!(builtin["name"], "builtin");
    assert_eq!(builtin["filename"], "builtin.pmx");
    assert_eq!(builtin["size"], pmx(10).len());
    let shop = find("/workshop/123456/models/shop.pmx").expect("workshop model");
    assert_eq!(shop["location"], "steam_workshop");
    assert_eq!(shop["source"], "steam_workshop");
    assert_eq!(shop["item_id"], "123456");
    let alice = find("/user_mmd/Alice/alice.pmx").expect("user model");
    assert_eq!(alice["location"], "user");
    assert!(alice.get("broken").is_none());
    assert!(find("/user_mmd/solo.pmx").is_some());
    let left = find("/user_mmd/Leftover").expect("broken marker");
    assert_eq!(left["broken"], true);
    assert_eq!(left["size"], 5);
    assert_eq!(models.len(), 5, "{models:?}");

    // Emotion mappings.
    let (st, b) = s.get("/api/model/mmd/emotion_mapping").await;
    assert_eq!((st, b), (200, json!({"success": true, "mapping": {}})));
    let (st, b) = s.get("/api/model/mmd/emotion_mapping?model=alice").await;
    assert_eq!((st, &b["mapping"]), (200, &json!({})));
    let mapping = json!({"happy": ["笑い", "にこり"], "sad": {"morph": "悲しい", "weight": 0.8}});
    for m in ["alice", "solo"] {
        let (st, b) = s
            .post(
                "/api/model/mmd/emotion_mapping",
                json!({"model": m, "mapping": mapping}),
            )
            .await;
        assert_eq!(st, 200, "{b}");
        assert_eq!(b["success"], true);
    }
    let (_, b) = s.get("/api/model/mmd/emotion_mapping?model=alice").await;
    assert_eq!(b["mapping"], mapping);
    assert!(user_mmd(&s).join("emotion_config/alice.json").is_file());
    for bad in [
        json!({"model": "../x", "mapping": {}}),
        json!({"model": "a/b", "mapping": {}}),
        json!({"model": "a\\b", "mapping": {}}),
        json!({"model": "..", "mapping": {}}),
        json!({"mapping": {}}),
        json!({"model": "alice", "mapping": [1]}),
        json!({"model": "alice"}),
    ] {
        let (st, b) = s.post("/api/model/mmd/emotion_mapping", bad.clone()).await;
        // A mapping of another type is refused as a body (422), the others by rule.
        assert!(st == 400 || st == 422, "{bad}: {b}");
        assert_eq!(b["success"], false);
    }
    let (st, _) = s.get("/api/model/mmd/emotion_mapping?model=..%2Fx").await;
    assert_eq!(st, 400);
    let (_, b) = s.get("/api/model/mmd/emotion_mapping?model=alice").await;
    assert_eq!(b["mapping"], mapping, "a refused write changed nothing");

    // Delete rules.
    let del = |url: &str| {
        let url = url.to_string();
        let s = &s;
        async move {
            s.send(
                Method::DELETE,
                "/api/model/mmd/model",
                Some(json!({"url": url})),
            )
            .await
        }
    };
    let (st, b) = del("/static/mmd/Builtin/builtin.pmx").await;
    assert_eq!(st, 403, "{b}");
    assert!(s.bundle.join("static/mmd/Builtin/builtin.pmx").exists());
    assert_eq!(del("/workshop/123456/models/shop.pmx").await.0, 403);
    assert_eq!(del("/user_mmd/../config/characters.json").await.0, 400);
    assert_eq!(del("/user_mmd/%2e%2e/config").await.0, 400);
    assert_eq!(del("/etc/passwd").await.0, 400);
    assert_eq!(del("/user_mmd/animation/x.vmd").await.0, 400);
    assert_eq!(del("/user_mmd/emotion_config/alice.json").await.0, 400);
    assert_eq!(del("/user_mmd/Nobody/x.pmx").await.0, 404);
    assert_eq!(del("/user_mmd/Alice/tex/a.png").await.0, 400);
    let (st, _) = s.send(Method::DELETE, "/api/model/mmd/model", None).await;
    assert_eq!(st, 400);
    assert!(s.data.join("config/characters.json").exists());

    // A model in a sub-folder: the whole folder and its mapping go.
    let (st, b) = del("http://127.0.0.1:1/user_mmd/Alice/alice.pmx?v=2").await;
    assert_eq!(st, 200, "{b}");
    let mut files: Vec<String> = b["deleted_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "Alice/alice.pmx",
            "Alice/tex/a.png",
            "emotion_config/alice.json"
        ]
    );
    assert!(!user_mmd(&s).join("Alice").exists());
    assert!(!user_mmd(&s).join("emotion_config/alice.json").exists());
    // A lone top-level file: only that file (query form of the parameter).
    let (st, b) = s
        .send(
            Method::DELETE,
            "/api/model/mmd/model?url=/user_mmd/solo.pmx",
            None,
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        b["deleted_files"],
        json!(["solo.pmx", "emotion_config/solo.json"])
    );
    // The broken leftover can be removed through its listed url.
    let (st, b) = del("/user_mmd/Leftover").await;
    assert_eq!(st, 200, "{b}");
    assert_user_mmd_clean(&s);
    let (_, b) = s.get("/api/model/mmd/models").await;
    assert_eq!(b["models"].as_array().unwrap().len(), 2);
    assert_eq!(
        s.get("/api/model/mmd/emotion_mapping?model=alice").await.1["mapping"],
        json!({})
    );
}

#[tokio::test]
async fn mmd_uploads_read_only_the_part_named_file() {
    let s = TestServer::start(&[SMALL]).await;
    for (route, name, data) in [
        ("/api/model/mmd/upload", "m.pmx", pmx(10)),
        ("/api/model/mmd/upload_animation", "a.vmd", vmd()),
        (
            "/api/model/mmd/upload_zip",
            "z.zip",
            zip_of(&[("z/z.pmx", &pmx(4))]),
        ),
    ] {
        for part in ["model", "files", "upload", "File"] {
            let (st, b) = send_multipart(&s, route, multipart(&[(part, Some(name), &data)])).await;
            assert!((400..500).contains(&st), "{route} part {part}: {st} {b}");
            assert_eq!(b["success"], false);
            assert_eq!(b["error_code"], "missing_file", "{b}");
            assert_user_mmd_clean(&s);
        }
    }
    // Other parts before the `file` part are skipped; the `file` part is stored.
    let (st, b) = send_multipart(
        &s,
        "/api/model/mmd/upload",
        multipart(&[
            ("decoy", Some("decoy.pmx"), &pmx(3)),
            ("file", Some("real.pmx"), &pmx(5)),
        ]),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert!(user_mmd(&s).join("real.pmx").is_file());
    assert!(!user_mmd(&s).join("decoy.pmx").exists());
}

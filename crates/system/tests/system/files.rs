//! `/api/file-exists`, `/api/find-first-image` and `/api/platform/proxy-image`.

use crate::common::*;

#[tokio::test]
async fn file_exists_traversal_table() {
    let s = server_with(|_, bundle| write(&bundle.join("static/app.js"), b"x")).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("real.txt");
    std::fs::write(&file, b"x").unwrap();
    let enc = |p: &str| url::form_urlencoded::byte_serialize(p.as_bytes()).collect::<String>();
    let check = |p: String| {
        let s = &s;
        async move { s.get(&format!("/api/file-exists?path={}", enc(&p))).await }
    };
    assert_eq!(
        check(file.display().to_string()).await,
        (200, json!({"exists": true}))
    );
    assert_eq!(
        check(dir.path().display().to_string()).await,
        (200, json!({"exists": false}))
    );
    assert_eq!(
        check(format!("{}/missing", dir.path().display())).await,
        (200, json!({"exists": false}))
    );
    assert_eq!(
        check("static/app.js".into()).await,
        (200, json!({"exists": true}))
    );
    let hostile = [
        "../etc/passwd".to_string(),
        "/tmp/../etc/passwd".into(),
        format!("{}/../real.txt", dir.path().display()),
        "a/../../b".into(),
        "..".into(),
        "%2e%2e/etc/passwd".into(),
        "/a/%2E%2E/etc/passwd".into(),
        "..\\..\\windows".into(),
        "/a/b/..".into(),
        "static/../../x".into(),
    ];
    for h in hostile {
        let (code, v) = check(h.clone()).await;
        assert_eq!(code, 400, "{h} → {v}");
        assert_eq!(v["exists"], false);
    }
    for bad in [
        "/api/file-exists",
        "/api/file-exists?path=",
        "/api/file-exists?path=a%00b",
    ] {
        let (code, v) = s.get(bad).await;
        assert_eq!((code, v["exists"].as_bool()), (400, Some(false)), "{bad}");
    }
}

#[tokio::test]
async fn find_first_image_in_approved_roots_only() {
    let ws_dir = tempfile::tempdir().unwrap();
    let ws_path = ws_dir.path().to_path_buf();
    write(
        &ws_path.join("12345/preview.jpg"),
        &[0xFF, 0xD8, 0xFF, 0xE0],
    );
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("preview.png"), &png(10));
    let outside_path = outside.path().to_path_buf();
    let s = TestServer::start_with(
        FAMILIES,
        TestOptions {
            edit: Some(Box::new(move |o| o.workshop_dir = Some(ws_path))),
            prepare: Some(Box::new(move |data, bundle| {
                let m = bundle.join("static/live2d/m1");
                write(&m.join("preview.jpg"), &vec![0u8; 2 * 1024 * 1024]);
                write(&m.join("thumbnail.png"), &png(100));
                write(
                    &bundle.join("static/exact/preview.png"),
                    &vec![0u8; 1024 * 1024],
                );
                write(&data.join("user_mmd/model/icon.png"), &png(10));
                std::fs::create_dir_all(bundle.join("static/empty")).unwrap();
                #[cfg(unix)]
                std::os::unix::fs::symlink(&outside_path, bundle.join("static/escape")).unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let get = |folder: String| {
        let s = &s;
        async move {
            let q = url::form_urlencoded::byte_serialize(folder.as_bytes()).collect::<String>();
            s.get(&format!("/api/find-first-image?folder={q}")).await
        }
    };
    let (code, v) = get("static/live2d/m1".into()).await;
    assert_eq!(code, 200);
    assert_eq!(
        v,
        json!({"success": true, "imagePath": "static/live2d/m1/thumbnail.png", "url": "/static/live2d/m1/thumbnail.png"})
    );
    let abs = s.bundle.join("static/live2d/m1").display().to_string();
    assert_eq!(
        get(abs).await.1["imagePath"],
        "static/live2d/m1/thumbnail.png"
    );
    let (_, v) = get("user_mmd/model".into()).await;
    assert_eq!(v["url"], "/user_mmd/model/icon.png");
    let item = ws_dir.path().join("12345").display().to_string();
    let (code, v) = get(item.clone()).await;
    assert_eq!(code, 200, "{v}");
    assert!(v["imagePath"]
        .as_str()
        .unwrap()
        .ends_with("12345/preview.jpg"));
    assert!(v["url"]
        .as_str()
        .unwrap()
        .starts_with("/api/platform/proxy-image?image_path="));
    // The workshop image is then served by the platform proxy.
    let r = s
        .http
        .get(s.url(v["url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/jpeg");

    // Exactly 1 MiB is not "under 1 MiB".
    let (code, v) = get("static/exact".into()).await;
    assert_eq!((code, v["success"].as_bool()), (200, Some(false)));
    let (code, v) = get("static/empty".into()).await;
    assert_eq!((code, v["success"].as_bool()), (200, Some(false)));
    let (code, _) = get("static/live2d/m1/thumbnail.png".into()).await;
    assert_eq!(code, 400, "a file is not a folder");
    let (code, _) = get("static/nothing-here".into()).await;
    assert_eq!(code, 404);
    for h in [
        "../".to_string(),
        "static/../../".into(),
        "static/live2d/../../..".into(),
        "static//live2d".into(),
        outside.path().display().to_string(),
        "/etc".into(),
        "/".into(),
        "static/escape".into(),
        "%2e%2e/%2e%2e".into(),
        format!("{}/../..", s.bundle.join("static").display()),
    ] {
        let (code, v) = get(h.clone()).await;
        assert_eq!(code, 403, "{h} → {v}");
        assert_eq!(v["success"], false);
    }
    let (code, _) = s.get("/api/find-first-image").await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn platform_proxy_image_containment_and_type() {
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("x.png"), &png(10));
    let outside_path = outside.path().to_path_buf();
    let s = server_with(move |_, bundle| {
        write(&bundle.join("static/img/a.png"), &png(5000));
        write(
            &bundle.join("static/img/fake.png"),
            b"<html>not an image</html>",
        );
        write(&bundle.join("static/img/notes.txt"), b"text");
        write(&bundle.join("static/img/pic.svg"), b"<svg/>");
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            outside_path.join("x.png"),
            bundle.join("static/img/link.png"),
        )
        .unwrap();
    })
    .await;
    let get = |p: String| {
        let s = &s;
        async move {
            let q = url::form_urlencoded::byte_serialize(p.as_bytes()).collect::<String>();
            s.http
                .get(s.url(&format!("/api/platform/proxy-image?image_path={q}")))
                .send()
                .await
                .unwrap()
        }
    };
    let r = get("static/img/a.png".into()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().to_vec(), png(5000));
    let abs = s.bundle.join("static/img/a.png").display().to_string();
    assert_eq!(get(abs).await.status(), 200);
    assert_eq!(get("../static/img/a.png".into()).await.status(), 200);
    // Encoded once more (the value is decoded twice).
    assert_eq!(get("static%2Fimg%2Fa.png".into()).await.status(), 200);
    let cases: Vec<(String, u16)> = vec![
        ("http://example.com/a.png".into(), 400),
        ("https://example.com/a.png".into(), 400),
        ("static/img/notes.txt".into(), 400),
        ("static/img/pic.svg".into(), 400),
        ("static/img/fake.png".into(), 400),
        ("static/img/missing.png".into(), 404),
        ("static/img/link.png".into(), 403),
        (outside.path().join("x.png").display().to_string(), 403),
        ("/etc/passwd".into(), 403),
        ("../../etc/passwd".into(), 403),
        ("static/../../etc/passwd".into(), 403),
        ("../static/../../x.png".into(), 403),
        ("static/img/%2e%2e/%2e%2e/x.png".into(), 403),
        ("nowhere/x.png".into(), 403),
        ("".into(), 400),
    ];
    for (p, want) in cases {
        let r = get(p.clone()).await;
        let code = r.status().as_u16();
        let (_, v) = split(r).await;
        assert_eq!(code, want, "{p} → {v}");
        assert_eq!(v["success"], false, "{p}");
    }
}

//! PNGTuber packages: simple and layered uploads, limits, names, listing.

use super::common::*;

#[tokio::test]
async fn pngtuber_simple_package_lifecycle() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let idle = png(3, 3, [255, 0, 0, 255]);
    let talk = png(3, 3, [0, 255, 0, 255]);
    let (st, b) = upload_pkg(
        &s,
        &[
            ("Pack/model.json", model_json("Cute Cat!", json!({}))),
            ("Pack/idle.png", idle.clone()),
            ("Pack\\img\\talk.png", talk.clone()),
        ],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["folder"], "Cute_Cat");
    assert_eq!(b["name"], "Cute Cat!");
    assert_eq!(b["model_name"], "Cute Cat!");
    assert_eq!(b["model_type"], "pngtuber");
    assert_eq!(b["source_format"], "simple_package");
    assert_eq!(b["url"], "/user_pngtuber/Cute_Cat/model.json");
    assert_eq!(b["warnings"], json!([]));
    assert_eq!(
        b["file_size"],
        idle.len() + talk.len() + model_json("Cute Cat!", json!({})).len()
    );
    let p = &b["pngtuber"];
    assert_eq!(p["idle_image"], "/user_pngtuber/Cute_Cat/idle.png");
    assert_eq!(p["talking_image"], "/user_pngtuber/Cute_Cat/img/talk.png");
    assert_eq!(p["happy_image"], "");
    assert_eq!(p["scale"], 0.8);
    assert_eq!(p["mobile_scale"], 0.8);
    assert_eq!(p["mirror"], true);
    assert_eq!(p["offset_x"], 0);
    assert_eq!(p["adapter"], "");
    assert_eq!(p["source_type"], "transparent_asset");
    let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
    assert_eq!(
        keys[..8],
        [
            "idle_image",
            "talking_image",
            "drag_image",
            "click_image",
            "happy_image",
            "sad_image",
            "angry_image",
            "surprised_image"
        ]
    );
    // Committed files are served.
    let r = s
        .http
        .get(s.url("/user_pngtuber/Cute_Cat/img/talk.png"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap().as_ref(), talk.as_slice());
    let stored: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("user_pngtuber/Cute_Cat/model.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stored["source_format"], "simple_package");
    assert_eq!(
        stored["pngtuber"]["idle_image"],
        "/user_pngtuber/Cute_Cat/idle.png"
    );

    // Same name again: existing destination.
    let (st, b) = upload_pkg(
        &s,
        &[
            ("model.json", model_json("Cute Cat!", json!({}))),
            ("idle.png", idle.clone()),
            ("img/talk.png", talk.clone()),
        ],
    )
    .await;
    assert_eq!(st, 409, "{b}");

    // Validation failures, each leaving nothing behind.
    let bad: Vec<(&str, Files)> = vec![
        ("missing file", vec![("model.json", model_json("Other", json!({}))), ("idle.png", idle.clone())]),
        ("no idle", vec![("model.json", serde_json::to_vec(&json!({"name": "X", "model_type": "pngtuber", "pngtuber": {"talking_image": "idle.png"}})).unwrap()), ("idle.png", idle.clone())]),
        ("bad ext", vec![("model.json", serde_json::to_vec(&json!({"name": "X", "model_type": "pngtuber", "pngtuber": {"idle_image": "idle.bmp"}})).unwrap()), ("idle.bmp", idle.clone())]),
        ("escape", vec![("model.json", serde_json::to_vec(&json!({"name": "X", "model_type": "pngtuber", "pngtuber": {"idle_image": "../Cute_Cat/idle.png"}})).unwrap())]),
        ("bad json", vec![("model.json", b"{not json".to_vec()), ("idle.png", idle.clone())]),
        ("path", vec![("../model.json", model_json("X", json!({})))]),
        ("dot path", vec![("a/./model.json", model_json("X", json!({})))]),
        ("duplicate", vec![("idle.png", idle.clone()), ("idle.png", idle.clone())]),
        ("file/folder clash", vec![("a/b.png", idle.clone()), ("a", idle.clone())]),
    ];
    for (what, files) in bad {
        let (st, b) = upload_pkg(&s, &files).await;
        assert_eq!(st, 400, "{what}: {b}");
        assert_eq!(b["success"], false, "{what}");
        let t = tree(&s.data.join("user_pngtuber"));
        assert!(t.iter().all(|p| p.starts_with("Cute_Cat")), "{what}: {t:?}");
    }
    let (st, b) = send_multipart(
        &s,
        "/api/model/pngtuber/upload_model",
        multipart(&[("other", Some("x.png"), b"x")]),
    )
    .await;
    assert_eq!(st, 400, "{b}");

    // Listing: only valid pngtuber packages.
    let pt = s.data.join("user_pngtuber");
    std::fs::create_dir_all(pt.join("live2d")).unwrap();
    std::fs::write(pt.join("live2d/model.json"), br#"{"model_type":"live2d"}"#).unwrap();
    std::fs::create_dir_all(pt.join("broken")).unwrap();
    std::fs::write(pt.join("broken/model.json"), b"{oops").unwrap();
    std::fs::create_dir_all(pt.join("invalid")).unwrap();
    std::fs::write(
        pt.join("invalid/model.json"),
        br#"{"model_type":"pngtuber","pngtuber":{"idle_image":"gone.png"}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(pt.join("bare")).unwrap();
    std::fs::write(pt.join("bare/a.png"), &idle).unwrap();
    std::fs::write(
        pt.join("bare/model.json"),
        br#"{"model_type":"pngtuber","pngtuber":{"idle_image":"a.png"}}"#,
    )
    .unwrap();
    let (st, b) = s.get("/api/model/pngtuber/models").await;
    assert_eq!(st, 200, "{b}");
    let models = b["models"].as_array().unwrap();
    let folders: Vec<&str> = models
        .iter()
        .map(|m| m["folder"].as_str().unwrap())
        .collect();
    assert_eq!(folders, ["bare", "Cute_Cat"]);
    assert_eq!(models[0]["name"], "bare");
    assert_eq!(models[0]["source_format"], "simple_package");
    assert_eq!(
        models[0]["pngtuber"]["idle_image"],
        "/user_pngtuber/bare/a.png"
    );
    assert_eq!(models[1]["location"], "user");
    assert_eq!(models[1]["type"], "pngtuber");
    assert_eq!(models[1]["filename"], "Cute_Cat");
    assert_eq!(models[1]["url"], "/user_pngtuber/Cute_Cat/model.json");
    assert_eq!(
        models[1]["pngtuber"]["talking_image"],
        "/user_pngtuber/Cute_Cat/img/talk.png"
    );

    // Delete: identifiers and rules.
    let del = |body: Value| {
        let s = &s;
        async move {
            s.send(Method::DELETE, "/api/model/pngtuber/model", Some(body))
                .await
        }
    };
    assert_eq!(del(json!({})).await.0, 400);
    assert_eq!(del(json!({"folder": "  "})).await.0, 400);
    assert_eq!(del(json!({"folder": "../config"})).await.0, 400);
    assert_eq!(
        del(json!({"url": "/user_pngtuber/../../config/model.json"}))
            .await
            .0,
        400
    );
    assert_eq!(
        del(json!({"url": "/user_pngtuber/a/b/model.json"})).await.0,
        400
    );
    assert_eq!(del(json!({"folder": "nothing"})).await.0, 404);
    assert!(s.data.join("config").exists());
    let (st, b) = del(json!({"url": "/user_pngtuber/Cute_Cat/model.json"})).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert!(!pt.join("Cute_Cat").exists());
    assert_eq!(del(json!({"name": "bare"})).await.0, 200);
    assert_eq!(del(json!({"folder": "bare"})).await.0, 404);
    let (st, _) = s
        .send(
            Method::DELETE,
            "/api/model/pngtuber/model?folder=invalid",
            None,
        )
        .await;
    assert_eq!(st, 200);
}

#[tokio::test]
async fn pngtuber_layered_save_is_converted() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let body = png(4, 4, [255, 0, 0, 255]);
    let mouth = png(2, 2, [0, 0, 255, 255]);
    let save = json!({
        "1": plus_layer(1, Value::Null, "Vector2(0, 0)", 0, 0, &body),
        "2": plus_layer(2, json!(1), "Vector2(1, 1)", 2, 1, &mouth),
        "3": {"identification": 3, "imageData": "not base64 at all", "showTalk": 0},
        "settings": {"ignored": true},
    });
    let settings =
        json!({"costumeKeys": ["1", "null", "", "1", "5"], "blinkSpeed": 2.0, "blinkChance": 120});
    let (st, b) = upload_pkg(
        &s,
        &[
            (
                "Bunny Folder/bunny.save",
                serde_json::to_vec(&save).unwrap(),
            ),
            (
                "Bunny Folder/settings.pngtp",
                serde_json::to_vec(&settings).unwrap(),
            ),
        ],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["source_format"], "pngtuber_layered_save");
    assert_eq!(b["folder"], "bunny");
    assert_eq!(b["adapter_version"], 2);
    assert_eq!(b["pngtuber"]["adapter"], "layered_canvas_v1");
    assert_eq!(b["pngtuber"]["source_type"], "pngtuber_layered_save");
    assert_eq!(b["pngtuber"]["idle_image"], "/user_pngtuber/bunny/idle.png");
    assert_eq!(
        b["pngtuber"]["layered_metadata"],
        "/user_pngtuber/bunny/metadata.pngtuber-plus.json"
    );
    assert_eq!(b["warnings"].as_array().unwrap().len(), 1);
    assert!(b["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("costume_hotkeys")));

    let get = |p: &str| {
        let url = s.url(p);
        let http = s.http.clone();
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .to_vec()
        }
    };
    let idle = decode(&get("/user_pngtuber/bunny/idle.png").await);
    let talking = decode(&get("/user_pngtuber/bunny/talking.png").await);
    assert_eq!((idle.0, idle.1), (4, 4));
    assert_eq!(
        pixel(&idle, 2, 2),
        [255, 0, 0, 255],
        "mouth hidden while idle"
    );
    assert_eq!(
        pixel(&talking, 2, 2),
        [0, 0, 255, 255],
        "mouth shown while talking"
    );
    assert_eq!(pixel(&talking, 0, 0), [255, 0, 0, 255]);
    let meta: Value =
        serde_json::from_slice(&get("/user_pngtuber/bunny/metadata.pngtuber-plus.json").await)
            .unwrap();
    assert_eq!(meta["adapter_version"], 2);
    assert_eq!(meta["source_format"], "pngtuber_layered_save");
    assert_eq!(meta["canvas"], json!({"width": 4, "height": 4}));
    assert_eq!(meta["layers"].as_array().unwrap().len(), 2);
    assert_eq!(meta["layers"][1]["x"], 2.0);
    assert_eq!(meta["layers"][1]["parent_chain"], json!(["1"]));
    assert_eq!(meta["layers"][1]["states"].as_array().unwrap().len(), 10);
    assert_eq!(meta["blink"]["interval_min_ms"], 14000);
    assert_eq!(meta["blink"]["interval_max_ms"], 18000);
    let keys: Vec<&str> = meta["hotkeys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["1", "5", "6", "7", "8", "9", "0"]);
    assert_eq!(meta["capabilities"]["costumes"], true);
    assert!(s.data.join("user_pngtuber/bunny/source.save").is_file());
    assert!(s
        .data
        .join("user_pngtuber/bunny/layers/plus_0002_2.png")
        .is_file());
    let (_, list) = s.get("/api/model/pngtuber/models").await;
    assert_eq!(list["models"][0]["source_format"], "pngtuber_layered_save");

    // Two saves with no tie-breaker: 400 with the candidates.
    let one = serde_json::to_vec(&save).unwrap();
    let (st, b) = upload_pkg(
        &s,
        &[
            ("Pack/one.save", one.clone()),
            ("Pack/backup/two.save", one.clone()),
        ],
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["source_format"], "pngtuber_layered_save");
    assert_eq!(b["warnings"], json!(["backup/two.save", "one.save"]));
    // A root save named like the upload folder wins.
    let (st, b) = upload_pkg(
        &s,
        &[
            ("avatar/avatar.save", one.clone()),
            ("avatar/backup/older.save", one.clone()),
        ],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["folder"], "avatar");
    // An unparseable save is a conversion failure of that format.
    let (st, b) = upload_pkg(
        &s,
        &[
            ("broken/broken.save", b"[1, 2".to_vec()),
            ("broken/x.png", body.clone()),
        ],
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["source_format"], "pngtuber_layered_save");
    assert!(
        b["error"].as_str().unwrap().contains("conversion failed"),
        "{b}"
    );
    let t = tree(&s.data.join("user_pngtuber"));
    assert!(
        t.iter()
            .all(|p| p.starts_with("bunny") || p.starts_with("avatar")),
        "{t:?}"
    );
}

#[tokio::test]
async fn pngtuber_layered_project_is_converted_with_mesh_rules() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let body = png(6, 4, [200, 10, 10, 255]);
    let mouth = png(2, 2, [10, 10, 200, 255]);
    let talk = vec![
        ("should_talk", Variant::Bool(true)),
        ("open_mouth", Variant::Bool(true)),
        ("z_index", Variant::Int(1)),
    ];
    let file = remix_file(
        vec![
            remix_sprite(1, None, &body, vec![], vec![]),
            remix_sprite(2, Some(1), &mouth, talk.clone(), vec![]),
        ],
        true,
    );
    let (st, b) = upload_pkg(&s, &[("proj/Fox.pngRemix", file)]).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["source_format"], "pngtuber_layered_project");
    assert_eq!(b["folder"], "Fox");
    assert_eq!(b["adapter_version"], 2);
    assert_eq!(b["pngtuber"]["adapter"], "layered_canvas_v1");
    let dir = s.data.join("user_pngtuber/Fox");
    let idle = decode(&std::fs::read(dir.join("idle.png")).unwrap());
    let talking = decode(&std::fs::read(dir.join("talking.png")).unwrap());
    assert_eq!((idle.0, idle.1), (6, 4));
    assert_eq!(pixel(&idle, 3, 2), [200, 10, 10, 255]);
    assert_eq!(pixel(&talking, 3, 2), [10, 10, 200, 255]);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("metadata.pngtube-remix.json")).unwrap())
            .unwrap();
    assert_eq!(meta["adapter_version"], 2);
    assert_eq!(meta["capabilities"]["meshMetadata"], false);
    assert_eq!(meta["capabilities"]["meshRuntime"], false);
    assert_eq!(meta["layers"][1]["effective_zindex"], 1);
    assert_eq!(meta["emotion_mappings"]["neutral"]["state_index"], 0);
    let unsupported = meta["runtime_features"]["unsupportedFeatures"]
        .as_array()
        .unwrap();
    assert!(unsupported.contains(&json!("mesh metadata absent")));

    // Mesh hints without geometry: metadata true, runtime false, reason listed.
    let hinted = remix_file(
        vec![remix_sprite(
            1,
            None,
            &body,
            vec![("tip_point", Variant::Int(3))],
            vec![(
                "mesh",
                Variant::Dict(vec![(
                    key("vertices"),
                    Variant::Array(vec![
                        Variant::Tuple(vec![0.0, 0.0]),
                        Variant::Tuple(vec![1.0, 0.0]),
                        Variant::Tuple(vec![0.0, 1.0]),
                    ]),
                )]),
            )],
        )],
        false,
    );
    let (st, b) = upload_pkg(&s, &[("Hinted.pngRemix", hinted)]).await;
    assert_eq!(st, 200, "{b}");
    let meta: Value = serde_json::from_slice(
        &std::fs::read(
            s.data
                .join("user_pngtuber/Hinted/metadata.pngtube-remix.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(meta["capabilities"]["meshMetadata"], true);
    assert_eq!(meta["capabilities"]["meshRuntime"], false);
    assert_eq!(meta["runtime_features"]["mesh_deformation"], false);
    let reasons = meta["runtime_features"]["unsupportedFeatures"].to_string();
    assert!(reasons.contains("mesh geometry missing"), "{reasons}");
    assert!(reasons.contains("UV"), "{reasons}");

    // Real vertices, UVs and triangles: mesh deformation at runtime.
    let v3 = |a: f64, b: f64| Variant::Tuple(vec![a, b]);
    let mesh = Variant::Dict(vec![
        (
            key("vertices"),
            Variant::Array(vec![v3(0.0, 0.0), v3(6.0, 0.0), v3(0.0, 4.0)]),
        ),
        (
            key("uvs"),
            Variant::Array(vec![v3(0.0, 0.0), v3(1.0, 0.0), v3(0.0, 1.0)]),
        ),
        (
            key("triangles"),
            Variant::Array(vec![Variant::Int(0), Variant::Int(1), Variant::Int(2)]),
        ),
    ]);
    let meshed = remix_file(
        vec![remix_sprite(1, None, &body, vec![], vec![("mesh", mesh)])],
        false,
    );
    let (st, b) = upload_pkg(&s, &[("Meshed.pngRemix", meshed)]).await;
    assert_eq!(st, 200, "{b}");
    let meta: Value = serde_json::from_slice(
        &std::fs::read(
            s.data
                .join("user_pngtuber/Meshed/metadata.pngtube-remix.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(meta["capabilities"]["meshRuntime"], true);
    assert_eq!(meta["runtime_features"]["mesh_deformation"], true);
    assert_eq!(meta["layers"][0]["mesh"]["valid"], true);

    // Unparseable project: conversion failure of that format, not "missing model.json".
    for junk in [b"garbage bytes".to_vec(), remix_file(vec![], false), {
        let mut v = Vec::new();
        godot::encode(&Variant::Dict(vec![(key("x"), Variant::Int(1))]), &mut v);
        v
    }] {
        let (st, b) = upload_pkg(&s, &[("Bad/bad.pngRemix", junk)]).await;
        assert_eq!(st, 400, "{b}");
        assert_eq!(b["source_format"], "pngtuber_layered_project");
        assert!(
            b["error"].as_str().unwrap().contains("conversion failed"),
            "{b}"
        );
        assert!(b["warnings"].is_array());
    }
    assert!(!s.data.join("user_pngtuber/Bad").exists());
}

#[tokio::test]
async fn pngtuber_rejected_formats_and_limits() {
    let s = TestServer::start(&[SMALL]).await;
    let img = png(2, 2, [1, 1, 1, 255]);
    // Packed project: recognised, a sample requested.
    let (st, b) = upload_pkg(
        &s,
        &[
            ("v/model.veado", b"binary".to_vec()),
            ("v/a.png", img.clone()),
        ],
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["source_format"], "packed_project");
    assert!(b["error"].as_str().unwrap().contains("sample"));
    // Images only: points at the two-image importer.
    let (st, b) = upload_pkg(
        &s,
        &[("i/idle.png", img.clone()), ("i/talk.png", img.clone())],
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["source_format"], "image_pair_candidate");
    assert!(b["error"].as_str().unwrap().contains("two-image"));
    // Nothing recognisable.
    let (st, b) = upload_pkg(&s, &[("notes.txt", b"hi".to_vec())]).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["source_format"], "unknown");
    // A non-pngtuber model.json with images falls through to the image rule.
    let (st, b) = upload_pkg(
        &s,
        &[
            ("model.json", br#"{"model_type":"live2d"}"#.to_vec()),
            ("a.png", img.clone()),
        ],
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["source_format"], "image_pair_candidate");

    // Limits (32 KiB per file, 80 KiB per package).
    let (st, b) = upload_pkg(
        &s,
        &[
            ("model.json", model_json("Big", json!({}))),
            ("idle.png", vec![0; 33 * 1024]),
        ],
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large");
    let chunk = vec![0u8; 30 * 1024];
    let (st, b) = upload_pkg(
        &s,
        &[
            ("a.png", chunk.clone()),
            ("b.png", chunk.clone()),
            ("c.png", chunk.clone()),
        ],
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large");
    assert!(b["error"].as_str().unwrap().contains("package"));
    let t = tree(&s.data.join("user_pngtuber"));
    assert!(t.is_empty(), "{t:?}");
}

#[tokio::test]
async fn pngtuber_real_50_mb_file_limit_over_http() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let body = streamed_part("files", "pkg/idle.png", Vec::new(), 51 * 1024 * 1024, None);
    let r = s
        .http
        .post(s.url("/api/model/pngtuber/upload_model"))
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await
        .expect("the refusal is readable");
    let (st, b) = split(r).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large");
    assert!(b["error"].as_str().unwrap().contains("50 MB"), "{b}");
    assert!(eventually(|| tree(&s.data.join("user_pngtuber")).is_empty()).await);
}

#[tokio::test]
async fn pngtuber_names_are_checked_and_long_cjk_names_work() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let pt = s.data.join("user_pngtuber");
    let idle = png(2, 2, [9, 9, 9, 255]);
    let long_file = format!("{}.png", "a".repeat(252)); // 256 bytes
    let long_dir = "目".repeat(86); // 258 bytes
    let (long_model, long_idle) = (
        format!("{long_dir}/model.json"),
        format!("{long_dir}/idle.png"),
    );
    let bad: Vec<(Files, &str)> = vec![
        (
            vec![
                ("model.json", model_json("A", json!({}))),
                (long_file.as_str(), idle.clone()),
            ],
            "too long",
        ),
        (
            vec![
                (long_model.as_str(), model_json("B", json!({}))),
                (long_idle.as_str(), idle.clone()),
            ],
            "too long",
        ),
        (
            vec![("P/../model.json", model_json("C", json!({})))],
            "dots or spaces",
        ),
        (
            vec![("P/ . /model.json", model_json("C", json!({})))],
            "dots or spaces",
        ),
        (vec![("P/.../idle.png", idle.clone())], "dots or spaces"),
        (vec![("P/a\u{85}.png", idle.clone())], "refuses"),
    ];
    for (files, why) in bad {
        let (st, b) = upload_pkg(&s, &files).await;
        assert_eq!(st, 400, "{b}");
        assert_eq!(b["error_code"], "invalid_upload_path", "{b}");
        assert!(b["error"].as_str().unwrap().contains(why), "{b}");
        assert!(tree(&pt).is_empty(), "left behind: {:?}", tree(&pt));
    }
    // 60-character CJK file and folder names: stored (they are 180 bytes).
    let cjk60 = "猫".repeat(60);
    let img = format!("{cjk60}.png");
    let model = serde_json::to_vec(&json!({"name": cjk60, "model_type": "pngtuber",
        "pngtuber": {"idle_image": img}}))
    .unwrap();
    let (st, b) = upload_pkg(
        &s,
        &[
            (&format!("{cjk60}/model.json"), model),
            (&format!("{cjk60}/{img}"), idle.clone()),
        ],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["folder"], cjk60);
    assert!(pt.join(&cjk60).join(&img).is_file());
    // A 100-character CJK model name: the folder slug is cut to 255 bytes, not an OS error.
    let name100 = "犬".repeat(100);
    let (st, b) = upload_pkg(
        &s,
        &[
            (
                "Pack/model.json",
                model_json(&name100, json!({"pngtuber": {"idle_image": "idle.png"}})),
            ),
            ("Pack/idle.png", idle.clone()),
        ],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let folder = b["folder"].as_str().unwrap();
    assert!(folder.len() <= 255 && folder == "犬".repeat(85), "{folder}");
    assert_eq!(b["name"], name100);
    let (_, l) = s.get("/api/model/pngtuber/models").await;
    assert_eq!(l["models"].as_array().unwrap().len(), 2, "{l}");
}

#[tokio::test]
async fn extreme_numbers_inside_uploaded_projects_never_break_the_server() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let body = png(4, 4, [255, 0, 0, 255]);
    let mouth = png(2, 2, [0, 0, 255, 255]);
    for (i, v) in [
        json!(1e308),
        json!(-1e308),
        json!(18446744073709551616.0),
        json!(-1),
        json!(-0.0),
        json!("NaN"),
        json!(1e-320),
        json!({"nested": [1]}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut l1 = plus_layer(1, Value::Null, "Vector2(0, 0)", 0, 0, &body);
        let mut l2 = plus_layer(2, json!(1), "Vector2(1, 1)", 2, 1, &mouth);
        for k in ["zindex", "showTalk", "showBlink", "frames", "animSpeed"] {
            l2[k] = v.clone();
        }
        l1["zindex"] = v.clone();
        let save = json!({"1": l1, "2": l2});
        let settings = json!({"costumeKeys": ["1"], "blinkSpeed": v, "blinkChance": v});
        let dir = format!("P{i}");
        let (st, b) = upload_pkg(
            &s,
            &[
                (
                    &format!("{dir}/x{i}.save"),
                    serde_json::to_vec(&save).unwrap(),
                ),
                (
                    &format!("{dir}/settings.pngtp"),
                    serde_json::to_vec(&settings).unwrap(),
                ),
            ],
        )
        .await;
        assert!(st == 200 || st == 400, "save {v}: {st} {b}");
        // the same numbers in a layered project
        let f = |x: f64| Variant::Float(x);
        let x = v.as_f64().unwrap_or(f64::MAX);
        let file = remix_file(
            vec![
                remix_sprite(1, None, &body, vec![("z_index", f(x))], vec![]),
                remix_sprite(
                    2,
                    Some(1),
                    &mouth,
                    vec![
                        ("should_talk", Variant::Bool(true)),
                        ("hframes", f(x)),
                        ("vframes", f(x)),
                        ("frames", f(x)),
                        ("frame", f(x)),
                        ("z_index", f(-x)),
                    ],
                    vec![],
                ),
            ],
            true,
        );
        let (st, b) = upload_pkg(&s, &[(&format!("R{i}/r{i}.pngRemix"), file)]).await;
        assert!(st == 200 || st == 400, "remix {v}: {st} {b}");
    }
}

/// The models listing is cached per package; every change on disk shows at once.
#[tokio::test]
async fn pngtuber_listing_follows_changes_on_disk() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let pt = s.data.join("user_pngtuber");
    let idle = png(2, 2, [1, 2, 3, 255]);
    for f in ["a", "b", "c"] {
        std::fs::create_dir_all(pt.join(f).join("img")).unwrap();
        std::fs::write(pt.join(f).join("idle.png"), &idle).unwrap();
        std::fs::write(pt.join(f).join("img/talk.png"), &idle).unwrap();
        std::fs::write(pt.join(f).join("model.json"), model_json(f, json!({}))).unwrap();
    }
    let names = || async {
        let (st, b) = s.get("/api/model/pngtuber/models").await;
        assert_eq!(st, 200, "{b}");
        b["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names().await, ["a", "b", "c"]);
    // Past the racy window the entries are cached; changes still show at once.
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    assert_eq!(names().await, ["a", "b", "c"]);
    assert_eq!(names().await, ["a", "b", "c"]);
    // A referenced file deep in the package disappears.
    std::fs::remove_file(pt.join("a/img/talk.png")).unwrap();
    assert_eq!(names().await, ["b", "c"]);
    // model.json rewritten in place (same length) and atomically.
    std::fs::write(pt.join("b/model.json"), model_json("x", json!({}))).unwrap();
    assert_eq!(names().await, ["x", "c"]);
    std::fs::write(pt.join("tmp.json"), model_json("yy", json!({}))).unwrap();
    std::fs::rename(pt.join("tmp.json"), pt.join("b/model.json")).unwrap();
    assert_eq!(names().await, ["yy", "c"]);
    // A referenced image replaced by a symlink leaving the folder.
    #[cfg(unix)]
    {
        let outside = s.data.join("outside.png");
        std::fs::write(&outside, &idle).unwrap();
        std::fs::remove_file(pt.join("c/idle.png")).unwrap();
        std::os::unix::fs::symlink(&outside, pt.join("c/idle.png")).unwrap();
        assert_eq!(names().await, ["yy"]);
    }
    // The missing file comes back; a package folder is removed.
    std::fs::write(pt.join("a/img/talk.png"), &idle).unwrap();
    std::fs::remove_dir_all(pt.join("b")).unwrap();
    assert_eq!(names().await, ["a"]);
}

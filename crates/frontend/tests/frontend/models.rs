//! Live2D and VRM model lists, uploads and deletes; storage location; the features companiond does not have.

use crate::common::*;

#[tokio::test]
async fn model_lists_storage_and_unavailable_features() {
    let s = start_front(None).await;
    let (st, l2d) = s.get("/api/live2d/models").await;
    assert_eq!(st, 200);
    let arr = l2d.as_array().expect("a bare array");
    let names: Vec<&str> = arr.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["mao", "mine"]);
    assert_eq!(arr[0]["path"], "/static/mao/mao.model3.json");
    assert_eq!(arr[1]["path"], "/user_live2d/mine/mine.model3.json");
    let (_, simple) = s.get("/api/live2d/models?simple=true").await;
    assert_eq!(simple["models"], json!(["mao", "mine"]));
    let (_, user) = s.get("/api/live2d/user_models").await;
    let user = user["models"].as_array().unwrap().clone();
    assert!(user
        .iter()
        .any(|m| m["name"] == "broken" && m["broken"] == true));
    assert!(user
        .iter()
        .any(|m| m["type"] == "vrm" && m["path"] == "/user_vrm/avatar.vrm"));
    let (_, files) = s.get("/api/live2d/model_files/mao").await;
    assert_eq!(files["motion_files"], json!(["motions/idle.motion3.json"]));
    assert_eq!(
        files["expression_files"],
        json!(["expressions/smile.exp3.json"])
    );
    assert_eq!(s.get("/api/live2d/model_files/none").await.0, 404);
    let (_, vrm) = s.get("/api/model/vrm/models").await;
    let urls: Vec<&str> = vrm["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["url"].as_str())
        .collect();
    assert_eq!(urls, ["/static/vrm/project.vrm", "/user_vrm/avatar.vrm"]);
    let (_, anims) = s.get("/api/model/vrm/animations").await;
    assert_eq!(
        anims["animations"][0]["url"],
        "/user_vrm/animation/wave.vrma"
    );

    // Binding a Live2D model by folder name stores the path page_config serves.
    let (st, _) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/l2d/Companion",
        json!({"model_type": "live2d", "live2d": "mao"}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, cur) = s
        .get("/api/characters/current_live2d_model?catgirl_name=Companion")
        .await;
    assert_eq!(cur["model_name"], "mao");
    assert_eq!(cur["model_info"]["path"], "/static/mao/mao.model3.json");

    // Storage: the data dir is the one location.
    let (_, b) = s.get("/api/storage/location/bootstrap").await;
    assert_eq!(b["current_root"], s.data.to_string_lossy().as_ref());
    assert_eq!(b["selection_required"], false);
    let (_, stt) = s.get("/api/storage/location/status").await;
    assert_eq!(
        (stt["ok"].as_bool(), stt["ready"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(stt["completion_notice"]["completed"], false);
    let (st, _) = s.post("/api/storage/location/select", json!({})).await;
    assert_eq!(st, 403);
    let (st, r) = s.post_csrf("/api/storage/location/select", json!({})).await;
    assert_eq!((st, r["ok"].as_bool()), (409, Some(false)));
    assert_eq!(r["error_code"], "storage_relocation_unsupported");

    // Platform language without a platform.
    let (st, sl) = s.get("/api/config/steam_language").await;
    assert_eq!((st, sl["success"].as_bool()), (200, Some(false)));
    assert_eq!(sl["uiLanguage"], Value::Null);
    assert_eq!(sl["is_mainland_china"], false);

    // Features companiond does not have.
    assert_eq!(
        s.get("/api/agent/health").await,
        (
            502,
            json!({"success": false, "status": "down", "error": "companiond has no agent server"})
        )
    );
    assert_eq!(s.get("/api/agent/flags").await.0, 502);
    assert_eq!(s.get("/api/music/domains").await.1["domains"], json!([]));
    assert_eq!(
        s.get("/api/music/search?query=").await.1["error"],
        "EMPTY_QUERY"
    );
    let (_, w) = s.get("/api/widget-mode/state").await;
    assert_eq!(
        w["state"],
        json!({"enabled": false, "stealthEnabled": false})
    );
    assert_eq!(
        s.post("/api/widget-mode/enabled", json!({"enabled": true}))
            .await
            .0,
        403
    );
    assert_eq!(
        s.post_csrf("/api/widget-mode/enabled", json!({"enabled": "yes"}))
            .await
            .0,
        422
    );
    let (_, w) = s
        .post_csrf("/api/widget-mode/enabled", json!({"enabled": true}))
        .await;
    assert_eq!(w["state"]["enabled"], true);
    let (st, cd) = send_json(
        &s,
        Method::POST,
        "/api/card-drop/active-character",
        json!({"name": "Companion"}),
    )
    .await;
    assert_eq!((st, cd), (200, json!({"ok": true})));
    assert_eq!(
        s.get("/api/card-drop/active-character").await.1["name"],
        "Companion"
    );
    let (st, g) = send_json(
        &s,
        Method::POST,
        "/api/galgame/options",
        json!({"messages": []}),
    )
    .await;
    assert_eq!((st, &g["error"]), (400, &json!("no_assistant_turn")));
    let (st, g) = send_json(
        &s,
        Method::POST,
        "/api/galgame/options",
        json!({"messages": [{"role": "assistant", "text": "hi"}]}),
    )
    .await;
    assert_eq!((st, g["options"].as_array().map(Vec::len)), (200, Some(3)));
    let (st, items) = s.get("/api/steam/workshop/subscribed-items").await;
    assert_eq!((st, &items["items"]), (200, &json!([])));
    let (st, sync) = send_json(
        &s,
        Method::POST,
        "/api/steam/workshop/sync-characters",
        json!({}),
    )
    .await;
    assert_eq!((st, &sync["added"]), (200, &json!(0)));
    let (st, beacon) = send_json(&s, Method::POST, "/api/beacon/shutdown", json!({})).await;
    assert_eq!((st, beacon), (200, Value::Null));
    assert_eq!(
        s.get("/api/characters").await.0,
        200,
        "still running after the beacon"
    );
}

#[tokio::test]
async fn vrm_models_and_animations_are_uploaded_listed_and_deleted() {
    let s = start_front(None).await;
    let (st, up) = upload(
        &s,
        "/api/model/vrm/upload",
        "file",
        "Tiny.vrm",
        b"glTF-tiny",
    )
    .await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["model_url"], "/user_vrm/Tiny.vrm");
    assert_eq!(up["model_name"], "Tiny");
    assert_eq!(up["file_size"], 9);
    let (_, vrm) = s.get("/api/model/vrm/models").await;
    assert!(vrm["models"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["url"] == "/user_vrm/Tiny.vrm" && m["location"] == "user"));
    let (st, body, _) = text(&s, "/user_vrm/Tiny.vrm").await;
    assert_eq!((st, body.as_str()), (200, "glTF-tiny"));
    // Taken name, wrong extension, no file part, a path in the name.
    let (st, e) = upload(&s, "/api/model/vrm/upload", "file", "Tiny.vrm", b"other").await;
    assert_eq!(st, 400, "{e}");
    assert_eq!(
        std::fs::read(s.data.join("user_vrm/Tiny.vrm")).unwrap(),
        b"glTF-tiny"
    );
    assert_eq!(
        upload(&s, "/api/model/vrm/upload", "file", "x.txt", b"x")
            .await
            .0,
        400
    );
    assert_eq!(
        upload(&s, "/api/model/vrm/upload", "other", "y.vrm", b"x")
            .await
            .0,
        400
    );
    let (st, up) = upload(&s, "/api/model/vrm/upload", "file", "../../evil.vrm", b"x").await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["model_url"], "/user_vrm/evil.vrm");
    assert!(!s.data.join("evil.vrm").exists());
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(s.data.join("user_vrm"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());

    let (st, up) = upload(
        &s,
        "/api/model/vrm/upload_animation",
        "file",
        "Bow.vrma",
        b"anim",
    )
    .await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["file_path"], "/user_vrm/animation/Bow.vrma");
    let (_, anims) = s.get("/api/model/vrm/animations").await;
    assert!(anims["animations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["url"] == "/user_vrm/animation/Bow.vrma"));
    assert_eq!(
        upload(
            &s,
            "/api/model/vrm/upload_animation",
            "file",
            "Bow.vrm",
            b"x"
        )
        .await
        .0,
        400
    );

    // Delete: only imported top-level models.
    for bad in [
        "/static/vrm/project.vrm",
        "/user_vrm/../x.vrm",
        "/user_vrm/a/b.vrm",
    ] {
        let (st, _) = send_json(
            &s,
            Method::DELETE,
            "/api/model/vrm/model",
            json!({"url": bad}),
        )
        .await;
        assert_eq!(st, 400, "{bad}");
    }
    let (st, _) = send_json(
        &s,
        Method::DELETE,
        "/api/model/vrm/model",
        json!({"url": "/user_vrm/Nope.vrm"}),
    )
    .await;
    assert_eq!(st, 404);
    let (st, _) = send_json(
        &s,
        Method::DELETE,
        "/api/model/vrm/model",
        json!({"url": "/user_vrm/Tiny.vrm"}),
    )
    .await;
    assert_eq!(st, 200);
    assert!(!s.data.join("user_vrm/Tiny.vrm").exists());
    // An upload from another site's page is refused.
    let (ct, body) = multipart("file", "Cross.vrm", b"x");
    let r = s
        .http
        .post(s.url("/api/model/vrm/upload"))
        .header("content-type", ct)
        .header("Origin", "http://evil.example")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(!s.data.join("user_vrm/Cross.vrm").exists());
}

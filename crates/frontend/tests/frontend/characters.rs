//! The characters document, the card manager (create, edit, switch, delete) and the rename through the original path.

use crate::common::*;

#[tokio::test]
async fn the_characters_document_carries_both_shapes() {
    let s = TestServer::start(FAMILIES).await;
    let (st, doc) = s.get("/api/characters").await;
    assert_eq!(st, 200);
    assert_eq!(doc["success"], true);
    assert_eq!(doc["current"], "Companion");
    assert_eq!(doc["characters"][0]["name"], "Companion");
    assert_eq!(doc["当前猫娘"], "Companion");
    assert_eq!(doc["主人"], json!({}));
    assert_eq!(doc["猫娘"]["Companion"]["model_type"], "live2d");
    assert!(doc["猫娘"]["Companion"].get("name").is_none());

    // The master profile.
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master",
        json!({"昵称": "x"}),
    )
    .await;
    assert_eq!(st, 400);
    let (st, r) = send_json(
        &s,
        Method::POST,
        "/api/characters/master",
        json!({"档案名": "Ash", "昵称": "A", "性别": ""}),
    )
    .await;
    assert_eq!((st, &r["success"]), (200, &json!(true)));
    let (_, doc) = s.get("/api/characters").await;
    assert_eq!(doc["主人"], json!({"档案名": "Ash", "昵称": "A"}));
}

#[tokio::test]
async fn card_manager_creates_edits_switches_and_deletes() {
    let s = TestServer::start(FAMILIES).await;
    let (st, r) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika", "性别": "女", "年龄": "", "_field_order": ["性别"]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["character_name"], "Mika");
    // A taken name gets a suffix.
    let (_, r2) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika"}),
    )
    .await;
    assert_eq!(r2["character_name"], "Mika(1)");
    let (st, bad) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "a/b"}),
    )
    .await;
    assert_eq!(st, 400);
    assert_eq!(bad["success"], false);

    // Bind a model, then save the form: user fields are replaced, the binding stays.
    let (st, r) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/l2d/Mika",
        json!({"model_type": "live3d", "vrm": "/user_vrm/avatar.vrm", "idle_animation": ["/user_vrm/animation/wave.vrma"]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    for bad in [
        json!({"model_type": "live3d", "vrm": "/user_vrm/../x.vrm"}),
        json!({"model_type": "live3d", "vrm": "https://evil/x.vrm"}),
        json!({"model_type": "live3d", "vrm": "/user_vrm/a.vrm", "mmd": "/user_mmd/a.pmx"}),
        json!({"model_type": "hologram"}),
    ] {
        let (st, r) = send_json(
            &s,
            Method::PUT,
            "/api/characters/catgirl/l2d/Mika",
            bad.clone(),
        )
        .await;
        assert_eq!(st, 400, "{bad} {r}");
        assert!(r["error"].as_str().is_some());
    }
    let (st, r) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/Mika",
        json!({"档案名": "Mika", "昵称": "Mi", "model_type": "live3d", "vrm": "/static/vrm/x.vrm", "_field_order": ["昵称"]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["ignored_reserved_fields"], json!(["vrm"]));
    let (_, doc) = s.get("/api/characters").await;
    let mika = &doc["猫娘"]["Mika"];
    assert_eq!(mika["昵称"], "Mi");
    assert!(mika.get("性别").is_none(), "replace semantics: {mika}");
    assert_eq!(mika["vrm"], "/user_vrm/avatar.vrm");
    assert_eq!(mika["live3d_sub_type"], "vrm");
    assert_eq!(
        mika["idleAnimations"],
        json!(["/user_vrm/animation/wave.vrma"])
    );
    assert_eq!(mika["_reserved"]["field_order"], json!(["昵称"]));
    assert_eq!(
        send_json(&s, Method::PUT, "/api/characters/catgirl/Nobody", json!({}))
            .await
            .0,
        404
    );

    // A foreign page cannot edit.
    let r = s
        .http
        .put(s.url("/api/characters/catgirl/Mika"))
        .header("Origin", "http://evil.example")
        .json(&json!({"昵称": "pwned"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // Switch, with the original's body.
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/current_catgirl",
        json!({"catgirl_name": "Mika"}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, cur) = s.get("/api/characters/current_catgirl").await;
    assert_eq!(cur["current_catgirl"], "Mika");
    assert_eq!(
        send_json(
            &s,
            Method::POST,
            "/api/characters/current_catgirl",
            json!({"catgirl_name": "Nobody"})
        )
        .await
        .0,
        404
    );
    // The current character cannot be deleted; another can.
    assert_eq!(
        send_json(
            &s,
            Method::DELETE,
            "/api/characters/catgirl/Mika",
            json!(null)
        )
        .await
        .0,
        400
    );
    let (st, _) = send_json(
        &s,
        Method::DELETE,
        "/api/characters/catgirl/Mika(1)",
        json!(null),
    )
    .await;
    assert_eq!(st, 200);
    let (_, doc) = s.get("/api/characters").await;
    assert!(doc["猫娘"].get("Mika(1)").is_none());
    // Its memory and profile went to the trash (docs/data.md).
    let trash = companiond_core::snapshots::list_kind(
        &s.data,
        "Mika(1)",
        companiond_core::snapshots::Kind::Delete,
    );
    assert_eq!(trash.len(), 1);
    assert!(trash[0].profile.as_ref().is_some_and(|p| p.is_object()));

    // Per-character settings.
    let (_, vm) = s
        .get("/api/characters/catgirl/Mika/voice_mode_status")
        .await;
    assert_eq!(vm["is_current"], true);
    assert_eq!(vm["is_voice_mode"], false);
    let (_, vm) = s
        .get("/api/characters/catgirl/a%3Cb/voice_mode_status")
        .await;
    assert_eq!(vm["invalid_name"], true);
    let (_, mmd) = s.get("/api/characters/catgirl/Mika/mmd_settings").await;
    assert_eq!(mmd["settings"]["physics"]["strength"], 1.0);
    let (st, _) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/Mika/mmd_settings",
        json!({"physics": {"strength": 99}, "cursor_follow": {"enabled": false}}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, mmd) = s.get("/api/characters/catgirl/Mika/mmd_settings").await;
    assert_eq!(mmd["settings"]["physics"]["strength"], 10.0);
    assert_eq!(mmd["settings"]["cursorFollow"]["enabled"], false);
    assert_eq!(
        send_json(
            &s,
            Method::PUT,
            "/api/characters/catgirl/Mika/mmd_settings",
            json!({"physics": 3})
        )
        .await
        .0,
        400
    );
    assert_eq!(
        s.get("/api/characters/catgirl/Nobody/mmd_settings").await.0,
        404
    );

    // Language preference: CSRF-guarded like the original sends it.
    let (_, lp) = s
        .get("/api/characters/character/Mika/language-preference")
        .await;
    assert_eq!(lp["language"], "");
    let r = send_json(
        &s,
        Method::PUT,
        "/api/characters/character/Mika/language-preference",
        json!({"language": "ja"}),
    )
    .await;
    assert_eq!(r.0, 403);
    let r = s
        .csrf(
            Method::PUT,
            "/api/characters/character/Mika/language-preference",
        )
        .json(&json!({"language": "ja"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (_, lp) = s
        .get("/api/characters/character/Mika/language-preference")
        .await;
    assert_eq!(
        (lp["language"].as_str(), lp["effective_language"].as_str()),
        (Some("ja"), Some("ja"))
    );

    // Cards and voices.
    let (_, metas) = s.get("/api/characters/card-metas").await;
    assert_eq!(metas["metas"]["Mika"]["origin"], "self");
    assert_eq!(
        s.get("/api/characters/card-faces").await.1["names"],
        json!([])
    );
    assert_eq!(
        s.get("/api/characters/character-card/list").await.1["character_cards"],
        json!([])
    );
    assert_eq!(s.get("/api/characters/voices").await.1["voices"], json!({}));
    let (st, c) = send_json(
        &s,
        Method::POST,
        "/api/characters/clear_voice_ids",
        json!({}),
    )
    .await;
    assert_eq!((st, &c["cleared_count"]), (200, &json!(0)));
    let (_, ob) = s.get("/api/characters/persona-onboarding-state").await;
    assert_eq!(ob["state"]["status"], "completed");
}

#[tokio::test]
async fn rename_without_the_memory_family_is_a_clear_error() {
    let s = start_front(None).await;
    let path = "/api/characters/catgirl/Companion/rename";
    let (st, body) = s.post(path, json!({"new_name": "Mimi"})).await;
    assert_eq!(st, 503, "{body}");
    assert_eq!(body["success"], false);
    assert_eq!(body["error_code"], "rename_unavailable");
    // Nothing changed.
    let (_, doc) = s.get("/api/characters").await;
    assert!(doc["猫娘"].get("Companion").is_some() && doc["猫娘"].get("Mimi").is_none());
}

#[tokio::test]
async fn rename_through_the_original_path_is_the_rename_transaction() {
    let s = start_front_with(WITH_MEMORY, None).await;
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika", "昵称": "mi"}),
    )
    .await;
    assert_eq!(st, 200);
    // Some history, as a chat would leave it.
    write(
        s.data.join("memory/Mika/recent.json"),
        r#"[{"type":"human","data":{"content":"hi Mika"}}]"#,
    );
    let (st, body) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Mika/rename",
        json!({"new_name": "Mimi"}),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["success"], true);
    let (_, doc) = s.get("/api/characters").await;
    assert!(doc["猫娘"].get("Mimi").is_some() && doc["猫娘"].get("Mika").is_none());
    assert_eq!(doc["猫娘"]["Mimi"]["昵称"], "mi");
    // The character's memory moved with it (the same transaction as the
    // interface's /api/characters/profile/{old_name}/rename).
    assert!(s.data.join("memory/Mimi/recent.json").is_file());
    assert!(!s.data.join("memory/Mika").exists());
    // Its errors: unknown old name, taken new name, no new name.
    let (st, body) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Nobody/rename",
        json!({"new_name": "Other"}),
    )
    .await;
    assert_eq!(st, 404, "{body}");
    assert_eq!(body["success"], false);
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Mimi/rename",
        json!({"new_name": "Companion"}),
    )
    .await;
    assert!(st == 400 || st == 409, "{st}");
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Mimi/rename",
        json!({}),
    )
    .await;
    assert_eq!(st, 400);
    // Refused from another site's page, like every character edit.
    let r = s
        .http
        .post(s.url("/api/characters/catgirl/Mimi/rename"))
        .header("Origin", "http://evil.example")
        .json(&json!({"new_name": "Evil"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // The master profile's name.
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master",
        json!({"档案名": "Ann"}),
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master/Ann/rename",
        json!({"new_name": "Anna"}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, doc) = s.get("/api/characters").await;
    assert_eq!(doc["主人"]["档案名"], "Anna");
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master/Ann/rename",
        json!({"new_name": "X"}),
    )
    .await;
    assert_eq!(st, 404);
}

/// A master rename is one read-modify-write under the document's lock: a
/// form save of the master beside it is never lost (it lands before the
/// rename, which keeps its fields, or after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_master_saves_both_land() {
    let s = TestServer::start(FAMILIES).await;
    for round in 0..20 {
        let (st, _) = send_json(
            &s,
            Method::POST,
            "/api/characters/master",
            json!({"档案名": "Ann", "昵称": "before"}),
        )
        .await;
        assert_eq!(st, 200);
        let nickname = format!("after {round}");
        let (renamed, saved) = tokio::join!(
            send_json(
                &s,
                Method::POST,
                "/api/characters/master/Ann/rename",
                json!({"new_name": "Bea"}),
            ),
            send_json(
                &s,
                Method::POST,
                "/api/characters/master",
                json!({"档案名": "Ann", "昵称": nickname}),
            ),
        );
        assert_eq!(saved.0, 200, "{}", saved.1);
        let (_, doc) = s.get("/api/characters").await;
        let master = &doc["主人"];
        assert_eq!(master["昵称"], nickname.as_str(), "round {round}: {master}");
        match renamed.0 {
            // Renamed first (then replaced by the save) or after the save.
            200 => assert!(master["档案名"] == "Ann" || master["档案名"] == "Bea"),
            st => panic!("round {round}: the rename answered {st}: {}", renamed.1),
        }
    }
}

/// The card form's `voice_id` and `model_type` are strings: another value is
/// refused (400) and nothing is stored.
#[tokio::test]
async fn a_card_form_with_a_non_string_model_type_is_refused() {
    let s = TestServer::start(FAMILIES).await;
    for body in [
        json!({"档案名": "Mika", "model_type": {"x": 1}}),
        json!({"档案名": "Mika", "voice_id": 7}),
    ] {
        let (st, r) = send_json(&s, Method::POST, "/api/characters/catgirl", body).await;
        assert_eq!(
            (st, r["error_code"].as_str()),
            (400, Some("invalid_request")),
            "{r}"
        );
    }
    let (st, r) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/Companion",
        json!({"model_type": [1]}),
    )
    .await;
    assert_eq!(
        (st, r["error_code"].as_str()),
        (400, Some("invalid_request")),
        "{r}"
    );
    let (_, doc) = s.get("/api/characters").await;
    assert!(!doc["猫娘"].as_object().unwrap().contains_key("Mika"));
    assert_eq!(doc["猫娘"]["Companion"]["model_type"], "live2d");
}

/// An imported character card (docs/characters.md) shows in the original card
/// manager: its image as the card face, its metadata as imported.
#[tokio::test]
async fn an_imported_card_gives_the_card_face_and_meta() {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for b in bytes {
            crc ^= *b as u32;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(kind: &[u8], data: &[u8]) -> Vec<u8> {
        let mut out = (data.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc32(&[kind, data].concat()).to_be_bytes());
        out
    }
    fn base64(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in bytes.chunks(3) {
            let n = (c[0] as u32) << 16
                | (*c.get(1).unwrap_or(&0) as u32) << 8
                | *c.get(2).unwrap_or(&0) as u32;
            for i in 0..4 {
                out.push(if i <= c.len() {
                    A[(n >> (18 - 6 * i) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        out
    }
    let card = json!({"spec": "chara_card_v3", "spec_version": "3.0",
        "data": {"name": "Kiri", "creator": "ann", "description": "A fox."}});
    let mut text = b"ccv3\0".to_vec();
    text.extend_from_slice(base64(card.to_string().as_bytes()).as_bytes());
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]));
    png.extend(chunk(b"tEXt", &text));
    png.extend(chunk(b"IEND", &[]));

    let s = TestServer::start(FAMILIES).await;
    let boundary = "frontendcardtest";
    let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"kiri.png\"\r\n\r\n").into_bytes();
    body.extend_from_slice(&png);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let r = s
        .csrf(reqwest::Method::POST, "/api/characters/card/import")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    assert_eq!(
        s.get("/api/characters/card-faces").await.1["names"],
        json!(["Kiri"])
    );
    let r = reqwest::get(s.url("/api/characters/catgirl/Kiri/card-face"))
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().to_vec(), png);
    let (st, b) = s.get("/api/characters/catgirl/Companion/card-face").await;
    assert_eq!((st, b["success"].as_bool()), (404, Some(false)));
    let (_, metas) = s.get("/api/characters/card-metas").await;
    assert_eq!(
        (
            metas["metas"]["Kiri"]["origin"].as_str(),
            metas["metas"]["Kiri"]["author"].as_str()
        ),
        (Some("imported"), Some("ann"))
    );
    let (_, doc) = s.get("/api/characters").await;
    assert_eq!(doc["猫娘"]["Kiri"]["description"], "A fox.");
}

//! The rename transaction: moves, repeats, refusals and rollback.

use crate::common::*;

async fn create_character(s: &TestServer, name: &str) {
    let (st, b) = s
        .post(
            "/api/characters/profile",
            json!({"name": name, "nickname": "n"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
}

async fn character_names(s: &TestServer) -> (Vec<String>, String) {
    let (_, b) = s.get("/api/characters").await;
    let names = b["characters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    (names, b["current"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_moves_everything_and_repeats_as_a_no_op() {
    let s = server().await;
    create_character(&s, "Mika").await;
    s.post("/api/characters/current", json!({"name": "Mika"}))
        .await;
    let (st, _) = s.get("/api/memory/recent_files").await;
    assert_eq!(st, 200);
    write_history(
        &s,
        "Mika",
        &json!([
            msg("human", "Mika: hi"),
            msg("ai", "[Mika] hello, EMika: stays")
        ]),
    );
    std::fs::write(
        s.data.join("memory/Mika/facts.json"),
        br#"[{"fact": "likes tea"}]"#,
    )
    .unwrap();
    // A legacy flat file of Mika is folded into the directory.
    std::fs::write(s.data.join("memory/surfaced_Mika.json"), br#"["legacy"]"#).unwrap();
    std::fs::remove_file(s.data.join("memory/Mika/surfaced.json")).unwrap();

    // An open chat session follows the rename.
    let (mut ws, _) = s.chat("Mika").await;
    assert!(s.state.sessions.is_active("Mika"));

    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": " Rin "}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["memory_renamed"], true);
    assert_eq!(b["memory_server_reloaded"], true);
    let (names, current) = character_names(&s).await;
    assert_eq!(names, vec!["Companion", "Rin"]);
    assert_eq!(current, "Rin");
    let (_, list) = s.get("/api/characters").await;
    let rin = &list["characters"][1];
    assert_eq!(rin["nickname"], "n");
    assert_eq!(
        rin["_reserved"]["ai_context"]["rename_events"][0]["old_name"],
        "Mika"
    );
    assert!(!s.data.join("memory/Mika").exists());
    assert!(!s.data.join("memory/surfaced_Mika.json").exists());
    let dir = s.data.join("memory/Rin");
    for f in companiond_memory::UNIT_FILES {
        assert!(dir.join(f).is_file(), "{f}");
    }
    assert_eq!(
        std::fs::read(dir.join("facts.json")).unwrap(),
        br#"[{"fact": "likes tea"}]"#
    );
    assert_eq!(
        std::fs::read(dir.join("surfaced.json")).unwrap(),
        br#"["legacy"]"#
    );
    assert_eq!(
        texts(&stored(&s, "Rin")),
        vec!["Rin: hi", "[Rin] hello, EMika: stays"]
    );
    let (st, _) = read(&s, "recent_Rin.json").await;
    assert_eq!(st, 200);
    let (st, _) = read(&s, "recent_Mika.json").await;
    assert_eq!(st, 404);

    // The session continues under the new name and is told.
    assert!(s.state.sessions.is_active("Rin"));
    assert!(s.state.sessions.get("Mika").is_none());
    let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let frame: Value = serde_json::from_str(frame.to_text().unwrap()).unwrap();
    assert_eq!(
        frame,
        json!({"type": "character_renamed", "old_name": "Mika", "new_name": "Rin"})
    );
    ws.send(tokio_tungstenite::tungstenite::Message::Close(None))
        .await
        .ok();

    // The follow-up (alias) is an idempotent no-op.
    let (st, b) = s
        .post(
            "/api/memory/update_character_name",
            json!({"old_name": "Mika", "new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["changed"], false);
    assert_eq!(b["already_renamed"], true);
    assert_eq!(b["exists_after"], true);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!((st, b["changed"].clone()), (200, json!(false)));

    // Old storage reappearing while the config holds the new name → 409.
    std::fs::create_dir_all(s.data.join("memory/Mika")).unwrap();
    let (st, b) = s
        .post(
            "/api/memory/update_character_name",
            json!({"old_name": "Mika", "new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    std::fs::remove_dir(s.data.join("memory/Mika")).unwrap();

    // Rename back through the alias; dotted existing names are accepted as old names.
    let (st, b) = s
        .post(
            "/api/memory/update_character_name",
            json!({"old_name": "Rin", "new_name": "Mika"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(character_names(&s).await.0, vec!["Companion", "Mika"]);
}

#[tokio::test]
async fn rename_refuses_bad_names() {
    let s = server().await;
    create_character(&s, "Mika").await;
    let before = tree(&s.data);
    let cases: Vec<(Value, u16)> = vec![
        (json!({"old_name": "Mika", "new_name": "a/b"}), 400),
        (json!({"old_name": "Mika", "new_name": "../x"}), 400),
        (json!({"old_name": "Mika", "new_name": "api"}), 400),
        (json!({"old_name": "Mika", "new_name": "a.b"}), 400),
        (json!({"old_name": "Mika", "new_name": "CON"}), 400),
        (json!({"old_name": "Mika", "new_name": "x".repeat(61)}), 400),
        (json!({"old_name": "Mika", "new_name": ""}), 400),
        (json!({"old_name": "Mika"}), 400),
        (json!({"new_name": "Rin"}), 400),
        (json!({"old_name": 3, "new_name": "Rin"}), 400),
        (json!({"old_name": "Mika", "new_name": "Mika"}), 400),
        (json!({"old_name": "../Mika", "new_name": "Rin"}), 400),
        (json!({"old_name": "Nobody", "new_name": "Rin"}), 404),
        (json!({"old_name": "Mika", "new_name": "Companion"}), 409),
    ];
    for (body, want) in cases {
        let (st, b) = s
            .post("/api/memory/update_character_name", body.clone())
            .await;
        assert_eq!(st, want, "{body} → {b}");
        assert_eq!(b["success"], false);
    }
    let (st, _) = post_raw(&s, "/api/memory/update_character_name", b"{broken".to_vec()).await;
    assert_eq!(st, 400);
    let (st, _) = post_raw(&s, "/api/characters/profile/Mika/rename", b"".to_vec()).await;
    assert_eq!(st, 400);
    let (st, _) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "ws"}),
        )
        .await;
    assert_eq!(st, 400);
    assert_eq!(tree(&s.data), before);
}

#[tokio::test]
async fn rename_rolls_back_every_step_on_injected_failures() {
    let s = server().await;
    create_character(&s, "Mika").await;
    s.post("/api/characters/current", json!({"name": "Mika"}))
        .await;
    s.get("/api/memory/recent_files").await;
    write_history(&s, "Mika", &json!([msg("human", "Mika: hello")]));
    std::fs::write(s.data.join("memory/recent_meta.json"), b"{}").unwrap();
    let chars_file = s.data.join("config/characters.json");

    // (a) The reload fails after storage moved: a damaged time index.
    std::fs::write(
        s.data.join("memory/Mika/time_indexed.db"),
        b"this is not sqlite",
    )
    .unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 500, "{b}");
    assert_eq!(b["code"], "MEMORY_RELOAD_FAILED");
    assert_eq!(b["rolled_back"], true);
    assert_eq!(tree(&s.data), before, "state byte-identical after rollback");
    assert_eq!(
        character_names(&s).await,
        (vec!["Companion".into(), "Mika".into()], "Mika".into())
    );
    assert!(s.state.sessions.get("Mika").is_some() && s.state.sessions.get("Rin").is_none());
    let conn = rusqlite::Connection::open(s.data.join("memory/Mika/time_indexed.db")).unwrap();
    drop(conn);
    std::fs::remove_file(s.data.join("memory/Mika/time_indexed.db")).unwrap();
    s.get("/api/memory/recent_files").await; // recreates a good time index

    // (b) A merge into an existing directory meets a child in the way after
    //     other children moved.
    std::fs::create_dir_all(s.data.join("memory/Rin")).unwrap();
    std::fs::write(s.data.join("memory/Rin/time_indexed.db"), b"orphan").unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "destination_exists");
    assert_eq!(tree(&s.data), before);
    assert_eq!(character_names(&s).await.0, vec!["Companion", "Mika"]);
    std::fs::remove_dir_all(s.data.join("memory/Rin")).unwrap();

    // (c) A file in the way of the new directory.
    std::fs::write(s.data.join("memory/Rin"), b"file in the way").unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(tree(&s.data), before);
    std::fs::remove_file(s.data.join("memory/Rin")).unwrap();

    // (d) The characters file cannot be written (a directory in its place):
    //     nothing moves, 409 non-writable storage.
    let saved_chars = std::fs::read(&chars_file).unwrap();
    std::fs::remove_file(&chars_file).unwrap();
    std::fs::create_dir(&chars_file).unwrap();
    std::fs::write(chars_file.join("keep"), b"x").unwrap();
    let before = tree(&s.data);
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "STORAGE_NOT_WRITABLE");
    assert_eq!(tree(&s.data), before);
    std::fs::remove_dir_all(&chars_file).unwrap();
    std::fs::write(&chars_file, &saved_chars).unwrap();

    // (e) A read-only memory root (only meaningful without root privileges).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let root = s.data.join("memory");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o555)).unwrap();
        let privileged = std::fs::write(root.join(".probe"), b"x").is_ok();
        let _ = std::fs::remove_file(root.join(".probe"));
        if !privileged {
            let before = tree(&s.data);
            let (st, b) = s
                .post(
                    "/api/characters/profile/Mika/rename",
                    json!({"new_name": "Rin"}),
                )
                .await;
            assert_eq!(st, 409, "{b}");
            assert_eq!(tree(&s.data), before);
        } else {
            eprintln!("running with privileges: read-only directory case not observable");
        }
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    // Finally the rename succeeds.
    let (st, b) = s
        .post(
            "/api/characters/profile/Mika/rename",
            json!({"new_name": "Rin"}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(s.data.join("memory/recent_meta.json").exists());
}

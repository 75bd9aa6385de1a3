//! Songs and actions: uploads (names from metadata, tags, file name), hiding
//! built-in ones, deleting user ones, visibility and metadata edits.

use crate::common::*;

#[tokio::test]
async fn uploads_take_names_from_metadata_tags_then_filename() {
    let s = plain().await;
    let songs_dir = s.data.join("jukebox/songs");

    // One file: its RIFF INFO tags name it; the MD5 is the file's.
    let w = wav(800, 7, Some("Wave Title"), Some("Wave Artist"));
    let song = upload_ok(&s, "songs", "first take.wav", w.clone()).await;
    assert_eq!(song["name"], "Wave Title");
    assert_eq!(song["artist"], "Wave Artist");
    assert_eq!(song["audioFormat"], "wav");
    assert_eq!(song["audioMd5"], md5_hex(&w));
    assert_eq!(song["id"], "first_take");
    assert_eq!(song["audio"], "songs/first take.wav");
    assert_eq!(song["visible"], true);
    assert_eq!(song["defaultAction"], "");
    assert_eq!(song["isBuiltin"], false);
    assert_eq!(std::fs::read(songs_dir.join("first take.wav")).unwrap(), w);

    // A batch: metadata by position, then ID3v2 / Vorbis tags, then the file name;
    // an unsupported type fails inside the successful batch.
    let (st, body) = upload(
        &s,
        "songs",
        &[
            ("tagged.mp3", mp3("Mp3 Title", "Mp3 Artist", 1)),
            ("tune.flac", flac("Flac Title", Some("Flac Artist"))),
            ("plain.ogg", b"OggS-not-really-ogg-data".to_vec()),
            ("notes.txt", b"hello".to_vec()),
        ],
        Some(json!([{"name": "Given Name"}, {}, {"artist": "Given Artist"}])),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["success"], true);
    let r = body["results"].as_array().unwrap();
    assert_eq!(r.len(), 4);
    assert_eq!(r[0]["song"]["name"], "Given Name");
    assert_eq!(r[0]["song"]["artist"], "Mp3 Artist");
    assert_eq!(r[1]["song"]["name"], "Flac Title");
    assert_eq!(r[1]["song"]["artist"], "Flac Artist");
    assert_eq!(r[2]["song"]["name"], "plain");
    assert_eq!(r[2]["song"]["artist"], "Given Artist");
    assert_eq!(r[3]["success"], false);
    assert!(
        r[3]["error"].as_str().unwrap().contains("unsupported"),
        "{}",
        r[3]
    );

    // Duplicate MD5 under another name: refused, nothing left behind.
    let before = files_in(&songs_dir);
    let (st, dup) = upload(&s, "songs", &[("again.wav", w.clone())], None).await;
    assert_eq!(st, 409, "{dup}");
    assert_eq!(dup["success"], false);
    assert!(
        dup["error"].as_str().unwrap().contains("first_take"),
        "{dup}"
    );
    assert_eq!(files_in(&songs_dir), before);
    // Inside a batch it is a per-item failure.
    let (st, b) = upload(
        &s,
        "songs",
        &[("x.wav", w.clone()), ("y.wav", wav(50, 9, None, None))],
        None,
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b["results"][0]["success"], false);
    assert_eq!(b["results"][1]["success"], true);

    // Same file name, other content: stored beside it, named after the stored file.
    let other = upload_ok(&s, "songs", "first take.wav", wav(60, 11, None, None)).await;
    assert_eq!(other["audio"], "songs/first take_1.wav");
    assert_eq!(other["name"], "first take_1");
    assert_eq!(other["id"], "first_take_1");

    // Actions: metadata name or file name; type checked.
    let (st, b) = upload(
        &s,
        "actions",
        &[("dance.vmd", vmd("m1")), ("walk.bvh", bvh("Hips"))],
        Some(json!([{"name": "Dance One"}])),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["results"][0]["action"]["name"], "Dance One");
    assert_eq!(b["results"][0]["action"]["format"], "vmd");
    assert_eq!(b["results"][0]["action"]["file"], "actions/dance.vmd");
    assert_eq!(b["results"][0]["action"]["missing"], false);
    assert_eq!(b["results"][1]["action"]["name"], "walk");
    let (st, bad) = upload(&s, "actions", &[("song.mp3", mp3("a", "b", 2))], None).await;
    assert_eq!(st, 400, "{bad}");
    assert_eq!(bad["success"], false);

    // Request errors in {detail}: no files, bad metadata (nothing stored), not multipart.
    let before = files_in(&songs_dir);
    let (st, e) = upload(&s, "songs", &[], Some(json!([]))).await;
    assert_eq!(st, 400);
    assert!(detail(&e).contains("no files"), "{e}");
    let r = s
        .http
        .post(s.url(&format!("{J}/songs")))
        .multipart(
            Form::new()
                .part(
                    "files",
                    Part::bytes(wav(10, 1, None, None)).file_name("m.wav"),
                )
                .text("metadata", "{not json"),
        )
        .send()
        .await
        .unwrap();
    let (st, e) = split(r).await;
    assert_eq!(st, 400);
    assert_eq!(detail(&e), "metadata format error");
    assert_eq!(files_in(&songs_dir), before);
    let (st, e) = s.post(&format!("{J}/songs"), json!({"files": []})).await;
    assert_eq!(st, 400, "{e}");
    assert!(e["detail"].is_string());

    // Concurrent uploads and binds serialise on the library lock: none is lost.
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let client = s.http.clone();
        let url = s.url(&format!("{J}/actions"));
        tasks.push(tokio::spawn(async move {
            let form = Form::new().part(
                "files",
                Part::bytes(vmd(&format!("c{i}"))).file_name(format!("c{i}.vmd")),
            );
            client
                .post(url)
                .multipart(form)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let mut binds = Vec::new();
    for i in 0..8u8 {
        let client = s.http.clone();
        let url = s.url(&format!("{J}/bind"));
        binds.push(tokio::spawn(async move {
            let off = i.to_string();
            let fields = [
                ("songId", "first_take"),
                ("actionId", &format!("c{i}")),
                ("offset", off.as_str()),
            ];
            client
                .post(url)
                .form(&fields)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in binds {
        assert_eq!(t.await.unwrap(), 200);
    }
    let c = config(&s).await;
    assert_eq!(c["actionCount"], 10);
    assert_eq!(c["bindings"]["first_take"].as_object().unwrap().len(), 8);
    assert_eq!(c["bindings"]["first_take"]["c7"]["offset"], 7);

    let c = config(&s).await;
    assert_eq!(c["songCount"], 6);
    assert_eq!(c["actionCount"], 10);
    assert_eq!(c["md5Index"]["songs"][md5_hex(&w)], "first_take");
    assert_eq!(c["songs"].as_object().unwrap().len(), 6);
}

#[tokio::test]
async fn builtin_resources_are_hidden_user_resources_deleted() {
    let s = with_bundle().await;
    let c = config(&s).await;
    assert_eq!(c["songs"][BUILTIN_SONG]["isBuiltin"], true);
    assert_eq!(c["actions"][BUILTIN_ACTION]["isBuiltin"], true);
    assert_eq!(c["actions"][BUILTIN_ACTION]["missing"], false);
    assert_eq!(
        c["actions"]["ghost"]["missing"], true,
        "no file in either folder"
    );
    assert_eq!(c["actions"]["ghost"]["id"], "ghost");
    assert_eq!(c["bindings"][BUILTIN_SONG][BUILTIN_ACTION]["offset"], 0);
    assert_eq!(c["songs"][BUILTIN_SONG]["defaultAction"], BUILTIN_ACTION);
    assert_eq!(
        c["md5Index"]["songs"][md5_hex(&builtin_wav())],
        BUILTIN_SONG
    );
    assert!(
        !s.data.join("jukebox/config.json").exists(),
        "reading writes nothing"
    );

    // Built-in delete hides; the bundled file stays; only the override is stored.
    let (st, b) = s
        .send(Method::DELETE, &format!("{J}/songs/{BUILTIN_SONG}"), None)
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["hidden"], true);
    assert!(b["message"].is_string());
    assert!(s.bundle.join("jukebox/songs/builtin.wav").exists());
    let c = config(&s).await;
    assert_eq!(c["songs"][BUILTIN_SONG]["visible"], false);
    assert_eq!(c["visibleSongCount"], 0);
    let stored: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("jukebox/config.json")).unwrap())
            .unwrap();
    assert_eq!(stored["songs"], json!({}));
    assert_eq!(stored["actions"], json!({}));
    assert_eq!(
        stored["builtinOverrides"]["songs"][BUILTIN_SONG],
        json!({"visible": false})
    );
    let r = s
        .http
        .get(s.url(&format!("{J}/file/songs/builtin.wav")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    assert_eq!(r.bytes().await.unwrap().to_vec(), builtin_wav());

    // A user action bound to the built-in song, then deleted: file, bindings, default gone.
    let act = upload_ok(&s, "actions", "mine.vmd", vmd("mine")).await;
    let aid = act["id"].as_str().unwrap().to_string();
    let (st, b) = form(
        &s,
        Method::POST,
        &format!("{J}/bind"),
        &[("songId", BUILTIN_SONG), ("actionId", &aid)],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{BUILTIN_SONG}/default-action"),
        &[("action_id", &aid)],
    )
    .await;
    assert_eq!(st, 200);
    let action_file = s.data.join("jukebox/actions/mine.vmd");
    assert!(action_file.exists());
    let (st, b) = s
        .send(Method::DELETE, &format!("{J}/actions/{aid}"), None)
        .await;
    assert_eq!(st, 200, "{b}");
    assert_ne!(b["hidden"], true);
    assert!(!action_file.exists());
    let c = config(&s).await;
    assert!(c["actions"].get(&aid).is_none());
    assert_eq!(c["songs"][BUILTIN_SONG]["defaultAction"], "");
    assert!(c["bindings"][BUILTIN_SONG].get(&aid).is_none());
    assert!(c["md5Index"]["actions"]
        .get(md5_hex(&vmd("mine")))
        .is_none());

    // A user song: file, bindings and index entry removed.
    let song = upload_ok(&s, "songs", "user.wav", wav(90, 2, None, None)).await;
    let sid = song["id"].as_str().unwrap().to_string();
    let (st, _) = form(
        &s,
        Method::POST,
        &format!("{J}/bind"),
        &[("songId", &sid), ("actionId", BUILTIN_ACTION)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, b) = s
        .send(Method::DELETE, &format!("{J}/songs/{sid}"), None)
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(!s.data.join("jukebox/songs/user.wav").exists());
    let c = config(&s).await;
    assert!(c["songs"].get(&sid).is_none());
    assert!(c["bindings"].get(&sid).is_none());
    assert!(c["md5Index"]["songs"]
        .get(md5_hex(&wav(90, 2, None, None)))
        .is_none());
    let (st, e) = s
        .send(Method::DELETE, &format!("{J}/songs/{sid}"), None)
        .await;
    assert_eq!(st, 404);
    assert!(e["detail"].is_string());

    // Batch delete: exact result shape; a missing id changes nothing.
    let u1 = upload_ok(&s, "songs", "one.wav", wav(30, 4, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let u2 = upload_ok(&s, "songs", "two.wav", wav(31, 4, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = config(&s).await;
    let (st, e) = s
        .post(
            &format!("{J}/songs/batch-delete"),
            json!({"songIds": [u1, "nope"]}),
        )
        .await;
    assert_eq!(st, 404, "{e}");
    assert_eq!(e["detail"]["songIds"], json!(["nope"]));
    assert_eq!(config(&s).await, before);
    let (st, b) = s
        .post(
            &format!("{J}/songs/batch-delete"),
            json!({"songIds": [u1, BUILTIN_SONG, u2, u1, ""]}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        b,
        json!({"success": true, "partial": false, "requestedCount": 3, "deletedCount": 2, "hiddenCount": 1,
            "failedCount": 0,
            "deleted": [{"songId": u1, "name": "one"}, {"songId": u2, "name": "two"}],
            "hidden": [{"songId": BUILTIN_SONG, "name": "Built-in Song"}], "failed": []})
    );
    assert_eq!(
        files_in(&s.data.join("jukebox/songs")),
        Vec::<String>::new()
    );
    let (st, _) = s
        .post(&format!("{J}/songs/batch-delete"), json!({"songIds": []}))
        .await;
    assert_eq!(st, 400);
    let (st, e) = s
        .post(&format!("{J}/songs/batch-delete"), json!({"songIds": "x"}))
        .await;
    assert_eq!(st, 422);
    assert!(e["detail"].is_string());

    let a2 = upload_ok(&s, "actions", "two.bvh", bvh("Root")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, b) = s
        .post(
            &format!("{J}/actions/batch-delete"),
            json!({"actionIds": [BUILTIN_ACTION, a2]}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        b["hidden"],
        json!([{"actionId": BUILTIN_ACTION, "name": "Built-in Dance"}])
    );
    assert_eq!(b["deleted"], json!([{"actionId": a2, "name": "two"}]));
    assert!(s.bundle.join("jukebox/actions/builtin.vmd").exists());
    let c = config(&s).await;
    assert_eq!(c["actions"][BUILTIN_ACTION]["visible"], false);
    // Hiding keeps the built-in binding.
    assert_eq!(c["bindings"][BUILTIN_SONG][BUILTIN_ACTION]["offset"], 0);
}

//! Export, import and pack-folder archives: round trips, hostile archives,
//! oversized uploads.

use crate::common::*;

/// Songs and bindings keyed by MD5, for comparing libraries across servers.
fn by_md5(c: &Value) -> Value {
    let songs = c["songs"].as_object().unwrap();
    let actions = c["actions"].as_object().unwrap();
    let amd5 = |id: &str| actions[id]["fileMd5"].as_str().unwrap().to_string();
    let mut out = serde_json::Map::new();
    for (id, s) in songs {
        if s["isBuiltin"] == true {
            continue;
        }
        let mut b = serde_json::Map::new();
        if let Some(m) = c["bindings"].get(id).and_then(Value::as_object) {
            for (aid, v) in m {
                b.insert(amd5(aid), v["offset"].clone());
            }
        }
        let default = s["defaultAction"]
            .as_str()
            .filter(|d| !d.is_empty())
            .map(amd5);
        out.insert(
            s["audioMd5"].as_str().unwrap().to_string(),
            json!({"name": s["name"], "artist": s["artist"], "visible": s["visible"],
                "bindings": b, "default": default}),
        );
    }
    let mut acts = serde_json::Map::new();
    for a in actions.values() {
        if a["isBuiltin"] != true {
            acts.insert(
                a["fileMd5"].as_str().unwrap().to_string(),
                json!({"name": a["name"], "format": a["format"]}),
            );
        }
    }
    json!({"songs": out, "actions": acts})
}

#[tokio::test]
async fn export_then_import_round_trips_on_another_server() {
    let a = with_bundle().await;
    let w = wav(300, 13, Some("Round Trip"), Some("Artist A"));
    let m = mp3("Second", "Artist B", 9);
    let s1 = upload_ok(&a, "songs", "one.wav", w.clone()).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let s2 = upload_ok(&a, "songs", "two.mp3", m.clone()).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let s3 = upload_ok(&a, "songs", "hidden.flac", flac("Hidden", None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let a1 = upload_ok(&a, "actions", "one.vmd", vmd("one")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let a2 = upload_ok(&a, "actions", "two.bvh", bvh("Two")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (sid, aid, off) in [
        (&s1, &a1, "12"),
        (&s1, &a2, "-4"),
        (&s2, &a1, "0"),
        (&s2, &BUILTIN_ACTION.to_string(), "7"),
        (&s3, &a2, "3"),
    ] {
        let (st, b) = form(
            &a,
            Method::POST,
            &format!("{J}/bind"),
            &[("songId", sid), ("actionId", aid), ("offset", off)],
        )
        .await;
        assert_eq!(st, 200, "{b}");
    }
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s2}/default-action"),
        &[("action_id", BUILTIN_ACTION)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s1}/default-action"),
        &[("action_id", &a2)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s3}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &a,
        Method::PUT,
        &format!("{J}/songs/{s1}/metadata"),
        &[("name", "Renamed One")],
    )
    .await;
    assert_eq!(st, 200);
    let ca = config(&a).await;

    // Full export: streamed zip, built-in song skipped, built-in action by id and MD5 only.
    let (st, h, zip) = export(&a, &[]).await;
    assert_eq!(st, 200);
    assert_eq!(h["content-type"], "application/zip");
    assert!(h["content-disposition"]
        .to_str()
        .unwrap()
        .contains("jukebox_export.zip"));
    assert_eq!(h["content-length"].to_str().unwrap(), zip.len().to_string());
    let entries = unzip(&zip);
    let names: Vec<&str> = entries.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "actions/one.vmd",
            "actions/two.bvh",
            "config.json",
            "songs/hidden.flac",
            "songs/one.wav",
            "songs/two.mp3"
        ]
    );
    assert_eq!(entries["songs/one.wav"], w);
    let cfg: Value = serde_json::from_slice(&entries["config.json"]).unwrap();
    assert!(cfg["songs"].get(BUILTIN_SONG).is_none());
    assert_eq!(
        cfg["actions"][BUILTIN_ACTION],
        json!({"id": BUILTIN_ACTION, "name": "Built-in Dance", "fileMd5": md5_hex(&builtin_vmd()), "isBuiltin": true})
    );
    assert_eq!(
        cfg["bindings"][md5_hex(&w)][md5_hex(&vmd("one"))],
        json!({"offset": 12})
    );
    assert_eq!(
        cfg["bindings"][md5_hex(&m)][md5_hex(&builtin_vmd())],
        json!({"offset": 7})
    );
    assert!(
        cfg["bindings"].get(md5_hex(&builtin_wav())).is_none(),
        "built-in song bindings are not exported"
    );

    // includeHidden=false drops the hidden song and its bindings; a selection adds bound actions.
    let (_, _, z) = export(&a, &[("includeHidden", "false")]).await;
    let e = unzip(&z);
    assert!(!e.contains_key("songs/hidden.flac"));
    let c: Value = serde_json::from_slice(&e["config.json"]).unwrap();
    assert!(c["songs"].get(&s3).is_none());
    assert!(c["bindings"].get(md5_hex(&flac("Hidden", None))).is_none());
    let sel = serde_json::to_string(&[&s2]).unwrap();
    let (_, _, z) = export(&a, &[("songIds", &sel), ("actionIds", "[]")]).await;
    let e = unzip(&z);
    assert_eq!(
        e.keys().cloned().collect::<Vec<_>>(),
        vec!["actions/one.vmd", "config.json", "songs/two.mp3"]
    );
    let c: Value = serde_json::from_slice(&e["config.json"]).unwrap();
    assert_eq!(c["actions"].as_object().unwrap().len(), 2, "{c}");
    let (st, err) = {
        let (st, _, body) = export(&a, &[("songIds", "not json")]).await;
        (st, serde_json::from_slice::<Value>(&body).unwrap())
    };
    assert_eq!(st, 400);
    assert!(err["detail"].is_string());
    let (st, _, _) = export(&a, &[("includeHidden", "perhaps")]).await;
    assert_eq!(st, 400);

    // Import on a second server with the same bundle.
    let b = with_bundle().await;
    let (st, r) = import(&b, zip.clone()).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(
        r["stats"],
        json!({"songsAdded": 3, "songsMerged": 0, "actionsAdded": 2, "actionsMerged": 2, "bindingsAdded": 5})
    );
    let cb = config(&b).await;
    assert_eq!(by_md5(&cb), by_md5(&ca));
    assert_eq!(cb["songCount"], ca["songCount"]);
    for f in ["songs/one.wav", "songs/two.mp3", "actions/one.vmd"] {
        assert_eq!(
            std::fs::read(b.data.join("jukebox").join(f)).unwrap(),
            entries[f]
        );
    }
    // Importing again merges everything and adds nothing.
    let (st, r) = import(&b, zip.clone()).await;
    assert_eq!(st, 200);
    assert_eq!(
        r["stats"],
        json!({"songsAdded": 0, "songsMerged": 3, "actionsAdded": 0, "actionsMerged": 4, "bindingsAdded": 0})
    );
    assert_eq!(config(&b).await["configRevision"], cb["configRevision"]);

    // Delete everything on the first server, import: the same library again.
    let (st, _) = a
        .post(
            &format!("{J}/songs/batch-delete"),
            json!({"songIds": [s1, s2, s3]}),
        )
        .await;
    assert_eq!(st, 200);
    let (st, _) = a
        .post(
            &format!("{J}/actions/batch-delete"),
            json!({"actionIds": [a1, a2]}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        files_in(&a.data.join("jukebox/songs")),
        Vec::<String>::new()
    );
    let (st, r) = import(&a, zip).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(by_md5(&config(&a).await), by_md5(&ca));
}

#[tokio::test]
async fn hostile_archives_and_oversized_uploads_are_refused() {
    let s = small().await;
    let songs = s.data.join("jukebox/songs");
    let tmp = s.data.join("jukebox/.tmp");
    let outside = s.data.join("evil.txt");
    let clean = config(&s).await;
    let song_cfg = |file: &str| {
        serde_json::to_vec(
            &json!({"songs": {"x": {"id": "x", "name": "X", "audio": format!("songs/{file}")}}}),
        )
        .unwrap()
    };

    // Zip-slip entries: refused whole, nothing written anywhere.
    for evil in [
        "../evil.txt",
        "../../evil.txt",
        "/tmp/evil.txt",
        "songs/../../evil.txt",
        "..\\evil.txt",
    ] {
        let z = make_zip(
            &[
                ("config.json", song_cfg("a.wav")),
                ("songs/a.wav", wav(10, 1, None, None)),
                (evil, b"pwned".to_vec()),
            ],
            zip::CompressionMethod::Stored,
        );
        let (st, e) = import(&s, z).await;
        assert_eq!(st, 400, "{evil}: {e}");
        assert!(detail(&e).contains("unsafe"), "{e}");
        assert!(!outside.exists());
    }
    // Record paths pointing outside songs/ are skipped, never followed.
    let z = make_zip(
        &[(
            "config.json",
            serde_json::to_vec(&json!({"songs": {"x": {"audio": "../config.json"}, "y": {"audio": "songs/../../../x.wav"}}})).unwrap(),
        )],
        zip::CompressionMethod::Stored,
    );
    let (st, r) = import(&s, z).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["stats"]["songsAdded"], 0);

    // A bomb: 20 MB of zeros deflated to a few KB, over the 1 MB file limit.
    let bomb = make_zip(
        &[
            ("config.json", song_cfg("bomb.wav")),
            ("songs/bomb.wav", vec![0u8; 20 << 20]),
        ],
        zip::CompressionMethod::Deflated,
    );
    assert!(bomb.len() < 200_000);
    let (st, e) = import(&s, bomb).await;
    assert_eq!(st, 413, "{e}");
    // Many entries each under the file limit, together over the 4 MB archive limit.
    let mut cfg = serde_json::Map::new();
    let mut ents: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..6 {
        cfg.insert(format!("s{i}"), json!({"audio": format!("songs/s{i}.wav")}));
        let mut data = vec![0u8; 900 << 10];
        data[0] = i;
        ents.push((format!("songs/s{i}.wav"), data));
    }
    ents.push((
        "config.json".into(),
        serde_json::to_vec(&json!({"songs": cfg})).unwrap(),
    ));
    let refs: Vec<(&str, Vec<u8>)> = ents.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    let (st, e) = import(&s, make_zip(&refs, zip::CompressionMethod::Deflated)).await;
    assert_eq!(st, 413, "{e}");
    assert_eq!(files_in(&songs), Vec::<String>::new(), "no partial files");

    // More records than the entry limit (50 in this server).
    let many: serde_json::Map<String, Value> = (0..60)
        .map(|i| (format!("s{i}"), json!({"audio": "songs/a.wav"})))
        .collect();
    let z = make_zip(
        &[
            (
                "config.json",
                serde_json::to_vec(&json!({"songs": many})).unwrap(),
            ),
            ("songs/a.wav", wav(5, 1, None, None)),
        ],
        zip::CompressionMethod::Stored,
    );
    let (st, e) = import(&s, z).await;
    assert_eq!(st, 400, "{e}");
    // One entry named by many records is extracted once and added once.
    let few: serde_json::Map<String, Value> = (0..20)
        .map(|i| {
            (
                format!("s{i}"),
                json!({"audio": "songs/a.wav", "name": format!("N{i}")}),
            )
        })
        .collect();
    let z = make_zip(
        &[
            (
                "config.json",
                serde_json::to_vec(&json!({"songs": few})).unwrap(),
            ),
            ("songs/a.wav", wav(5, 1, None, None)),
        ],
        zip::CompressionMethod::Stored,
    );
    let (st, r) = import(&s, z).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["stats"]["songsAdded"], 1);
    assert_eq!(r["stats"]["songsMerged"], 19);
    let id = config(&s).await["md5Index"]["songs"][md5_hex(&wav(5, 1, None, None))]
        .as_str()
        .unwrap()
        .to_string();
    let (st, _) = s
        .send(Method::DELETE, &format!("{J}/songs/{id}"), None)
        .await;
    assert_eq!(st, 200);

    // Not a zip, no config.json, bad config.json, an archive over the limit.
    let (st, e) = import(&s, b"definitely not a zip".to_vec()).await;
    assert_eq!(st, 400, "{e}");
    let (st, e) = import(
        &s,
        make_zip(
            &[("songs/a.wav", wav(5, 1, None, None))],
            zip::CompressionMethod::Stored,
        ),
    )
    .await;
    assert_eq!(st, 400);
    assert!(detail(&e).contains("config.json"));
    let (st, _) = import(
        &s,
        make_zip(
            &[("config.json", b"[1,2".to_vec())],
            zip::CompressionMethod::Stored,
        ),
    )
    .await;
    assert_eq!(st, 400);
    let (st, e) = import(&s, vec![7u8; 5 << 20]).await;
    assert_eq!(st, 413, "{e}");
    let r = s
        .http
        .post(s.url(&format!("{J}/import")))
        .multipart(Form::new().text("other", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // Uploads over the 1 MB file limit: 413 while streaming, nothing kept, even the
    // smaller file of the same request.
    let big = vec![1u8; (1 << 20) + 1];
    let (st, e) = upload(&s, "songs", &[("big.wav", big.clone())], None).await;
    assert_eq!(st, 413, "{e}");
    assert!(e["detail"].is_string());
    let (st, _) = upload(
        &s,
        "songs",
        &[("ok.wav", wav(20, 1, None, None)), ("big.wav", big)],
        None,
    )
    .await;
    assert_eq!(st, 413);
    let (st, _) = upload(&s, "actions", &[("big.vmd", vec![2u8; 3 << 20])], None).await;
    assert_eq!(st, 413);
    assert_eq!(files_in(&songs), Vec::<String>::new());
    assert_eq!(
        files_in(&s.data.join("jukebox/actions")),
        Vec::<String>::new()
    );
    assert_eq!(files_in(&tmp), Vec::<String>::new());
    assert_eq!(config(&s).await, clean);
    // Exactly at the limit is fine.
    let (st, b) = upload(&s, "songs", &[("edge.wav", vec![3u8; 1 << 20])], None).await;
    assert_eq!(st, 200, "{b}");
}

#[tokio::test]
async fn pack_folder_streams_a_zip_of_relative_paths_and_routes_are_documented() {
    let s = plain().await;
    let files = [
        ("My Dance/motion.vmd", vmd("pack")),
        ("My Dance/audio/song.wav", wav(40, 6, None, None)),
        ("My Dance/readme.txt", b"hello".to_vec()),
    ];
    let mut f = Form::new();
    for (name, data) in &files {
        f = f.part(
            "files",
            Part::bytes(data.clone()).file_name(name.to_string()),
        );
    }
    let r = s
        .http
        .post(s.url(&format!("{J}/pack-folder")))
        .multipart(f)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/zip");
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("packed.zip"));
    let entries = unzip(&r.bytes().await.unwrap());
    assert_eq!(entries.len(), 3);
    for (name, data) in &files {
        assert_eq!(&entries[*name], data, "{name}");
    }

    for bad in [
        vec!["../x.vmd"],
        vec!["/abs/x.vmd"],
        vec!["a/../../x"],
        vec!["a.vmd", "a.vmd"],
        vec![],
    ] {
        let mut f = Form::new().text("note", "x");
        for name in &bad {
            f = f.part(
                "files",
                Part::bytes(b"data".to_vec()).file_name(name.to_string()),
            );
        }
        let r = s
            .http
            .post(s.url(&format!("{J}/pack-folder")))
            .multipart(f)
            .send()
            .await
            .unwrap();
        let (st, e) = split(r).await;
        assert_eq!(st, 400, "{bad:?}: {e}");
        assert!(e["detail"].is_string());
    }
    assert_eq!(files_in(&s.data.join("jukebox/.tmp")), Vec::<String>::new());

    // Every route is in the OpenAPI document.
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    let paths = doc["paths"].as_object().unwrap();
    let mut ops = 0;
    for (p, item) in paths {
        if p.starts_with("/api/jukebox/") {
            ops += item
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "delete"].contains(&k.as_str()))
                .count();
        }
    }
    assert_eq!(ops, 19);
    for (method, path) in [
        ("get", "/api/jukebox/file/{file_path}"),
        ("delete", "/api/jukebox/bind"),
        ("post", "/api/jukebox/bind"),
        ("put", "/api/jukebox/songs/{song_id}/default-action"),
        ("post", "/api/jukebox/pack-folder"),
    ] {
        assert!(paths[path].get(method).is_some(), "{method} {path}");
    }
}

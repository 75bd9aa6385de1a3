//! File names on every upload route: over-long and odd names are refused.

use crate::common::*;

#[tokio::test]
async fn over_long_and_odd_file_names_are_refused_on_every_upload_route() {
    let s = plain().await;
    let lib = s.data.join("jukebox");
    let long_ascii = format!("{}.wav", "a".repeat(252)); // 256 bytes
    let long_cjk = format!("{}.wav", "曲".repeat(84)); // 256 bytes, 88 characters
    let bad: Vec<(String, &str)> = vec![
        (long_ascii.clone(), "too long"),
        (long_cjk.clone(), "too long"),
        ("..".into(), "dots or spaces"),
        ("...".into(), "dots or spaces"),
        ("   ".into(), "dots or spaces"),
        (". . .".into(), "dots or spaces"),
        // a C1 control character passes the multipart parser and is named
        ("a\u{85}b.wav".into(), "refuses"),
    ];
    let before = tree(&lib);
    for kind in ["songs", "actions"] {
        for (name, why) in &bad {
            let name = if kind == "actions" {
                name.replace(".wav", ".vmd")
            } else {
                name.clone()
            };
            let data = if kind == "songs" {
                wav(20, 3, None, None)
            } else {
                vmd("x")
            };
            let (st, b) = upload(&s, kind, &[(name.as_str(), data)], None).await;
            assert_eq!(st, 400, "{kind} {name:?}: {b}");
            assert!(detail(&b).contains(why), "{kind} {name:?}: {b}");
            assert_eq!(tree(&lib), before, "{kind} {name:?} left files");
        }
    }
    // The same names sent raw (no client re-encoding), and NUL: 400, nothing written.
    for name in [long_cjk.as_str(), "..", "a\0b.wav", "a\u{1}b.wav"] {
        let (st, b) = send_raw(
            &s,
            &format!("{J}/songs"),
            raw_multipart("files", name, &wav(20, 4, None, None)),
        )
        .await;
        assert_eq!(st, 400, "{name:?}: {b}");
        assert_eq!(tree(&lib), before, "{name:?} left files");
    }
    // Several files: the bad one fails alone, naming the problem.
    let (st, b) = upload(
        &s,
        "songs",
        &[
            (long_ascii.as_str(), wav(20, 5, None, None)),
            ("fine.wav", wav(20, 6, None, None)),
        ],
        None,
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["results"][0]["success"], false);
    assert!(
        b["results"][0]["error"]
            .as_str()
            .unwrap()
            .contains("256 bytes"),
        "{b}"
    );
    assert_eq!(b["results"][1]["success"], true);

    // A 60-character CJK name works; a 253-byte name that clashes gets a suffix
    // that still fits in 255 bytes.
    let cjk60 = format!("{}.wav", "歌".repeat(60));
    let song = upload_ok(&s, "songs", &cjk60, wav(20, 7, None, None)).await;
    assert_eq!(song["audio"], format!("songs/{cjk60}"));
    let name253 = format!("{}.wav", "歌".repeat(83));
    let first = upload_ok(&s, "songs", &name253, wav(20, 8, None, None)).await;
    let second = upload_ok(&s, "songs", &name253, wav(20, 9, None, None)).await;
    assert_eq!(first["audio"], format!("songs/{name253}"));
    let stored = second["audio"]
        .as_str()
        .unwrap()
        .trim_start_matches("songs/");
    assert!(
        stored.len() <= 255 && stored.ends_with("_1.wav"),
        "{stored}"
    );
    assert!(lib.join("songs").join(stored).is_file());

    // pack-folder: every component is checked.
    let before = tree(&lib);
    for path in [
        format!("Dance/{}", long_ascii.replace(".wav", ".vmd")),
        format!("{}/x.vmd", "d".repeat(256)),
        "Dance/ . /x.vmd".to_string(),
    ] {
        let form = Form::new().part("files", Part::bytes(vmd("x")).file_name(path.clone()));
        let r = s
            .http
            .post(s.url(&format!("{J}/pack-folder")))
            .multipart(form)
            .send()
            .await
            .unwrap();
        let (st, b) = split(r).await;
        assert_eq!(st, 400, "{path}: {b}");
    }
    // import: an entry with an over-long or dot-only component refuses the archive.
    for entry in [
        format!("songs/{long_ascii}"),
        format!("{}/a.wav", "s".repeat(300)),
    ] {
        let file = entry.clone();
        let cfg = json!({"songs": {"x": {"id": "x", "name": "X", "audio": file}}});
        let z = make_zip(
            &[
                ("config.json", serde_json::to_vec(&cfg).unwrap()),
                (entry.as_str(), wav(10, 11, None, None)),
            ],
            zip::CompressionMethod::Stored,
        );
        let (st, e) = import(&s, z).await;
        assert_eq!(st, 400, "{e}");
        assert!(detail(&e).contains("too long"), "{e}");
        let after: Vec<String> = tree(&lib)
            .into_iter()
            .filter(|p| !p.starts_with(".tmp"))
            .collect();
        let want: Vec<String> = before
            .iter()
            .filter(|p| !p.starts_with(".tmp"))
            .cloned()
            .collect();
        assert_eq!(after, want, "import left files");
    }
}

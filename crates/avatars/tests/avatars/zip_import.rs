//! Model ZIP import: placement, legacy names, hostile and streamed archives.

use super::common::*;

#[tokio::test]
async fn zip_import_places_models_and_recovers_legacy_names() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let tex = png(2, 2, [9, 9, 9, 255]);
    let model = pmx(500);
    // One top-level folder: it names the destination and is stripped.
    let z = zip_of(&[
        ("Miku/", b""),
        ("Miku/miku.pmx", &model),
        ("Miku/tex/face.png", &tex),
        ("__MACOSX/Miku/._miku.pmx", b"junk"),
    ]);
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "miku.zip", &z).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["model_name"], "miku");
    assert_eq!(b["model_url"], "/user_mmd/Miku/miku.pmx");
    assert_eq!(b["file_count"], 2);
    assert_eq!(b["file_size"], z.len());
    assert_eq!(
        std::fs::read(user_mmd(&s).join("Miku/miku.pmx")).unwrap(),
        model
    );
    assert_eq!(
        std::fs::read(user_mmd(&s).join("Miku/tex/face.png")).unwrap(),
        tex
    );
    assert!(!user_mmd(&s).join("__MACOSX").exists());

    // Same archive again: the folder exists.
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "miku.zip", &z).await;
    assert_eq!(st, 409, "{b}");

    // Flat archive: folder named after the model.
    let z = zip_of(&[("Luka.pmd", &pmd()), ("luka_tex.png", &tex)]);
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "whatever.zip", &z).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["model_url"], "/user_mmd/Luka/Luka.pmd");
    assert!(user_mmd(&s).join("Luka/luka_tex.png").is_file());

    // Shift-JIS names without the UTF-8 flag.
    let z = zip_legacy(
        encoding_rs::SHIFT_JIS,
        &[
            ("初音ミク/初音ミク.pmx", &model),
            ("初音ミク/テクスチャ/顔.png", &tex),
        ],
    );
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "sjis.zip", &z).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["model_url"], "/user_mmd/初音ミク/初音ミク.pmx");
    assert_eq!(b["model_name"], "初音ミク");
    assert!(user_mmd(&s).join("初音ミク/テクスチャ/顔.png").is_file());

    // GBK names without the UTF-8 flag.
    let z = zip_legacy(
        encoding_rs::GBK,
        &[
            ("模型/模型文件.pmx", &model),
            ("模型/贴图/脸部纹理.png", &tex),
        ],
    );
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "gbk.zip", &z).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["model_url"], "/user_mmd/模型/模型文件.pmx");
    assert!(user_mmd(&s).join("模型/贴图/脸部纹理.png").is_file());

    // The listing sees all four.
    let (_, b) = s.get("/api/model/mmd/models").await;
    let mut urls: Vec<String> = b["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["url"].as_str().unwrap().to_string())
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        [
            "/user_mmd/Luka/Luka.pmd",
            "/user_mmd/Miku/miku.pmx",
            "/user_mmd/初音ミク/初音ミク.pmx",
            "/user_mmd/模型/模型文件.pmx"
        ]
    );
    let hidden: Vec<String> = tree(&user_mmd(&s))
        .into_iter()
        .filter(|p| p.split('/').any(|seg| seg.starts_with('.')))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
}

#[tokio::test]
async fn zip_import_refuses_hostile_archives_and_leaves_nothing() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let model = pmx(100);
    let outside = s.data.parent().unwrap().to_path_buf();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "zip-slip",
            zip_of(&[("m/model.pmx", &model), ("../../evil.pmx", b"x")]),
            "unsafe_zip_entry",
        ),
        (
            "nested slip",
            zip_of(&[("m/model.pmx", &model), ("m/../../evil2.png", b"x")]),
            "unsafe_zip_entry",
        ),
        (
            "absolute",
            zip_of(&[("/tmp/abs.pmx", &model)]),
            "unsafe_zip_entry",
        ),
        (
            "backslash slip",
            zip_of(&[("m/model.pmx", &model), ("..\\evil3.png", b"x")]),
            "unsafe_zip_entry",
        ),
        (
            "file and folder",
            zip_of(&[("m/model.pmx", &model), ("m/t", b"x"), ("m/t/x.png", b"y")]),
            "invalid_zip",
        ),
        (
            "no model",
            zip_of(&[("readme.txt", b"hello"), ("tex.png", b"x")]),
            "no_model",
        ),
        (
            "not a zip",
            b"PK\x03\x04 but not really a zip archive at all".to_vec(),
            "invalid_zip",
        ),
    ];
    for (what, z, code) in cases {
        let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "x.zip", &z).await;
        assert_eq!(st, 400, "{what}: {b}");
        assert_eq!(b["error_code"], code, "{what}: {b}");
        assert_user_mmd_clean(&s);
    }
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "x.zip", &pmx(10)).await;
    assert_eq!(st, 400, "{b}");
    assert!(!outside.join("evil.pmx").exists() && !s.data.join("evil.pmx").exists());

    // A symlink entry.
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default();
    w.start_file("m/model.pmx", o).unwrap();
    w.write_all(&model).unwrap();
    w.add_symlink("m/link.png", "/etc/passwd", o).unwrap();
    let z = w.finish().unwrap().into_inner();
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "link.zip", &z).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "unsafe_zip_entry");
    assert_user_mmd_clean(&s);

    // 10,001 entries (the spec limit is 10,000).
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    w.start_file("m/model.pmx", o).unwrap();
    w.write_all(&model).unwrap();
    for i in 0..10_000 {
        w.start_file(format!("m/t/{i}.txt"), o).unwrap();
        w.write_all(b"x").unwrap();
    }
    let z = w.finish().unwrap().into_inner();
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "many.zip", &z).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "too_many_entries");
    assert_user_mmd_clean(&s);
}

#[tokio::test]
async fn zip_import_streams_descriptors_zip64_and_small_chunks() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    // Data with descriptor signatures inside it (false candidates for the scan).
    let mut model = pmx(3000);
    for i in 0..20 {
        let at = 100 + i * 97;
        model[at..at + 4].copy_from_slice(b"PK\x07\x08");
    }
    let noise: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let text = b"hello hello hello hello hello".repeat(500);
    let files: Vec<(&str, &[u8])> = vec![
        ("model.pmx", &model),
        ("tex/noise.bin", &noise),
        ("tex/text.txt", &text),
        ("empty.txt", b""),
    ];
    let layouts: Vec<(&str, Vec<u8>)> = vec![
        (
            "descriptors",
            zip_raw(&[
                RawEntry {
                    name: "S/model.pmx",
                    data: &model,
                    deflate: false,
                    descriptor: Some(true),
                },
                RawEntry {
                    name: "S/tex/noise.bin",
                    data: &noise,
                    deflate: true,
                    descriptor: Some(false),
                },
                RawEntry {
                    name: "S/tex/text.txt",
                    data: &text,
                    deflate: true,
                    descriptor: Some(true),
                },
                RawEntry {
                    name: "S/empty.txt",
                    data: b"",
                    deflate: false,
                    descriptor: Some(true),
                },
            ]),
        ),
        (
            "zip64 stored",
            zip64_of("S", &files, zip::CompressionMethod::Stored),
        ),
        (
            "zip64 deflated",
            zip64_of("S", &files, zip::CompressionMethod::Deflated),
        ),
    ];
    for (what, z) in &layouts {
        for chunk in [7, 4096, 1 << 20] {
            let (st, b) = upload_chunked(&s, "s.zip", z, chunk).await;
            assert_eq!(st, 200, "{what} / {chunk}: {b}");
            assert_eq!(b["file_count"], 4, "{what}");
            assert_eq!(b["file_size"], z.len(), "{what}");
            for (n, d) in &files {
                let got = std::fs::read(user_mmd(&s).join("S").join(n)).unwrap();
                assert!(got == *d, "{what} / {chunk}: {n} differs");
            }
            std::fs::remove_dir_all(user_mmd(&s).join("S")).unwrap();
            assert_user_mmd_clean(&s);
        }
    }

    // A client that goes away mid-archive leaves nothing behind either.
    let z = &layouts[1].1;
    let items: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from(part_head("file", Some("gone.zip")))),
        Ok(Bytes::copy_from_slice(&z[..z.len() / 2])),
        Err(std::io::Error::other("client gone")),
    ];
    let r = s
        .http
        .post(s.url("/api/model/mmd/upload_zip"))
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(reqwest::Body::wrap_stream(futures::stream::iter(items)))
        .send()
        .await;
    assert!(r.is_err() || r.unwrap().status() != 200);
    let clean = eventually(|| {
        tree(&user_mmd(&s))
            .iter()
            .all(|p| p == "animation" || p == "emotion_config")
    })
    .await;
    assert!(clean, "partial import left: {:?}", tree(&user_mmd(&s)));

    // Damaged archives are refused whole, whatever was already extracted.
    let good = zip_raw(&[
        RawEntry {
            name: "D/model.pmx",
            data: &model,
            deflate: false,
            descriptor: None,
        },
        RawEntry {
            name: "D/noise.bin",
            data: &noise,
            deflate: true,
            descriptor: Some(true),
        },
    ]);
    let mut bad_crc = good.clone();
    bad_crc[30 + "D/model.pmx".len() + 1000] ^= 0xff;
    let truncated = good[..good.len() / 2].to_vec();
    let mut bad_offset = good.clone();
    let cd_at = good.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    bad_offset[cd_at + 42] = 9;
    let mut bad_descriptor = good.clone();
    let d_at = good.windows(4).rposition(|w| w == b"PK\x07\x08").unwrap();
    bad_descriptor[d_at + 8] ^= 1;
    let mut bad_deflate = zip_raw(&[
        RawEntry {
            name: "D/model.pmx",
            data: &model,
            deflate: false,
            descriptor: None,
        },
        RawEntry {
            name: "D/noise.bin",
            data: &noise,
            deflate: true,
            descriptor: None,
        },
    ]);
    let n_at = bad_deflate
        .windows(11)
        .rposition(|w| w == b"D/noise.bin")
        .unwrap();
    let first_local_noise = bad_deflate
        .windows(11)
        .position(|w| w == b"D/noise.bin")
        .unwrap();
    assert!(n_at > first_local_noise);
    for b in &mut bad_deflate[first_local_noise + 11..first_local_noise + 11 + 64] {
        *b = 0xff;
    }
    for (what, z) in [
        ("crc", bad_crc),
        ("truncated", truncated),
        ("central offset", bad_offset),
        ("descriptor", bad_descriptor),
        ("deflate stream", bad_deflate),
    ] {
        let (st, b) = upload_chunked(&s, "d.zip", &z, 4096).await;
        assert_eq!(st, 400, "{what}: {b}");
        assert_eq!(b["error_code"], "invalid_zip", "{what}: {b}");
        assert_user_mmd_clean(&s);
    }
}

#[tokio::test]
async fn zip_bomb_with_lying_sizes_is_stopped_while_extracting() {
    let s = TestServer::start(&[SMALL]).await;
    let model = pmx(100);
    // 4 MiB of zeros compress to a few KiB; the headers claim 100 bytes.
    let zeros = vec![0u8; 4 * 1024 * 1024];
    let mut z = zip_of(&[("bomb/model.pmx", &model), ("bomb/zeros.bin", &zeros)]);
    let mut patched = 0;
    for i in 0..z.len().saturating_sub(30) {
        let sig = &z[i..i + 4];
        let size_at = if sig == b"PK\x03\x04" {
            Some(i + 22)
        } else if sig == b"PK\x01\x02" {
            Some(i + 24)
        } else {
            None
        };
        if let Some(at) = size_at {
            let declared = u32::from_le_bytes(z[at..at + 4].try_into().unwrap());
            if declared == zeros.len() as u32 {
                z[at..at + 4].copy_from_slice(&100u32.to_le_bytes());
                patched += 1;
            }
        }
    }
    assert_eq!(patched, 2);
    assert!(z.len() < 64 * 1024);
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "bomb.zip", &z).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large", "{b}");
    assert_user_mmd_clean(&s);

    // Honest archives over the limits are refused too.
    let z = zip_of(&[("big/model.pmx", &model), ("big/zeros.bin", &zeros)]);
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "big.zip", &z).await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large");
    let many: Vec<(String, Vec<u8>)> = (0..60).map(|i| (format!("m/{i}.txt"), vec![1u8])).collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("m/model.pmx", &model)];
    entries.extend(many.iter().map(|(n, d)| (n.as_str(), d.as_slice())));
    let (st, b) = upload(
        &s,
        "/api/model/mmd/upload_zip",
        "many.zip",
        &zip_of(&entries),
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "too_many_entries");
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "huge.zip", &{
        let mut v = zip_of(&[("m/model.pmx", &model)]);
        v.resize(300 * 1024, 0);
        v
    })
    .await;
    assert_eq!(st, 400, "{b}");
    assert_eq!(b["error_code"], "file_too_large");
    assert_user_mmd_clean(&s);
}

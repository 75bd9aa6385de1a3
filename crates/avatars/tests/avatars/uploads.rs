//! Rules shared by every avatar upload: draining refused bodies, file names.

use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_big_uploads_are_drained_before_the_answer() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    for _ in 0..5 {
        refused_big_body_is_drained(&s, "upload", "big.pmx").await;
        refused_big_body_is_drained(&s, "upload_zip", "big.zip").await;
    }
    assert_user_mmd_clean(&s);
}

#[tokio::test]
async fn over_long_and_odd_file_names_are_refused_on_every_avatar_upload() {
    let s = TestServer::start(&[SMALL]).await;
    let long = |ext: &str| format!("{}.{ext}", "a".repeat(255 - ext.len())); // 256 bytes
    let long_cjk = |ext: &str| format!("{}.{ext}", "模".repeat(84)); // 255 + 1 + ext bytes
    for (route, ext, data) in [
        ("/api/model/mmd/upload", "pmx", pmx(10)),
        ("/api/model/mmd/upload_animation", "vmd", vmd()),
        (
            "/api/model/mmd/upload_zip",
            "zip",
            zip_of(&[("z/z.pmx", &pmx(4))]),
        ),
    ] {
        for (name, why) in [
            (long(ext), "too long"),
            (long_cjk(ext), "too long"),
            ("..".to_string(), "dots or spaces"),
            ("...".to_string(), "dots or spaces"),
            (". .".to_string(), "dots or spaces"),
            (format!("a\u{85}b.{ext}"), "refuses"),
        ] {
            let (st, b) = upload(&s, route, &name, &data).await;
            assert_eq!(st, 400, "{route} {name:?}: {b}");
            assert_eq!(b["error_code"], "invalid_filename", "{route} {name:?}: {b}");
            assert!(
                b["error"].as_str().unwrap().contains(why),
                "{route} {name:?}: {b}"
            );
            assert_user_mmd_clean(&s);
        }
        // a NUL cannot even pass the multipart parser: still a 400, nothing stored
        let (st, _) = upload(&s, route, &format!("a\0b.{ext}"), &data).await;
        assert_eq!(st, 400);
        assert_user_mmd_clean(&s);
    }
    // ZIP entries: every component is checked; the whole archive is refused.
    let deep = format!("{}/m.pmx", "d".repeat(256));
    let long_file = format!("m/{}", long("png"));
    for entry in [deep.as_str(), long_file.as_str()] {
        let z = zip_of(&[("m/m.pmx", &pmx(4)), (entry, b"x")]);
        let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "m.zip", &z).await;
        assert_eq!(st, 400, "{entry}: {b}");
        assert_eq!(b["error_code"], "unsafe_zip_entry", "{b}");
        assert!(b["error"].as_str().unwrap().contains("too long"), "{b}");
        assert_user_mmd_clean(&s);
    }
    // 60-character CJK names work everywhere (180 bytes).
    let cjk60 = "模".repeat(60);
    let (st, b) = upload(
        &s,
        "/api/model/mmd/upload",
        &format!("{cjk60}.pmx"),
        &pmx(3),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let (st, b) = upload(
        &s,
        "/api/model/mmd/upload_animation",
        &format!("{cjk60}.vmd"),
        &vmd(),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let z = zip_of(&[
        (&format!("{cjk60}/{cjk60}.pmx"), &pmx(4)),
        (&format!("{cjk60}/{cjk60}.png"), b"t"),
    ]);
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", &format!("{cjk60}.zip"), &z).await;
    assert_eq!(st, 200, "{b}");
    assert!(user_mmd(&s)
        .join(&cjk60)
        .join(format!("{cjk60}.pmx"))
        .is_file());
}

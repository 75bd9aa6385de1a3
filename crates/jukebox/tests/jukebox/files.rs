//! GET /file: ranges, user files before bundled ones, traversal refused.

use crate::common::*;

#[tokio::test]
async fn file_route_serves_ranges_prefers_user_files_and_blocks_traversal() {
    let s = with_bundle().await;
    let w = wav(500, 21, None, None);
    let song = upload_ok(&s, "songs", "track.wav", w.clone()).await;
    let url = format!("{J}/file/{}", song["audio"].as_str().unwrap());
    let r = s.http.get(s.url(&url)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    assert_eq!(r.bytes().await.unwrap().to_vec(), w);

    // Range requests (audio seeking).
    let r = s
        .http
        .get(s.url(&url))
        .header("Range", "bytes=0-3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes 0-3/{}", w.len()).as_str()
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"RIFF");
    let r = s
        .http
        .get(s.url(&url))
        .header("Range", "bytes=100-")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap().to_vec(), w[100..].to_vec());
    let r = s
        .http
        .get(s.url(&url))
        .header("Range", "bytes=999999-")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);

    let mp = upload_ok(&s, "songs", "x.mp3", mp3("t", "a", 3)).await;
    let r = s
        .http
        .get(s.url(&format!("{J}/file/{}", mp["audio"].as_str().unwrap())))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "audio/mpeg");
    let r = s
        .http
        .get(s.url(&format!("{J}/file/actions/builtin.vmd")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    assert_eq!(r.bytes().await.unwrap().to_vec(), builtin_vmd());

    // The user folder wins over the bundled one.
    std::fs::create_dir_all(s.data.join("jukebox/actions")).unwrap();
    std::fs::write(s.data.join("jukebox/actions/builtin.vmd"), b"user copy").unwrap();
    let r = s
        .http
        .get(s.url(&format!("{J}/file/actions/builtin.vmd")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"user copy");
    let r = s
        .http
        .get(s.url(&format!("{J}/file/songs/nothing.wav")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let (_, body) = split(r).await;
    assert!(body["detail"].is_string());

    // Traversal: secrets outside the library folders are never served.
    std::fs::write(s.data.join("secret.txt"), b"TOPSECRET").unwrap();
    std::fs::write(s.bundle.join("secret.txt"), b"TOPSECRET").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        s.data.join("secret.txt"),
        s.data.join("jukebox/songs/link.wav"),
    )
    .unwrap();
    let table = [
        "/api/jukebox/file/../secret.txt",
        "/api/jukebox/file/songs/../../secret.txt",
        "/api/jukebox/file/songs/../../../data/secret.txt",
        "/api/jukebox/file/%2e%2e/secret.txt",
        "/api/jukebox/file/songs/%2e%2e/%2e%2e/secret.txt",
        "/api/jukebox/file/songs%2f..%2f..%2fsecret.txt",
        "/api/jukebox/file/songs/..%5c..%5csecret.txt",
        "/api/jukebox/file/songs/%252e%252e/%252e%252e/secret.txt",
        "/api/jukebox/file//etc/passwd",
        "/api/jukebox/file/C:/Windows/win.ini",
        "/api/jukebox/file/songs/%00.wav",
        "/api/jukebox/file/static/jukebox/../../secret.txt",
        "/api/jukebox/file/config.json",
        "/api/jukebox/file/songs/link.wav",
        "/api/jukebox/file/songs",
    ];
    for path in table {
        let (st, text) = raw_get(&s, path).await;
        assert!(st == 400 || st == 404, "{path}: {st}\n{text}");
        assert!(!text.contains("TOPSECRET"), "{path} leaked");
        assert!(!text.contains("root:"), "{path} leaked");
    }
}

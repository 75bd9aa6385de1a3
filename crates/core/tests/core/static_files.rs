//! `/static/`, `/user_mmd/`, `/user_pngtuber/`, `/workshop/`: containment and
//! the workshop dir.

use companiond_core::testkit::{TestOptions, TestServer};

#[tokio::test]
async fn static_files_are_contained() {
    let s = TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(|data, bundle| {
                std::fs::create_dir_all(bundle.join("static/css")).unwrap();
                std::fs::write(bundle.join("static/css/app.css"), b"body{}").unwrap();
                std::fs::write(bundle.join("secret.txt"), b"TOPSECRET").unwrap();
                std::fs::create_dir_all(data.join("user_mmd/m")).unwrap();
                std::fs::write(data.join("user_mmd/m/a.json"), b"{}").unwrap();
                std::fs::create_dir_all(data.join("user_pngtuber/p")).unwrap();
                std::fs::write(data.join("user_pngtuber/p/model.json"), b"{\"x\":1}").unwrap();
                std::fs::write(data.join("config.secret"), b"TOPSECRET").unwrap();
                #[cfg(unix)]
                std::os::unix::fs::symlink(
                    bundle.join("secret.txt"),
                    bundle.join("static/link.txt"),
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let r = s
        .http
        .get(s.url("/static/css/app.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/css");
    assert_eq!(
        s.http
            .get(s.url("/user_mmd/m/a.json"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = s
        .http
        .get(s.url("/user_pngtuber/p/model.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/json");
    for probe in [
        "/static/../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/..%2fsecret.txt",
        "/static/%2e%2e%2fsecret.txt",
        "/static/..%5csecret.txt",
        "/static/link.txt",
        "/static/css",
        "/user_mmd/..%2f..%2fconfig.secret",
        "/user_pngtuber/%2e%2e/config.secret",
        "/static/%00",
        "/static/C:%5csecret.txt",
    ] {
        let r = s.http.get(s.url(probe)).send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert!(!text.contains("TOPSECRET"), "{probe}");
        assert_eq!(status, 404, "{probe}");
    }
}

#[tokio::test]
async fn workshop_files_are_served_when_configured() {
    let s = TestServer::start_with(
        &[],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("../workshop/123/model")).unwrap();
                std::fs::write(data.join("../workshop/123/model/m.json"), b"{}").unwrap();
                std::fs::write(data.join("../outside.txt"), b"TOPSECRET").unwrap();
            })),
            edit: Some(Box::new(|o| {
                o.workshop_dir = Some(o.data_dir.join("../workshop"))
            })),
            ..Default::default()
        },
    )
    .await;
    let r = s
        .http
        .get(s.url("/workshop/123/model/m.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for probe in [
        "/workshop/..%2foutside.txt",
        "/workshop/%2e%2e/outside.txt",
        "/workshop/123/missing",
    ] {
        assert_eq!(
            s.http.get(s.url(probe)).send().await.unwrap().status(),
            404,
            "{probe}"
        );
    }
    let plain = TestServer::start(&[]).await;
    assert_eq!(
        plain
            .http
            .get(plain.url("/workshop/123/model/m.json"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

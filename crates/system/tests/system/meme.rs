//! `GET /api/meme/proxy-image` (SSRF table, redirects, limits, cache).

use crate::common::upstreams::*;

#[tokio::test]
async fn meme_proxy_serves_checked_images_and_caches() {
    let s = server().await;
    let h = hosts();
    let img = &h.image.base;
    let before = h.image.requests().len();
    let r = proxy(&s, &format!("{img}/ok.png")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.headers()["x-cache"], "MISS");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.headers()["cache-control"], "public, max-age=86400");
    assert_eq!(r.bytes().await.unwrap().to_vec(), png());
    let r = proxy(&s, &format!("{img}/ok.png")).await;
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["x-cache"].to_str().unwrap()
        ),
        (200, "HIT")
    );
    assert_eq!(
        h.image.requests().len(),
        before + 1,
        "the hit did not reach the host"
    );
    let sent = h
        .image
        .requests()
        .into_iter()
        .find(|r| r.path == "/ok.png")
        .unwrap();
    assert_eq!(sent.headers["referer"], "http://127.0.0.1/");

    let r = proxy(&s, &format!("{img}/photo.jpg")).await;
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["content-type"].to_str().unwrap()
        ),
        (200, "image/jpeg")
    );

    // Three redirects are followed, a fourth is not.
    let before = h.image.requests_to("/r/0").len();
    assert_eq!(proxy(&s, &format!("{img}/r/3")).await.status(), 200);
    assert_eq!(h.image.requests_to("/r/0").len(), before + 1);
    let cases = [
        ("/r/4", 502, "too_many_redirects"),
        ("/noloc", 502, "invalid_redirect"),
        ("/logo.svg", 403, "unsupported_content_type"),
        ("/page", 403, "unsupported_content_type"),
        ("/none", 403, "unsupported_content_type"),
        ("/declared-big", 413, "too_large"),
        ("/streamed-big", 413, "too_large"),
        ("/status/500", 502, "upstream_status"),
        ("/slow", 504, "upstream_timeout"),
    ];
    for (path, code, err) in cases {
        let (c, v) = split(proxy(&s, &format!("{img}{path}")).await).await;
        assert_eq!(
            (c, v["error_code"].as_str()),
            (code, Some(err)),
            "{path}: {v}"
        );
        assert_eq!(v["success"], false);
    }
    // Failures are never cached.
    let n = h.image.requests_to("/streamed-big").len();
    assert_eq!(
        proxy(&s, &format!("{img}/streamed-big")).await.status(),
        413
    );
    assert_eq!(h.image.requests_to("/streamed-big").len(), n + 1);

    let (c, v) = s.get("/api/meme/proxy-image").await;
    assert_eq!((c, v["error_code"].as_str()), (400, Some("missing_url")));
    let (c, _) = s.get("/api/meme/proxy-image?url=").await;
    assert_eq!(c, 400);
}

#[tokio::test]
async fn meme_proxy_ssrf_table_is_never_fetched() {
    let s = server().await;
    let h = hosts();
    let v = h.victim.addr.port();
    let i = h.image.addr.port();
    let img = &h.image.base;
    let victim_before = h.victim.requests().len();
    let mut table: Vec<String> = [
        "http://127.0.0.1:{V}/x.png",
        "http://localhost:{V}/x.png",
        "http://LOCALHOST:{V}/x.png",
        "http://localhost.:{V}/x.png",
        "http://foo.localhost:{V}/x.png",
        "http://localhost.localdomain:{V}/x.png",
        "http://vm:{V}/x.png",
        "http://[::1]:{V}/x.png",
        "http://[::ffff:127.0.0.1]:{V}/x.png",
        "http://[::ffff:7f00:1]:{V}/x.png",
        "http://[0:0:0:0:0:ffff:127.0.0.1]:{V}/x.png",
        "http://[::127.0.0.1]:{V}/x.png",
        "http://[::]:{V}/x.png",
        "http://0.0.0.0:{V}/x.png",
        "http://0:{V}/x.png",
        "http://2130706433:{V}/x.png",
        "http://0x7f000001:{V}/x.png",
        "http://0x7f.0x0.0x0.0x1:{V}/x.png",
        "http://0177.0.0.1:{V}/x.png",
        "http://017700000001:{V}/x.png",
        "http://127.1:{V}/x.png",
        "http://127.0.1:{V}/x.png",
        "http://127.255.255.254:{V}/x.png",
        "http://10.0.0.1:{V}/x.png",
        "http://172.16.0.1:{V}/x.png",
        "http://192.168.0.1:{V}/x.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1:{V}/x.png",
        "http://224.0.0.1:{V}/x.png",
        "http://255.255.255.255:{V}/x.png",
        "http://[fe80::1]:{V}/x.png",
        "http://[fc00::1]:{V}/x.png",
        "http://[fd00:ec2::254]/x.png",
        "http://[64:ff9b::7f00:1]:{V}/x.png",
        "http://[2002:7f00:1::]:{V}/x.png",
        "http://[ff02::1]:{V}/x.png",
        "http://user:pass@127.0.0.1:{V}/x.png",
        "http://example.com@127.0.0.1:{V}/x.png",
        "http://127.0.0.1:{V}#@example.com/x.png",
        "http://127.0.0.1:{V}\\@example.com/x.png",
        "https://127.0.0.1:{V}/x.png",
        "file:///etc/passwd",
        "ftp://127.0.0.1:{V}/x.png",
        "gopher://127.0.0.1:{V}/_x",
        "javascript:alert(1)",
        "//127.0.0.1:{V}/x.png",
        "http:/127.0.0.1:{V}/x.png",
        // Only the named host:port is trusted.
        "http://localhost:{I}/ok.png",
        "http://[::1]:{I}/ok.png",
        "http://127.0.0.2:{I}/ok.png",
    ]
    .iter()
    .map(|u| {
        u.replace("{V}", &v.to_string())
            .replace("{I}", &i.to_string())
    })
    .collect();
    // Redirects from the trusted host to forbidden targets.
    for target in [
        format!("http://127.0.0.1:{v}/x.png"),
        format!("http://localhost:{v}/x.png"),
        format!("http://[::1]:{v}/x.png"),
        format!("http://2130706433:{v}/x.png"),
        "http://169.254.169.254/".to_string(),
        "file:///etc/passwd".to_string(),
        format!("http://user@127.0.0.1:{v}/"),
    ] {
        table.push(format!("{img}/to?u={}", enc(&target)));
    }
    assert!(table.len() >= 40);
    for u in &table {
        let (code, body) = split(proxy(&s, u).await).await;
        assert!(code == 400 || code == 403, "{u} → {code} {body}");
        assert_eq!(body["success"], false, "{u}");
    }
    assert_eq!(
        h.victim.requests().len(),
        victim_before,
        "a forbidden target was contacted"
    );
}

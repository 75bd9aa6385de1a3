//! `POST /api/config/set_proxy_mode`.

use crate::common::*;

#[tokio::test]
async fn proxy_mode_snapshots_and_restores() {
    // Loopback stays unproxied for the other tests of this binary while the
    // variables are set.
    let lower_no_proxy = std::env::var("no_proxy").ok();
    std::env::set_var("NO_PROXY", "127.0.0.1,localhost");
    std::env::set_var("HTTP_PROXY", "http://user:hunter2@proxy.invalid:3128");
    std::env::set_var("https_proxy", "http://proxy.invalid:3129");
    let s = server().await;
    let (st, v) = s
        .post("/api/config/set_proxy_mode", json!({"direct": true}))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["direct"], json!(true));
    assert_eq!(v["proxies_after"]["no"], json!("*"));
    assert!(v["proxies_after"].get("http").is_none());
    assert!(std::env::var("HTTP_PROXY").is_err());
    assert_eq!(std::env::var("no_proxy").unwrap(), "*");
    // A second direct:true keeps the first snapshot.
    let (_, v) = s
        .post("/api/config/set_proxy_mode", json!({"direct": true}))
        .await;
    assert_eq!(v["success"], json!(true));
    let (_, v) = s
        .post("/api/config/set_proxy_mode", json!({"direct": false}))
        .await;
    assert_eq!(v["direct"], json!(false));
    assert_eq!(
        v["proxies_after"]["http"],
        json!("http://proxy.invalid:3128/")
    );
    assert_eq!(
        v["proxies_after"]["https"],
        json!("http://proxy.invalid:3129/")
    );
    assert!(!v.to_string().contains("hunter2"));
    assert_eq!(
        std::env::var("HTTP_PROXY").unwrap(),
        "http://user:hunter2@proxy.invalid:3128"
    );
    assert_eq!(std::env::var("NO_PROXY").unwrap(), "127.0.0.1,localhost");
    assert_eq!(std::env::var("no_proxy").ok(), lower_no_proxy);
    std::env::remove_var("HTTP_PROXY");
    std::env::remove_var("https_proxy");
    let (st, _) = s.post("/api/config/set_proxy_mode", json!({})).await;
    assert_eq!(st, 400);
}

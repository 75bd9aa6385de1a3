//! The route table as the OpenAPI document shows it.

use super::common::*;

#[tokio::test]
async fn every_route_is_in_the_openapi_document() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    let paths = doc["paths"].as_object().unwrap();
    for (m, p) in [
        ("post", "/api/model/mmd/upload"),
        ("post", "/api/model/mmd/upload_animation"),
        ("post", "/api/model/mmd/upload_zip"),
        ("get", "/api/model/mmd/models"),
        ("get", "/api/model/mmd/animations"),
        ("get", "/api/model/mmd/animations/list"),
        ("get", "/api/model/mmd/config"),
        ("get", "/api/model/mmd/emotion_mapping"),
        ("post", "/api/model/mmd/emotion_mapping"),
        ("delete", "/api/model/mmd/model"),
        ("delete", "/api/model/mmd/animation"),
        ("post", "/api/model/pngtuber/upload_model"),
        ("get", "/api/model/pngtuber/models"),
        ("delete", "/api/model/pngtuber/model"),
    ] {
        assert!(
            paths.get(p).and_then(|x| x.get(m)).is_some(),
            "{m} {p} missing"
        );
    }
}

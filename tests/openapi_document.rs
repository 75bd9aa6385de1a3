//! `/openapi.json` of the whole application: OpenAPI 3.1, every `$ref`
//! resolves, operation ids are unique, typed families' tags are described
//! (docs/openapi.md). The CI check (`tests/openapi/run`) runs schemathesis on it.

use companiond_core::testkit::TestServer;

#[tokio::test]
async fn the_whole_document_is_openapi_3_1_with_resolving_refs() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert_eq!(
        companiond_core::http::openapi::problems(&doc),
        Vec::<String>::new()
    );
    let tags = doc["tags"].as_array().expect("tags");
    for typed in ["characters", "cloudsave", "config"] {
        assert!(
            tags.iter()
                .any(|t| t["name"] == typed && t["description"].is_string()),
            "{typed} tag described"
        );
    }
}

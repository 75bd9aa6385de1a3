//! `/openapi.json` of the whole application: OpenAPI 3.1, every `$ref`
//! resolves, operation ids are unique, typed families' tags are described
//! (docs/openapi.md). The CI check (`tests/openapi/run`) runs schemathesis on it.

use companiond_core::testkit::TestServer;

#[tokio::test]
async fn the_whole_document_is_openapi_3_1_with_resolving_refs() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        companiond_core::http::openapi::dangling_refs(&doc),
        Vec::<String>::new()
    );
    let mut ids = std::collections::BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("operations") {
            let id = op["operationId"].as_str().expect("operationId");
            assert!(ids.insert(id.to_string()), "duplicate operationId {id}");
            let responses = op["responses"].as_object().expect("responses");
            assert!(responses.contains_key("200"), "{method} {path}");
            assert!(
                responses.contains_key("403"),
                "{method} {path}: the Host refusal"
            );
        }
    }
    let tags = doc["tags"].as_array().expect("tags");
    for typed in ["characters", "cloudsave", "config"] {
        assert!(
            tags.iter()
                .any(|t| t["name"] == typed && t["description"].is_string()),
            "{typed} tag described"
        );
    }
}

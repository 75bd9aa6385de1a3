//! `/openapi.json` lists every registered route.

use companiond_core::testkit::TestServer;

use crate::common::*;

#[tokio::test]
async fn openapi_lists_registered_routes() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["paths"]["/api/characters"]["get"].is_object());
    assert!(
        doc["paths"]["/api/characters/profile/{name}"]["delete"]["parameters"][0]["name"] == "name"
    );
    assert!(doc["paths"]["/api/probe/csrf"]["post"].is_object());
}

#[tokio::test]
async fn the_served_document_is_openapi_3_1_with_resolving_refs() {
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert_eq!(
        companiond_core::http::openapi::problems(&doc),
        Vec::<String>::new()
    );
    // The guarded probe carries the CSRF scheme and its 403 in the success envelope.
    let csrf = &doc["paths"]["/api/probe/csrf"]["post"];
    assert_eq!(csrf["security"][0]["csrf"], serde_json::json!([]));
    let forbidden = csrf["responses"]["403"].to_string();
    assert!(forbidden.contains("csrf_validation_failed"), "{forbidden}");
    assert!(forbidden.contains("host_not_allowed"), "{forbidden}");
}

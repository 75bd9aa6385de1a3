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

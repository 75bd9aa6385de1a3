//! Every route of the family is in the OpenAPI document.

use crate::common::*;

#[tokio::test]
async fn every_route_is_in_openapi() {
    let s = TestServer::start(FAMILIES).await;
    let (_, doc) = s.get("/openapi.json").await;
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/api/config/steam_language",
        "/api/storage/location/bootstrap",
        "/api/storage/location/status",
        "/api/live2d/models",
        "/api/model/vrm/models",
        "/api/characters/current_catgirl",
        "/api/characters/catgirl/{name}",
        "/api/characters/catgirl/l2d/{name}",
        "/api/characters/catgirl/{name}/voice_mode_status",
        "/api/characters/catgirl/{name}/mmd_settings",
        "/api/characters/card-metas",
        "/api/characters/clear_voice_ids",
        "/api/beacon/shutdown",
        "/api/agent/health",
        "/api/steam/update-playtime",
        "/api/yui-guide/handoff/create",
        "/api/characters/catgirl/{name}/rename",
        "/api/characters/master/{name}/rename",
        "/api/characters/custom_tts_voices",
        "/api/live2d/load_model_parameters/{name}",
        "/api/live2d/model_parameters/{name}",
        "/api/model/vrm/upload",
        "/api/model/vrm/upload_animation",
        "/api/model/vrm/model",
        "/api/agent/{capability}/availability",
    ] {
        assert!(paths.contains_key(p), "{p} missing from /openapi.json");
    }
    let save = &paths["/api/characters/catgirl/{name}"];
    assert!(save.get("put").is_some() && save.get("delete").is_some());
}

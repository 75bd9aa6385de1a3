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

/// The schema `r` names (`$ref` into the components), or `r` itself.
fn resolve<'a>(doc: &'a Value, r: &'a Value) -> &'a Value {
    match r["$ref"].as_str() {
        Some(name) => {
            let name = name.trim_start_matches("#/components/schemas/");
            assert!(
                doc["components"]["schemas"].get(name).is_some(),
                "{name} does not resolve"
            );
            &doc["components"]["schemas"][name]
        }
        None => r,
    }
}

fn keys(schema: &Value, field: &str) -> Vec<String> {
    match &schema[field] {
        Value::Object(m) => m.keys().cloned().collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// The card form save: its body and answer are named schemas listing the
/// fields the handler reads and writes, its errors carry their codes, and the
/// real answer has exactly the fields its schema lists.
#[tokio::test]
async fn the_card_form_save_is_typed_from_its_handler() {
    let s = TestServer::start(FAMILIES).await;
    let (_, doc) = s.get("/openapi.json").await;
    assert_eq!(
        companiond_core::http::openapi::dangling_refs(&doc),
        Vec::<String>::new()
    );
    let put = &doc["paths"]["/api/characters/catgirl/{name}"]["put"];
    assert_eq!(put["operationId"], "frontend_save_character");
    let body = resolve(
        &doc,
        &put["requestBody"]["content"]["application/json"]["schema"],
    );
    let fields = keys(body, "properties");
    for f in ["档案名", "_field_order", "voice_id", "model_type"] {
        assert!(fields.contains(&f.to_string()), "{f} missing: {fields:?}");
    }
    // The form is open: its other keys are user fields.
    assert!(body.get("additionalProperties").is_some(), "{body}");
    let ok = resolve(
        &doc,
        &put["responses"]["200"]["content"]["application/json"]["schema"],
    );
    let answer_fields = keys(ok, "properties");
    assert_eq!(
        answer_fields,
        [
            "success",
            "character_name",
            "voice_id_changed",
            "session_restarted",
            "context_refreshed",
            "ignored_reserved_fields"
        ]
    );
    assert_eq!(keys(ok, "required"), answer_fields);
    let not_found = put["responses"]["404"].to_string();
    assert!(not_found.contains("character_not_found"), "{not_found}");

    // The real answer: exactly those fields.
    let (st, saved) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/Companion",
        json!({"性格": "calm", "live2d": "x"}),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    let real: Vec<String> = saved.as_object().unwrap().keys().cloned().collect();
    assert_eq!(real, answer_fields);
    assert_eq!(saved["ignored_reserved_fields"], json!(["live2d"]));
}

/// The Live2D list is one of its two shapes; the storage mutations document
/// the 409 they answer, in the family envelope.
#[tokio::test]
async fn models_and_storage_answers_are_described() {
    let s = TestServer::start(FAMILIES).await;
    let (_, doc) = s.get("/openapi.json").await;
    let list = &doc["paths"]["/api/live2d/models"]["get"];
    assert_eq!(list["parameters"][0]["name"], "simple");
    let shapes = resolve(
        &doc,
        &list["responses"]["200"]["content"]["application/json"]["schema"],
    );
    let one_of = shapes["oneOf"].as_array().expect("oneOf");
    assert_eq!(one_of.len(), 2, "{shapes}");
    let model = resolve(&doc, &one_of[0]["items"]);
    assert_eq!(
        keys(model, "properties"),
        [
            "name",
            "display_name",
            "path",
            "source",
            "item_id",
            "is_fallback"
        ]
    );
    let select = &doc["paths"]["/api/storage/location/select"]["post"];
    let conflict = select["responses"]["409"].to_string();
    assert!(
        conflict.contains("storage_relocation_unsupported") && conflict.contains("SuccessError"),
        "{conflict}"
    );
    let (st, r) = s.post_csrf("/api/storage/location/select", json!({})).await;
    assert_eq!(st, 409);
    assert_eq!(
        (
            r["success"].clone(),
            r["ok"].clone(),
            r["error_code"].clone()
        ),
        (
            json!(false),
            json!(false),
            json!("storage_relocation_unsupported")
        )
    );
    assert!(r["error"].is_string());
}

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

/// The schema a `$ref` points to inside `doc`.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let found = r.strip_prefix('#').and_then(|p| doc.pointer(p));
            assert!(found.is_some(), "{r} does not resolve");
            found.unwrap_or(&Value::Null)
        }
        None => schema,
    }
}

fn properties(schema: &Value) -> Vec<&str> {
    schema["properties"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_openapi_document_types_requests_answers_and_errors() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let (_, doc) = s.get("/openapi.json").await;
    assert_eq!(
        companiond_core::http::openapi::dangling_refs(&doc),
        Vec::<String>::new()
    );
    // The model listing: its typed answer and the entry's fields.
    let list = &doc["paths"]["/api/model/mmd/models"]["get"];
    assert_eq!(list["operationId"], "avatars_list_mmd_models");
    let answer = resolve(
        &doc,
        &list["responses"]["200"]["content"]["application/json"]["schema"],
    );
    assert_eq!(properties(answer), ["success", "models"]);
    let entry = resolve(&doc, &answer["properties"]["models"]["items"]);
    assert_eq!(
        properties(entry),
        [
            "name", "filename", "url", "rel_path", "type", "size", "location", "broken", "source",
            "item_id"
        ]
    );
    assert_eq!(
        entry["required"],
        json!(["name", "filename", "url", "rel_path", "type", "size", "location"])
    );
    assert!(answer["example"]["models"][0]["url"].is_string());
    // The emotion mapping: the JSON body and its open mapping.
    let save = &doc["paths"]["/api/model/mmd/emotion_mapping"]["post"];
    let body = resolve(
        &doc,
        &save["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(properties(body), ["model", "mapping"]);
    assert_eq!(body["properties"]["mapping"]["additionalProperties"], true);
    // An upload: the file part, the typed answer (domain fields after
    // `success`) and every 400 code of the family in its envelope.
    let zip = &doc["paths"]["/api/model/mmd/upload_zip"]["post"];
    let part = &zip["requestBody"]["content"]["multipart/form-data"]["schema"];
    assert_eq!(part["properties"]["file"]["format"], "binary");
    let answer = resolve(
        &doc,
        &zip["responses"]["200"]["content"]["application/json"]["schema"],
    );
    let imported = resolve(&doc, &answer["allOf"][0]);
    assert!(properties(imported).contains(&"extracted_size"));
    let bad = zip["responses"]["400"]["content"]["application/json"]["schema"].to_string();
    for code in [
        "invalid_zip",
        "file_too_large",
        "upload_aborted",
        "unsafe_zip_entry",
    ] {
        assert!(bad.contains(code), "{code} missing from the 400 answer");
    }
    assert!(bad.contains("#/components/schemas/SuccessError"));
    // The PNGTuber listing entry names the normalised block.
    let pkgs = &doc["paths"]["/api/model/pngtuber/models"]["get"];
    let answer = resolve(
        &doc,
        &pkgs["responses"]["200"]["content"]["application/json"]["schema"],
    );
    let pkg = resolve(&doc, &answer["properties"]["models"]["items"]);
    assert!(properties(pkg).contains(&"pngtuber"));
    let tags = doc["tags"].as_array().cloned().unwrap_or_default();
    assert!(tags
        .iter()
        .any(|t| t["name"] == "avatars" && t["description"].is_string()));
}

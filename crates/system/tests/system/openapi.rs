//! The OpenAPI description of the system routes: every reference resolves, and
//! the typed schemas name the fields the server really answers.

use companiond_core::http::openapi::dangling_refs;

use crate::common::*;

/// `v`, or the component schema its `$ref` names.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str() {
        Some(r) => doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{r} does not resolve")),
        None => v,
    }
}

/// The property names of an object schema, through `allOf` (a flattened field).
fn property_names(doc: &Value, schema: &Value) -> Vec<String> {
    let schema = resolve(doc, schema);
    let mut names: Vec<String> = match schema["allOf"].as_array() {
        Some(parts) => parts.iter().flat_map(|p| property_names(doc, p)).collect(),
        None => schema["properties"]
            .as_object()
            .expect("an object schema")
            .keys()
            .cloned()
            .collect(),
    };
    names.sort();
    names
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
    k.sort();
    k
}

#[tokio::test]
async fn handoff_create_is_typed_and_its_answer_matches_the_schema() {
    let s = server().await;
    let (code, doc) = s.get("/openapi.json").await;
    assert_eq!(code, 200);
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
    let op = &doc["paths"]["/api/guide/handoff/create"]["post"];
    assert_eq!(op["operationId"], "system_create_handoff");

    // The request body: the fields the handler reads, target_page required.
    let body = resolve(
        &doc,
        &op["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(
        property_names(&doc, body),
        [
            "flow_id",
            "resume_scene",
            "source_page",
            "source_path",
            "target_page",
            "target_path"
        ]
    );
    assert_eq!(body["required"], json!(["target_page"]));

    // The 200 answer: the typed token, whose fields are exactly those sent.
    let ok = resolve(
        &doc,
        &op["responses"]["200"]["content"]["application/json"]["schema"],
    );
    assert_eq!(property_names(&doc, ok), ["ok", "success", "token"]);
    let token_schema = resolve(&doc, &ok["properties"]["token"]);
    let (code, answer) = send_csrf(
        &s,
        Method::POST,
        "/api/guide/handoff/create",
        json!({"target_page": "chat"}),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(keys(&answer), property_names(&doc, ok));
    assert_eq!(keys(&answer["token"]), property_names(&doc, token_schema));

    // A refusal: 400 in the system envelope with the route's codes.
    let bad = op["responses"]["400"]["content"]["application/json"]["schema"].to_string();
    assert!(bad.contains("invalid_target_page") && bad.contains("invalid_json"));
    let (code, answer) = send_csrf(&s, Method::POST, "/api/guide/handoff/create", json!({})).await;
    assert_eq!(
        (code, &answer["error_code"]),
        (400, &json!("invalid_target_page"))
    );
}

#[tokio::test]
async fn typed_answers_name_the_fields_the_server_sends() {
    let s = server().await;
    let (_, doc) = s.get("/openapi.json").await;
    for path in [
        "/api/system/status",
        "/api/token-usage",
        "/api/autostart-prompt/state",
        "/api/seven-day-tutorial/state",
        "/api/pending-notices",
    ] {
        let schema = resolve(
            &doc,
            &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
        );
        let (code, answer) = s.get(path).await;
        assert_eq!(code, 200, "{path}: {answer}");
        assert_eq!(keys(&answer), property_names(&doc, schema), "{path}");
    }
    // The storage flags of the status (core's type, described in this family).
    let status = resolve(
        &doc,
        &doc["paths"]["/api/system/status"]["get"]["responses"]["200"]["content"]
            ["application/json"]["schema"],
    );
    let (_, answer) = s.get("/api/system/status").await;
    assert_eq!(
        keys(&answer["storage"]),
        property_names(&doc, &status["properties"]["storage"])
    );
    // Parameters: typed, with the default the handler applies.
    let days = &doc["paths"]["/api/token-usage"]["get"]["parameters"][0];
    assert_eq!(days["name"], "days");
    assert_eq!(days["schema"]["default"], 7);
    // A 409 the interface defines, by its code.
    let conflict =
        doc["paths"]["/api/seven-day-tutorial/state"]["put"]["responses"]["409"].to_string();
    assert!(conflict.contains("seven_day_tutorial_revision_conflict"));
}

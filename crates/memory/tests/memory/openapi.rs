//! `/openapi.json` describes the memory routes with the types the handlers
//! really read and answer (docs/memory.md § OpenAPI).

use crate::common::*;
use companiond_core::http::openapi::dangling_refs;

/// The component schema a `$ref` names.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{r} does not resolve")),
        None => schema,
    }
}

/// The schema of the 200 answer of `method path`.
fn ok_of<'a>(doc: &'a Value, path: &str, method: &str) -> &'a Value {
    resolve(
        doc,
        &doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"],
    )
}

fn property_names(schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    k.sort();
    k
}

#[tokio::test]
async fn the_recent_file_routes_are_typed_and_their_answers_match() {
    let s = server().await;
    write_history(&s, C, &json!([msg("human", "hello"), msg("ai", "hi")]));
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());

    // The read: its query parameter and its typed answer, whose fields are
    // exactly those of a real read.
    let get = &doc["paths"]["/api/memory/recent_file"]["get"];
    assert_eq!(get["operationId"], "memory_read_recent_file");
    assert_eq!(get["parameters"][0]["name"], "filename");
    assert_eq!(get["parameters"][0]["required"], true);
    let ok = ok_of(&doc, "/api/memory/recent_file", "get");
    assert_eq!(
        property_names(ok),
        ["content", "fingerprint", "identity_token"]
    );
    let (st, r) = read(&s, "recent_Companion.json").await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(keys(&r), property_names(ok));
    // Errors in the family envelope.
    let bad = get["responses"]["400"]["content"]["application/json"]["schema"].to_string();
    assert!(bad.contains("SuccessError"), "{bad}");

    // The save: the fields the one-pass reader keeps, and the typed answer.
    let save = &doc["paths"]["/api/memory/recent_file/save"]["post"];
    let body = resolve(
        &doc,
        &save["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(
        property_names(body),
        ["chat", "filename", "fingerprint", "identity_token"]
    );
    let entry = resolve(&doc, &body["properties"]["chat"]["items"]);
    assert_eq!(
        property_names(entry),
        ["role", "source_index", "text", "theater"]
    );
    let saved = ok_of(&doc, "/api/memory/recent_file/save", "post");
    let (st, answer) = save_request(&s, &r).await;
    assert_eq!(st, 200, "{answer}");
    assert_eq!(keys(&answer), property_names(saved));
    let conflict = save["responses"]["409"]["description"].to_string();
    assert!(conflict.contains("changed since it was read"), "{conflict}");
}

async fn save_request(s: &TestServer, read: &Value) -> (u16, Value) {
    save(
        s,
        json!({
            "filename": "recent_Companion.json",
            "fingerprint": read["fingerprint"],
            "identity_token": read["identity_token"],
            "chat": [{"role": "human", "text": "hello again"}],
        }),
    )
    .await
}

#[tokio::test]
async fn the_long_term_routes_state_params_and_answers() {
    let s = server().await;
    let (_, doc) = s.get("/openapi.json").await;
    let facts = &doc["paths"]["/api/memory/facts"]["get"];
    let limit = facts["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == "limit")
        .expect("limit");
    assert_eq!(limit["schema"]["maximum"], 200);
    let listing = ok_of(&doc, "/api/memory/facts", "get");
    let (st, real) = s.get(&format!("/api/memory/facts?character={C}")).await;
    assert_eq!(st, 200, "{real}");
    assert_eq!(keys(&real), property_names(listing));

    let answer = ok_of(&doc, "/api/memory/search", "get");
    let (st, real) = s.get(&format!("/api/memory/search?character={C}")).await;
    assert_eq!(st, 200, "{real}");
    assert_eq!(keys(&real), property_names(answer));
    let hit = resolve(&doc, &answer["properties"]["items"]["items"]);
    assert!(property_names(hit).contains(&"score".to_string()));

    // The archive of the folded history: its query is stated and required.
    let archive = &doc["paths"]["/api/memory/archive"]["get"];
    let params = archive["parameters"].as_array().expect("parameters");
    let param = |n: &str| params.iter().find(|p| p["name"] == n).expect(n).clone();
    assert_eq!(param("character")["required"], true);
    assert_eq!(param("limit")["schema"]["maximum"], 200);
    assert_eq!(param("limit")["schema"]["minimum"], 1);
    assert_eq!(param("before")["schema"]["minimum"], 1);
    let answer = ok_of(&doc, "/api/memory/archive", "get");
    let (st, real) = s.get(&format!("/api/memory/archive?character={C}")).await;
    assert_eq!(st, 200, "{real}");
    let mut documented = property_names(answer);
    documented.retain(|k| k != "next_before");
    assert_eq!(keys(&real), documented);

    // A CSRF-guarded write names its body and the token scheme.
    let correct = &doc["paths"]["/api/memory/correct"]["post"];
    assert!(correct["security"][0].get("csrf").is_some());
    let body = resolve(
        &doc,
        &correct["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(body["required"], json!(["character", "id", "text"]));
    assert_eq!(body["properties"]["importance"]["maximum"], 10);
}

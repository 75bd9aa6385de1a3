//! `/openapi.json` describes the four routes with the types they really read
//! and answer.

use std::collections::BTreeSet;

use companiond_core::http::openapi::dangling_refs;
use companiond_tools::registry::ToolList;
use serde_json::{json, Value};

use crate::common::{register, server};

/// The component schema `name` (it must exist).
fn component<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = &doc["components"]["schemas"][name];
    assert!(s.is_object(), "{name} missing");
    s
}

/// The names listed under `required` of a schema.
fn required_of(schema: &Value) -> BTreeSet<&str> {
    schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A real answer names no field the schema `name` lacks and misses none it requires.
fn conforms(doc: &Value, name: &str, answer: &Value) {
    let schema = component(doc, name);
    for key in answer.as_object().expect("object").keys() {
        assert!(
            schema["properties"].get(key).is_some(),
            "{name}: {key} undocumented"
        );
    }
    for field in required_of(schema) {
        assert!(answer.get(field).is_some(), "{name}: {field} missing");
    }
}

#[tokio::test]
async fn the_four_operations_are_typed_and_match_real_answers() {
    let s = server().await;
    let (_, doc) = s.get("/openapi.json").await;
    let reg = &doc["paths"]["/api/tools/register"]["post"];
    assert_eq!(reg["operationId"], "tools_register");
    assert_eq!(
        reg["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/RegisterBody"
    );
    let body = component(&doc, "RegisterBody");
    assert_eq!(required_of(body), BTreeSet::from(["name", "callback_url"]));
    assert_eq!(body["properties"]["timeout_seconds"]["maximum"], 300.0);
    assert!(body["properties"]["parameters"].is_object());
    // Errors: 422 and 404 in `{detail}`, the loopback 403.
    for status in ["403", "404", "422"] {
        let r = reg["responses"][status].to_string();
        assert!(r.contains("#/components/schemas/Detail"), "{status}: {r}");
    }
    let list = &doc["paths"]["/api/tools"]["get"];
    assert_eq!(list["parameters"][0]["name"], "role");
    assert_eq!(
        list["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ToolList"
    );
    assert!(list["responses"]["422"].is_null(), "a list reads no body");
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());

    // Real answers name exactly the documented fields.
    let (st, registered) = register(
        &s,
        json!({"name": "oa_tool", "callback_url": "http://127.0.0.1:9/x", "source": "oa"}),
    )
    .await;
    assert_eq!(st, 200, "{registered}");
    conforms(&doc, "Registered", &registered);
    // The list is written straight to bytes: it parses as the documented type.
    let body = s
        .http
        .get(s.url("/api/tools"))
        .send()
        .await
        .expect("answer")
        .bytes()
        .await
        .expect("body");
    let listed: ToolList = serde_json::from_slice(&body).expect("a ToolList");
    assert!(listed.ok);
    let entries: Vec<_> = listed.tools_by_role.values().flatten().collect();
    assert!(entries.iter().any(|t| t.name == "oa_tool"), "{entries:?}");
    let raw: Value = serde_json::from_slice(&body).expect("json");
    let first = raw["tools_by_role"]
        .as_object()
        .and_then(|m| m.values().find_map(|v| v.get(0)))
        .expect("an entry");
    conforms(&doc, "ToolEntry", first);
    let (_, removed) = s
        .post("/api/tools/unregister", json!({"name": "oa_tool"}))
        .await;
    conforms(&doc, "Unregistered", &removed);
    let (_, cleared) = s.post("/api/tools/clear", json!({"source": "oa"})).await;
    conforms(&doc, "Cleared", &cleared);
}

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
    let location = resolve(&doc, &entry["properties"]["location"]);
    assert_eq!(
        location["enum"],
        json!(["project", "user", "steam_workshop"])
    );
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

/// Properties and required fields of an object schema, through `$ref`s and `allOf`.
fn fields(doc: &Value, schema: &Value) -> (Vec<String>, Vec<String>) {
    let schema = resolve(doc, schema);
    let mut props: Vec<String> = properties(schema).iter().map(|p| p.to_string()).collect();
    let mut required: Vec<String> = schema["required"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for part in schema["allOf"].as_array().into_iter().flatten() {
        let (p, r) = fields(doc, part);
        props.extend(p);
        required.extend(r);
    }
    (props, required)
}

/// `answer` has only fields the 200 schema of `method path` names, and every
/// field it requires; returns the schema's properties.
fn conforms(doc: &Value, method: &str, path: &str, answer: &Value) -> Vec<String> {
    let schema =
        &doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"];
    let (props, required) = fields(doc, schema);
    let got = answer.as_object().unwrap();
    for k in got.keys() {
        assert!(props.contains(k), "{method} {path}: {k} is not described");
    }
    for r in &required {
        assert!(got.contains_key(r), "{method} {path}: required {r} missing");
    }
    props
}

/// The entry schema of a listing's array field `key`, checked against `entry`.
fn entry_conforms(doc: &Value, path: &str, key: &str, entry: &Value) {
    let schema =
        &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
    let items = &resolve(doc, schema)["properties"][key]["items"];
    let (props, required) = fields(doc, items);
    for k in entry.as_object().unwrap().keys() {
        assert!(
            props.contains(k),
            "{path}: entry field {k} is not described"
        );
    }
    for r in &required {
        assert!(entry.get(r).is_some(), "{path}: entry field {r} missing");
    }
}

#[tokio::test]
async fn real_answers_have_the_fields_the_document_describes() {
    let s = TestServer::start(&[companiond_avatars::FAMILY]).await;
    let (_, doc) = s.get("/openapi.json").await;

    let (st, b) = upload(&s, "/api/model/mmd/upload", "Miku.pmx", &pmx(16)).await;
    assert_eq!(st, 200, "{b}");
    conforms(&doc, "post", "/api/model/mmd/upload", &b);
    let (st, b) = upload(&s, "/api/model/mmd/upload_animation", "wave.vmd", &vmd()).await;
    assert_eq!(st, 200, "{b}");
    conforms(&doc, "post", "/api/model/mmd/upload_animation", &b);
    let zip = zip_of(&[("Rin/Rin.pmx", &pmx(8)), ("Rin/tex.png", b"png")]);
    let (st, b) = upload(&s, "/api/model/mmd/upload_zip", "Rin.zip", &zip).await;
    assert_eq!(st, 200, "{b}");
    conforms(&doc, "post", "/api/model/mmd/upload_zip", &b);

    for (path, key) in [
        ("/api/model/mmd/models", "models"),
        ("/api/model/mmd/animations", "animations"),
        ("/api/model/mmd/animations/list", "animations"),
    ] {
        let (st, b) = s.get(path).await;
        assert_eq!(st, 200, "{b}");
        conforms(&doc, "get", path, &b);
        let entries = b[key].as_array().unwrap();
        assert!(!entries.is_empty(), "{path}");
        entries
            .iter()
            .for_each(|e| entry_conforms(&doc, path, key, e));
    }
    let (_, b) = s.get("/api/model/mmd/config").await;
    conforms(&doc, "get", "/api/model/mmd/config", &b);
    let (_, b) = s.get("/api/model/mmd/emotion_mapping?model=Miku").await;
    conforms(&doc, "get", "/api/model/mmd/emotion_mapping", &b);

    let (st, b) = upload_pkg(
        &s,
        &[
            ("Pack/model.json", model_json("Cat", json!({}))),
            ("Pack/idle.png", png(2, 2, [1, 2, 3, 255])),
            ("Pack/img/talk.png", png(2, 2, [4, 5, 6, 255])),
        ],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    conforms(&doc, "post", "/api/model/pngtuber/upload_model", &b);
    let (st, b) = s.get("/api/model/pngtuber/models").await;
    assert_eq!(st, 200, "{b}");
    conforms(&doc, "get", "/api/model/pngtuber/models", &b);
    entry_conforms(
        &doc,
        "/api/model/pngtuber/models",
        "models",
        &b["models"][0],
    );
}

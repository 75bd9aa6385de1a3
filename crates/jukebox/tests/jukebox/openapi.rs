//! `/openapi.json` describes the jukebox routes, and the shapes written by
//! hand (the streamed config, records keyed `song`/`action`, batch items keyed
//! `songId`) match real answers (docs/jukebox.md § OpenAPI).

use crate::common::*;
use companiond_core::http::openapi::dangling_refs;

fn component<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let c = &doc["components"]["schemas"][name];
    assert!(c.is_object(), "{name} missing");
    c
}

fn ref_name(schema: &Value) -> String {
    schema["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or_else(|| panic!("not a $ref: {schema}"))
        .to_string()
}

fn ok_schema(doc: &Value, path: &str, method: &str) -> String {
    ref_name(
        &doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"],
    )
}

fn props(schema: &Value) -> Vec<String> {
    let mut p: Vec<String> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .cloned()
        .collect();
    p.sort();
    p
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    k.sort();
    k
}

/// Every key of `v` is a property of `schema`, and every required one is there.
fn conforms(schema: &Value, v: &Value) {
    let p = props(schema);
    for k in keys(v) {
        assert!(p.contains(&k), "{k} not in {p:?} ({v})");
    }
    for r in schema["required"].as_array().into_iter().flatten() {
        let r = r.as_str().expect("name");
        assert!(v.get(r).is_some(), "{r} missing from {v}");
    }
}

#[tokio::test]
async fn hand_written_answers_match_their_documented_shapes() {
    let s = plain().await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());

    // One upload: `{success, song}`; the record has the documented fields.
    let (st, one) = upload(&s, "songs", &[("a.wav", wav(100, 1, None, None))], None).await;
    assert_eq!(st, 200, "{one}");
    conforms(component(&doc, "JukeboxSongChanged"), &one);
    conforms(component(&doc, "JukeboxSong"), &one["song"]);
    assert_eq!(keys(&one["song"]), props(component(&doc, "JukeboxSong")));
    let id = one["song"]["id"].as_str().expect("id").to_string();
    let up = &doc["paths"]["/api/jukebox/songs"]["post"];
    assert_eq!(
        up["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["files"]
            ["format"],
        "binary"
    );
    // Several: each file's result.
    let (st, many) = upload(
        &s,
        "actions",
        &[("x.vmd", vmd("m")), ("y.txt", b"no".to_vec())],
        None,
    )
    .await;
    assert_eq!(st, 200, "{many}");
    conforms(component(&doc, "JukeboxActionUploads"), &many);
    conforms(component(&doc, "JukeboxActionChanged"), &many["results"][0]);
    conforms(component(&doc, "JukeboxUploadRefused"), &many["results"][1]);

    // The config streamed from cached parts has exactly the documented keys.
    let c = config(&s).await;
    assert_eq!(
        ok_schema(&doc, "/api/jukebox/config", "get"),
        "JukeboxConfig"
    );
    assert_eq!(keys(&c), props(component(&doc, "JukeboxConfig")));
    assert_eq!(
        keys(&c["md5Index"]),
        props(component(&doc, "JukeboxMd5Index"))
    );

    let (st, v) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{id}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let name = ok_schema(&doc, "/api/jukebox/songs/{song_id}/visibility", "put");
    assert_eq!(keys(&v), props(component(&doc, &name)));

    let (st, b) = s
        .post(&format!("{J}/songs/batch-delete"), json!({"songIds": [id]}))
        .await;
    assert_eq!(st, 200, "{b}");
    let name = ok_schema(&doc, "/api/jukebox/songs/batch-delete", "post");
    assert_eq!(keys(&b), props(component(&doc, &name)));
    conforms(component(&doc, "JukeboxSongItem"), &b["deleted"][0]);
    // Unknown ids: 404 with the structured detail, documented.
    let (st, nf) = s
        .post(
            &format!("{J}/songs/batch-delete"),
            json!({"songIds": ["nope"]}),
        )
        .await;
    assert_eq!(st, 404, "{nf}");
    let not_found = &doc["paths"]["/api/jukebox/songs/batch-delete"]["post"]["responses"]["404"];
    assert!(not_found["description"]
        .as_str()
        .is_some_and(|d| d.contains("songIds")));
}

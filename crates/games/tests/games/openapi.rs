//! The OpenAPI document lists every route of both families, and its schemas
//! name what the routes really read and answer.

use std::collections::BTreeSet;

use companiond_core::http::openapi::dangling_refs;
use serde_json::{json, Value};

use crate::common::{server, start};

#[tokio::test]
async fn every_route_is_in_openapi() {
    let s = server().await;
    let (_, doc) = s.get("/openapi.json").await;
    let paths = doc["paths"].as_object().expect("paths");
    let expected: &[(&str, &str)] = &[
        ("/api/game/logs", "get"),
        ("/api/game/logs", "post"),
        ("/api/game/logs/view", "get"),
        ("/api/game/logs/enable", "post"),
        ("/api/game/{game_type}/route/start", "post"),
        ("/api/game/{game_type}/route/state", "get"),
        ("/api/game/route/active", "get"),
        ("/api/game/{game_type}/route/drain", "post"),
        ("/api/game/{game_type}/route/voice-transcript", "post"),
        ("/api/game/{game_type}/route/heartbeat", "post"),
        ("/api/game/{game_type}/route/end", "post"),
        ("/api/game/{game_type}/passive-guard", "post"),
        ("/api/game/{game_type}/chat", "post"),
        ("/api/game/{game_type}/mirror-assistant", "post"),
        ("/api/game/{game_type}/speak", "post"),
        ("/api/game/{game_type}/realtime-context", "post"),
        ("/api/game/{game_type}/quick-lines", "post"),
        ("/api/game/{game_type}/character", "get"),
        ("/api/game/{game_type}/end", "post"),
        ("/api/game/{game_type}/leaderboard", "get"),
        ("/api/game/{game_type}/leaderboard", "post"),
        ("/api/icebreaker/route/start", "post"),
        ("/api/icebreaker/route/end", "post"),
        ("/api/icebreaker/route/state", "get"),
        ("/api/icebreaker/context", "post"),
        ("/api/icebreaker/free-text/interpret", "post"),
        ("/api/icebreaker/choice", "post"),
        ("/api/icebreaker/speak", "post"),
    ];
    for (p, m) in expected {
        assert!(
            paths.get(*p).and_then(|x| x.get(*m)).is_some(),
            "{m} {p} missing"
        );
    }
    assert_eq!(expected.len(), 28);
}

/// The properties and required fields of `schema`, through `$ref`s and `allOf`.
fn fields(doc: &Value, schema: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut props = BTreeSet::new();
    let mut required = BTreeSet::new();
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.trim_start_matches("#/components/schemas/");
        let target = &doc["components"]["schemas"][name];
        assert!(target.is_object(), "{r} does not resolve");
        return fields(doc, target);
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        let (p, r) = fields(doc, part);
        props.extend(p);
        required.extend(r);
    }
    if let Some(p) = schema["properties"].as_object() {
        props.extend(p.keys().cloned());
    }
    for r in schema["required"].as_array().into_iter().flatten() {
        required.insert(r.as_str().expect("name").to_string());
    }
    (props, required)
}

/// A real answer has every required field of `schema` and no field it does not name.
fn conforms(doc: &Value, schema: &Value, answer: &Value) {
    let (props, required) = fields(doc, schema);
    let keys: BTreeSet<String> = answer
        .as_object()
        .expect("object")
        .keys()
        .cloned()
        .collect();
    assert!(required.is_subset(&keys), "missing {:?}", &required - &keys);
    assert!(keys.is_subset(&props), "undocumented {:?}", &keys - &props);
}

#[tokio::test]
async fn the_route_start_is_typed_from_its_answer_to_its_body() {
    let s = server().await;
    let (_, doc) = s.get("/openapi.json").await;
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
    let op = &doc["paths"]["/api/game/{game_type}/route/start"]["post"];
    assert_eq!(op["operationId"], "games_start_route");
    assert_eq!(op["parameters"][0]["name"], "game_type");
    // The body names the character (required) and the page's signals.
    let body = &op["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(body["$ref"], "#/components/schemas/RouteStartBody");
    let (props, required) = fields(&doc, body);
    assert!(required.contains("persona_name"), "{required:?}");
    for f in [
        "session_id",
        "mode",
        "pageVisible",
        "visibilityState",
        "finalScore",
    ] {
        assert!(props.contains(f), "{f} missing from {props:?}");
    }
    // 200: the typed answer, or the family's `{ok:false, reason}` with its codes.
    let ok = &op["responses"]["200"]["content"]["application/json"]["schema"];
    assert_eq!(ok["anyOf"][0]["$ref"], "#/components/schemas/RouteStarted");
    let refused = ok["anyOf"][1].to_string();
    assert!(refused.contains("OkReason") && refused.contains("missing_persona_name"));
    let bad = op["responses"]["400"].to_string();
    assert!(bad.contains("not_a_game_route"), "{bad}");
    // The answer's `state` is a route (PublicRoute) or `{game_route_active:false}`.
    let state = &doc["components"]["schemas"]["RouteState"]["anyOf"];
    assert_eq!(state[0]["$ref"], "#/components/schemas/PublicRoute");
    // A real start answers exactly the documented fields: the route's own at the
    // top level (RouteStarted flattens a PublicRoute) and again as `state`.
    let started = start(&s, "soccer", "oa1").await;
    let route = json!({"$ref": "#/components/schemas/PublicRoute"});
    let mut top = started.clone();
    for k in ["ok", "state", "superseded"] {
        top.as_object_mut().expect("object").remove(k);
    }
    conforms(&doc, &route, &top);
    conforms(&doc, &route, &started["state"]);
}

#[tokio::test]
async fn the_icebreaker_answers_match_their_schemas() {
    let s = server().await;
    let (_, doc) = s.get("/openapi.json").await;
    let choice = |session: &str| {
        json!({"persona_name": "Companion", "session_id": session, "day": 1,
            "node_id": "n1", "choice": "a"})
    };
    let ice = json!({"persona_name": "Companion", "session_id": "i1"});
    // (route, body, schema of the answer, schema of a nested field)
    let calls = [
        (
            "route/start",
            ice.clone(),
            "IceStateAnswer",
            Some(("state", "IceState")),
        ),
        ("choice", choice("i1"), "ChoiceRecorded", None),
        ("choice", choice("other"), "StaleSession", None),
        ("route/end", ice, "IceEnded", Some(("ended", "EndedIce"))),
    ];
    for (route, body, name, nested) in calls {
        let (_, answer) = s.post_csrf(&format!("/api/icebreaker/{route}"), body).await;
        assert_eq!(answer["ok"], true, "{route}: {answer}");
        let schema = |n: &str| json!({"$ref": format!("#/components/schemas/{n}")});
        conforms(&doc, &schema(name), &answer);
        if let Some((field, inner)) = nested {
            conforms(&doc, &schema(inner), &answer[field]);
        }
    }
}

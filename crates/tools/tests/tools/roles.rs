//! Role targeting of register / unregister / clear, and `GET /api/tools` listing.

use companiond_core::testkit::{TestOptions, TestServer};
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn role_targeting_listing_and_clear() {
    let s = server().await;
    create_character(&s, "Alice").await;
    create_character(&s, "Bob").await;
    let url = "http://127.0.0.1:9/cb";

    // role null: every character that exists now.
    let (st, b) = register(
        &s,
        json!({"name": "global", "callback_url": url, "source": "plugin:x", "description": "d"}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b["ok"], true);
    assert_eq!(
        sorted(&b["affected_roles"]),
        vec!["Alice", "Bob", "Companion"]
    );
    assert_eq!(b["failed_roles"], json!([]));
    // Empty-string role counts as null.
    let (st, b) = register(
        &s,
        json!({"name": "global2", "callback_url": url, "source": "plugin:x", "role": ""}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(
        sorted(&b["affected_roles"]),
        vec!["Alice", "Bob", "Companion"]
    );
    // One role.
    let (st, b) = register(
        &s,
        json!({"name": "alice_only", "callback_url": url, "role": "Alice"}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(b["affected_roles"], json!(["Alice"]));

    // Unknown role: 404 on every route, nothing changes.
    let (st, b) = register(
        &s,
        json!({"name": "nope", "callback_url": url, "role": "Nobody"}),
    )
    .await;
    assert_eq!(st, 404);
    assert_eq!(b["detail"], "unknown role: Nobody");
    let (st, _) = s
        .post(
            "/api/tools/unregister",
            json!({"name": "global", "role": "Nobody"}),
        )
        .await;
    assert_eq!(st, 404);
    let (st, _) = s
        .post(
            "/api/tools/clear",
            json!({"source": "plugin:x", "role": "Nobody"}),
        )
        .await;
    assert_eq!(st, 404);
    let (st, _) = s.get("/api/tools?role=Nobody").await;
    assert_eq!(st, 404);

    // Listing: all roles, and one role.
    let (st, b) = s.get("/api/tools").await;
    assert_eq!(st, 200);
    assert_eq!(b["ok"], true);
    let by_role = b["tools_by_role"].as_object().expect("object");
    // The body written straight to bytes is the document the registry lists,
    // roles in character order.
    let expected: serde_json::Map<String, Value> = companiond_tools::registry::list(&s.state, None)
        .unwrap()
        .into_iter()
        .map(|(r, t)| (r, json!(t)))
        .collect();
    assert_eq!(by_role, &expected);
    assert_eq!(
        by_role.keys().collect::<Vec<_>>(),
        s.state.characters.names().iter().collect::<Vec<_>>()
    );
    let mut roles: Vec<&String> = by_role.keys().collect();
    roles.sort();
    assert_eq!(roles, vec!["Alice", "Bob", "Companion"]);
    assert_eq!(by_role["Alice"].as_array().map(Vec::len), Some(3));
    assert_eq!(by_role["Bob"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        by_role["Bob"][0],
        json!({"name": "global", "description": "d", "source": "plugin:x", "callback_url": url, "is_remote": true})
    );
    let (_, b) = s.get("/api/tools?role=Alice").await;
    assert_eq!(b["tools_by_role"].as_object().map(|m| m.len()), Some(1));
    assert_eq!(
        listed(&s, "Alice").await,
        vec!["global", "global2", "alice_only"]
    );

    // A character created after a null registration does not get it.
    create_character(&s, "Carol").await;
    assert!(listed(&s, "Carol").await.is_empty());

    // Unregister a global tool from one role only.
    let (st, b) = s
        .post(
            "/api/tools/unregister",
            json!({"name": "global", "role": "Bob"}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        b,
        json!({"ok": true, "removed": true, "name": "global", "affected_roles": ["Bob"], "failed_roles": []})
    );
    assert_eq!(listed(&s, "Bob").await, vec!["global2"]);
    assert_eq!(
        listed(&s, "Alice").await,
        vec!["global", "global2", "alice_only"]
    );
    // Unregister something absent.
    let (st, b) = s
        .post("/api/tools/unregister", json!({"name": "ghost"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], false);
    assert_eq!(b["ok"], true);
    assert_eq!(b["affected_roles"], json!([]));

    // Clear by source in one role, then everywhere.
    let (st, b) = s
        .post(
            "/api/tools/clear",
            json!({"source": "plugin:x", "role": "Alice"}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], 2);
    assert_eq!(b["affected_roles"], json!(["Alice"]));
    assert_eq!(listed(&s, "Alice").await, vec!["alice_only"]);
    let (st, b) = s
        .post("/api/tools/clear", json!({"source": "plugin:x"}))
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["removed"], 3); // Companion: global, global2; Bob: global2.
    assert_eq!(sorted(&b["affected_roles"]), vec!["Bob", "Companion"]);
    assert_eq!(b["source"], "plugin:x");
    assert_eq!(listed(&s, "Alice").await, vec!["alice_only"]);
    let (_, b) = s
        .post("/api/tools/clear", json!({"source": "plugin:x"}))
        .await;
    assert_eq!(b["removed"], 0);
    assert_eq!(b["ok"], true);

    // A deleted character is an unknown role.
    let (st, _) = s
        .send(
            axum::http::Method::DELETE,
            "/api/characters/profile/Alice",
            None,
        )
        .await;
    assert_eq!(st, 200);
    let (st, _) = s.get("/api/tools?role=Alice").await;
    assert_eq!(st, 404);
}

#[tokio::test]
async fn no_role_accepting_gives_ok_false() {
    // A data dir whose characters file holds no character at all.
    let s = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            prepare: Some(Box::new(|data, _| {
                std::fs::create_dir_all(data.join("config")).expect("mkdir");
                std::fs::write(
                    data.join("config/characters.json"),
                    br#"{"current": "", "characters": {}}"#,
                )
                .expect("write");
            })),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = register(
        &s,
        json!({"name": "t", "callback_url": "http://127.0.0.1:9/"}),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["ok"], false);
    assert_eq!(b["registered"], "t");
    assert_eq!(b["affected_roles"], json!([]));
    assert_eq!(b["failed_roles"], json!([]));
    assert!(b["error"].is_string());
    let (st, b) = s.get("/api/tools").await;
    assert_eq!(st, 200);
    assert_eq!(b, json!({"ok": true, "tools_by_role": {}}));
}

#[tokio::test]
async fn routes_are_listed_and_roles_are_url_decoded() {
    let s = server().await;
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, 200);
    for (path, method) in [
        ("/api/tools/register", "post"),
        ("/api/tools/unregister", "post"),
        ("/api/tools/clear", "post"),
        ("/api/tools", "get"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{path} {method}");
    }
    create_character(&s, "猫娘").await;
    create_character(&s, "Anna Lee").await;
    let (st, _) = register(
        &s,
        json!({"name": "t", "callback_url": "http://127.0.0.1:9/", "role": "猫娘"}),
    )
    .await;
    assert_eq!(st, 200);
    let (st, b) = s.get("/api/tools?role=%E7%8C%AB%E5%A8%98").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["tools_by_role"]["猫娘"][0]["name"], "t");
    let (st, b) = s.get("/api/tools?role=Anna+Lee").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["tools_by_role"]["Anna Lee"], json!([]));
    // An empty role parameter lists every role.
    let (st, b) = s.get("/api/tools?role=").await;
    assert_eq!(st, 200);
    assert_eq!(b["tools_by_role"].as_object().map(|m| m.len()), Some(3));
}

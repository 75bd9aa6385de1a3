//! Option bodies and character names of every route, refused before storage
//! is touched.

use crate::common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn bad_options_and_names_are_refused_before_touching_storage() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", json!({})).await;
    write_memory(&mem_dir(&s, "Mika"));

    for (path, body, param) in [
        ("upload", json!({"overwrite": "yes"}), "overwrite"),
        ("upload", json!({"overwrite": 1}), "overwrite"),
        (
            "download",
            json!({"overwrite": true, "force": "true"}),
            "force",
        ),
        (
            "download",
            json!({"backup_before_overwrite": null}),
            "backup_before_overwrite",
        ),
        ("download", json!({"overwrite": [true]}), "overwrite"),
    ] {
        let (st, b) = s
            .post(&format!("/api/cloudsave/character/Mika/{path}"), body)
            .await;
        assert_eq!(st, 400, "{b}");
        assert_envelope(&b, "INVALID_PARAMETER");
        assert_eq!(b["message_params"]["parameter"], param);
        assert_eq!(b["character_name"], "Mika");
    }
    for raw in ["{not json", "[true]", "\"overwrite\""] {
        let r = s
            .http
            .post(s.url("/api/cloudsave/character/Mika/upload"))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400);
        let b: Value = r.json().await.unwrap();
        assert_envelope(&b, "INVALID_JSON_BODY");
    }
    // An empty body means the defaults.
    let r = s
        .http
        .post(s.url("/api/cloudsave/character/Mika/upload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    // Hostile names never become storage keys.
    for raw in [
        "..", "%2E%2E", "a%2Fb", "a%5Cb", "%20Mika", "CON", "a%3Cb", "x..",
    ] {
        for (m, path) in [
            ("GET", format!("/api/cloudsave/character/{raw}")),
            ("POST", format!("/api/cloudsave/character/{raw}/upload")),
            ("POST", format!("/api/cloudsave/character/{raw}/download")),
        ] {
            let method = reqwest::Method::from_bytes(m.as_bytes()).unwrap();
            let r = s.http.request(method, s.url(&path)).send().await.unwrap();
            let status = r.status().as_u16();
            let b: Value = r.json().await.unwrap_or(Value::Null);
            // ".." segments are normalised away by some clients; whatever route
            // answers, it must not be a success.
            assert!(
                status == 400 || status == 404 || status == 405,
                "{raw}: {status} {b}"
            );
            if status == 400 {
                assert_envelope(&b, "NAME_AUDIT_FAILED");
            }
        }
    }
    let cloud = tree(&s.data.join("cloud"));
    assert_eq!(
        cloud
            .keys()
            .filter(|k| !k.starts_with("characters/Mika/"))
            .count(),
        0,
        "{:?}",
        cloud.keys()
    );

    // Unknown characters.
    let (st, b) = s.get("/api/cloudsave/character/Nobody").await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUDSAVE_CHARACTER_NOT_FOUND");
    assert_eq!(b["character_name"], "Nobody");
    let (st, b) = s
        .post("/api/cloudsave/character/Nobody/upload", json!({}))
        .await;
    assert_eq!(st, 404);
    assert_envelope(&b, "LOCAL_CHARACTER_NOT_FOUND");
    let (st, b) = s
        .post("/api/cloudsave/character/Nobody/download", json!({}))
        .await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUDSAVE_CHARACTER_NOT_FOUND");
    // Local only: 200 with a null cloud side.
    create_character(&s, "Solo", json!({})).await;
    let (st, b) = s.get("/api/cloudsave/character/Solo").await;
    assert_eq!(st, 200, "{b}");
    assert!(b["cloud_summary"].is_null());
    assert_eq!(b["item"]["relation_state"], "local_only");
    assert_eq!(b["sync_backend"], "local_directory");
    // Local exists, cloud does not: download says so.
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Solo/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 404);
    assert_envelope(&b, "CLOUD_CHARACTER_NOT_FOUND");

    // The five routes are in the OpenAPI listing.
    let (_, doc) = s.get("/openapi.json").await;
    for p in [
        "/api/cloudsave/summary",
        "/api/cloudsave/platform-autocloud-config",
        "/api/cloudsave/character/{name}",
        "/api/cloudsave/character/{name}/upload",
        "/api/cloudsave/character/{name}/download",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} missing from openapi");
    }
    let (st, cfg) = s.get("/api/cloudsave/platform-autocloud-config").await;
    assert_eq!(st, 200);
    assert_eq!(cfg["success"], true);
    assert_eq!(cfg["sync_backend"], "local_directory");
    let pa = &cfg["platform_autocloud"];
    for k in [
        "backend",
        "app_id",
        "has_snapshot",
        "snapshot_sequence_number",
        "snapshot_exported_at_utc",
        "manifest_fingerprint",
        "last_applied_manifest_fingerprint",
        "startup_import_required",
        "manual_download_required",
        "runtime_has_user_content",
        "last_successful_export_at",
        "last_successful_import_at",
        "source_launch",
        "steam_session_ready",
        "steam_launch_tracked",
        "steam_available",
        "steam_running",
        "steam_logged_on",
        "runtime_root",
        "cloudsave_root",
        "manifest_path",
        "manifest_exists",
        "recommended_paths",
        "current_platform_rule",
    ] {
        assert!(pa.get(k).is_some(), "platform_autocloud.{k} missing");
    }
    assert_eq!(pa["has_snapshot"], true);
    assert_eq!(pa["runtime_has_user_content"], true);
}

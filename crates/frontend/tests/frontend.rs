//! End to end over real HTTP and WebSocket: the original frontend's pages served
//! from `--frontend-dir` (small templates of our own), the routes the pages call,
//! and the original chat protocol with a loopback model.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::Method;
use companiond_core::testkit::{MockLlm, TestOptions, TestServer, CSRF};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const FAMILIES: &[companiond_core::server::Family] =
    &[companiond_system::FAMILY, companiond_frontend::FAMILY];
/// With the config family too (page_config).
const WITH_CONFIG: &[companiond_core::server::Family] = &[
    companiond_system::FAMILY,
    companiond_config::FAMILY,
    companiond_frontend::FAMILY,
];

fn front_of(bundle: &Path) -> PathBuf {
    bundle.parent().map(|p| p.join("front")).unwrap_or_default()
}

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A frontend folder of our own that uses the same template mechanisms as the
/// original pages: versions, `tojson`, `format`, `int`, escaping, `is defined`.
fn write_frontend(front: &Path) {
    write(
        front.join("templates/index.html"),
        "<html><body{% if initial_chat_surface_mode is defined and initial_chat_surface_mode %} data-mode=\"{{ initial_chat_surface_mode }}\"{% endif %}>\
         <script src=\"/static/js/app.js?v={{ static_asset_version }}\"></script>\
         <script>window.V = {{ react_chat_asset_version | tojson }}; window.L = {{ vrm_defaults | tojson }};</script></body></html>",
    );
    write(
        front.join("templates/model_manager.html"),
        "<input value=\"{{ \"%.2f\"|format(vrm_defaults.ambient) }}\"><i>{{ vrm_defaults.fill }}</i>\
         <option {{ 'selected' if vrm_defaults.toneMapping|int == 7 }}>7</option>",
    );
    write(
        front.join("templates/cloudsave_manager.html"),
        "<input id=\"lanlan_name\" value=\"{{ lanlan_name | e }}\"><b>{{ static_asset_version|default('0', true) }}</b>",
    );
    write(
        front.join("templates/memory_browser.html"),
        "<p>memory {{' + name + '}}</p>",
    );
    write(front.join("static/js/app.js"), "window.APP = 1;\n");
    write(
        front.join("static/mao/mao.model3.json"),
        r#"{"Version":3,"FileReferences":{"Moc":"mao.moc3"}}"#,
    );
    write(front.join("static/mao/motions/idle.motion3.json"), "{}");
    write(front.join("static/mao/expressions/smile.exp3.json"), "{}");
    write(front.join("static/vrm/project.vrm"), "glTF");
}

async fn start_front(llm: Option<&MockLlm>) -> TestServer {
    start_front_with(FAMILIES, llm).await
}

async fn start_front_with(
    families: &[companiond_core::server::Family],
    llm: Option<&MockLlm>,
) -> TestServer {
    let s = TestServer::start_with(
        families,
        TestOptions {
            edit: Some(Box::new(|o| o.frontend_dir = Some(front_of(&o.bundle_dir)))),
            prepare: Some(Box::new(|data, bundle| {
                write_frontend(&front_of(bundle));
                write(bundle.join("static/bundled-only.txt"), "from the bundle");
                write(
                    front_of(bundle).join("static/both.txt"),
                    "from the frontend",
                );
                write(bundle.join("static/both.txt"), "from the bundle");
                write(data.join("user_live2d/mine/mine.model3.json"), "{}");
                std::fs::create_dir_all(data.join("user_live2d/broken")).unwrap();
                write(data.join("user_vrm/avatar.vrm"), "glTF-user");
                write(data.join("user_vrm/animation/wave.vrma"), "anim");
            })),
            ..Default::default()
        },
    )
    .await;
    if let Some(llm) = llm {
        s.configure_llm(&llm.base()).await;
    }
    s
}

async fn text(s: &TestServer, path: &str) -> (u16, String, reqwest::header::HeaderMap) {
    let r = s.http.get(s.url(path)).send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, r.text().await.unwrap_or_default(), headers)
}

async fn send_json(s: &TestServer, method: Method, path: &str, body: Value) -> (u16, Value) {
    let r = s
        .http
        .request(method, s.url(path))
        .header("Origin", format!("http://127.0.0.1:{}", s.addr.port()))
        .json(&body)
        .send()
        .await
        .unwrap();
    companiond_core::testkit::split(r).await
}

#[tokio::test]
async fn pages_render_from_the_frontend_folder() {
    let s = start_front(None).await;
    let (st, html, h) = text(&s, "/").await;
    assert_eq!(st, 200);
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(html.contains("/static/js/app.js?v=companiond-"), "{html}");
    assert!(!html.contains("data-mode"));
    // Jinja2's tojson: sorted keys, ", " and ": " separators.
    assert!(
        html.contains(r#""ambient": 0.83, "bottom": 0.0, "exposure": 1.1"#),
        "{html}"
    );
    assert!(html.contains(r#""toneMapping": 7, "top": 0.0}"#), "{html}");
    let (_, compact, _) = text(&s, "/web_chat_compact").await;
    assert!(compact.contains("data-mode=\"compact\""));
    // A character's own main page.
    let (st, named, _) = text(&s, "/Companion").await;
    assert_eq!(st, 200);
    assert!(named.contains("window.V = \""));

    let (_, mm, _) = text(&s, "/model_manager").await;
    assert_eq!(
        mm,
        "<input value=\"0.83\"><i>0.0</i><option selected>7</option>"
    );
    let (_, l2d, _) = text(&s, "/l2d").await;
    assert_eq!(l2d, mm);

    let (_, cs, _) = text(&s, "/cloudsave_manager?lanlan_name=%3Cb%3E%22x%27").await;
    assert!(
        cs.starts_with("<input id=\"lanlan_name\" value=\"&lt;b&gt;&#34;x&#39;\">"),
        "{cs}"
    );
    let (_, mb, _) = text(&s, "/memory_browser").await;
    assert_eq!(mb, "<p>memory  + name + </p>");

    // A page whose template the folder lacks.
    let (st, body, _) = text(&s, "/api_key").await;
    assert_eq!(st, 404);
    assert!(body.contains("api_key_settings.html"));

    // The legacy redirect keeps the query.
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap();
    let r = no_redirect
        .get(s.url("/chara_manager?lanlan_name=Mika&x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 307);
    assert_eq!(
        r.headers()["location"],
        "/character_card_manager?lanlan_name=Mika&x=1"
    );

    // Static files: the frontend folder first, the bundle for the rest.
    let (st, js, _) = text(&s, "/static/js/app.js").await;
    assert_eq!((st, js.as_str()), (200, "window.APP = 1;\n"));
    assert_eq!(text(&s, "/static/both.txt").await.1, "from the frontend");
    assert_eq!(
        text(&s, "/static/bundled-only.txt").await.1,
        "from the bundle"
    );
    assert_eq!(text(&s, "/static/../templates/index.html").await.0, 404);
    assert_eq!(text(&s, "/static/%2e%2e/templates/index.html").await.0, 404);
    // User mounts.
    assert_eq!(text(&s, "/user_vrm/avatar.vrm").await.1, "glTF-user");
    assert_eq!(text(&s, "/user_vrm/animation/wave.vrma").await.1, "anim");
    assert_eq!(text(&s, "/user_live2d/mine/mine.model3.json").await.1, "{}");
    assert_eq!(
        text(&s, "/user_vrm/..%2f..%2fconfig/characters.json")
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn without_a_frontend_folder_no_page_is_served() {
    let s = TestServer::start(FAMILIES).await;
    for p in ["/", "/memory_browser", "/Companion", "/chara_manager"] {
        assert_eq!(text(&s, p).await.0, 404, "{p}");
    }
    // The routes the pages call are there anyway.
    let (st, b) = s.get("/api/storage/location/bootstrap").await;
    assert_eq!(st, 200);
    assert_eq!(b["blocking_reason"], "");
}

#[tokio::test]
async fn the_characters_document_carries_both_shapes() {
    let s = TestServer::start(FAMILIES).await;
    let (st, doc) = s.get("/api/characters").await;
    assert_eq!(st, 200);
    assert_eq!(doc["success"], true);
    assert_eq!(doc["current"], "Companion");
    assert_eq!(doc["characters"][0]["name"], "Companion");
    assert_eq!(doc["当前猫娘"], "Companion");
    assert_eq!(doc["主人"], json!({}));
    assert_eq!(doc["猫娘"]["Companion"]["model_type"], "live2d");
    assert!(doc["猫娘"]["Companion"].get("name").is_none());

    // The master profile.
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master",
        json!({"昵称": "x"}),
    )
    .await;
    assert_eq!(st, 400);
    let (st, r) = send_json(
        &s,
        Method::POST,
        "/api/characters/master",
        json!({"档案名": "Ash", "昵称": "A", "性别": ""}),
    )
    .await;
    assert_eq!((st, &r["success"]), (200, &json!(true)));
    let (_, doc) = s.get("/api/characters").await;
    assert_eq!(doc["主人"], json!({"档案名": "Ash", "昵称": "A"}));
}

#[tokio::test]
async fn card_manager_creates_edits_switches_and_deletes() {
    let s = TestServer::start(FAMILIES).await;
    let (st, r) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika", "性别": "女", "年龄": "", "_field_order": ["性别"]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["character_name"], "Mika");
    // A taken name gets a suffix.
    let (_, r2) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika"}),
    )
    .await;
    assert_eq!(r2["character_name"], "Mika(1)");
    let (st, bad) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "a/b"}),
    )
    .await;
    assert_eq!(st, 400);
    assert_eq!(bad["success"], false);

    // Bind a model, then save the form: user fields are replaced, the binding stays.
    let (st, r) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/l2d/Mika",
        json!({"model_type": "live3d", "vrm": "/user_vrm/avatar.vrm", "idle_animation": ["/user_vrm/animation/wave.vrma"]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    for bad in [
        json!({"model_type": "live3d", "vrm": "/user_vrm/../x.vrm"}),
        json!({"model_type": "live3d", "vrm": "https://evil/x.vrm"}),
        json!({"model_type": "live3d", "vrm": "/user_vrm/a.vrm", "mmd": "/user_mmd/a.pmx"}),
        json!({"model_type": "hologram"}),
    ] {
        let (st, r) = send_json(
            &s,
            Method::PUT,
            "/api/characters/catgirl/l2d/Mika",
            bad.clone(),
        )
        .await;
        assert_eq!(st, 400, "{bad} {r}");
        assert!(r["error"].as_str().is_some());
    }
    let (st, r) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/Mika",
        json!({"档案名": "Mika", "昵称": "Mi", "model_type": "live3d", "vrm": "/static/vrm/x.vrm", "_field_order": ["昵称"]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["ignored_reserved_fields"], json!(["vrm"]));
    let (_, doc) = s.get("/api/characters").await;
    let mika = &doc["猫娘"]["Mika"];
    assert_eq!(mika["昵称"], "Mi");
    assert!(mika.get("性别").is_none(), "replace semantics: {mika}");
    assert_eq!(mika["vrm"], "/user_vrm/avatar.vrm");
    assert_eq!(mika["live3d_sub_type"], "vrm");
    assert_eq!(
        mika["idleAnimations"],
        json!(["/user_vrm/animation/wave.vrma"])
    );
    assert_eq!(mika["_reserved"]["field_order"], json!(["昵称"]));
    assert_eq!(
        send_json(&s, Method::PUT, "/api/characters/catgirl/Nobody", json!({}))
            .await
            .0,
        404
    );

    // A foreign page cannot edit.
    let r = s
        .http
        .put(s.url("/api/characters/catgirl/Mika"))
        .header("Origin", "http://evil.example")
        .json(&json!({"昵称": "pwned"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // Switch, with the original's body.
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/current_catgirl",
        json!({"catgirl_name": "Mika"}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, cur) = s.get("/api/characters/current_catgirl").await;
    assert_eq!(cur["current_catgirl"], "Mika");
    assert_eq!(
        send_json(
            &s,
            Method::POST,
            "/api/characters/current_catgirl",
            json!({"catgirl_name": "Nobody"})
        )
        .await
        .0,
        404
    );
    // The current character cannot be deleted; another can.
    assert_eq!(
        send_json(
            &s,
            Method::DELETE,
            "/api/characters/catgirl/Mika",
            json!(null)
        )
        .await
        .0,
        400
    );
    let (st, _) = send_json(
        &s,
        Method::DELETE,
        "/api/characters/catgirl/Mika(1)",
        json!(null),
    )
    .await;
    assert_eq!(st, 200);
    let (_, doc) = s.get("/api/characters").await;
    assert!(doc["猫娘"].get("Mika(1)").is_none());

    // Per-character settings.
    let (_, vm) = s
        .get("/api/characters/catgirl/Mika/voice_mode_status")
        .await;
    assert_eq!(vm["is_current"], true);
    assert_eq!(vm["is_voice_mode"], false);
    let (_, vm) = s
        .get("/api/characters/catgirl/a%3Cb/voice_mode_status")
        .await;
    assert_eq!(vm["invalid_name"], true);
    let (_, mmd) = s.get("/api/characters/catgirl/Mika/mmd_settings").await;
    assert_eq!(mmd["settings"]["physics"]["strength"], 1.0);
    let (st, _) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/Mika/mmd_settings",
        json!({"physics": {"strength": 99}, "cursor_follow": {"enabled": false}}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, mmd) = s.get("/api/characters/catgirl/Mika/mmd_settings").await;
    assert_eq!(mmd["settings"]["physics"]["strength"], 10.0);
    assert_eq!(mmd["settings"]["cursorFollow"]["enabled"], false);
    assert_eq!(
        send_json(
            &s,
            Method::PUT,
            "/api/characters/catgirl/Mika/mmd_settings",
            json!({"physics": 3})
        )
        .await
        .0,
        400
    );
    assert_eq!(
        s.get("/api/characters/catgirl/Nobody/mmd_settings").await.0,
        404
    );

    // Language preference: CSRF-guarded like the original sends it.
    let (_, lp) = s
        .get("/api/characters/character/Mika/language-preference")
        .await;
    assert_eq!(lp["language"], "");
    let r = send_json(
        &s,
        Method::PUT,
        "/api/characters/character/Mika/language-preference",
        json!({"language": "ja"}),
    )
    .await;
    assert_eq!(r.0, 403);
    let r = s
        .csrf(
            Method::PUT,
            "/api/characters/character/Mika/language-preference",
        )
        .json(&json!({"language": "ja"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (_, lp) = s
        .get("/api/characters/character/Mika/language-preference")
        .await;
    assert_eq!(
        (lp["language"].as_str(), lp["effective_language"].as_str()),
        (Some("ja"), Some("ja"))
    );

    // Cards and voices.
    let (_, metas) = s.get("/api/characters/card-metas").await;
    assert_eq!(metas["metas"]["Mika"]["origin"], "self");
    assert_eq!(
        s.get("/api/characters/card-faces").await.1["names"],
        json!([])
    );
    assert_eq!(
        s.get("/api/characters/character-card/list").await.1["character_cards"],
        json!([])
    );
    assert_eq!(s.get("/api/characters/voices").await.1["voices"], json!({}));
    let (st, c) = send_json(
        &s,
        Method::POST,
        "/api/characters/clear_voice_ids",
        json!({}),
    )
    .await;
    assert_eq!((st, &c["cleared_count"]), (200, &json!(0)));
    let (_, ob) = s.get("/api/characters/persona-onboarding-state").await;
    assert_eq!(ob["state"]["status"], "completed");
}

#[tokio::test]
async fn model_lists_storage_and_unavailable_features() {
    let s = start_front(None).await;
    let (st, l2d) = s.get("/api/live2d/models").await;
    assert_eq!(st, 200);
    let arr = l2d.as_array().expect("a bare array");
    let names: Vec<&str> = arr.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["mao", "mine"]);
    assert_eq!(arr[0]["path"], "/static/mao/mao.model3.json");
    assert_eq!(arr[1]["path"], "/user_live2d/mine/mine.model3.json");
    let (_, simple) = s.get("/api/live2d/models?simple=true").await;
    assert_eq!(simple["models"], json!(["mao", "mine"]));
    let (_, user) = s.get("/api/live2d/user_models").await;
    let user = user["models"].as_array().unwrap().clone();
    assert!(user
        .iter()
        .any(|m| m["name"] == "broken" && m["broken"] == true));
    assert!(user
        .iter()
        .any(|m| m["type"] == "vrm" && m["path"] == "/user_vrm/avatar.vrm"));
    let (_, files) = s.get("/api/live2d/model_files/mao").await;
    assert_eq!(files["motion_files"], json!(["motions/idle.motion3.json"]));
    assert_eq!(
        files["expression_files"],
        json!(["expressions/smile.exp3.json"])
    );
    assert_eq!(s.get("/api/live2d/model_files/none").await.0, 404);
    let (_, vrm) = s.get("/api/model/vrm/models").await;
    let urls: Vec<&str> = vrm["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["url"].as_str())
        .collect();
    assert_eq!(urls, ["/static/vrm/project.vrm", "/user_vrm/avatar.vrm"]);
    let (_, anims) = s.get("/api/model/vrm/animations").await;
    assert_eq!(
        anims["animations"][0]["url"],
        "/user_vrm/animation/wave.vrma"
    );

    // Binding a Live2D model by folder name stores the path page_config serves.
    let (st, _) = send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/l2d/Companion",
        json!({"model_type": "live2d", "live2d": "mao"}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, cur) = s
        .get("/api/characters/current_live2d_model?catgirl_name=Companion")
        .await;
    assert_eq!(cur["model_name"], "mao");
    assert_eq!(cur["model_info"]["path"], "/static/mao/mao.model3.json");

    // Storage: the data dir is the one location.
    let (_, b) = s.get("/api/storage/location/bootstrap").await;
    assert_eq!(b["current_root"], s.data.to_string_lossy().as_ref());
    assert_eq!(b["selection_required"], false);
    let (_, stt) = s.get("/api/storage/location/status").await;
    assert_eq!(
        (stt["ok"].as_bool(), stt["ready"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(stt["completion_notice"]["completed"], false);
    let (st, _) = s.post("/api/storage/location/select", json!({})).await;
    assert_eq!(st, 403);
    let (st, r) = s.post_csrf("/api/storage/location/select", json!({})).await;
    assert_eq!((st, r["ok"].as_bool()), (409, Some(false)));
    assert_eq!(r["error_code"], "storage_relocation_unsupported");

    // Platform language without a platform.
    let (st, sl) = s.get("/api/config/steam_language").await;
    assert_eq!((st, sl["success"].as_bool()), (200, Some(false)));
    assert_eq!(sl["uiLanguage"], Value::Null);
    assert_eq!(sl["is_mainland_china"], false);

    // Features companiond does not have.
    assert_eq!(
        s.get("/api/agent/health").await,
        (
            502,
            json!({"success": false, "status": "down", "error": "companiond has no agent server"})
        )
    );
    assert_eq!(s.get("/api/agent/flags").await.0, 502);
    assert_eq!(s.get("/api/music/domains").await.1["domains"], json!([]));
    assert_eq!(
        s.get("/api/music/search?query=").await.1["error"],
        "EMPTY_QUERY"
    );
    let (_, w) = s.get("/api/widget-mode/state").await;
    assert_eq!(
        w["state"],
        json!({"enabled": false, "stealthEnabled": false})
    );
    assert_eq!(
        s.post("/api/widget-mode/enabled", json!({"enabled": true}))
            .await
            .0,
        403
    );
    assert_eq!(
        s.post_csrf("/api/widget-mode/enabled", json!({"enabled": "yes"}))
            .await
            .0,
        400
    );
    let (_, w) = s
        .post_csrf("/api/widget-mode/enabled", json!({"enabled": true}))
        .await;
    assert_eq!(w["state"]["enabled"], true);
    let (st, cd) = send_json(
        &s,
        Method::POST,
        "/api/card-drop/active-character",
        json!({"name": "Companion"}),
    )
    .await;
    assert_eq!((st, cd), (200, json!({"ok": true})));
    assert_eq!(
        s.get("/api/card-drop/active-character").await.1["name"],
        "Companion"
    );
    let (st, g) = send_json(
        &s,
        Method::POST,
        "/api/galgame/options",
        json!({"messages": []}),
    )
    .await;
    assert_eq!((st, &g["error"]), (400, &json!("no_assistant_turn")));
    let (st, g) = send_json(
        &s,
        Method::POST,
        "/api/galgame/options",
        json!({"messages": [{"role": "assistant", "text": "hi"}]}),
    )
    .await;
    assert_eq!((st, g["options"].as_array().map(Vec::len)), (200, Some(3)));
    let (st, items) = s.get("/api/steam/workshop/subscribed-items").await;
    assert_eq!((st, &items["items"]), (200, &json!([])));
    let (st, sync) = send_json(
        &s,
        Method::POST,
        "/api/steam/workshop/sync-characters",
        json!({}),
    )
    .await;
    assert_eq!((st, &sync["added"]), (200, &json!(0)));
    let (st, beacon) = send_json(&s, Method::POST, "/api/beacon/shutdown", json!({})).await;
    assert_eq!((st, beacon), (200, Value::Null));
    assert_eq!(
        s.get("/api/characters").await.0,
        200,
        "still running after the beacon"
    );
}

#[tokio::test]
async fn original_platform_and_guide_paths_are_aliases() {
    let s = TestServer::start(FAMILIES).await;
    let (a, b) = (
        s.get("/api/steam/list-achievements").await,
        s.get("/api/platform/list-achievements").await,
    );
    assert_eq!(a, b);
    assert_eq!(
        s.post("/api/steam/update-playtime", json!({"seconds": 5}))
            .await
            .0,
        403
    );
    // Same handler: the same answer (503 while no platform is configured).
    let (st, r) = s
        .post_csrf("/api/steam/update-playtime", json!({"seconds": 5}))
        .await;
    let (st2, r2) = s
        .post_csrf("/api/platform/update-playtime", json!({"seconds": 5}))
        .await;
    assert_eq!((st, &r["error_code"]), (st2, &r2["error_code"]), "{r}");
    assert_eq!(
        s.post_csrf("/api/steam/set-achievement-status/FIRST", json!({}))
            .await
            .0,
        s.post_csrf("/api/platform/set-achievement-status/FIRST", json!({}))
            .await
            .0
    );
    // A token made on the original path is consumed on the interface path.
    let (st, created) = s
        .post_csrf(
            "/api/yui-guide/handoff/create",
            json!({"page": "/memory_browser", "step": 1}),
        )
        .await;
    if st == 200 {
        let tok = created["token"].clone();
        let (st, _) = s
            .post_csrf("/api/guide/handoff/consume", json!({"token": tok}))
            .await;
        assert_eq!(st, 200);
    } else {
        // Whatever the body rules are, both paths judge it the same way.
        let (st2, _) = s
            .post_csrf(
                "/api/guide/handoff/create",
                json!({"page": "/memory_browser", "step": 1}),
            )
            .await;
        assert_eq!(st, st2);
    }
    assert_eq!(
        s.post("/api/yui-guide/handoff/create", json!({})).await.0,
        403
    );
}

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

/// A multipart body with one part `name` holding `bytes` as file `file_name`.
fn multipart(name: &str, file_name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "companiondTestBoundary7d1";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(s: &TestServer, path: &str, part: &str, file: &str, bytes: &[u8]) -> (u16, Value) {
    let (ct, body) = multipart(part, file, bytes);
    let r = s
        .http
        .post(s.url(path))
        .header("content-type", ct)
        .body(body)
        .send()
        .await
        .unwrap();
    companiond_core::testkit::split(r).await
}

#[tokio::test]
async fn rename_through_the_original_path_is_the_rename_transaction() {
    let s = start_front(None).await;
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika", "昵称": "mi"}),
    )
    .await;
    assert_eq!(st, 200);
    // Some history, as a chat would leave it.
    write(
        s.data.join("memory/Mika/recent.json"),
        r#"[{"type":"human","data":{"content":"hi Mika"}}]"#,
    );
    let (st, body) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Mika/rename",
        json!({"new_name": "Mimi"}),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["success"], true);
    let (_, doc) = s.get("/api/characters").await;
    assert!(doc["猫娘"].get("Mimi").is_some() && doc["猫娘"].get("Mika").is_none());
    assert_eq!(doc["猫娘"]["Mimi"]["昵称"], "mi");
    // The character's memory moved with it (the same transaction as the
    // interface's /api/characters/profile/{old_name}/rename).
    assert!(s.data.join("memory/Mimi/recent.json").is_file());
    assert!(!s.data.join("memory/Mika").exists());
    // Its errors: unknown old name, taken new name, no new name.
    let (st, body) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Nobody/rename",
        json!({"new_name": "Other"}),
    )
    .await;
    assert_eq!(st, 404, "{body}");
    assert_eq!(body["success"], false);
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Mimi/rename",
        json!({"new_name": "Companion"}),
    )
    .await;
    assert!(st == 400 || st == 409, "{st}");
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl/Mimi/rename",
        json!({}),
    )
    .await;
    assert_eq!(st, 400);
    // Refused from another site's page, like every character edit.
    let r = s
        .http
        .post(s.url("/api/characters/catgirl/Mimi/rename"))
        .header("Origin", "http://evil.example")
        .json(&json!({"new_name": "Evil"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // The master profile's name.
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master",
        json!({"档案名": "Ann"}),
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master/Ann/rename",
        json!({"new_name": "Anna"}),
    )
    .await;
    assert_eq!(st, 200);
    let (_, doc) = s.get("/api/characters").await;
    assert_eq!(doc["主人"]["档案名"], "Anna");
    let (st, _) = send_json(
        &s,
        Method::POST,
        "/api/characters/master/Ann/rename",
        json!({"new_name": "X"}),
    )
    .await;
    assert_eq!(st, 404);
}

#[tokio::test]
async fn the_default_model_parameters_voices_and_agent_capabilities() {
    let s = start_front_with(WITH_CONFIG, None).await;
    let front = front_of(&s.bundle);
    // Unbound, with no default model anywhere: success false.
    let (_, cur) = s
        .get("/api/characters/current_live2d_model?catgirl_name=Companion")
        .await;
    assert_eq!(cur["success"], false);
    assert_eq!(cur["model_name"], "yui-lolita");
    // page_config's fallback path is the bundle layout's.
    let (_, pc) = s.get("/api/config/page_config").await;
    assert_eq!(
        pc["model_path"],
        "/static/live2d/yui-lolita/yui-lolita.model3.json"
    );
    // The original layout keeps the default model directly under static/.
    write(
        front.join("static/yui-lolita/yui-lolita.model3.json"),
        r#"{"Version":3}"#,
    );
    write(
        front.join("static/yui-lolita/yui-lolita.cdi3.json"),
        r#"{"Parameters":[{"Id":"ParamAngleX","GroupId":"G1","Name":"Angle X"},{"Id":"ParamEyeOpen"}],
            "ParameterGroups":[{"Id":"G1","Name":"Head"}]}"#,
    );
    let (_, cur) = s
        .get("/api/characters/current_live2d_model?catgirl_name=Companion")
        .await;
    assert_eq!(cur["success"], true, "{cur}");
    assert_eq!(cur["model_info"]["is_fallback"], true);
    assert_eq!(
        cur["model_info"]["path"],
        "/static/yui-lolita/yui-lolita.model3.json"
    );
    let (_, pc) = s.get("/api/config/page_config").await;
    assert_eq!(
        pc["model_path"],
        "/static/yui-lolita/yui-lolita.model3.json"
    );
    // A bound model is not a fallback.
    send_json(
        &s,
        Method::PUT,
        "/api/characters/catgirl/l2d/Companion",
        json!({"model_type": "live2d", "live2d": "mao"}),
    )
    .await;
    let (_, cur) = s.get("/api/characters/current_live2d_model").await;
    assert_eq!(cur["model_name"], "mao");
    assert!(cur["model_info"].get("is_fallback").is_none());

    // Saved parameters: {} until the editor saved some; the cdi3 parameter list.
    let (st, p) = s.get("/api/live2d/load_model_parameters/yui-lolita").await;
    assert_eq!((st, p), (200, json!({"success": true, "parameters": {}})));
    write(
        front.join("static/yui-lolita/parameters.json"),
        r#"{"ParamAngleX": 12.5}"#,
    );
    let (_, p) = s.get("/api/live2d/load_model_parameters/yui-lolita").await;
    assert_eq!(p["parameters"]["ParamAngleX"], 12.5);
    let (st, p) = s.get("/api/live2d/load_model_parameters/nothing").await;
    assert_eq!(st, 200);
    assert_eq!(p["success"], false);
    let (_, p) = s.get("/api/live2d/model_parameters/yui-lolita").await;
    assert_eq!(p["success"], true);
    assert_eq!(
        p["parameters"],
        json!([{"id": "ParamAngleX", "groupId": "G1", "name": "Angle X"},
               {"id": "ParamEyeOpen", "groupId": "", "name": "ParamEyeOpen"}])
    );
    assert_eq!(p["parameter_groups"]["G1"]["name"], "Head");
    let (_, p) = s.get("/api/live2d/model_parameters/mao").await;
    assert_eq!(p["success"], false);

    // Custom voices: the original's "not enabled" answer the card form reads.
    let (st, v) = s
        .get("/api/characters/custom_tts_voices?provider=gptsovits")
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["success"], false);
    assert_eq!(v["code"], "GPTSOVITS_NOT_ENABLED");
    assert_eq!(v["voices"], json!([]));

    // Agent capabilities without an agent server.
    let (st, a) = s.get("/api/agent/openclaw/availability").await;
    assert_eq!(st, 502);
    assert_eq!(a["ready"], false);
    let (st, a) = s.get("/api/agent/mcp/availability").await;
    assert_eq!((st, a["ready"].clone()), (200, json!(false)));
}

#[tokio::test]
async fn vrm_models_and_animations_are_uploaded_listed_and_deleted() {
    let s = start_front(None).await;
    let (st, up) = upload(
        &s,
        "/api/model/vrm/upload",
        "file",
        "Tiny.vrm",
        b"glTF-tiny",
    )
    .await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["model_url"], "/user_vrm/Tiny.vrm");
    assert_eq!(up["model_name"], "Tiny");
    assert_eq!(up["file_size"], 9);
    let (_, vrm) = s.get("/api/model/vrm/models").await;
    assert!(vrm["models"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["url"] == "/user_vrm/Tiny.vrm" && m["location"] == "user"));
    let (st, body, _) = text(&s, "/user_vrm/Tiny.vrm").await;
    assert_eq!((st, body.as_str()), (200, "glTF-tiny"));
    // Taken name, wrong extension, no file part, a path in the name.
    let (st, e) = upload(&s, "/api/model/vrm/upload", "file", "Tiny.vrm", b"other").await;
    assert_eq!(st, 400, "{e}");
    assert_eq!(
        std::fs::read(s.data.join("user_vrm/Tiny.vrm")).unwrap(),
        b"glTF-tiny"
    );
    assert_eq!(
        upload(&s, "/api/model/vrm/upload", "file", "x.txt", b"x")
            .await
            .0,
        400
    );
    assert_eq!(
        upload(&s, "/api/model/vrm/upload", "other", "y.vrm", b"x")
            .await
            .0,
        400
    );
    let (st, up) = upload(&s, "/api/model/vrm/upload", "file", "../../evil.vrm", b"x").await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["model_url"], "/user_vrm/evil.vrm");
    assert!(!s.data.join("evil.vrm").exists());
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(s.data.join("user_vrm"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());

    let (st, up) = upload(
        &s,
        "/api/model/vrm/upload_animation",
        "file",
        "Bow.vrma",
        b"anim",
    )
    .await;
    assert_eq!(st, 200, "{up}");
    assert_eq!(up["file_path"], "/user_vrm/animation/Bow.vrma");
    let (_, anims) = s.get("/api/model/vrm/animations").await;
    assert!(anims["animations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["url"] == "/user_vrm/animation/Bow.vrma"));
    assert_eq!(
        upload(
            &s,
            "/api/model/vrm/upload_animation",
            "file",
            "Bow.vrm",
            b"x"
        )
        .await
        .0,
        400
    );

    // Delete: only imported top-level models.
    for bad in [
        "/static/vrm/project.vrm",
        "/user_vrm/../x.vrm",
        "/user_vrm/a/b.vrm",
    ] {
        let (st, _) = send_json(
            &s,
            Method::DELETE,
            "/api/model/vrm/model",
            json!({"url": bad}),
        )
        .await;
        assert_eq!(st, 400, "{bad}");
    }
    let (st, _) = send_json(
        &s,
        Method::DELETE,
        "/api/model/vrm/model",
        json!({"url": "/user_vrm/Nope.vrm"}),
    )
    .await;
    assert_eq!(st, 404);
    let (st, _) = send_json(
        &s,
        Method::DELETE,
        "/api/model/vrm/model",
        json!({"url": "/user_vrm/Tiny.vrm"}),
    )
    .await;
    assert_eq!(st, 200);
    assert!(!s.data.join("user_vrm/Tiny.vrm").exists());
    // An upload from another site's page is refused.
    let (ct, body) = multipart("file", "Cross.vrm", b"x");
    let r = s
        .http
        .post(s.url("/api/model/vrm/upload"))
        .header("content-type", ct)
        .header("Origin", "http://evil.example")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(!s.data.join("user_vrm/Cross.vrm").exists());
}

// ------------------------------------------------------------------ chat

async fn connect(s: &TestServer, name: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(s.ws_url(&format!("/ws/{name}")))
        .await
        .expect("connect");
    ws
}

async fn next_frame(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(15), ws.next())
            .await
            .expect("frame in time")
            .expect("socket open")
            .expect("frame");
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).expect("JSON frame");
        }
    }
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string())).await.unwrap();
}

/// Nothing arrives within `ms`.
async fn quiet(ws: &mut Ws, ms: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(ms), ws.next())
        .await
        .is_err()
}

#[tokio::test]
async fn the_original_chat_protocol_streams_a_text_exchange() {
    let llm = MockLlm::start("Hello there, friend!").await;
    let s = start_front(Some(&llm)).await;
    let mut ws = connect(&s, "Companion").await;
    // Open-time status frames: accepted silently, and no greeting is sent.
    send(
        &mut ws,
        json!({"action": "voice_input_control", "event": "lease_sync", "engaged": false}),
    )
    .await;
    send(
        &mut ws,
        json!({"action": "capture_bridge_status", "available": false, "capabilities": {}}),
    )
    .await;
    send(
        &mut ws,
        json!({"action": "language_update", "language": "en"}),
    )
    .await;
    send(
        &mut ws,
        json!({"action": "greeting_check", "is_switch": false}),
    )
    .await;
    assert!(quiet(&mut ws, 600).await, "the server must stay silent");
    send(&mut ws, json!({"action": "ping"})).await;
    assert_eq!(next_frame(&mut ws).await, json!({"type": "pong"}));

    send(&mut ws, json!({"action": "start_session", "input_type": "text", "new_session": false, "request_id": "R1"})).await;
    assert_eq!(
        next_frame(&mut ws).await,
        json!({"type": "session_started", "input_mode": "text", "request_id": "R1"})
    );
    send(&mut ws, json!({"action": "stream_data", "input_type": "text", "data": "Hi!", "request_id": "req-1-a"})).await;
    let mut reply = String::new();
    let mut first = true;
    let end = loop {
        let f = next_frame(&mut ws).await;
        match f["type"].as_str() {
            Some("gemini_response") => {
                assert_eq!(f["isNewMessage"], first, "{f}");
                assert_eq!(f["request_id"], "req-1-a");
                assert!(f["turn_id"].is_string());
                first = false;
                reply.push_str(f["text"].as_str().unwrap());
            }
            Some("system") => break f,
            other => panic!("unexpected frame {other:?}: {f}"),
        }
    };
    assert_eq!(reply, "Hello there, friend!");
    assert_eq!(
        end,
        json!({"type": "system", "data": "turn end", "request_id": "req-1-a"})
    );

    // A voice start is refused so the page stays on text; unknown actions are named.
    send(
        &mut ws,
        json!({"action": "start_session", "input_type": "audio", "request_id": "R2"}),
    )
    .await;
    let st = next_frame(&mut ws).await;
    assert_eq!(st["type"], "status");
    let msg: Value = serde_json::from_str(st["message"].as_str().unwrap()).unwrap();
    assert_eq!(msg["code"], "SESSION_START_FAILED");
    assert_eq!(next_frame(&mut ws).await["type"], "session_failed");
    send(&mut ws, json!({"action": "fly"})).await;
    let st = next_frame(&mut ws).await;
    assert!(st["message"].as_str().unwrap().contains("UNKNOWN_ACTION"));

    // The exchange landed in the history like a companiond-protocol turn.
    let hist = std::fs::read_to_string(s.data.join("memory/Companion/recent.json")).unwrap();
    assert!(
        hist.contains("Hi!") && hist.contains("Hello there, friend!"),
        "{hist}"
    );

    // A switch reaches the open socket in the original's shape.
    send_json(
        &s,
        Method::POST,
        "/api/characters/catgirl",
        json!({"档案名": "Mika"}),
    )
    .await;
    send_json(
        &s,
        Method::POST,
        "/api/characters/current_catgirl",
        json!({"catgirl_name": "Mika"}),
    )
    .await;
    assert_eq!(
        next_frame(&mut ws).await,
        json!({"type": "catgirl_switched", "new_catgirl": "Mika", "old_catgirl": "Companion"})
    );
}

#[tokio::test]
async fn a_model_failure_settles_the_original_page() {
    let s = start_front(None).await; // no provider configured
    let mut ws = connect(&s, "Companion").await;
    send(
        &mut ws,
        json!({"action": "stream_data", "input_type": "text", "data": "Hi", "request_id": "R9"}),
    )
    .await;
    let st = next_frame(&mut ws).await;
    assert_eq!(st["type"], "status", "{st}");
    assert!(st["message"]
        .as_str()
        .unwrap()
        .contains("API_UNKNOWN_ERROR"));
    assert_eq!(
        next_frame(&mut ws).await,
        json!({"type": "system", "data": "turn end", "request_id": "R9"})
    );
}

#[tokio::test]
async fn companiond_clients_keep_their_protocol() {
    let llm = MockLlm::start("native reply").await;
    let s = start_front(Some(&llm)).await;
    let mut ws = connect(&s, "Companion").await;
    let hello = next_frame(&mut ws).await;
    assert_eq!(hello["type"], "session_started");
    assert_eq!(hello["persona_name"], "Companion");
    send(&mut ws, json!({"type": "user_text", "text": "yo"})).await;
    let mut text = String::new();
    loop {
        let f = next_frame(&mut ws).await;
        match f["type"].as_str() {
            Some("assistant_delta") => text.push_str(f["text"].as_str().unwrap()),
            Some("turn_end") => break,
            _ => {}
        }
    }
    assert_eq!(text, "native reply");
    // A client that speaks first still gets the greeting first.
    let mut ws2 = connect(&s, "Companion").await;
    send(&mut ws2, json!({"type": "ping"})).await;
    assert_eq!(next_frame(&mut ws2).await["type"], "session_started");
    assert_eq!(next_frame(&mut ws2).await["type"], "pong");
    let _ = CSRF;
}

//! The original pages rendered from `--frontend-dir`, and none without it.

use crate::common::*;

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

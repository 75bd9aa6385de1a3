//! The original platform and guide aliases; default model parameters, voices and agent capabilities.

use crate::common::*;

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

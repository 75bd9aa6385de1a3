//! `GET /api/config/page_config`.

use crate::common::*;

#[tokio::test]
async fn page_config_resolves_models_and_carries_csrf() {
    let s = TestServer::start_with(
        &[companiond_config::FAMILY],
        TestOptions {
            prepare: Some(Box::new(|data, bundle| {
                std::fs::create_dir_all(data.join("user_vrm")).unwrap();
                std::fs::write(data.join("user_vrm/my model.vrm"), b"vrm").unwrap();
                std::fs::create_dir_all(data.join("user_mmd/m")).unwrap();
                std::fs::write(data.join("user_mmd/m/m.pmx"), b"pmx").unwrap();
                std::fs::create_dir_all(data.join("user_pngtuber/p")).unwrap();
                std::fs::write(data.join("user_pngtuber/p/idle.png"), b"png").unwrap();
                std::fs::create_dir_all(bundle.join("static/live2d/hiyori")).unwrap();
                std::fs::write(
                    bundle.join("static/live2d/hiyori/hiyori.model3.json"),
                    b"{}",
                )
                .unwrap();
            })),
            ..Default::default()
        },
    )
    .await;
    let (_, h, v) = get_with_headers(&s, "/api/config/page_config").await;
    assert!(h["cache-control"].to_str().unwrap().contains("no-store"));
    assert_eq!(v["success"], json!(true));
    assert_eq!(v["csrf_token"], json!(CSRF));
    assert_eq!(v["persona_name"], json!("Companion"));
    assert_eq!(v["model_type"], json!("live2d"));
    for (name, profile) in [
        (
            "Vee",
            json!({"name": "Vee", "model_type": "vrm", "vrm": "my model.vrm", "lighting": {"ambient": 0.5}}),
        ),
        (
            "Emm",
            json!({"name": "Emm", "avatar": {"model_type": "live3d", "mmd": {"model_path": "/user_mmd/m/m.pmx"}}}),
        ),
        (
            "Pee",
            json!({"name": "Pee", "model_type": "pngtuber", "pngtuber": {"idle_image": "p/idle.png", "talking_image": "p/missing.png", "sad_image": "../../etc/passwd.png"}}),
        ),
        ("Ell", json!({"name": "Ell", "live2d": "hiyori"})),
    ] {
        let (st, v) = s.post("/api/characters/profile", profile).await;
        assert_eq!(st, 200, "{name}: {v}");
    }
    let (_, v) = s.get("/api/config/page_config?persona_name=Vee").await;
    assert_eq!(v["model_type"], json!("live3d"));
    assert_eq!(v["live3d_sub_type"], json!("vrm"));
    assert_eq!(v["model_path"], json!("/user_vrm/my%20model.vrm"));
    assert_eq!(v["lighting"], json!({"ambient": 0.5}));
    let (_, v) = s.get("/api/config/page_config?lanlan_name=Emm").await;
    assert_eq!(v["live3d_sub_type"], json!("mmd"));
    assert_eq!(v["model_path"], json!("/user_mmd/m/m.pmx"));
    let (_, v) = s.get("/api/config/page_config?persona_name=Pee").await;
    assert_eq!(v["model_type"], json!("pngtuber"));
    assert_eq!(v["model_path"], json!("/user_pngtuber/p/idle.png"));
    assert_eq!(v["pngtuber"]["talking_image"], json!(""));
    assert_eq!(v["pngtuber"]["sad_image"], json!(""));
    assert!(v.get("live3d_sub_type").is_none());
    let (_, v) = s.get("/api/config/page_config?persona_name=Ell").await;
    assert_eq!(
        v["model_path"],
        json!("/static/live2d/hiyori/hiyori.model3.json")
    );
    assert_eq!(v["model_paths"]["vrm"], json!(""));
    let (st, v) = s.get("/api/config/page_config?persona_name=Nobody").await;
    assert_eq!(st, 200);
    assert_eq!(v["character_exists"], json!(false));
    assert_eq!(v["csrf_token"], json!(CSRF));
}

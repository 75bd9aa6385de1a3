//! `/api/config/preferences` and `/api/config/preferences/set-preferred`.

use crate::common::*;

#[tokio::test]
async fn preferences_save_merge_and_order() {
    let s = server().await;
    let (st, v) = s.get("/api/config/preferences").await;
    assert_eq!((st, v), (200, json!([])));
    let rec = |p: &str, x: f64| json!({"model_path": p, "position": {"x": x, "y": 2}, "scale": {"x": 1, "y": 1}});
    for bad in [
        json!({}),
        json!({"model_path": "a", "position": {"x": 1}, "scale": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": [1, 2], "scale": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": {"x": "1", "y": 1}, "scale": {"x": 1, "y": 1}}),
        json!({"model_path": "a", "position": {"x": 1, "y": 1}, "scale": {"x": 1, "y": 1}, "parameters": [1]}),
        json!({"model_path": "__global_conversation__", "position": {"x": 1, "y": 1}, "scale": {"x": 1, "y": 1}}),
    ] {
        let (st, v) = s.post("/api/config/preferences", bad.clone()).await;
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["success"], json!(false));
        assert!(v["error"].is_string());
    }
    assert!(!s.data.join("config/preferences.json").exists());
    let mut first = rec("a/a.model3.json", 1.0);
    first["parameters"] = json!({"ParamAngleX": 3.5});
    first["viewport"] = json!({"width": 800, "height": 600});
    let (st, v) = s.post("/api/config/preferences", first).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["success"], json!(true));
    let (st, _) = s.post("/api/config/preferences", rec("b.vrm", 5.0)).await;
    assert_eq!(st, 200);
    let (_, list) = s.get("/api/config/preferences").await;
    assert_eq!(list[0]["model_path"], json!("b.vrm"));
    assert_eq!(list[1]["model_path"], json!("a/a.model3.json"));
    // Update in place keeps its position and carries over absent optional fields;
    // an invalid viewport is dropped (the old one stays).
    let mut upd = rec("a/a.model3.json", 9.0);
    upd["viewport"] = json!({"width": -1, "height": 5});
    let (st, _) = s.post("/api/config/preferences", upd).await;
    assert_eq!(st, 200);
    let (_, list) = s.get("/api/config/preferences").await;
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(list[1]["position"]["x"], json!(9.0));
    assert_eq!(list[1]["parameters"], json!({"ParamAngleX": 3.5}));
    assert_eq!(list[1]["viewport"], json!({"width": 800, "height": 600}));
    // set-preferred moves it to the front.
    let (st, v) = s
        .post(
            "/api/config/preferences/set-preferred",
            json!({"model_path": "a/a.model3.json"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let (_, list) = s.get("/api/config/preferences").await;
    assert_eq!(list[0]["model_path"], json!("a/a.model3.json"));
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("config/preferences.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk, list);
    let (st, v) = s
        .post(
            "/api/config/preferences/set-preferred",
            json!({"model_path": "nope"}),
        )
        .await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["success"], json!(false));
    let (st, _) = s
        .post("/api/config/preferences/set-preferred", json!({}))
        .await;
    assert_eq!(st, 400);
}

//! `GET /api/survey` and `POST /api/survey/submit`.

use crate::common::*;

#[tokio::test]
async fn survey_delivery_submit_and_upload() {
    let up = Upstream::start(
        axum::Router::new().route("/api/v1/survey", axum::routing::post(|| async { "ok" })),
    )
    .await;
    let upload_url = up.base.clone();
    let s = server_with(move |_, bundle| {
        write(&bundle.join("achievements.json"), br#"["ACH_A"]"#);
        write(
            &bundle.join(format!("surveys/{VERSION}.json")),
            &survey_file(),
        );
        let mut en: Value = serde_json::from_slice(&survey_file()).unwrap();
        en["title"] = json!("English survey");
        write(
            &bundle.join(format!("surveys/en/{VERSION}.json")),
            &serde_json::to_vec(&en).unwrap(),
        );
        write(
            &bundle.join("surveys/config.json"),
            &serde_json::to_vec(&json!({"upload_url": upload_url, "upload_key": "k"})).unwrap(),
        );
    })
    .await;
    let (code, v) = s.get("/api/survey?lang=fr").await;
    assert_eq!(code, 200);
    assert_eq!(v["has_survey"], true, "{v}");
    assert_eq!(v["survey_version"], VERSION);
    assert_eq!(v["survey"]["title"], "English survey");
    assert_eq!(
        v["survey"]["survey_version"], VERSION,
        "the server's own version wins"
    );
    let (_, v) = s.get("/api/survey?lang=zh-CN").await;
    assert_eq!(v["survey"]["title"], "How are we doing?");

    // Opt-out disables delivery.
    write(
        &s.data.join("config/reporting.json"),
        br#"{"do_not_track": true}"#,
    );
    let (_, v) = s.get("/api/survey").await;
    assert_eq!(v["has_survey"], false);
    std::fs::remove_file(s.data.join("config/reporting.json")).unwrap();

    let answers = json!({"q1": "y", "long": "x".repeat(5000), "nested": {"a": 1},
                         "list": (0..80).collect::<Vec<_>>(), "survey_version": "9.9.9"});
    let (code, v) = s
        .post_csrf(
            "/api/survey/submit",
            json!({"action": "submit", "answers": answers, "survey_version": "9.9.9"}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["uploaded"], true);
    let reqs = up.requests_to("/api/v1/survey");
    assert_eq!(reqs.len(), 1);
    let sent = reqs[0].json();
    assert_eq!(sent["survey_version"], VERSION);
    assert_eq!(sent["answers"]["q1"], "y");
    assert_eq!(sent["answers"]["long"].as_str().unwrap().len(), 2000);
    assert!(sent["answers"].get("nested").is_none());
    assert_eq!(sent["answers"]["list"].as_array().unwrap().len(), 50);
    assert_eq!(reqs[0].headers["x-survey-signature"].len(), 64);

    // Submitted: no longer delivered.
    let (_, v) = s.get("/api/survey").await;
    assert_eq!(v["has_survey"], false);
    let (code, v) = s
        .post_csrf("/api/survey/submit", json!({"action": "skip"}))
        .await;
    assert_eq!((code, v["uploaded"].as_bool()), (200, Some(true)));
    assert_eq!(
        up.requests_to("/api/v1/survey")[1].json()["answers"],
        json!({})
    );
    let (code, _) = s
        .post_csrf("/api/survey/submit", json!({"answers": "not an object"}))
        .await;
    assert_eq!(code, 400, "a field of another type is refused");
    let (code, _) = s
        .csrf(Method::POST, "/api/survey/submit")
        .header("content-type", "application/json")
        .body("[1]")
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(code, 400);
}

#[tokio::test]
async fn survey_offline_filters_and_no_platform() {
    let plain = server_with(|_, bundle| {
        write(
            &bundle.join(format!("surveys/{VERSION}.json")),
            &survey_file(),
        );
    })
    .await;
    let (_, v) = plain.get("/api/survey").await;
    assert_eq!(v["has_survey"], false, "not a platform user");

    let s = server_with(|_, bundle| {
        write(&bundle.join("achievements.json"), br#"["ACH_A"]"#);
        let mut f: Value = serde_json::from_slice(&survey_file()).unwrap();
        f["locales"] = json!(["de"]);
        write(
            &bundle.join(format!("surveys/{VERSION}.json")),
            &serde_json::to_vec(&f).unwrap(),
        );
        f["locales"] = Value::Null;
        f["expires_at"] = json!("2001-01-01");
        write(
            &bundle.join(format!("surveys/fr/{VERSION}.json")),
            &serde_json::to_vec(&f).unwrap(),
        );
        // A closed port: the upload fails, the submit still succeeds.
        write(
            &bundle.join("surveys/config.json"),
            br#"{"upload_url": "http://127.0.0.1:9"}"#,
        );
    })
    .await;
    let (_, v) = s.get("/api/survey?lang=de").await;
    assert_eq!(v["has_survey"], true);
    let (_, v) = s.get("/api/survey?lang=en").await;
    assert_eq!(v["has_survey"], false, "locale filter");
    let (_, v) = s.get("/api/survey?lang=fr").await;
    assert_eq!(v["has_survey"], false, "expired");
    let (code, v) = s
        .post_csrf("/api/survey/submit", json!({"answers": {"q1": "y"}}))
        .await;
    assert_eq!(
        (code, v["ok"].as_bool(), v["uploaded"].as_bool()),
        (200, Some(true), Some(false))
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("state/survey.json")).unwrap()).unwrap();
    assert_eq!(doc["responses"][VERSION]["uploaded"], false);
}

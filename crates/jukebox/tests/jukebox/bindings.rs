//! Bindings and default actions: bind, unbind, default transitions, offsets.

use crate::common::*;

#[tokio::test]
async fn bind_unbind_and_default_action_transitions() {
    let s = plain().await;
    let sid = upload_ok(&s, "songs", "song.wav", wav(70, 8, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let v1 = upload_ok(&s, "actions", "v1.vmd", vmd("v1")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let v2 = upload_ok(&s, "actions", "v2.vmd", vmd("v2")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bh = upload_ok(&s, "actions", "b.bvh", bvh("B")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let v3 = upload_ok(&s, "actions", "v3.vmd", vmd("v3")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bind = format!("{J}/bind");
    let def = format!("{J}/songs/{sid}/default-action");

    // First binding becomes the default; same type keeps it; another type takes over.
    let (st, b) = form(
        &s,
        Method::POST,
        &bind,
        &[("songId", &sid), ("actionId", &v1), ("offset", "5")],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["success"], true);
    assert_eq!(b["defaultAction"], v1);
    let (st, b) = mform(
        &s,
        Method::POST,
        &bind,
        &[("songId", &sid), ("actionId", &v2)],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["defaultAction"], v1);
    let (_, b) = form(
        &s,
        Method::POST,
        &bind,
        &[("songId", &sid), ("actionId", &bh), ("offset", "-30")],
    )
    .await;
    assert_eq!(b["defaultAction"], bh);
    let c = config(&s).await;
    assert_eq!(c["bindings"][&sid][&v1], json!({"offset": 5}));
    assert_eq!(c["bindings"][&sid][&v2], json!({"offset": 0}));
    assert_eq!(c["bindings"][&sid][&bh], json!({"offset": -30}));
    assert_eq!(c["songs"][&sid]["defaultAction"], bh);

    // Bad binds.
    for (fields, status) in [
        (
            vec![
                ("songId", sid.as_str()),
                ("actionId", v1.as_str()),
                ("offset", "1.5"),
            ],
            400,
        ),
        (
            vec![
                ("songId", sid.as_str()),
                ("actionId", v1.as_str()),
                ("offset", "abc"),
            ],
            400,
        ),
        (vec![("actionId", v1.as_str())], 400),
        (vec![("songId", "nope"), ("actionId", v1.as_str())], 404),
        (vec![("songId", sid.as_str()), ("actionId", "nope")], 404),
    ] {
        let (st, e) = form(&s, Method::POST, &bind, &fields).await;
        assert_eq!(st, status, "{fields:?} {e}");
        assert!(e["detail"].is_string(), "{e}");
    }

    // Default action: must be bound; unknown ids 404; empty clears.
    let (st, b) = form(&s, Method::PUT, &def, &[("action_id", &v2)]).await;
    assert_eq!((st, b["defaultAction"].clone()), (200, json!(v2)));
    let (st, e) = form(&s, Method::PUT, &def, &[("action_id", &v3)]).await;
    assert_eq!(st, 400, "{e}");
    let (st, _) = form(&s, Method::PUT, &def, &[("action_id", "nope")]).await;
    assert_eq!(st, 404);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/nope/default-action"),
        &[("action_id", &v1)],
    )
    .await;
    assert_eq!(st, 404);
    let (st, _) = form(&s, Method::PUT, &def, &[]).await;
    assert_eq!(st, 400);
    let (st, b) = form(&s, Method::PUT, &def, &[("action_id", "")]).await;
    assert_eq!(
        (st, b),
        (200, json!({"success": true, "defaultAction": ""}))
    );
    let (_, b) = form(&s, Method::PUT, &def, &[("action_id", &v2)]).await;
    assert_eq!(b["defaultAction"], v2);

    // Unbinding the default clears it; unbinding another keeps it; a missing binding is 404.
    let (st, b) = form(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", &sid), ("actionId", &v1)],
    )
    .await;
    assert_eq!((st, b["defaultAction"].clone()), (200, json!(v2)));
    let (st, b) = mform(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", &sid), ("actionId", &v2)],
    )
    .await;
    assert_eq!((st, b["defaultAction"].clone()), (200, json!("")));
    let (st, e) = form(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", &sid), ("actionId", &v2)],
    )
    .await;
    assert_eq!(st, 404);
    assert!(e["detail"].as_str().unwrap().contains("binding"));
    let (st, _) = form(
        &s,
        Method::DELETE,
        &bind,
        &[("songId", "nope"), ("actionId", &v2)],
    )
    .await;
    assert_eq!(st, 404);
    let c = config(&s).await;
    assert_eq!(c["bindings"][&sid].as_object().unwrap().len(), 1);
    assert_eq!(c["songs"][&sid]["defaultAction"], "");

    // Visibility and metadata forms.
    for bad in ["maybe", ""] {
        let (st, e) = form(
            &s,
            Method::PUT,
            &format!("{J}/songs/{sid}/visibility"),
            &[("visible", bad)],
        )
        .await;
        assert_eq!(st, 400, "{bad}: {e}");
    }
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/actions/{v1}/visibility"),
        &[("visible", "0")],
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(config(&s).await["actions"][&v1]["visible"], false);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/actions/nope/visibility"),
        &[("visible", "1")],
    )
    .await;
    assert_eq!(st, 404);
    let (st, b) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{sid}/metadata"),
        &[("artist", "Someone")],
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let c = config(&s).await;
    assert_eq!(c["songs"][&sid]["artist"], "Someone");
    assert_eq!(c["songs"][&sid]["name"], "song");
    let (st, _) = form(&s, Method::PUT, &format!("{J}/actions/{v1}/metadata"), &[]).await;
    assert_eq!(st, 400);
    let (st, _) = mform(
        &s,
        Method::PUT,
        &format!("{J}/actions/{v1}/metadata"),
        &[("name", "Wave")],
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(config(&s).await["actions"][&v1]["name"], "Wave");
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/nope/metadata"),
        &[("name", "x")],
    )
    .await;
    assert_eq!(st, 404);
}

#[tokio::test]
async fn bind_offsets_are_range_checked_and_hidden_defaults_are_not_exported() {
    let s = with_bundle().await;
    let sid = upload_ok(&s, "songs", "one.wav", wav(40, 21, None, None)).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = upload_ok(&s, "actions", "shown.vmd", vmd("shown")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let hidden = upload_ok(&s, "actions", "hidden.vmd", vmd("hidden")).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    // offsets: integers within the 32-bit range; anything else 400, never a 5xx
    for off in [
        "18446744073709551616",
        "9223372036854775807",
        "2147483648",
        "-2147483649",
        "1e308",
        "-0.0",
        "NaN",
        "1e-320",
        "1.5",
        "{}",
    ] {
        let (st, b) = form(
            &s,
            Method::POST,
            &format!("{J}/bind"),
            &[("songId", &sid), ("actionId", &shown), ("offset", off)],
        )
        .await;
        assert_eq!(st, 400, "offset={off}: {b}");
    }
    for v in [
        json!(18446744073709551616.0),
        json!(-1e308),
        json!("NaN"),
        json!(1e-320),
        json!({"n": {"m": 1}}),
        json!([1]),
    ] {
        let r = s
            .http
            .post(s.url(&format!("{J}/bind")))
            .json(&json!({"songId": sid, "actionId": shown, "offset": v}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "offset={v}");
    }
    // A whole number written with a fraction is that integer (JSON Schema's `integer`).
    let r = s
        .http
        .post(s.url(&format!("{J}/bind")))
        .json(&json!({"songId": sid, "actionId": shown, "offset": 5.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "offset=5.0");
    for (aid, off) in [(&shown, "2147483647"), (&hidden, "-2147483647")] {
        let (st, b) = form(
            &s,
            Method::POST,
            &format!("{J}/bind"),
            &[("songId", &sid), ("actionId", aid), ("offset", off)],
        )
        .await;
        assert_eq!(st, 200, "{b}");
    }
    // the default action is the hidden one
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{sid}/default-action"),
        &[("action_id", &hidden)],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/actions/{hidden}/visibility"),
        &[("visible", "false")],
    )
    .await;
    assert_eq!(st, 200);
    let (st, _, z) = export(&s, &[("includeHidden", "false")]).await;
    assert_eq!(st, 200);
    let c: Value = serde_json::from_slice(&unzip(&z)["config.json"]).unwrap();
    assert!(c["actions"].get(&hidden).is_none());
    assert_eq!(c["songs"][&sid]["defaultAction"], "", "{c}");
    assert_eq!(
        c["bindings"][md5_hex(&wav(40, 21, None, None))][md5_hex(&vmd("shown"))],
        json!({"offset": 2147483647})
    );
    // the library keeps its default; a full export keeps it too
    assert_eq!(config(&s).await["songs"][&sid]["defaultAction"], hidden);
    let (_, _, z) = export(&s, &[]).await;
    let c: Value = serde_json::from_slice(&unzip(&z)["config.json"]).unwrap();
    assert_eq!(c["songs"][&sid]["defaultAction"], hidden);
    // an exported default that is exported stays
    let (st, _) = form(
        &s,
        Method::PUT,
        &format!("{J}/songs/{sid}/default-action"),
        &[("action_id", &shown)],
    )
    .await;
    assert_eq!(st, 200);
    let (_, _, z) = export(&s, &[("includeHidden", "false")]).await;
    let c: Value = serde_json::from_slice(&unzip(&z)["config.json"]).unwrap();
    assert_eq!(c["songs"][&sid]["defaultAction"], shown);
}

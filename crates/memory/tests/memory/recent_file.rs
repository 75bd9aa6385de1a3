//! `/api/memory/recent_file(s)`: listing, reading, the compare-and-swap save, limits and the read-only theater messages.

use crate::common::*;

#[tokio::test]
async fn recent_file_read_edit_save_round_trip() {
    let s = server().await;
    write_history(
        &s,
        "Companion",
        &json!([
            msg("human", "hello"),
            msg("ai", "hi there"),
            msg("human", "bye")
        ]),
    );
    // A legacy flat file and a bundled file are listed too, deduplicated and sorted.
    std::fs::write(s.data.join("memory").join("recent_Old.json"), b"[]").unwrap();
    std::fs::create_dir_all(s.bundle.join("memory").join("Seed")).unwrap();
    std::fs::write(
        s.bundle.join("memory").join("Seed").join("recent.json"),
        serde_json::to_vec(&json!([msg("ai", "seeded")])).unwrap(),
    )
    .unwrap();
    std::fs::write(s.bundle.join("memory").join("recent_Companion.json"), b"[]").unwrap();
    let (st, body) = s.get("/api/memory/recent_files").await;
    assert_eq!(st, 200);
    assert_eq!(
        body["files"],
        json!([
            "recent_Companion.json",
            "recent_Old.json",
            "recent_Seed.json"
        ])
    );

    let (st, r) = read(&s, "recent_Companion.json").await;
    assert_eq!(st, 200, "{r}");
    let on_disk = std::fs::read(recent_path(&s, "Companion")).unwrap();
    assert_eq!(
        r["content"].as_str().unwrap().as_bytes(),
        on_disk.as_slice()
    );
    assert_eq!(r["fingerprint"], sha(&on_disk));
    let identity = r["identity_token"].as_str().unwrap().to_string();
    assert_eq!(identity.len(), 64);
    // Reading again gives the same tokens.
    let (_, r2) = read(&s, "recent_Companion.json").await;
    assert_eq!(r2, r);

    // Edit: change one text, delete one, add one; unknown fields are not stored.
    let (st, saved) = save(
        &s,
        json!({
            "filename": "recent_Companion.json",
            "fingerprint": r["fingerprint"], "identity_token": r["identity_token"],
            "chat": [
                {"role": "human", "text": "hello!", "source_index": 0, "evil": "x"},
                {"role": "ai", "text": "hi there", "source_index": 1},
                {"role": "system", "text": "note"},
                {"role": "ai"}
            ]
        }),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    assert_eq!(saved["success"], true);
    assert_eq!(saved["need_refresh"], true);
    assert_eq!(saved["profile_name"], "Companion");
    let v = stored(&s, "Companion");
    assert_eq!(texts(&v), vec!["hello!", "hi there", "note", ""]);
    assert_eq!(v[0]["type"], "human");
    assert_eq!(v[0]["data"]["type"], "human");
    assert!(v[0].get("evil").is_none() && v[0]["data"].get("evil").is_none());
    assert_eq!(v[1]["data"]["tool_calls"], json!([]));
    let bytes = std::fs::read(recent_path(&s, "Companion")).unwrap();
    assert_eq!(saved["fingerprint"], sha(&bytes));
    // The new tokens are those of the next read.
    let (_, r3) = read(&s, "recent_Companion.json").await;
    assert_eq!(r3["fingerprint"], saved["fingerprint"]);
    assert_eq!(r3["identity_token"], saved["identity_token"]);

    // The old tokens now conflict and the answer carries the current tokens,
    // which then succeed.
    let (st, c) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
               "identity_token": r["identity_token"], "chat": []}),
    )
    .await;
    assert_eq!(st, 409);
    assert_eq!(c["code"], "RECENT_FILE_CONFLICT");
    assert_eq!(c["success"], false);
    assert_eq!(c["fingerprint"], saved["fingerprint"]);
    assert_eq!(c["identity_token"], saved["identity_token"]);
    let (st, _) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": c["fingerprint"],
               "identity_token": c["identity_token"], "chat": [{"role": "ai", "text": "only"}]}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(texts(&stored(&s, "Companion")), vec!["only"]);

    // A chat append after the read (the chat session's path) is a conflict too.
    let (_, r4) = read(&s, "recent_Companion.json").await;
    s.state
        .store
        .update("memory/Companion/recent.json", |cur: Option<Vec<Value>>| {
            let mut v = cur.unwrap_or_default();
            v.push(json!({"type": "human", "data": {"content": "appended"}}));
            (v, ())
        })
        .await
        .unwrap();
    let (st, c) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r4["fingerprint"],
               "identity_token": r4["identity_token"], "chat": []}),
    )
    .await;
    assert_eq!(st, 409);
    assert_eq!(c["code"], "RECENT_FILE_CONFLICT");
    assert_eq!(texts(&stored(&s, "Companion")), vec!["only", "appended"]);

    // Identity alone differing is a conflict.
    let (_, r5) = read(&s, "recent_Companion.json").await;
    let (st, c) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": r5["fingerprint"],
               "identity_token": "0".repeat(64), "chat": []}),
    )
    .await;
    assert_eq!(
        (st, c["code"].clone()),
        (409, json!("RECENT_FILE_CONFLICT"))
    );

    // Missing tokens: 409 without a code.
    for body in [
        json!({"filename": "recent_Companion.json", "chat": []}),
        json!({"filename": "recent_Companion.json", "fingerprint": r5["fingerprint"], "chat": []}),
        json!({"filename": "recent_Companion.json", "fingerprint": null, "identity_token": null, "chat": []}),
    ] {
        let (st, c) = save(&s, body).await;
        assert_eq!(st, 409, "{c}");
        assert!(c.get("code").is_none(), "{c}");
        assert_eq!(c["success"], false);
    }

    // A bundled history is read from the bundle and saved to the data dir.
    let (st, seed) = read(&s, "recent_Seed.json").await;
    assert_eq!(st, 200);
    assert!(seed["content"].as_str().unwrap().contains("seeded"));
    let (st, _) = save(
        &s,
        json!({"filename": "recent_Seed.json", "fingerprint": seed["fingerprint"],
               "identity_token": seed["identity_token"], "chat": [{"role": "ai", "text": "mine"}]}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(texts(&stored(&s, "Seed")), vec!["mine"]);
    assert!(
        std::fs::read_to_string(s.bundle.join("memory/Seed/recent.json"))
            .unwrap()
            .contains("seeded")
    );
}

#[tokio::test]
async fn recent_file_bad_input() {
    let s = server().await;
    let before = tree(&s.data);
    for bad in [
        "",
        "recent.json",
        "recent_.json",
        "recent_../x.json",
        "../recent_Companion.json",
        "recent_a/b.json",
        "recent_a\\b.json",
        "recent_x..json",
        "settings_Companion.json",
        "recent_Companion.txt",
        "recent_a:b.json",
        "recent_%2e%2e.json",
    ] {
        let (st, b) = read(&s, bad).await;
        assert_eq!(st, 400, "{bad:?} → {b}");
        assert_eq!(b["success"], false);
        assert!(b["error"].is_string());
    }
    let (st, _) = s.get("/api/memory/recent_file").await;
    assert_eq!(st, 400);
    let (st, b) = read(&s, "recent_Nobody.json").await;
    assert_eq!(st, 404, "{b}");
    assert_eq!(b["success"], false);

    // Save: malformed bodies and validation failures are 400 and change nothing.
    let (_, r) = read(&s, "recent_Companion.json").await;
    let before_save = tree(&s.data);
    for raw in [&b"{broken"[..], b"", b"[]", b"null", b"\xff"] {
        let (st, b) = post_raw(&s, "/api/memory/recent_file/save", raw.to_vec()).await;
        assert_eq!(st, 400, "{raw:?} → {b}");
    }
    let ok = json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
                    "identity_token": r["identity_token"], "chat": []});
    let variants: Vec<Value> = vec![
        {
            let mut b = ok.clone();
            b["filename"] = json!("../x.json");
            b
        },
        {
            let mut b = ok.clone();
            b.as_object_mut().unwrap().remove("filename");
            b
        },
        {
            let mut b = ok.clone();
            b.as_object_mut().unwrap().remove("chat");
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!("x");
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!([{"text": "no role"}]);
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!([{"role": "ai", "text": 3}]);
            b
        },
        {
            let mut b = ok.clone();
            b["chat"] = json!([7]);
            b
        },
        {
            let mut b = ok.clone();
            b["fingerprint"] = json!(5);
            b
        },
        {
            let mut b = ok.clone();
            b["identity_token"] = json!(["x"]);
            b
        },
    ];
    for b in variants {
        let (st, resp) = save(&s, b.clone()).await;
        assert_eq!(st, 400, "{b} → {resp}");
        assert_eq!(resp["success"], false);
    }
    assert_eq!(tree(&s.data), before_save);
    let _ = before;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_saves_from_one_read_exactly_one_wins() {
    let s = Arc::new(server().await);
    write_history(&s, "Companion", &json!([msg("human", "base")]));
    let (_, r) = read(&s, "recent_Companion.json").await;
    let mut handles = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        let r = r.clone();
        handles.push(tokio::spawn(async move {
            let (st, b) = save(
                &s,
                json!({"filename": "recent_Companion.json", "fingerprint": r["fingerprint"],
                       "identity_token": r["identity_token"],
                       "chat": [{"role": "human", "text": format!("writer {i}")}]}),
            )
            .await;
            (i, st, b)
        }));
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for h in handles {
        let (i, st, b) = h.await.unwrap();
        match st {
            200 => winners.push((i, b)),
            409 => losers.push(b),
            other => panic!("unexpected {other}: {b}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one save wins");
    assert_eq!(losers.len(), 7);
    let (wi, wb) = &winners[0];
    assert_eq!(
        texts(&stored(&s, "Companion")),
        vec![format!("writer {wi}")]
    );
    for l in &losers {
        assert_eq!(l["code"], "RECENT_FILE_CONFLICT");
        assert_eq!(l["fingerprint"], wb["fingerprint"]);
        assert_eq!(l["identity_token"], wb["identity_token"]);
    }
    // A loser reads again (tokens from the conflict) and succeeds.
    let (st, _) = save(
        &s,
        json!({"filename": "recent_Companion.json", "fingerprint": losers[0]["fingerprint"],
               "identity_token": losers[0]["identity_token"],
               "chat": [{"role": "human", "text": "merged"}]}),
    )
    .await;
    assert_eq!(st, 200);
}

/// The server remembers the fingerprint of the history it last wrote (so a
/// long history is not hashed again per save); an edit in place right after
/// the save, of the same length and within one tick of the file clock, is
/// still seen as a change, and so is a replacement by the chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_sees_every_change_since_the_tokens_it_holds() {
    let s = server().await;
    write_history(&s, "Companion", &json!([msg("human", "base")]));
    let (_, r) = read(&s, "recent_Companion.json").await;
    let body = |tokens: &Value, text: &str| {
        json!({"filename": "recent_Companion.json", "fingerprint": tokens["fingerprint"],
               "identity_token": tokens["identity_token"],
               "chat": [{"role": "human", "text": text}]})
    };
    let (st, saved) = save(&s, body(&r, "first")).await;
    assert_eq!(st, 200, "{saved}");
    // Same inode, same length, same clock tick: only the bytes differ.
    let path = recent_path(&s, "Companion");
    let bytes = std::fs::read(&path).unwrap();
    let edited = String::from_utf8(bytes.clone())
        .unwrap()
        .replace("first", "FIRST");
    assert_eq!(edited.len(), bytes.len());
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all(edited.as_bytes()).unwrap();
    }
    let (st, c) = save(&s, body(&saved, "second")).await;
    assert_eq!(st, 409, "{c}");
    assert_eq!(c["code"], "RECENT_FILE_CONFLICT");
    assert_eq!(texts(&stored(&s, "Companion")), vec!["FIRST".to_string()]);
    // With the tokens of the conflict the save goes through; a later
    // replacement of the file (as the chat appends) is a conflict again.
    let (st, saved) = save(&s, body(&c, "third")).await;
    assert_eq!(st, 200, "{saved}");
    let tmp = path.with_extension("tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&json!([msg("human", "third"), msg("ai", "hi")])).unwrap(),
    )
    .unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let (st, c) = save(&s, body(&saved, "fourth")).await;
    assert_eq!(st, 409, "{c}");
    assert_eq!(
        texts(&stored(&s, "Companion")),
        vec!["third".to_string(), "hi".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_at_its_boundary_and_one_past() {
    let s = server().await;
    let tokens = |r: &Value| (r["fingerprint"].clone(), r["identity_token"].clone());
    let body = |t: &(Value, Value), chat: Vec<Value>| {
        json!({"filename": "recent_Companion.json", "fingerprint": t.0,
               "identity_token": t.1, "chat": chat})
    };
    let (_, r) = read(&s, "recent_Companion.json").await;
    let t = tokens(&r);

    // Entries: 10,001 → 400; nothing written.
    let (st, b) = save(
        &s,
        body(&t, vec![json!({"role": "ai", "text": "x"}); 10_001]),
    )
    .await;
    assert_eq!(st, 400, "{b}");
    // Text of one message: 32,769 characters (multi-byte) → 400.
    let (st, _) = save(
        &s,
        body(&t, vec![json!({"role": "ai", "text": "猫".repeat(32_769)})]),
    )
    .await;
    assert_eq!(st, 400);
    // Total: 64 × 32,768 + 1 → 400.
    let mut chat = vec![json!({"role": "ai", "text": "x".repeat(32_768)}); 64];
    chat.push(json!({"role": "human", "text": "y"}));
    let (st, _) = save(&s, body(&t, chat)).await;
    assert_eq!(st, 400);
    let (_, again) = read(&s, "recent_Companion.json").await;
    assert_eq!(
        again["fingerprint"], r["fingerprint"],
        "rejected saves wrote nothing"
    );

    // One message of exactly 32,768 (multi-byte) characters.
    let (st, saved) = save(
        &s,
        body(&t, vec![json!({"role": "ai", "text": "猫".repeat(32_768)})]),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    let t = (
        saved["fingerprint"].clone(),
        saved["identity_token"].clone(),
    );
    // Exactly 2,097,152 characters in total.
    let chat = vec![json!({"role": "ai", "text": "x".repeat(32_768)}); 64];
    let (st, saved) = save(&s, body(&t, chat)).await;
    assert_eq!(st, 200, "{saved}");
    let t = (
        saved["fingerprint"].clone(),
        saved["identity_token"].clone(),
    );

    // Exactly 10,000 entries with 2,000,000 characters: the benchmark history.
    let chat: Vec<Value> = (0..10_000)
        .map(|i| json!({"role": if i % 2 == 0 { "human" } else { "ai" }, "text": "z".repeat(200)}))
        .collect();
    let started = Instant::now();
    let (st, saved) = save(&s, body(&t, chat)).await;
    let first = started.elapsed();
    assert_eq!(st, 200, "{saved}");
    assert_eq!(stored(&s, "Companion").as_array().unwrap().len(), 10_000);

    let (st, r) = read(&s, "recent_Companion.json").await;
    assert_eq!(st, 200);
    assert_eq!(r["fingerprint"], saved["fingerprint"]);
    eprintln!("10,000-entry save over HTTP (debug build): {first:?}");
}

#[tokio::test]
async fn theater_messages_are_read_only() {
    let s = server().await;
    let snapshot = json!([
        msg("human", "one"),
        theater_msg("capsule A"),
        msg("ai", "two"),
        msg("human", "three"),
        theater_msg("capsule B"),
    ]);
    write_history(&s, "Companion", &snapshot);
    let read_tokens = |r: &Value| (r["fingerprint"].clone(), r["identity_token"].clone());
    let body = |t: &(Value, Value), chat: Value| {
        json!({"filename": "recent_Companion.json", "fingerprint": t.0,
               "identity_token": t.1, "chat": chat})
    };

    // 1. Without source_index: the client drops the theater messages and deletes "two".
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, saved) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([{"role": "human", "text": "one"}, {"role": "human", "text": "three"}]),
        ),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    let v = stored(&s, "Companion");
    assert_eq!(texts(&v), vec!["one", "capsule A", "three", "capsule B"]);
    assert_eq!(v[1], snapshot[1], "theater message kept verbatim");
    assert_eq!(v[3], snapshot[4]);

    // 2. With source_index: edit ordinary texts, try to edit a theater text.
    write_history(&s, "Companion", &snapshot);
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, saved) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([
                {"role": "human", "text": "ONE", "source_index": 0},
                {"role": "system", "text": "hacked capsule", "source_index": 1, "theater": true},
                {"role": "ai", "text": "TWO", "source_index": 2},
                {"role": "human", "text": "THREE", "source_index": 3}
            ]),
        ),
    )
    .await;
    assert_eq!(st, 200, "{saved}");
    let v = stored(&s, "Companion");
    assert_eq!(
        texts(&v),
        vec!["ONE", "capsule A", "TWO", "THREE", "capsule B"]
    );
    assert_eq!(v[1], snapshot[1]);
    assert_eq!(v[4], snapshot[4]);

    // 3. Without source_index an edited entry matches nothing while theater
    //    messages are unmatched: 409 RECENT_FILE_THEATER_READONLY, nothing written.
    write_history(&s, "Companion", &snapshot);
    let before = std::fs::read(recent_path(&s, "Companion")).unwrap();
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, b) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([{"role": "human", "text": "edited one"}, {"role": "ai", "text": "two"}]),
        ),
    )
    .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(b["code"], "RECENT_FILE_THEATER_READONLY");
    assert_eq!(std::fs::read(recent_path(&s, "Companion")).unwrap(), before);

    // 4. The same edit echoing the theater messages (no source_index) is accepted.
    let (st, b) = save(
        &s,
        body(
            &read_tokens(&r),
            json!([
                {"role": "human", "text": "edited one"},
                {"role": "system", "text": "capsule A", "theater": true},
                {"role": "ai", "text": "two"},
                {"role": "system", "text": "capsule B", "theater": true}
            ]),
        ),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    let v = stored(&s, "Companion");
    assert_eq!(
        texts(&v),
        vec!["edited one", "capsule A", "two", "capsule B"]
    );
    assert_eq!(v[3], snapshot[4]);

    // 5. An emptied chat keeps only the theater messages.
    let (_, r) = read(&s, "recent_Companion.json").await;
    let (st, _) = save(&s, body(&read_tokens(&r), json!([]))).await;
    assert_eq!(st, 200);
    assert_eq!(
        texts(&stored(&s, "Companion")),
        vec!["capsule A", "capsule B"]
    );
}

//! The new-user icebreaker (`/api/icebreaker/*`).

use companiond_core::testkit::{MockLlm, MockReply, TestServer};
use serde_json::{json, Value};

use crate::common::{active, frame_of, next_frame, server, silent, ws_open};

async fn ice_start(s: &TestServer, session: &str) -> Value {
    let (st, b) = s
        .post_csrf(
            "/api/icebreaker/route/start",
            json!({"persona_name": "Companion", "session_id": session}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["ok"], true, "{b}");
    b
}

#[tokio::test]
async fn onboarding_csrf_on_every_mutation_but_free_text() {
    let s = server().await;
    ice_start(&s, "i1").await;
    for path in [
        "/api/icebreaker/route/start",
        "/api/icebreaker/route/end",
        "/api/icebreaker/context",
        "/api/icebreaker/choice",
        "/api/icebreaker/speak",
    ] {
        let body = json!({"persona_name": "Companion", "session_id": "i1", "role": "user", "text": "x", "line": "x", "day": 1, "node_id": "n", "choice": "A"});
        let (st, b) = s.post(path, body.clone()).await;
        assert_eq!(
            (st, b["ok"].clone(), b["reason"].clone()),
            (403, json!(false), json!("csrf_validation_failed")),
            "{path}"
        );
        let r = s
            .http
            .post(s.url(path))
            .header("X-CSRF-Token", "nope")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
    }
    // nothing changed: still active for i1
    let (_, b) = s
        .get("/api/icebreaker/route/state?persona_name=Companion")
        .await;
    assert_eq!(b["state"]["session_id"], "i1");
    assert!(!s.data.join("state/icebreaker_choices.json").exists());
    // free text is not CSRF-guarded
    let (st, b) = s
        .post("/api/icebreaker/free-text/interpret", json!({"persona_name": "Companion", "session_id": "i1", "user_text": "hi", "options": []}))
        .await;
    assert_eq!((st, b["reason"].clone()), (200, json!("missing_options")));
}

#[tokio::test]
async fn onboarding_route_state_machine() {
    let s = server().await;
    let (_, b) = s.get("/api/icebreaker/route/state").await;
    assert_eq!(
        b,
        json!({"ok": true, "state": {"icebreaker_active": false}})
    );
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/start",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(b["reason"], "missing_session_id");
    // persona falls back to the current character
    let (_, b) = s
        .post_csrf("/api/icebreaker/route/start", json!({"session_id": "i1"}))
        .await;
    let st = &b["state"];
    assert_eq!(
        (
            st["icebreaker_active"].clone(),
            st["persona_name"].clone(),
            st["session_id"].clone(),
            st["source"].clone()
        ),
        (
            json!(true),
            json!("Companion"),
            json!("i1"),
            json!("new_user_icebreaker")
        )
    );
    assert!(st["started_at"].is_number() && st["last_activity"].is_number());
    // the game lookup never reports the onboarding route
    assert_eq!(active(&s).await, json!({"ok": true, "active": false}));
    // end with another session: rejected, route kept
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/end",
            json!({"persona_name": "Companion", "session_id": "other"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["handled"].clone(),
            b["method"].clone(),
            b["persona_name"].clone()
        ),
        (
            json!(false),
            json!("session_id_mismatch"),
            json!(false),
            json!("route_end"),
            json!("Companion")
        )
    );
    assert_eq!(b["state"]["session_id"], "i1");
    let (_, b) = s
        .get("/api/icebreaker/route/state?persona_name=Companion")
        .await;
    assert_eq!(b["state"]["icebreaker_active"], true);
    // a new start replaces the session
    ice_start(&s, "i2").await;
    // end without session id (and persona from the current character); default reason
    let (_, b) = s.post_csrf("/api/icebreaker/route/end", json!({})).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone(), b["state"].clone()),
        (
            json!(true),
            json!("icebreaker_end"),
            json!({"icebreaker_active": false})
        )
    );
    assert_eq!(b["ended"]["session_id"], "i2");
    let (_, b) = s.get("/api/icebreaker/route/state").await;
    assert_eq!(b["state"], json!({"icebreaker_active": false}));
    // ending again: inactive, still ok; matching session with an explicit reason
    let (_, b) = s
        .post_csrf("/api/icebreaker/route/end", json!({"session_id": "i2"}))
        .await;
    assert_eq!(
        (b["ok"].clone(), b["ended"].clone()),
        (json!(true), Value::Null)
    );
    ice_start(&s, "i3").await;
    let (_, b) = s
        .post_csrf(
            "/api/icebreaker/route/end",
            json!({"persona_name": "Companion", "session_id": "i3", "reason": "done"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(true), json!("done"))
    );
}

#[tokio::test]
async fn onboarding_context_rules() {
    let s = server().await;
    let c = "/api/icebreaker/context";
    let base = json!({"persona_name": "Companion", "session_id": "i1", "role": "assistant", "text": "Hello there"});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    // rule 4 (validated first)
    let (_, b) = s.post_csrf(c, with("role", json!("system"))).await;
    assert_eq!(b["reason"], "invalid_role");
    let (_, b) = s.post_csrf(c, with("text", json!("   "))).await;
    assert_eq!(b["reason"], "missing_text");
    let (_, b) = s.post_csrf(c, with("text", json!("x".repeat(2001)))).await;
    assert_eq!(b["reason"], "invalid_text_length");
    // no persona fallback
    let mut nb = base.clone();
    nb.as_object_mut().unwrap().remove("persona_name");
    let (_, b) = s.post_csrf(c, nb).await;
    assert_eq!(b["reason"], "missing_persona_name");
    // rule 2
    let (_, b) = s.post_csrf(c, base.clone()).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["persona_name"].clone(),
            b["source"].clone(),
            b["method"].clone()
        ),
        (
            json!(false),
            json!("route_not_active"),
            json!("Companion"),
            json!("new_user_icebreaker"),
            json!("project_session_history")
        )
    );
    ice_start(&s, "i1").await;
    // rule 3
    let (_, b) = s.post_csrf(c, with("session_id", json!("stale"))).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["skipped"].clone(),
            b["reason"].clone(),
            b["handled"].clone(),
            b["method"].clone()
        ),
        (
            json!(true),
            json!("stale_session"),
            json!("session_id_mismatch"),
            json!(false),
            json!("project_session_history")
        )
    );
    assert_eq!(b["state"]["session_id"], "i1");
    // success: 2000 characters is the limit
    let long = "y".repeat(2000);
    let (_, b) = s.post_csrf(c, with("text", json!(long))).await;
    assert_eq!(b["ok"], true, "{b}");
    let (_, b) = s.post_csrf(c, with("request_id", json!("q1"))).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["method"].clone(),
            b["source"].clone(),
            b["session_id"].clone(),
            b["memory_cached"].clone()
        ),
        (
            json!(true),
            json!("project_session_history"),
            json!("new_user_icebreaker"),
            json!("i1"),
            json!(true)
        )
    );
    assert!(b.get("deduped").is_none());
    // duplicate request id (also read from event.request_id)
    let mut dup = base.clone();
    dup["event"] = json!({"request_id": "q1"});
    let (_, b) = s.post_csrf(c, dup).await;
    assert_eq!(
        (b["ok"].clone(), b["deduped"].clone()),
        (json!(true), json!(true))
    );
    let mgr = s.state.sessions.get("Companion").unwrap();
    let hist = mgr.history().await;
    assert_eq!(hist.len(), 2, "the duplicate is not added");
    assert_eq!(hist[1].content.as_deref(), Some("Hello there"));
    assert_eq!(hist[1].role, "assistant");
    let recent: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("memory/Companion/recent.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(recent.as_array().unwrap().len(), 2);
    assert_eq!(recent[1]["data"]["content"], "Hello there");
    // a user line
    let (_, b) = s.post_csrf(c, with("role", json!("user"))).await;
    assert_eq!(b["ok"], true);
    assert_eq!(mgr.history().await.last().unwrap().role, "user");
    // no session manager for a name without a character
    s.post_csrf(
        "/api/icebreaker/route/start",
        json!({"persona_name": "Ghost", "session_id": "g"}),
    )
    .await;
    let (_, b) = s
        .post_csrf(
            c,
            json!({"persona_name": "Ghost", "session_id": "g", "role": "user", "text": "x"}),
        )
        .await;
    assert_eq!(b["reason"], "no_session_manager");
}

#[tokio::test]
async fn onboarding_free_text_interpretation() {
    let s = server().await;
    let f = "/api/icebreaker/free-text/interpret";
    let opts = json!([{"choice": "A", "label": "Cats"}, {"choice": "B", "label": "Dogs"}]);
    let body = json!({"persona_name": "Companion", "session_id": "i1", "user_text": "definitely dogs", "options": opts, "assistant_line": "Cats or dogs?"});
    let (_, b) = s
        .post(
            f,
            json!({"session_id": "i1", "user_text": "x", "options": opts}),
        )
        .await;
    assert_eq!(b["reason"], "missing_persona_name");
    let (_, b) = s
        .post(
            f,
            json!({"persona_name": "Companion", "session_id": "i1", "options": opts}),
        )
        .await;
    assert_eq!(b["reason"], "missing_user_text");
    let (_, b) = s
        .post(
            f,
            json!({"persona_name": "Companion", "user_text": "x", "options": opts}),
        )
        .await;
    assert_eq!(b["reason"], "missing_session_id");
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("route_not_active"))
    );
    ice_start(&s, "i1").await;
    let mut stale = body.clone();
    stale["session_id"] = json!("old");
    let (_, b) = s.post(f, stale).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone(), b["skipped"].clone()),
        (
            json!(false),
            json!("session_id_mismatch"),
            json!("stale_session")
        )
    );
    let mut no_opts = body.clone();
    no_opts["options"] = json!([{"label": "no id"}]);
    let (_, b) = s.post(f, no_opts).await;
    assert_eq!(b["reason"], "missing_options");
    // no model
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("llm_api_not_configured"))
    );
    let llm = MockLlm::start("not json at all").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text("```json\n{\"action\": \"choose\", \"choice\": \"b\", \"reply\": \"ignored\", \"topic_state\": \"on_topic\"}\n```".into()));
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["action"].clone(),
            b["choice"].clone(),
            b["reply"].clone()
        ),
        (json!(true), json!("choose"), json!("B"), json!(""))
    );
    assert_eq!(
        b["selected_option"],
        json!({"choice": "B", "label": "Dogs"})
    );
    let sent = llm.chat_requests()[0]["messages"].to_string();
    assert!(sent.contains("definitely dogs") && sent.contains("Dogs"));
    llm.push(MockReply::Text("{\"action\": \"respond_and_keep_options\", \"reply\": \"Hmm,   tell me more!\", \"topic_state\": \"soft_derail\"}".into()));
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (
            b["action"].clone(),
            b["choice"].clone(),
            b["reply"].clone(),
            b["topic_state"].clone()
        ),
        (
            json!("respond_and_keep_options"),
            json!(""),
            json!("Hmm, tell me more!"),
            json!("soft_derail")
        )
    );
    // parse failure and upstream failure
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("parse_failed"))
    );
    llm.push(MockReply::Status(500, "boom".into()));
    let (_, b) = s.post(f, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("free_text_interpreter_failed"))
    );
}

#[tokio::test]
async fn onboarding_choice_is_write_only() {
    let s = server().await;
    let llm = MockLlm::start("x").await;
    s.configure_llm(&llm.base()).await;
    let ch = "/api/icebreaker/choice";
    let body = json!({"persona_name": "Companion", "session_id": "i1", "day": 1, "node_id": "intro", "choice": "A", "label": "Cats", "handoff": false, "completed": true, "seq": 3});
    let (_, b) = s.post_csrf(ch, body.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("route_not_active"))
    );
    ice_start(&s, "i1").await;
    let mut stale = body.clone();
    stale["session_id"] = json!("old");
    let (_, b) = s.post_csrf(ch, stale).await;
    assert_eq!(
        (b["ok"].clone(), b["skipped"].clone()),
        (json!(true), json!("stale_session"))
    );
    let mut nd = body.clone();
    nd.as_object_mut().unwrap().remove("day");
    let (_, b) = s.post_csrf(ch, nd).await;
    assert_eq!(b["reason"], "missing_day");
    let mut nc = body.clone();
    nc["choice"] = json!(" ");
    let (_, b) = s.post_csrf(ch, nc).await;
    assert_eq!(b["reason"], "invalid_choice");
    let mut bad = body.clone();
    bad["handoff"] = json!([1]);
    let (_, b) = s.post_csrf(ch, bad).await;
    assert_eq!(b["reason"], "invalid_body");
    assert!(!s.data.join("state/icebreaker_choices.json").exists());
    let (_, b) = s.post_csrf(ch, body.clone()).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["deduped"].clone(),
            b["source"].clone(),
            b["day"].clone()
        ),
        (
            json!(true),
            json!(false),
            json!("new_user_icebreaker"),
            json!(1)
        )
    );
    let (_, b) = s.post_csrf(ch, body.clone()).await;
    assert_eq!(b["deduped"], true);
    let doc: Value = serde_json::from_slice(
        &std::fs::read(s.data.join("state/icebreaker_choices.json")).unwrap(),
    )
    .unwrap();
    let day = &doc["characters"]["Companion"]["days"]["1"];
    assert_eq!(day["source"], "new_user_icebreaker");
    assert_eq!(day["completed"], true);
    assert_eq!(day["choices"].as_array().unwrap().len(), 1);
    assert_eq!(day["choices"][0]["label"], "Cats");
    assert_eq!(day["choices"][0]["seq"], 3);
    // write-only: no model call, no session history, no memory
    assert!(llm.chat_requests().is_empty());
    assert!(s
        .state
        .sessions
        .get("Companion")
        .unwrap()
        .history()
        .await
        .is_empty());
    assert!(!s.data.join("memory/Companion/recent.json").exists());
    // a corrupt record is reported once, kept aside whole (docs/data.md), and
    // the next choice starts a new one
    std::fs::write(s.data.join("state/icebreaker_choices.json"), b"{broken").unwrap();
    let mut other = body.clone();
    other["node_id"] = json!("n2");
    let (_, b) = s.post_csrf(ch, other.clone()).await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("choice_write_failed"))
    );
    let aside: Vec<_> = std::fs::read_dir(s.data.join("state"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("icebreaker_choices.json.corrupt-")
        })
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(aside[0].path()).unwrap(), b"{broken");
    let (_, b) = s.post_csrf(ch, other).await;
    assert_eq!(b["ok"], json!(true), "{b}");
}

#[tokio::test]
async fn onboarding_speak_rules() {
    let s = server().await;
    let mut ws = ws_open(&s, "Companion").await;
    let sp = "/api/icebreaker/speak";
    let (_, b) = s.post_csrf(sp, json!({"persona_name": "Companion", "session_id": "i1", "line": "<speak><break time=\"1s\"/></speak>"})).await;
    assert_eq!(b["reason"], "missing_line");
    let (_, b) = s
        .post_csrf(
            sp,
            json!({"persona_name": "Companion", "session_id": "i1", "line": "Hi"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["audio_sent"].clone(),
            b["method"].clone(),
            b["source"].clone()
        ),
        (
            json!(false),
            json!("route_not_active"),
            json!(false),
            json!("project_tts"),
            json!("new_user_icebreaker")
        )
    );
    ice_start(&s, "i1").await;
    let (_, b) = s
        .post_csrf(
            sp,
            json!({"persona_name": "Companion", "session_id": "old", "line": "Hi"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["skipped"].clone(),
            b["reason"].clone(),
            b["handled"].clone(),
            b["audio_sent"].clone(),
            b["audio_committed"].clone()
        ),
        (
            json!(true),
            json!("stale_session"),
            json!("session_id_mismatch"),
            json!(false),
            json!(false),
            json!(false)
        )
    );
    assert_eq!(b["voice_source"]["skipped"], "stale_session");
    assert!(silent(&mut ws, 100).await, "a stale speak sends nothing");
    // tags stripped, 240 characters after stripping, persona from the current character
    let line = format!("<prosody rate=\"slow\">{}</prosody>", "a".repeat(300));
    let (_, b) = s
        .post_csrf(sp, json!({"session_id": "i1", "line": line}))
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["persona_name"].clone(),
            b["method"].clone()
        ),
        (json!(true), json!("Companion"), json!("project_tts"))
    );
    assert_eq!(b["line"].as_str().unwrap(), "a".repeat(240));
    assert_eq!(b["voice_source"]["method"], "project_tts");
    assert!(b["voice_source"]["provider"].is_string());
    let f = frame_of(&mut ws, "assistant_mirror").await;
    assert_eq!(f["text"].as_str().unwrap().len(), 240);
    let f = next_frame(&mut ws).await;
    assert_eq!(
        (f["type"].clone(), f["source"].clone()),
        (json!("turn_end"), json!("new_user_icebreaker"))
    );
    // options: no mirror, no turn end, interrupt
    let (_, b) = s
        .post_csrf(sp, json!({"session_id": "i1", "line": "quiet", "mirror_text": false, "emit_turn_end": false, "interrupt_audio": true}))
        .await;
    assert_eq!(
        (b["mirrored"].clone(), b["turn_end_emitted"].clone()),
        (json!(false), json!(false))
    );
    assert_eq!(next_frame(&mut ws).await["type"], "interrupt_audio");
    assert!(silent(&mut ws, 150).await);
    let (_, b) = s
        .post_csrf(
            sp,
            json!({"session_id": "i1", "line": "x", "mirror_text": "maybe"}),
        )
        .await;
    assert_eq!(b["reason"], "invalid_body");
    let hist = s.state.sessions.get("Companion").unwrap().history().await;
    assert_eq!(hist.len(), 1);
}

//! Game dialogue (`chat`, `mirror-assistant`, `speak`, `realtime-context`, `quick-lines`,
//! `passive-guard`, `character`) with a loopback model server.

use companiond_core::testkit::{MockLlm, MockReply};
use serde_json::{json, Value};

use crate::common::{frame_of, server, start, ws_open};

#[tokio::test]
async fn game_chat_line_control_and_degraded_envelopes() {
    let s = server().await;
    let url = "/api/game/badminton/chat";
    let ev = json!({"kind": "line_in", "textRaw": "player hit the line"});
    // invalid body
    let r = s.http.post(s.url(url)).body("[1,2]").send().await.unwrap();
    let b: Value = r.json().await.unwrap();
    assert_eq!(
        (b["error"].clone(), b["line"].clone(), b["control"].clone()),
        (json!("invalid_body"), json!(""), json!({}))
    );
    // inactive route
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(
        (
            b["skipped"].clone(),
            b["reason"].clone(),
            b["line"].clone(),
            b["control"].clone()
        ),
        (
            json!("route_inactive"),
            json!("route_not_active"),
            json!(""),
            json!({})
        )
    );
    start(&s, "badminton", "b1").await;
    // stale session
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "zz", "event": ev}),
        )
        .await;
    assert_eq!(
        (b["skipped"].clone(), b["reason"].clone(), b["line"].clone()),
        (
            json!("stale_session"),
            json!("session_id_mismatch"),
            json!("")
        )
    );
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1"}),
        )
        .await;
    assert_eq!(
        (b["error"].clone(), b["line"].clone()),
        (json!("missing_event"), json!(""))
    );
    // no model configured
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(
        (b["error"].clone(), b["reason"].clone(), b["line"].clone()),
        (
            json!("provider_unavailable"),
            json!("no_provider"),
            json!("")
        )
    );
    // with a model
    let llm = MockLlm::start("Again! {\"mood\": \"excited\"}").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text(
        "What a shot!\n{\"mood\": \"happy\", \"expression\": \"cheer\", \"intensity\": \"huge\"}"
            .into(),
    ));
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(b["line"], "What a shot!", "{b}");
    assert_eq!(
        b["control"],
        json!({"mood": "happy", "expression": "cheer"})
    );
    let req = &llm.chat_requests()[0];
    assert!(req["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("player hit the line"));
    let (_, st) = s
        .get("/api/game/badminton/route/state?persona_name=Companion")
        .await;
    assert_eq!(st["state"]["dialog_count"], 1);
    assert_eq!(
        st["state"]["last_dialogues"][0]["result_line"],
        "What a shot!"
    );
    // the round's model session keeps the previous exchange
    s.post(
        url,
        json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
    )
    .await;
    assert_eq!(
        llm.chat_requests()[1]["messages"].as_array().unwrap().len(),
        4
    );
    // upstream failure
    llm.push(MockReply::Status(500, "boom".into()));
    let (_, b) = s
        .post(
            url,
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(
        (b["error"].clone(), b["line"].clone()),
        (json!("provider_unavailable"), json!(""))
    );
    // rate limit: 10 calls per 8 s per (character, session)
    let mut limited = None;
    for i in 0..12 {
        let (_, b) = s
            .post(
                url,
                json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
            )
            .await;
        if b["error"] == "rate_limited" {
            limited = Some((i, b));
            break;
        }
    }
    let (i, b) = limited.expect("rate limited");
    assert_eq!(i, 6, "4 calls were made before the loop");
    assert_eq!(
        (b["line"].clone(), b["control"].clone()),
        (json!(""), json!({}))
    );
    assert!(b["retry_after"].as_u64().unwrap() >= 1);
    // /end closes the round's model session
    let (_, b) = s
        .post(
            "/api/game/badminton/end",
            json!({"persona_name": "Companion", "session_id": "b1"}),
        )
        .await;
    assert_eq!(b["closed"], true);
}

#[tokio::test]
async fn mirror_assistant_speak_and_realtime_context() {
    let s = server().await;
    let mut ws = ws_open(&s, "Companion").await;
    let m = "/api/game/soccer/mirror-assistant";
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "line": "<break time=\"1s\"/>"}),
        )
        .await;
    assert_eq!(b["reason"], "missing_line");
    let (_, b) = s.post(m, json!({"line": "hi"})).await;
    assert_eq!(b["reason"], "missing_persona_name");
    let (_, b) = s
        .post(m, json!({"persona_name": "Ghost", "line": "hi"}))
        .await;
    assert_eq!(b["reason"], "no_session_manager");
    // before a route: allowed (opening line)
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "line": "<speak>Ready?</speak>"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["method"].clone(), b["line"].clone()),
        (json!(true), json!("project_text_mirror"), json!("Ready?"))
    );
    let f = frame_of(&mut ws, "assistant_mirror").await;
    assert_eq!(f["text"], "Ready?");
    let hist = s.state.sessions.get("Companion").unwrap().history().await;
    assert_eq!(hist.last().unwrap().content.as_deref(), Some("Ready?"));
    assert_eq!(hist.last().unwrap().role, "assistant");
    start(&s, "soccer", "s1").await;
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "session_id": "old", "line": "x"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["skipped"].clone(), b["reason"].clone()),
        (
            json!(true),
            json!("stale_session"),
            json!("session_id_mismatch")
        )
    );
    let (_, b) = s
        .post(
            "/api/game/badminton/mirror-assistant",
            json!({"persona_name": "Companion", "line": "x"}),
        )
        .await;
    assert_eq!(b["reason"], "route_owned_by_other_game");
    let (_, b) = s
        .post(
            m,
            json!({"persona_name": "Companion", "session_id": "s1", "line": "Goal!"}),
        )
        .await;
    assert_eq!(b["mirrored"], true);
    let (_, st) = s
        .get("/api/game/soccer/route/state?persona_name=Companion")
        .await;
    assert_eq!(st["state"]["dialog_count"], 1);

    // speak
    let sp = "/api/game/soccer/speak";
    let (st, b) = s
        .post(
            "/api/game/new_user_icebreaker/speak",
            json!({"persona_name": "Companion", "line": "x"}),
        )
        .await;
    assert_eq!((st, b["reason"].clone()), (400, json!("not_a_game_route")));
    assert_eq!(b["route"], "/api/icebreaker/speak");
    let (_, b) = s
        .post(sp, json!({"persona_name": "Companion", "session_id": "s1"}))
        .await;
    assert_eq!(b["reason"], "missing_line");
    let (_, b) = s
        .post(
            sp,
            json!({"persona_name": "Companion", "session_id": "s9", "line": "hey"}),
        )
        .await;
    assert_eq!(
        (b["skipped"].clone(), b["audio_committed"].clone()),
        (json!("stale_session"), json!(false))
    );
    assert_eq!(b["voice_source"]["skipped"], "stale_session");
    let (_, b) = s
        .post(
            "/api/game/chess/speak",
            json!({"persona_name": "Companion", "line": "hey"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["audio_sent"].clone()
        ),
        (json!(false), json!("route_not_active"), json!(false))
    );
    let (_, b) = s
        .post(
            sp,
            json!({"persona_name": "Companion", "session_id": "s1", "line": "hey"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["reason"].clone()),
        (json!(false), json!("no_voice_provider"))
    );
    assert_eq!(b["tts_pipeline"]["after"]["tts_available"], false);
    assert_eq!(b["audio_sent"], false);

    // realtime-context: CSRF, then no realtime session
    let rc = "/api/game/soccer/realtime-context";
    let body = json!({"persona_name": "Companion", "session_id": "s1", "state": {"round": 2}});
    let (st, b) = s.post(rc, body.clone()).await;
    assert_eq!(
        (st, b["ok"].clone(), b["reason"].clone()),
        (403, json!(false), json!("csrf_validation_failed"))
    );
    let r = s
        .http
        .post(s.url(rc))
        .header("X-CSRF-Token", "wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let (st, b) = s.post_csrf(rc, body.clone()).await;
    assert_eq!(
        (st, b["reason"].clone()),
        (200, json!("no_active_realtime_session"))
    );
    let (_, b) = s.post_csrf(rc, json!({"persona_name": "Ghost"})).await;
    assert_eq!(b["reason"], "no_session_manager");
    let (_, b) = s.post_csrf(rc, json!({"state": {}})).await;
    assert_eq!(b["reason"], "missing_persona_name");
    let (_, b) = s
        .post_csrf(rc, json!({"persona_name": "Companion", "state": "x"}))
        .await;
    assert_eq!(b["reason"], "invalid_body");
    // body token works without the header
    let r = s
        .http
        .post(s.url(rc))
        .json(&json!({"persona_name": "Companion", "_csrf_token": companiond_core::testkit::CSRF}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["reason"],
        "no_active_realtime_session"
    );
}

#[tokio::test]
async fn quick_lines_passive_guard_and_character() {
    let s = server().await;
    // unsupported
    let (st, b) = s
        .post(
            "/api/game/chess/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (st, b["ok"].clone(), b["lines"].clone()),
        (200, json!(false), json!({}))
    );
    // badminton without a model: built-in fallback
    let (_, b) = s
        .post(
            "/api/game/badminton/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["fallback"].clone()),
        (json!(true), json!(true))
    );
    assert!(b["lines"]["game_over"].is_array());
    let (_, b) = s
        .post(
            "/api/game/soccer/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (b["ok"].clone(), b["lines"].clone()),
        (json!(false), json!({}))
    );
    let llm = MockLlm::start("{}").await;
    s.configure_llm(&llm.base()).await;
    llm.push(MockReply::Text(
        "```json\n{\"goal-scored\": [\"Yes!\", \"a line that is far too long for the limit\"], \"bogus\": [\"x\"]}\n```".into(),
    ));
    let (_, b) = s
        .post(
            "/api/game/soccer/quick-lines",
            json!({"persona_name": "Companion", "session_id": "s"}),
        )
        .await;
    assert_eq!(b["ok"], true, "{b}");
    assert_eq!(b["character"], "Companion");
    let gs = b["lines"]["goal-scored"].as_array().unwrap();
    assert_eq!(gs.len(), 2);
    assert!(gs.iter().all(|l| l.as_str().unwrap().chars().count() <= 24));
    assert!(b["lines"].get("bogus").is_none());
    assert_eq!(b["missing"].as_array().unwrap().len(), 11);
    llm.push(MockReply::Text(
        "{\"out\": [\"Out!\"], \"net\": [\"Net!\"]}".into(),
    ));
    let (_, b) = s
        .post(
            "/api/game/badminton/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(b["lines"]["out"], json!(["Out!"]));
    assert!(b.get("cached").is_none());
    let calls = llm.chat_requests().len();
    let (_, b) = s
        .post(
            "/api/game/badminton/quick-lines",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (b["cached"].clone(), b["lines"]["net"].clone()),
        (json!(true), json!(["Net!"]))
    );
    assert_eq!(llm.chat_requests().len(), calls);

    // passive guard
    let pg = "/api/game/soccer/passive-guard";
    let (_, b) = s
        .post(
            "/api/game/badminton/passive-guard",
            json!({"persona_name": "Companion"}),
        )
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["recommendedAction"].clone(),
            b["exitPromptType"].clone()
        ),
        (json!(false), json!("observe_more"), json!("none"))
    );
    let (_, b) = s
        .post(pg, json!({"persona_name": "Companion", "session_id": "s1"}))
        .await;
    assert_eq!(
        (b["reason"].clone(), b["recommendedAction"].clone()),
        (json!("route_not_active"), json!("observe_more"))
    );
    start(&s, "soccer", "s1").await;
    llm.push(MockReply::Text(
        "{\"classification\": \"frustrated\", \"confidence\": 0.8, \"recommendedAction\": \"prepare_exit_prompt\", \"evidenceTags\": [\"idle\"]}".into(),
    ));
    let (_, b) = s.post(pg, json!({"persona_name": "Companion", "session_id": "s1", "stage": 9, "promptType": "rest"})).await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["recommendedAction"].clone(),
            b["exitPromptType"].clone(),
            b["classification"].clone()
        ),
        (
            json!(true),
            json!("prepare_exit_prompt"),
            json!("rest"),
            json!("frustrated")
        )
    );
    llm.push(MockReply::Text(
        "{\"recommendedAction\": \"prepare_exit_prompt\"}".into(),
    ));
    let (_, b) = s
        .post(
            pg,
            json!({"persona_name": "Companion", "session_id": "s1", "stage": 3}),
        )
        .await;
    assert_eq!(
        (b["recommendedAction"].clone(), b["exitPromptType"].clone()),
        (json!("observe_more"), json!("none"))
    );
    llm.push(MockReply::Status(503, "down".into()));
    let (_, b) = s
        .post(pg, json!({"persona_name": "Companion", "session_id": "s1"}))
        .await;
    assert_eq!(
        (
            b["ok"].clone(),
            b["reason"].clone(),
            b["recommendedAction"].clone(),
            b["exitPromptType"].clone()
        ),
        (
            json!(false),
            json!("exception"),
            json!("observe_more"),
            json!("none")
        )
    );

    // character info: fallback model type, then a profile with an avatar
    let (_, b) = s.get("/api/game/soccer/character").await;
    assert_eq!(
        (b["persona_name"].clone(), b["model_type"].clone()),
        (json!("Companion"), json!("live2d"))
    );
    let mut profile = serde_json::Map::new();
    profile.insert(
        "_reserved".into(),
        json!({"avatar": {"model_type": "live3d", "mmd": {"model_path": "mmd/miku/miku.pmx"}, "vrm": {"model_path": "/user_vrm/a.vrm"}}}),
    );
    s.state.characters.create("Miku", profile).await.unwrap();
    let (_, b) = s.get("/api/game/soccer/character?persona_name=Miku").await;
    assert_eq!(b["model_type"], "live3d");
    assert_eq!(b["live3d_sub_type"], "mmd");
    assert_eq!(b["mmd_path"], "/static/mmd/miku/miku.pmx");
    assert_eq!(b["vrm_path"], "/user_vrm/a.vrm");
    assert_eq!(b["live2d_path"], "");
    // unknown names fall back to the current character
    let (_, b) = s
        .get("/api/game/soccer/character?persona_name=Nobody")
        .await;
    assert_eq!(b["persona_name"], "Companion");
}

/// The game line's prompt is the character's prompt (companiond_core::prompt):
/// card fields, the lorebook scanning the game event, post-history instructions.
#[tokio::test]
async fn game_chat_prompt_comes_from_the_character_card() {
    let s = server().await;
    let card = json!({"spec": "chara_card_v3", "spec_version": "3.0", "data": {
        "name": "Companion", "description": "{{char}} is a fox.",
        "post_history_instructions": "Never break character.",
        "character_book": {"entries": [
            {"keys": ["shuttlecock"], "content": "LORE-SHUTTLE"},
            {"keys": ["castle"], "content": "LORE-CASTLE"}]}}});
    s.state
        .characters
        .mutate(move |doc| {
            doc.characters.insert(
                "Companion".into(),
                json!({"_reserved": {"character_card": card}}),
            );
            Ok(())
        })
        .await
        .unwrap();
    let llm = MockLlm::start("Nice!\n{}").await;
    s.configure_llm(&llm.base()).await;
    start(&s, "badminton", "b1").await;
    let ev = json!({"kind": "line_in", "textRaw": "the shuttlecock hit the line"});
    let (_, b) = s
        .post(
            "/api/game/badminton/chat",
            json!({"persona_name": "Companion", "session_id": "b1", "event": ev}),
        )
        .await;
    assert_eq!(b["line"], "Nice!", "{b}");
    let sys = llm.chat_requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    for part in [
        "Companion is a fox.",
        "LORE-SHUTTLE",
        "Never break character.",
        "badminton",
    ] {
        assert!(sys.contains(part), "{part} missing: {sys}");
    }
    assert!(!sys.contains("LORE-CASTLE"), "{sys}");
}

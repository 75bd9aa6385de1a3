//! The operation backup of a download: a failing reload restores the exact
//! previous state.

use crate::common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn reload_failure_rolls_back_to_the_exact_previous_state() {
    let s = server_with_cloud(None).await;
    create_character(&s, "Mika", serde_json::from_str(PROFILE).unwrap()).await;
    let dir = mem_dir(&s, "Mika");
    write_memory(&dir);
    // The unit carries a memory file the memory side cannot load.
    std::fs::write(dir.join("facts.json"), "{broken").unwrap();
    let (st, b) = s
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 200, "{b}");

    // Local state diverges in every way the import touches.
    std::fs::write(dir.join("facts.json"), r#"[{"fact":"fixed"}]"#).unwrap();
    std::fs::write(
        dir.join("recent.json"),
        r#"[{"type":"human","data":{"content":"newer"}}]"#,
    )
    .unwrap();
    std::fs::write(dir.join("surfaced.json"), "[]").unwrap();
    add_db_row(&dir.join("time_indexed.db"), "local only");
    s.state
        .characters
        .mutate(|doc| {
            doc.characters
                .insert("Mika".into(), json!({"display_name": "Local Mika"}));
            Ok(())
        })
        .await
        .unwrap();
    let mem_before = tree(&dir);
    let chars_before = std::fs::read(s.data.join("config/characters.json")).unwrap();

    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 500, "{b}");
    assert_envelope(&b, "LOCAL_RELOAD_FAILED_ROLLED_BACK");
    assert_eq!(b["rolled_back"], true, "{b}");
    assert_eq!(b["rollback_error"], "");
    assert!(b["message_params"]["message"]
        .as_str()
        .unwrap()
        .contains("facts.json"));
    assert!(b["backup_path"].is_string());

    assert_eq!(
        tree(&dir),
        mem_before,
        "memory byte-identical after rollback"
    );
    assert_eq!(
        std::fs::read(s.data.join("config/characters.json")).unwrap(),
        chars_before
    );
    assert_eq!(
        s.state.characters.profile("Mika").unwrap()["display_name"],
        "Local Mika"
    );
    let root: Value =
        serde_json::from_slice(&std::fs::read(s.data.join("state/root_state.json")).unwrap())
            .unwrap();
    assert_eq!(root["mode"], "normal", "the fence is lowered");

    // On a device where the character is new, the rollback removes it again.
    let cloud = s.data.join("cloud").to_string_lossy().into_owned();
    let other = server_with_cloud(Some(cloud)).await;
    let chars_before = std::fs::read(other.data.join("config/characters.json")).unwrap();
    let (st, b) = other
        .post("/api/cloudsave/character/Mika/download", json!({}))
        .await;
    assert_eq!(st, 500, "{b}");
    assert_eq!(b["rolled_back"], true);
    assert!(!other.state.characters.exists("Mika"));
    assert!(other.state.sessions.get("Mika").is_none());
    assert!(!mem_dir(&other, "Mika").exists());
    assert_eq!(
        std::fs::read(other.data.join("config/characters.json")).unwrap(),
        chars_before
    );
}

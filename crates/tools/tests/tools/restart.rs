//! Registrations are runtime state: not kept across a restart, never on disk.

use std::path::Path;

use companiond_core::testkit::{TestOptions, TestServer};
use serde_json::json;

use crate::common::*;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

fn any_file_contains(dir: &Path, needle: &[u8]) -> bool {
    std::fs::read_dir(dir).expect("read_dir").any(|e| {
        let p = e.expect("entry").path();
        if p.is_dir() {
            any_file_contains(&p, needle)
        } else {
            std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        }
    })
}

#[tokio::test]
async fn registrations_are_not_kept_across_a_restart() {
    let s = server().await;
    create_character(&s, "Alice").await;
    let (st, _) = register(
        &s,
        json!({"name": "ephemeral_tool_xyz", "callback_url": "http://127.0.0.1:9/cb"}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(listed(&s, "Alice").await, vec!["ephemeral_tool_xyz"]);
    assert!(!any_file_contains(&s.data, b"ephemeral_tool_xyz"));

    // "Restart": a new server over a copy of the same data directory.
    let data = s.data.clone();
    s.stop();
    let s2 = TestServer::start_with(
        &[companiond_tools::FAMILY],
        TestOptions {
            prepare: Some(Box::new(move |new_data, _| copy_dir(&data, new_data))),
            ..Default::default()
        },
    )
    .await;
    let (st, b) = s2.get("/api/tools").await;
    assert_eq!(st, 200);
    let by_role = b["tools_by_role"].as_object().expect("object");
    assert!(by_role.contains_key("Alice"), "{b}");
    assert!(by_role.values().all(|v| v == &json!([])), "{b}");
}

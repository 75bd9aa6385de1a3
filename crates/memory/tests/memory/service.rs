//! The memory service other families call around an import (release, reload).

use crate::common::*;

#[tokio::test]
async fn memory_service_releases_and_reloads_for_imports() {
    let s = server().await;
    let svc = s
        .state
        .hooks
        .memory_service()
        .expect("the memory family installs its service");
    svc.release("Companion".into()).await.unwrap();
    svc.reload("Companion".into()).await.unwrap();
    // A missing unit file is recreated; a database that is not SQLite fails the reload.
    let dir = s.data.join("memory").join("Companion");
    std::fs::remove_file(dir.join("facts.json")).unwrap();
    svc.reload("Companion".into()).await.unwrap();
    assert!(dir.join("facts.json").is_file());
    std::fs::write(
        dir.join("time_indexed.db"),
        b"definitely not sqlite, definitely not sqlite",
    )
    .unwrap();
    assert!(svc.reload("Companion".into()).await.is_err());
    assert!(svc.reload("../escape".into()).await.is_err());
}

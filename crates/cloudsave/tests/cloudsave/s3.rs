//! Cloud save on an S3 target: a real S3-compatible server (s3s-fs, SigV4
//! authentication on) on a loopback port. The target reads the process
//! environment (`AWS_*`); only this module's one test sets it, and the other
//! modules use directory targets, which never read it.

use std::net::SocketAddr;

use crate::common::*;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use serde_json::{json, Value};

const ACCESS_KEY: &str = "companiond-test";
const SECRET_KEY: &str = "companiond-test-secret-key";

/// Start s3s-fs over `root` (each sub-folder is a bucket).
async fn start_s3(root: &std::path::Path) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let fs = s3s_fs::FileSystem::new(root).unwrap();
    let mut b = s3s::service::S3ServiceBuilder::new(fs);
    b.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
    let service = b.build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        while let Ok((socket, _)) = listener.accept().await {
            let conn = http
                .serve_connection(TokioIo::new(socket), service.clone())
                .into_owned();
            tokio::spawn(async move {
                let _ = conn.await;
            });
        }
    });
    (addr, task)
}

fn set_env(endpoint: &str) {
    std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::set_var("AWS_ENDPOINT_URL", endpoint);
}

// One test function: the environment is process-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_target_round_trip_and_unreachable_endpoint() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("saves")).unwrap();
    let (addr, server) = start_s3(root.path()).await;
    set_env(&format!("http://{addr}"));

    let s = server_with_cloud(Some("s3://saves/companion/units".into())).await;
    let up = round_trip(&s, "s3").await;

    // The objects are in the bucket under the prefix; the meta names the payload.
    let unit = root.path().join("saves/companion/units/characters/Mika");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(unit.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        meta["payload_fingerprint"],
        up["meta"]["payload_fingerprint"]
    );
    let payload = unit
        .join("payload")
        .join(meta["payload_id"].as_str().unwrap());
    assert_eq!(
        db_rows(&payload.join("memory/time_indexed.db")),
        vec!["first", "second"]
    );
    assert!(!payload.join("memory/recent_meta.json").exists());

    let (st, cfg) = s.get("/api/cloudsave/platform-autocloud-config").await;
    assert_eq!(st, 200);
    assert_eq!(cfg["sync_backend"], "s3");
    assert_eq!(
        cfg["platform_autocloud"]["cloudsave_root"],
        "s3://saves/companion/units"
    );
    assert_eq!(cfg["platform_autocloud"]["has_snapshot"], true);
    assert_eq!(cfg["platform_autocloud"]["provider_available"], true);

    // A big database goes up in parts (multipart upload) and comes back intact.
    let db = mem_dir(&s, "Mika").join("time_indexed.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        let blob = "y".repeat(4000);
        c.execute_batch("BEGIN;").unwrap();
        for i in 0..3000 {
            c.execute(
                "INSERT INTO events(text) VALUES (?1)",
                [format!("{i}{blob}")],
            )
            .unwrap();
        }
        c.execute_batch("COMMIT;").unwrap();
    }
    assert!(std::fs::metadata(&db).unwrap().len() > 10 * 1024 * 1024);
    let t = std::time::Instant::now();
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/upload",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    let upload_ms = t.elapsed().as_millis();
    assert_eq!(b["sequence_number"], 2);
    std::fs::remove_file(&db).unwrap();
    let t = std::time::Instant::now();
    let (st, b) = s
        .post(
            "/api/cloudsave/character/Mika/download",
            json!({"overwrite": true}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    eprintln!(
        "S3 target, 12 MB database: upload {upload_ms} ms, download {} ms",
        t.elapsed().as_millis()
    );
    assert_eq!(db_rows(&db).len(), 3002);
    // The previous payload's objects were removed from the bucket (s3s-fs keeps empty folders).
    let payloads: Vec<_> = std::fs::read_dir(unit.join("payload"))
        .unwrap()
        .flatten()
        .filter(|e| !tree(&e.path()).is_empty())
        .collect();
    assert_eq!(payloads.len(), 1);

    // Wrong credentials: the server refuses, the route answers 503.
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "wrong");
    let bad = server_with_cloud(Some("s3://saves/companion/units".into())).await;
    let (st, b) = bad.get("/api/cloudsave/summary").await;
    assert_eq!(st, 503, "{b}");
    assert_envelope(&b, "CLOUDSAVE_PROVIDER_UNAVAILABLE");

    // Unreachable endpoint: 503 quickly, and the config route degrades.
    server.abort();
    let _ = server.await;
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    set_env(&format!("http://{dead_addr}"));
    let off = server_with_cloud(Some("s3://saves/x".into())).await;
    create_character(&off, "Mika", json!({})).await;
    let t = std::time::Instant::now();
    let (st, b) = off.get("/api/cloudsave/summary").await;
    assert_eq!(st, 503, "{b}");
    assert_envelope(&b, "CLOUDSAVE_PROVIDER_UNAVAILABLE");
    let (st, b) = off
        .post("/api/cloudsave/character/Mika/upload", json!({}))
        .await;
    assert_eq!(st, 503, "{b}");
    assert_envelope(&b, "CLOUDSAVE_PROVIDER_UNAVAILABLE");
    assert_eq!(b["character_name"], "Mika");
    let (st, b) = off.get("/api/cloudsave/platform-autocloud-config").await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["platform_autocloud"]["provider_available"], false);
    assert!(t.elapsed().as_secs() < 30, "took {:?}", t.elapsed());
    let root_state: Value = serde_json::from_slice(
        &std::fs::read(off.data.join("state/root_state.json")).unwrap_or_else(|_| b"{}".to_vec()),
    )
    .unwrap();
    assert_ne!(root_state["mode"], "bootstrap_importing");
}

//! Request bodies a handler did not read are discarded; the connection is kept.

use std::time::Duration;

use companiond_core::testkit::TestServer;

use crate::common::*;

#[tokio::test]
async fn unread_request_bodies_are_discarded_and_the_connection_kept() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = TestServer::start(&[companiond_core::server::Family::routes(probe)]).await;
    // The loopback probe never reads its body. After its answer the rest of the
    // body has been discarded, so the same keep-alive connection serves the next
    // request (without that, hyper closes it and a client still sending sees a reset).
    let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let body = vec![b'x'; 512 * 1024];
    for _ in 0..3 {
        let head = format!(
            "POST /api/probe/local HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&body).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(
            !text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    }
}

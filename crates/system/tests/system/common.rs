//! Fixtures shared by the system tests: servers, CSRF requests, files, chat sockets.
//! The loopback upstream hosts of the meme proxy and translation are in [`upstreams`].

pub mod upstreams;

pub use std::path::Path;
pub use std::time::Duration;

pub use axum::http::Method;
pub use companiond_core::testkit::{
    split, MockLlm, MockReply, TestOptions, TestServer, Upstream, CSRF,
};
pub use companiond_core::usage::UsageRow;
pub use futures::StreamExt;
pub use serde_json::{json, Value};
pub use tokio_tungstenite::tungstenite::Message;

pub const FAMILIES: &[companiond_core::server::Family] = &[companiond_system::FAMILY];
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub async fn server() -> TestServer {
    TestServer::start(FAMILIES).await
}

pub async fn server_with(prepare: impl FnOnce(&Path, &Path) + Send + 'static) -> TestServer {
    TestServer::start_with(
        FAMILIES,
        TestOptions {
            prepare: Some(Box::new(prepare)),
            ..Default::default()
        },
    )
    .await
}

pub async fn send_csrf(s: &TestServer, method: Method, path: &str, body: Value) -> (u16, Value) {
    split(s.csrf(method, path).json(&body).send().await.unwrap()).await
}

pub fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

pub fn png(extra: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend(std::iter::repeat_n(7u8, extra));
    v
}

pub use companiond_core::testkit::{next_of_type, Ws};

pub async fn ws(s: &TestServer, name: &str) -> Ws {
    let (w, first) = s.chat(name).await;
    assert_eq!(first["persona_name"], name);
    w
}

pub fn survey_file() -> Vec<u8> {
    serde_json::to_vec(&json!({"title": "How are we doing?", "survey_version": "9.9.9",
        "questions": [{"id": "q1", "type": "single", "label": "Happy?", "options": [{"value": "y", "label": "Yes"}]}]}))
    .unwrap()
}

/// A game route that owns every character's input (stands in for the games family).
pub struct RoutingEverything;

impl companiond_core::state::InputRouter for RoutingEverything {
    fn route(
        &self,
        _c: String,
        _t: String,
        _s: companiond_core::state::InputSource,
    ) -> futures::future::BoxFuture<'static, Option<Value>> {
        Box::pin(async { None })
    }
    fn is_routing(&self, _c: &str) -> bool {
        true
    }
}

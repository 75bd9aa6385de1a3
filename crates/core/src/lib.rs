//! Shared foundation of companiond.
//!
//! Every family crate (config, memory, cloudsave, system, games, tools, avatars,
//! jukebox) builds on the pieces here:
//!
//! * [`options`]: the command line / environment of `runtime.md`;
//! * [`store`]: atomic JSON documents under the data dir, one async lock per document;
//! * [`paths`]: the one safe join for request-supplied paths;
//! * [`sink`]: the file writer behind every streamed upload;
//! * [`envelope`]: the response envelopes of interface.md § Errors, the JSON body
//!   extractor (422) and the no-store helper;
//! * [`guards`]: the loopback guard and the CSRF guard;
//! * [`characters`]: the characters registry and its routes;
//! * [`sessions`], [`llm`], [`tools`]: per-character session managers, the chat
//!   WebSocket, the OpenAI-compatible client and runtime tool dispatch;
//! * [`api`]: the route builder that keeps the router and `/openapi.json` in step;
//! * [`server`]: assembling and serving the application.

pub mod api;
pub mod characters;
pub mod chat_dialect;
pub mod envelope;
pub mod fence;
pub mod front;
pub mod guards;
pub mod history;
pub mod http;
pub mod layout;
pub mod llm;
pub mod multipart;
pub mod net;
pub mod notices;
pub mod options;
pub mod paths;
pub mod providers;
pub mod server;
pub mod sessions;
pub mod sink;
pub mod staging;
pub mod stamp;
pub mod state;
pub mod static_files;
pub mod store;
pub mod task;
pub mod text;
pub mod tools;
pub mod usage;

#[cfg(feature = "testkit")]
pub mod testkit;

pub use api::Api;
pub use http::Ext;
pub use state::AppState;

/// Seconds since the Unix epoch as a float (timestamps in JSON bodies).
pub fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The current UTC time in RFC 3339 form.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

//! Shared foundation of companiond.
//!
//! Every family crate (config, memory, cloudsave, system, games, tools, avatars,
//! jukebox, frontend) builds on the pieces here, in two layers (docs/ARCHITECTURE.md):
//!
//! * the domain, which knows nothing of HTTP: [`options`] (command line and
//!   environment), [`store`] (atomic JSON documents, one async lock per document),
//!   [`layout`] (every fixed path of the data dir), [`paths`] (the one safe join for
//!   request-supplied paths), [`sink`] (the file writer behind every streamed
//!   upload), [`characters`] (the registry and the name rules), [`cards`]
//!   (character cards), [`prompt`] (the one prompt builder), [`sessions`]
//!   (per-character session managers), [`turn`] (one chat turn), [`history`],
//!   [`llm`], [`speech`] (text-to-speech), [`tools`], [`usage`], [`rename`] (the character rename hook),
//!   [`state`] (the [`AppState`] that holds them);
//! * [`http`]: the route builder [`api`], the front door, [`guards`], the
//!   [`envelope`]s, [`multipart`], the characters routes, the chat WebSocket and
//!   the static files. Its modules are re-exported here under their old paths
//!   (`companiond_core::guards::Csrf`, `companiond_core::envelope::*`, ...).
//!
//! [`server`] assembles both into the application and serves it.

pub mod alloc;
pub mod backup;
pub mod cards;
pub mod characters;
pub mod context;
pub mod disk;
pub mod fence;
pub mod frames;
pub mod hearing;
pub mod history;
pub mod hosts;
pub mod http;
pub mod instance;
pub mod json;
pub mod layout;
pub mod llm;
pub mod local_model;
pub mod metrics;
pub mod net;
pub mod notices;
pub mod options;
pub mod paths;
pub mod prompt;
pub mod providers;
pub mod rename;
pub mod server;
pub mod sessions;
pub mod sink;
pub mod snapshots;
pub mod speech;
pub mod sqlite;
pub mod staging;
pub mod stamp;
pub mod state;
pub mod storage_status;
pub mod store;
pub mod task;
pub mod text;
pub mod tools;
pub mod turn;
pub mod usage;

pub use http::{api, chat_dialect, envelope, front, guards, multipart, static_files};

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

/// A time in Unix milliseconds in RFC 3339 form (empty when out of range).
pub fn rfc3339_ms(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// An error with its sources, on one line (`outer: inner: root`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The current UTC time in RFC 3339 form.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

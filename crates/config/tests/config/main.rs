//! End-to-end tests of the configuration and proactive routes over real HTTP,
//! with real loopback upstreams and real files in a temporary data dir, one module
//! per resource.

#![allow(clippy::result_large_err)] // tungstenite handshake callbacks return its large error type

mod api_providers;
mod common;
mod connectivity;
mod conversation;
mod core_api;
mod languages;
mod list_models;
mod page;
mod perf;
mod preferences;
mod proactive;
mod proxy;
mod routes;
mod tts_voices;
mod voice;

//! End-to-end tests of the memory family over real HTTP and WebSocket, with
//! real files and real SQLite databases; one module per resource, shared
//! fixtures in [`common`].

mod common;

mod embeddings;
mod fence;
mod fold;
mod legacy;
mod longterm;
mod model_servers;
mod openapi;
mod recent_file;
mod rename;
mod review;
mod service;
mod snapshots;
mod toggles;
mod units;

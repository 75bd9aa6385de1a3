//! Core over real HTTP and WebSocket, one module per resource; shared fixtures
//! in `common` (over `companiond_core::testkit`).

mod cards;
mod characters;
mod chat_socket;
mod common;
mod guards;
mod hearing;
mod model_servers;
mod openapi;
mod request_bodies;
mod speech;
mod static_files;

//! End-to-end tests of /api/jukebox over real HTTP with real media files,
//! real multipart bodies and real ZIP archives, one module per resource.

mod archive;
mod bindings;
mod common;
mod config;
mod files;
mod openapi;
mod songs;
mod storage;
mod uploads;

//! End to end over real HTTP and WebSocket: the original frontend's pages served
//! from `--frontend-dir` (small templates of our own), the routes the pages call,
//! and the original chat protocol with a loopback model. One module per
//! resource; shared fixtures in [`common`].

mod common;

mod characters;
mod chat;
mod extras;
mod models;
mod openapi;
mod pages;

//! The system family over real HTTP, one module per resource. The meme proxy and
//! translation read start-up environment variables, set once by
//! [`common::upstreams`] before the first server that needs them is built.

mod activity;
mod autostart;
mod changelog;
mod common;
mod desktop;
mod emotion;
mod files;
mod handoff;
mod invitations;
mod meme;
mod notices;
mod openapi;
mod platform;
mod proactive;
mod routes;
mod status;
mod survey;
mod translate;
mod tutorial;
mod usage;

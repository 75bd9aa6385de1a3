//! companiond: the local backend of the desktop companion application.
//!
//! The binary assembles the families of the interface, each its own crate over
//! the shared foundation in `companiond-core`.

pub use companiond_core as core;
use companiond_core::server::Family;

/// Every family of the interface, in the order of interface.md.
pub const FAMILIES: &[Family] = &[
    companiond_config::api,
    companiond_memory::api,
    companiond_cloudsave::api,
    companiond_system::api,
    companiond_games::api,
    companiond_tools::api,
    companiond_avatars::api,
    companiond_jukebox::api,
    companiond_console::api,
    companiond_frontend::api,
];

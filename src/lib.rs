//! companiond: the local backend of the desktop companion application.
//!
//! The binary assembles the families of the interface, each its own crate over
//! the shared foundation in `companiond-core`.

pub use companiond_core as core;
use companiond_core::server::Family;

/// Every family of the interface, in the order of the README's family table.
pub const FAMILIES: &[Family] = &[
    companiond_config::FAMILY,
    companiond_memory::FAMILY,
    companiond_cloudsave::FAMILY,
    companiond_system::FAMILY,
    companiond_games::FAMILY,
    companiond_tools::FAMILY,
    companiond_mcp::FAMILY,
    companiond_avatars::FAMILY,
    companiond_jukebox::FAMILY,
    companiond_console::FAMILY,
    companiond_local::FAMILY,
    companiond_frontend::FAMILY,
];

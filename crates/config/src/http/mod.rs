//! Thin HTTP handlers over the domain modules, one file per resource.

pub mod conversation;
pub mod page;
pub mod preferences;
pub mod proactive;
pub mod providers;
pub mod voice;

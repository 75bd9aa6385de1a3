//! The HTTP handlers of both families, one module per resource. Each handler
//! takes its checked input ([`extract`], [`input`]), calls the domain
//! ([`crate::games`], [`crate::icebreaker`]) and turns the typed result into
//! the wire answer.

pub mod dialogue;
mod extract;
pub mod game_routes;
pub mod icebreaker;
mod input;
pub mod leaderboard;
pub mod logs;

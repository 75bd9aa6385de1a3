//! End-to-end tests of the mini-game (`/api/game`) and icebreaker (`/api/icebreaker`)
//! routes over real HTTP and the real chat WebSocket, with a loopback
//! OpenAI-compatible model server and real SQLite. One module per resource.

mod bodies;
mod common;
mod dialogue;
mod game_routes;
mod icebreaker;
mod leaderboard;
mod logs;
mod numeric_inputs;
mod openapi;
mod perf;
mod speak;

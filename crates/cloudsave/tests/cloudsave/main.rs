//! Cloud save over real HTTP and WebSocket, a module per resource.

mod backup;
mod common;
mod download;
mod fence;
mod requests;
mod s3;
mod summary;
mod upload;

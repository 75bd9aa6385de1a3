//! End-to-end tests of `/api/tools` and of tool calls by the model, over real
//! HTTP and the chat WebSocket, with a loopback OpenAI-compatible model server
//! (`MockLlm`) and a real loopback plugin callback server; a module per resource.

mod calls;
mod common;
mod eviction;
mod guard;
mod openapi;
mod register;
mod restart;
mod roles;

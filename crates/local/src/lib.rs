//! The built-in local model (docs/local-model.md): GGUF chat models run inside
//! companiond on the CPU with candle, so the companion talks with nothing
//! else installed.
//!
//! - `gguf.rs` checks a file before loading (GGUF, whole, supported, fits memory);
//! - `model.rs` the transformer (Llama, Qwen2, Qwen3) with a KV cache that keeps a prefix;
//! - `mat.rs` weight matrices and the device (CPU, or a GPU with `cuda`/`metal`);
//! - `q4_1.rs` decoding's product for Q4_1 weights (AVX2), read as they are in the file;
//! - `tokenizer.rs` byte-level BPE or SentencePiece (`spm.rs`) from the GGUF metadata;
//! - `template.rs` the model's chat template (minijinja); `json_guard.rs` and
//!   `schema_guard.rs` JSON- and JSON-schema-constrained sampling;
//! - `engine.rs` the worker thread: one copy loaded on first use, chat first, idle unload;
//! - `catalog.rs` the curated models, `pull.rs` their resumable, verified download;
//! - `backend.rs` what core's model client calls (`companiond_core::local_model::LocalBackend`);
//! - `http.rs` the routes under `/api/local/`, `cli.rs` `companiond model list|pull`.

pub mod backend;
pub mod catalog;
pub mod cli;
pub mod engine;
pub mod gguf;
mod http;
pub mod json_guard;
pub mod mat;
pub mod model;
pub mod pull;
pub mod q4_1;
pub mod schema_guard;
pub mod spm;
pub mod template;
pub mod tokenizer;

use std::sync::Arc;

use axum::http::Method;
use companiond_core::guards::Csrf;
use companiond_core::server::Family;
use companiond_core::{Api, AppState};

pub const FAMILY: Family = Family { api, start };

/// The routes (docs/local-model.md, "Routes").
pub fn api(state: &AppState) -> Api {
    Api::new(state, "local")
        .get(
            "/api/local/status",
            "the built-in model: which file, loaded or not, settings, last speed",
            http::status,
        )
        .get(
            "/api/local/models",
            "the curated models, which are pulled, and downloads in progress",
            http::models,
        )
        .guarded(
            Method::POST,
            "/api/local/models/{name}/pull",
            "download a curated model (resumable, checksum-verified); progress in /api/local/models",
            Csrf::Success,
            http::pull,
        )
        .guarded(
            Method::POST,
            "/api/local/unload",
            "unload the model now (it loads again on the next request)",
            Csrf::Success,
            http::unload,
        )
}

/// Install the backend in core's model client.
pub fn start(state: &AppState) {
    let backend = Arc::new(backend::Backend::new(state));
    state.llm.set_local(backend.clone());
    state.provide(backend);
}

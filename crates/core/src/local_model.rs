//! The seam to the built-in local model (docs/local-model.md). The engine
//! lives in its own crate (`crates/local`, the `local` family) so the other
//! families and their tests do not compile it; its `start()` installs a
//! [`LocalBackend`] with [`crate::llm::LlmClient::set_local`]. A slot that
//! resolves to the catalog's `local` provider, or any slot when no provider is
//! configured and a local model is available, is sent to it instead of over
//! HTTP.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::llm::{ChatMessage, Completion, LlmError};

/// The catalog key of the built-in provider.
pub const PROVIDER: &str = "local";
/// The base URL that stands for the built-in provider in an [`crate::providers::Endpoint`].
pub const BASE_URL: &str = "local://builtin";

/// Is `base_url` the built-in provider?
pub fn is_local(base_url: &str) -> bool {
    base_url.trim_end_matches('/') == BASE_URL
}

/// One generation request.
#[derive(Clone, Debug, Default)]
pub struct LocalRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// Constrain the answer to one JSON object (the `response_format` asked for
    /// JSON, with or without a schema).
    pub json: bool,
    /// The JSON schema the answer must follow (with `json`), when the call gave one.
    pub schema: Option<Value>,
    /// Background work (memory, emotion...) waits while chat requests are queued.
    pub background: bool,
}

/// What a generation sends back, in order: deltas, then one `Done` or `Failed`.
#[derive(Clone, Debug)]
pub enum LocalEvent {
    Delta(String),
    Done(Completion),
    Failed(LlmError),
}

/// The engine as the model client sees it.
pub trait LocalBackend: Send + Sync {
    /// Is a model file configured (the slot can be offered)?
    fn available(&self) -> BoxFuture<'static, bool>;
    /// Run a request; events arrive on the receiver. Dropping it cancels.
    fn generate(&self, req: LocalRequest) -> tokio::sync::mpsc::UnboundedReceiver<LocalEvent>;
    /// Embed texts (one unit vector each).
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'static, Result<Vec<Vec<f32>>, LlmError>>;
    /// The context window the model runs with.
    fn context_window(&self) -> BoxFuture<'static, Option<usize>>;
    /// The models it can run (`list_models`): `{id, name, ...}` objects.
    fn models(&self) -> BoxFuture<'static, Vec<Value>>;
}

//! The process's metrics, read at `GET /metrics` in Prometheus text format
//! (docs/operations.md). One registry for the process ([`metrics`]): the
//! request layer, the chat socket, the model client and the store record into
//! it without carrying a handle, as a log line is written without one.
//!
//! Label values are bounded: a route is its registered template (`/ws/{name}`,
//! never the request path), an unmatched request is `unmatched`.

use std::sync::OnceLock;
use std::time::Duration;

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

/// How a model call or a speech chunk ended (label `ok` / `error`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error,
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, e: &mut LabelValueEncoder) -> std::fmt::Result {
        e.write_str(match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
        })
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    slot: String,
    outcome: Outcome,
}

/// Which side of a model call a token count is (label `prompt` / `completion`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum TokenKind {
    Prompt,
    Completion,
}

impl EncodeLabelValue for TokenKind {
    fn encode(&self, e: &mut LabelValueEncoder) -> std::fmt::Result {
        e.write_str(match self {
            TokenKind::Prompt => "prompt",
            TokenKind::Completion => "completion",
        })
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    kind: TokenKind,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 0.5 ms … ~33 s
    Histogram::new(exponential_buckets(0.0005, 3.0, 11))
}

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Histograms<RouteLabels>,
    chat_sockets: Gauge,
    chat_turns: Counter,
    model_calls: Family<ModelLabels, Counter>,
    model_seconds: Histograms<ModelLabels>,
    model_tokens: Family<TokenLabels, Counter>,
    store_write_seconds: Histogram,
    speech_chunks: Family<OutcomeLabels, Counter>,
    disk_free: Gauge,
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("companiond");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template, method and status",
            requests.clone(),
        );
        let request_seconds: Histograms<RouteLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "http_request_duration",
            "Time to the answer's head, by route template and method",
            Unit::Seconds,
            request_seconds.clone(),
        );
        let chat_sockets = Gauge::default();
        registry.register(
            "chat_sockets_open",
            "Chat WebSockets open now",
            chat_sockets.clone(),
        );
        let chat_turns = Counter::default();
        registry.register(
            "chat_turns",
            "Chat turns ended (answered, failed or taken by a game)",
            chat_turns.clone(),
        );
        let model_calls = Family::<ModelLabels, Counter>::default();
        registry.register(
            "model_calls",
            "Language model calls, by slot and outcome",
            model_calls.clone(),
        );
        let model_seconds: Histograms<ModelLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "model_call_duration",
            "Language model call time (a streamed call: to its last chunk)",
            Unit::Seconds,
            model_seconds.clone(),
        );
        let model_tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "model_tokens",
            "Tokens the model servers reported, by kind",
            model_tokens.clone(),
        );
        let store_write_seconds = latency_histogram();
        registry.register_with_unit(
            "store_write_duration",
            "Atomic document writes (write, fsync, rename)",
            Unit::Seconds,
            store_write_seconds.clone(),
        );
        let speech_chunks = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "speech_chunks",
            "Text chunks sent to a speech provider, by outcome",
            speech_chunks.clone(),
        );
        let disk_free = Gauge::default();
        registry.register_with_unit(
            "data_dir_free",
            "Free space on the data directory's file system",
            Unit::Bytes,
            disk_free.clone(),
        );
        Metrics {
            registry,
            requests,
            request_seconds,
            chat_sockets,
            chat_turns,
            model_calls,
            model_seconds,
            model_tokens,
            store_write_seconds,
            speech_chunks,
            disk_free,
        }
    }

    /// An HTTP request answered.
    pub fn request(&self, method: &str, route: &str, status: u16, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_string(),
                route: route.to_string(),
                status,
            })
            .inc();
        self.request_seconds
            .get_or_create(&RouteLabels {
                method: method.to_string(),
                route: route.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// A chat socket opened; the guard closes it when dropped.
    pub fn chat_socket_open(&self) -> OpenSocket {
        self.chat_sockets.inc();
        OpenSocket
    }

    /// A chat turn ended.
    pub fn chat_turn(&self) {
        self.chat_turns.inc();
    }

    /// A model call ended.
    pub fn model_call(&self, slot: &str, outcome: Outcome, took: Duration) {
        let labels = ModelLabels {
            slot: slot.to_string(),
            outcome,
        };
        self.model_calls.get_or_create(&labels).inc();
        self.model_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// Tokens a model server reported for a call.
    pub fn model_tokens(&self, kind: TokenKind, n: u64) {
        self.model_tokens
            .get_or_create(&TokenLabels { kind })
            .inc_by(n);
    }

    /// A chunk of speech synthesised (or failed).
    pub fn speech_chunk(&self, outcome: Outcome) {
        self.speech_chunks
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// A document written by the store.
    pub fn store_write(&self, took: Duration) {
        self.store_write_seconds.observe(took.as_secs_f64());
    }

    /// The text exposition, with the free space of `data_dir` read now.
    pub fn encode(&self, data_dir: &std::path::Path) -> String {
        if let Some(free) = free_space(data_dir) {
            self.disk_free.set(i64::try_from(free).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Free space (for this user) on the file system of `path`.
pub fn free_space(path: &std::path::Path) -> Option<u64> {
    fs4::available_space(path).ok()
}

/// An open chat socket, counted until dropped.
pub struct OpenSocket;

impl Drop for OpenSocket {
    fn drop(&mut self) {
        metrics().chat_sockets.dec();
    }
}

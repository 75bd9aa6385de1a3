//! The character speaks (docs/voice.md): text-to-speech providers behind one
//! small trait, and the per-connection pipeline that turns a streamed reply
//! into ordered 48 kHz audio on the chat socket.
//!
//! * [`chunker`]: speakable chunks of streamed deltas;
//! * [`audio`]: PCM bytes, the streaming WAV reader, MP3, the 48 kHz resampler;
//! * [`openai`]: the OpenAI-compatible `POST <url>/audio/speech` provider;
//! * [`wyoming`]: the Wyoming provider (`tcp://host:port`);
//! * [`voice_server`]: the GPT-SoVITS v3 `stream-input` voice server (one socket per speech);
//! * [`pipeline`]: a connection's [`pipeline::Voice`] and one [`pipeline::Speech`]
//!   per reply (≤ 3 chunks in flight, strict order, barge-in);
//! * [`config`]: which provider the stored settings choose;
//! * [`voices`]: the configured provider's voices (settings pickers).

pub mod audio;
pub mod chunker;
pub mod config;
pub mod openai;
pub mod pipeline;
pub mod voice_server;
pub mod voices;
pub mod wyoming;

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::mpsc;

pub use audio::OUTPUT_RATE;

/// Why a chunk could not be spoken. Its [`code`](TtsError::code) is the
/// `code` of the error frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtsError {
    /// The provider cannot be reached (connection refused, DNS, TLS).
    Unavailable(String),
    /// The provider did not answer (or stopped answering) in time.
    Timeout,
    /// The provider refused the key (HTTP 401/403).
    Auth(u16),
    /// The provider answered an HTTP error.
    Upstream(u16, String),
    /// The audio could not be read (garbage, a lying header, too large).
    BadAudio(String),
    /// The settings name a provider that cannot be used (bad URL).
    Config(String),
}

impl TtsError {
    pub fn code(&self) -> &'static str {
        match self {
            TtsError::Unavailable(_) => "tts_unavailable",
            TtsError::Timeout => "tts_timeout",
            TtsError::Auth(_) => "tts_auth_failed",
            TtsError::Upstream(..) => "tts_upstream_error",
            TtsError::BadAudio(_) => "tts_bad_audio",
            TtsError::Config(_) => "tts_config_invalid",
        }
    }
}

impl std::fmt::Display for TtsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TtsError::Unavailable(e) => write!(f, "cannot reach the speech provider: {e}"),
            TtsError::Timeout => f.write_str("the speech provider did not answer in time"),
            TtsError::Auth(s) => write!(f, "the speech provider refused the key (HTTP {s})"),
            TtsError::Upstream(s, b) => write!(f, "the speech provider answered HTTP {s}: {b}"),
            TtsError::BadAudio(e) => write!(f, "unreadable audio from the speech provider: {e}"),
            TtsError::Config(e) => write!(f, "the speech settings cannot be used: {e}"),
        }
    }
}

impl From<audio::BadAudio> for TtsError {
    fn from(e: audio::BadAudio) -> Self {
        TtsError::BadAudio(e.0)
    }
}

pub(crate) use crate::error_chain as describe;

/// The time and size limits of speech (the defaults; tests provide their own
/// through `AppState::provide`).
#[derive(Debug, Clone)]
pub struct SpeechLimits {
    /// From a request to the first byte of its answer.
    pub first_byte: Duration,
    /// The longest silence within an answer.
    pub idle: Duration,
    /// Chunks synthesised at once (delivered in order).
    pub in_flight: usize,
    /// Audio queued for a connection's socket at most (bytes).
    pub queued_bytes: usize,
    /// Largest compressed (MP3) answer read.
    pub max_encoded: usize,
}

impl Default for SpeechLimits {
    fn default() -> Self {
        SpeechLimits {
            first_byte: Duration::from_secs(15),
            idle: Duration::from_secs(10),
            in_flight: 3,
            queued_bytes: 1024 * 1024,
            max_encoded: 2 * 1024 * 1024,
        }
    }
}

/// Samples per audio frame sent to a client (100 ms at 48 kHz).
pub const FRAME_SAMPLES: usize = 4_800;

/// Where a provider puts the audio of one chunk: samples at the provider's
/// rate go in, 48 kHz PCM16 LE frames of [`FRAME_SAMPLES`] come out on a bounded
/// channel (the synthesis waits while the socket is behind).
pub struct PcmSink {
    out: mpsc::Sender<Bytes>,
    resampler: Option<audio::To48k>,
    ready: Vec<i16>,
    total: u64,
}

/// The receiver side closed: the speech was dropped.
#[derive(Debug)]
pub struct SinkClosed;

impl PcmSink {
    pub fn new(capacity: usize) -> (PcmSink, mpsc::Receiver<Bytes>) {
        let (out, rx) = mpsc::channel(capacity.max(1));
        (
            PcmSink {
                out,
                resampler: None,
                ready: Vec::new(),
                total: 0,
            },
            rx,
        )
    }

    /// Mono samples at `rate`.
    pub async fn push(&mut self, rate: u32, samples: &[i16]) -> Result<(), TtsError> {
        if self.resampler.as_ref().map(audio::To48k::rate) != Some(rate) {
            if let Some(mut old) = self.resampler.take() {
                let tail = old.finish();
                self.ready.extend(tail);
            }
            self.resampler = Some(audio::To48k::new(rate)?);
        }
        if let Some(r) = self.resampler.as_mut() {
            let out = r.push(samples);
            self.ready.extend(out);
        }
        self.send_full().await
    }

    async fn send_full(&mut self) -> Result<(), TtsError> {
        while self.ready.len() >= FRAME_SAMPLES {
            let frame: Vec<i16> = self.ready.drain(..FRAME_SAMPLES).collect();
            self.send(&frame).await?;
        }
        Ok(())
    }

    async fn send(&mut self, samples: &[i16]) -> Result<(), TtsError> {
        let mut b = Vec::with_capacity(samples.len() * 2);
        for s in samples {
            b.extend_from_slice(&s.to_le_bytes());
        }
        self.total += samples.len() as u64;
        self.out
            .send(Bytes::from(b))
            .await
            .map_err(|_| TtsError::Unavailable("the speech was dropped".into()))
    }

    /// The chunk's audio is complete: flush the resampler and the last frame.
    pub async fn finish(&mut self) -> Result<(), TtsError> {
        if let Some(mut r) = self.resampler.take() {
            let tail = r.finish();
            self.ready.extend(tail);
        }
        self.send_full().await?;
        if !self.ready.is_empty() {
            let rest = std::mem::take(&mut self.ready);
            self.send(&rest).await?;
        }
        Ok(())
    }

    /// 48 kHz samples sent so far.
    pub fn samples_sent(&self) -> u64 {
        self.total
    }
}

/// A text-to-speech provider: one chunk of text in, PCM out through the sink.
/// Dropping the future cancels the synthesis (the upstream request or socket
/// is closed with it).
pub trait Provider: Send + Sync {
    /// The provider's name in `voice_source.provider` and the docs.
    fn name(&self) -> &'static str;
    fn synthesize<'a>(
        &'a self,
        text: &'a str,
        sink: &'a mut PcmSink,
    ) -> BoxFuture<'a, Result<(), TtsError>>;

    /// Does the provider take a whole speech's chunks on one connection
    /// ([`Provider::stream`]) instead of one request per chunk?
    fn streams_text(&self) -> bool {
        false
    }

    /// Speak every chunk received on `text` (until it closes) on one connection.
    fn stream<'a>(
        &'a self,
        text: mpsc::UnboundedReceiver<String>,
        sink: &'a mut PcmSink,
    ) -> BoxFuture<'a, Result<(), TtsError>> {
        drop((text, sink));
        Box::pin(async { Err(TtsError::Config("the provider does not stream text".into())) })
    }
}

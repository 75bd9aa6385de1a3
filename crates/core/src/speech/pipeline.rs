//! The speech of one chat connection (docs/voice.md, "The pipeline").
//!
//! A connection that speaks has one [`Voice`]. Each spoken reply is a
//! [`Speech`]: the turn pushes the reply's deltas, the [`Chunker`] cuts them
//! into speakable chunks, and the speech's driver task synthesises at most
//! `SpeechLimits::in_flight` chunks at once, each in its own task, and passes
//! their audio on strictly in chunk order as [`SpeechOut`] events on the
//! connection's outbound queue. Audio waits for room in the connection's
//! byte budget (`SpeechLimits::queued_bytes`), so a slow socket slows the
//! synthesis instead of growing a queue.
//!
//! Barge-in ([`Voice::interrupt`]) cancels the speech's token: the driver and
//! its synthesis tasks stop (an HTTP request in flight is dropped, which
//! closes it), and the connection drops every queued event of that speech.
//! Closing the connection ([`Voice::close`]) cancels every speech of it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::chunker::Chunker;
use super::config::{self, Choice};
use super::openai::OpenAiSpeech;
use super::{PcmSink, Provider, SpeechLimits, TtsError};
use crate::frames::EndReason;
use crate::sessions::Outbound;
use crate::state::AppState;

/// What a speech sends to its connection.
#[derive(Debug)]
pub enum SpeechEvent {
    /// The speech begins.
    Start { turn_id: String },
    /// 48 kHz mono PCM16 LE; the permit holds the bytes in the connection's budget.
    Audio {
        pcm: Bytes,
        permit: OwnedSemaphorePermit,
    },
    /// The provider failed; `End { Error }` follows.
    Failed { code: &'static str, message: String },
    /// The speech ended (never sent for an interrupted speech: the connection
    /// tells that itself, at once).
    End(EndReason),
}

/// One event of one speech.
#[derive(Debug)]
pub struct SpeechOut {
    pub speech_id: Arc<str>,
    /// The connection's number of the speech (tags companiond's binary frames).
    pub stream: u32,
    /// Cancelled when the speech was interrupted: the event must be dropped.
    pub live: CancellationToken,
    pub event: SpeechEvent,
}

impl SpeechOut {
    /// Should the connection still send this?
    pub fn is_live(&self) -> bool {
        !self.live.is_cancelled()
    }
}

#[derive(Clone)]
struct Live {
    id: Arc<str>,
    stream: u32,
    token: CancellationToken,
    ended: Arc<AtomicBool>,
    progress: Arc<Mutex<Progress>>,
}

/// What a speech has sent: each chunk's text and 48 kHz samples, and when its
/// first audio left, to estimate what the user heard when it was cut off
/// (playback taken to start with the first frame and to run in real time).
#[derive(Debug, Default)]
struct Progress {
    first_audio: Option<std::time::Instant>,
    chunks: Vec<(String, u64)>,
    /// The text and audio of chunks cannot be told apart (one stream for the
    /// whole speech): nothing can be estimated.
    unknown: bool,
}

impl Progress {
    fn audio(&mut self, index: usize, text: &str, samples: u64) {
        self.first_audio.get_or_insert_with(std::time::Instant::now);
        while self.chunks.len() <= index {
            self.chunks.push((text.to_string(), 0));
        }
        if let Some(c) = self.chunks.get_mut(index) {
            c.1 += samples;
        }
    }

    /// The text heard by `now`: whole chunks, then the share of the words of
    /// the chunk being played.
    fn heard(&self, now: std::time::Instant) -> Option<String> {
        if self.unknown {
            return None;
        }
        let Some(t0) = self.first_audio else {
            return Some(String::new());
        };
        let mut left = now.saturating_duration_since(t0).as_secs_f64() * super::OUTPUT_RATE as f64;
        let mut out: Vec<String> = Vec::new();
        for (text, n) in &self.chunks {
            let n = *n as f64;
            if left >= n {
                out.push(text.clone());
                left -= n;
            } else {
                let words: Vec<&str> = text.split_whitespace().collect();
                let k = ((words.len() as f64) * left / n.max(1.0)).floor() as usize;
                if k > 0 {
                    out.push(words[..k.min(words.len())].join(" "));
                }
                break;
            }
        }
        Some(out.join(" "))
    }
}

/// The interrupted speech, as [`Voice::interrupt`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupted {
    pub speech_id: String,
    /// Had the speech already sent all its audio?
    pub was_complete: bool,
}

/// The speech state of one chat connection.
pub struct Voice {
    st: AppState,
    tx: mpsc::UnboundedSender<Outbound>,
    root: CancellationToken,
    current: Mutex<Option<Live>>,
    budget: Arc<Semaphore>,
    streams: AtomicU32,
    limits: SpeechLimits,
    /// A speech was cut off mid-way: its reply is to be marked in the history
    /// once its turn has stored it ([`Voice::mark_interrupted_reply`]).
    pending_mark: AtomicBool,
    /// The part of that reply the user heard, when the cut came from speech.
    pending_heard: Mutex<Option<String>>,
    /// What was spoken lately (the microphone drops transcripts echoing it).
    echo: Arc<crate::hearing::echo::EchoLog>,
}

impl Voice {
    pub fn new(st: &AppState, tx: &mpsc::UnboundedSender<Outbound>) -> Arc<Voice> {
        let limits = st.ext::<SpeechLimits>().as_ref().clone();
        Arc::new(Voice {
            st: st.clone(),
            tx: tx.clone(),
            root: CancellationToken::new(),
            current: Mutex::new(None),
            budget: Arc::new(Semaphore::new(limits.queued_bytes.max(64 * 1024))),
            streams: AtomicU32::new(0),
            limits,
            pending_mark: AtomicBool::new(false),
            pending_heard: Mutex::new(None),
            echo: Arc::default(),
        })
    }

    /// What this connection's speech said lately.
    pub fn echo(&self) -> Arc<crate::hearing::echo::EchoLog> {
        self.echo.clone()
    }

    /// Is a speech of this connection still sending audio?
    pub fn is_speaking(&self) -> bool {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|l| !l.ended.load(Ordering::Acquire) && !l.token.is_cancelled())
    }

    /// The connection closed: stop every speech and task of it.
    pub fn close(&self) {
        self.root.cancel();
    }

    /// Stop the current speech at once; which one it was.
    pub fn interrupt(&self) -> Option<Interrupted> {
        self.cut(false)
    }

    /// Stop the current speech because the user spoke over it: only the part
    /// the user heard stays in the history.
    pub fn interrupt_heard(&self) -> Option<Interrupted> {
        self.cut(true)
    }

    fn cut(&self, keep_heard: bool) -> Option<Interrupted> {
        let live = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        live.token.cancel();
        let was_complete = live.ended.load(Ordering::Acquire);
        if !was_complete {
            self.pending_mark.store(true, Ordering::Release);
            let heard = if keep_heard {
                live.progress
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .heard(std::time::Instant::now())
            } else {
                None
            };
            *self.pending_heard.lock().unwrap_or_else(|e| e.into_inner()) = heard;
        }
        Some(Interrupted {
            speech_id: live.id.to_string(),
            was_complete,
        })
    }

    /// Stop the current speech and tell the client through the connection's
    /// queue (barge-in from outside the connection); whether one was speaking.
    pub fn interrupt_notify(&self) -> bool {
        match self.interrupt() {
            Some(cut) if !cut.was_complete => {
                let _ = self.tx.send(Outbound::Speech(SpeechOut {
                    speech_id: cut.speech_id.into(),
                    stream: 0,
                    live: CancellationToken::new(),
                    event: SpeechEvent::End(EndReason::Interrupted),
                }));
                true
            }
            _ => false,
        }
    }

    /// Mark the reply of an interrupted speech in `character`'s history. Call
    /// it holding the session's turn lock, so the reply has been stored.
    pub async fn mark_interrupted_reply(&self, character: &str) {
        if self.pending_mark.swap(false, Ordering::AcqRel) {
            let heard = self
                .pending_heard
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Err(e) = self
                .st
                .history
                .mark_last_reply_interrupted(character, heard)
                .await
            {
                tracing::warn!("cannot mark the interrupted reply of {character}: {e}");
            }
        }
    }

    /// The provider the stored settings choose for `character`.
    pub async fn provider(&self, character: &str) -> Result<Option<Arc<dyn Provider>>, TtsError> {
        let cfg = self.st.llm.core_config().await;
        let voice = self
            .st
            .characters
            .profile(character)
            .and_then(|p| p.voice_id().map(str::to_string));
        Ok(match config::resolve(&cfg, voice.as_deref())? {
            None => None,
            Some(Choice::OpenAi(target)) => Some(Arc::new(OpenAiSpeech {
                target,
                limits: self.limits.clone(),
            })),
            Some(Choice::VoiceServer(target)) => {
                Some(Arc::new(super::voice_server::VoiceServerSpeech {
                    target,
                    limits: self.limits.clone(),
                }))
            }
            Some(Choice::Wyoming(target)) => Some(Arc::new(super::wyoming::WyomingSpeech {
                target,
                limits: self.limits.clone(),
            })),
        })
    }

    /// Begin speaking a reply of `character`: `None` when no provider is
    /// configured (an invalid setting is reported as an error frame).
    pub async fn begin(self: &Arc<Self>, character: &str) -> Option<Speech> {
        // A turn runs holding the turn lock: the previous reply is stored.
        self.mark_interrupted_reply(character).await;
        let provider = match self.provider(character).await {
            Ok(Some(p)) => p,
            Ok(None) => return None,
            Err(e) => {
                let token = self.root.child_token();
                let id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
                let _ = self.tx.send(Outbound::Speech(SpeechOut {
                    speech_id: id,
                    stream: 0,
                    live: token,
                    event: SpeechEvent::Failed {
                        code: e.code(),
                        message: e.to_string(),
                    },
                }));
                return None;
            }
        };
        Some(self.start(provider))
    }

    /// Begin a speech with `provider` (the current speech is interrupted).
    pub fn start(self: &Arc<Self>, provider: Arc<dyn Provider>) -> Speech {
        self.start_with_id(provider, uuid::Uuid::new_v4().to_string().into())
    }

    /// Begin a speech of a given id; a speech still speaking is cut off and
    /// the client told (as at a barge-in).
    pub fn start_with_id(self: &Arc<Self>, provider: Arc<dyn Provider>, id: Arc<str>) -> Speech {
        self.interrupt_notify();
        let live = Live {
            id,
            stream: self.streams.fetch_add(1, Ordering::Relaxed) + 1,
            token: self.root.child_token(),
            ended: Arc::default(),
            progress: Arc::default(),
        };
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(live.clone());
        let (text_tx, text_rx) = mpsc::unbounded_channel();
        let driver = Driver {
            provider,
            live: live.clone(),
            tx: self.tx.clone(),
            budget: self.budget.clone(),
            limits: self.limits.clone(),
        };
        driver.emit(SpeechEvent::Start {
            turn_id: live.id.to_string(),
        });
        tokio::spawn(driver.run(text_rx));
        Speech {
            id: live.id.clone(),
            token: live.token.clone(),
            chunker: Mutex::new(Chunker::new()),
            text: Some(text_tx),
            echo: self.echo.clone(),
        }
    }
}

/// A line spoken by a route (`SessionManager::speak_line`).
#[derive(Debug, Clone)]
pub struct SpokenLine {
    pub speech_id: String,
    /// Connections the line is being spoken on.
    pub connections: usize,
    /// The provider's name (`voice_source.provider`).
    pub provider: &'static str,
}

/// Why a route's line is not spoken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpeakRefused {
    /// No open connection plays speech.
    NoListener,
    /// Speech is off or no provider is configured.
    NoProvider,
    /// The settings cannot be used.
    Invalid(TtsError),
}

/// Speak `line` of `character` on every connection in `voices` (one speech id).
pub async fn speak_line(
    voices: Vec<Arc<Voice>>,
    character: &str,
    line: &str,
) -> Result<SpokenLine, SpeakRefused> {
    let Some(first) = voices.first() else {
        return Err(SpeakRefused::NoListener);
    };
    let provider = match first.provider(character).await {
        Ok(Some(p)) => p,
        Ok(None) => return Err(SpeakRefused::NoProvider),
        Err(e) => return Err(SpeakRefused::Invalid(e)),
    };
    let id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
    for v in &voices {
        let speech = v.start_with_id(provider.clone(), id.clone());
        speech.say(line);
        speech.finish();
    }
    Ok(SpokenLine {
        speech_id: id.to_string(),
        connections: voices.len(),
        provider: provider.name(),
    })
}

/// The state of a connection's speech (`tts_pipeline` of the game speak route).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PipelineState {
    pub tts_available: bool,
    pub tts_thread_alive: bool,
    pub tts_ready: bool,
    pub tts_pending_chunks: usize,
    pub current_speech_id: Option<String>,
}

impl Voice {
    /// The speech state now.
    pub fn state(&self) -> PipelineState {
        let current = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let speaking = current
            .as_ref()
            .is_some_and(|l| !l.ended.load(Ordering::Acquire) && !l.token.is_cancelled());
        PipelineState {
            tts_available: true,
            tts_thread_alive: !self.root.is_cancelled(),
            tts_ready: true,
            tts_pending_chunks: usize::from(speaking),
            current_speech_id: current.filter(|_| speaking).map(|l| l.id.to_string()),
        }
    }
}

/// One spoken reply: push its deltas, then [`finish`](Speech::finish) (or drop).
pub struct Speech {
    id: Arc<str>,
    token: CancellationToken,
    chunker: Mutex<Chunker>,
    text: Option<mpsc::UnboundedSender<String>>,
    echo: Arc<crate::hearing::echo::EchoLog>,
}

impl Speech {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Was the speech cut off (barge-in or the connection closed)?
    pub fn interrupted(&self) -> bool {
        self.token.is_cancelled()
    }

    /// A delta of the reply.
    pub fn push(&self, delta: &str) {
        if self.token.is_cancelled() {
            return;
        }
        let chunks = self
            .chunker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(delta);
        self.send(chunks);
    }

    /// A whole line (the speak routes).
    pub fn say(&self, line: &str) {
        self.send(super::chunker::chunks_of(line));
    }

    fn send(&self, chunks: Vec<String>) {
        if let Some(tx) = &self.text {
            for c in chunks {
                self.echo.said(&c);
                let _ = tx.send(c);
            }
        }
    }

    /// The reply is complete.
    pub fn finish(mut self) {
        let rest = self
            .chunker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .finish();
        self.send(rest);
        self.text = None;
    }
}

/// A chunk being synthesised: its audio in order, then its result. Dropping
/// it aborts the synthesis task.
struct InFlight {
    text: String,
    audio: mpsc::Receiver<Bytes>,
    result: oneshot::Receiver<Result<(), TtsError>>,
    task: tokio::task::AbortHandle,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Frames a synthesis may run ahead of the socket.
const CHUNK_QUEUE: usize = 4;

struct Driver {
    provider: Arc<dyn Provider>,
    live: Live,
    tx: mpsc::UnboundedSender<Outbound>,
    budget: Arc<Semaphore>,
    limits: SpeechLimits,
}

enum Step {
    Cancelled,
    Text(Option<String>),
    Audio(Option<Bytes>),
}

impl Driver {
    fn emit(&self, event: SpeechEvent) {
        let _ = self.tx.send(Outbound::Speech(SpeechOut {
            speech_id: self.live.id.clone(),
            stream: self.live.stream,
            live: self.live.token.clone(),
            event,
        }));
    }

    fn spawn(&self, text: String) -> InFlight {
        let (mut sink, audio) = PcmSink::new(CHUNK_QUEUE);
        let (done, result) = oneshot::channel();
        let provider = self.provider.clone();
        let said = text.clone();
        let task = tokio::spawn(async move {
            let r = provider.synthesize(&text, &mut sink).await;
            drop(sink);
            let _ = done.send(r);
        });
        InFlight {
            text: said,
            audio,
            result,
            task: task.abort_handle(),
        }
    }

    /// One connection for the whole speech (a provider that streams text).
    async fn run_streamed(self, mut text: mpsc::UnboundedReceiver<String>) {
        let token = self.live.token.clone();
        let (mut sink, mut audio) = PcmSink::new(CHUNK_QUEUE);
        let (chunks, chunks_rx) = mpsc::unbounded_channel();
        let (done, result) = oneshot::channel();
        let provider = self.provider.clone();
        let task = tokio::spawn(async move {
            let r = provider.stream(chunks_rx, &mut sink).await;
            drop(sink);
            let _ = done.send(r);
        });
        self.live
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unknown = true;
        let _task = InFlight {
            text: String::new(),
            audio: mpsc::channel(1).1,
            result: oneshot::channel().1,
            task: task.abort_handle(),
        };
        let mut chunks = Some(chunks);
        loop {
            let step = tokio::select! {
                biased;
                _ = token.cancelled() => Step::Cancelled,
                a = audio.recv() => Step::Audio(a),
                t = text.recv(), if chunks.is_some() => Step::Text(t),
            };
            match step {
                Step::Cancelled => return,
                Step::Text(Some(t)) => {
                    if let Some(c) = &chunks {
                        let _ = c.send(t);
                    }
                }
                Step::Text(None) => chunks = None,
                Step::Audio(Some(pcm)) => {
                    if !self.send_audio(&token, pcm).await {
                        return;
                    }
                }
                Step::Audio(None) => break,
            }
        }
        let r = result.await.unwrap_or(Ok(()));
        self.end(r.err());
    }

    /// Queue audio within the connection's budget; false when cancelled.
    async fn send_audio(&self, token: &CancellationToken, pcm: Bytes) -> bool {
        let n = (pcm.len() as u32).max(1);
        let permit = tokio::select! {
            _ = token.cancelled() => return false,
            p = self.budget.clone().acquire_many_owned(n) => p,
        };
        let Ok(permit) = permit else { return false };
        self.emit(SpeechEvent::Audio { pcm, permit });
        true
    }

    fn end(&self, failure: Option<TtsError>) {
        if self.live.token.is_cancelled() {
            return;
        }
        if let Some(e) = &failure {
            tracing::warn!("speech {}: {e}", self.live.id);
            self.emit(SpeechEvent::Failed {
                code: e.code(),
                message: e.to_string(),
            });
        }
        self.live.ended.store(true, Ordering::Release);
        self.emit(SpeechEvent::End(if failure.is_some() {
            EndReason::Error
        } else {
            EndReason::Done
        }));
    }

    async fn run(self, mut text: mpsc::UnboundedReceiver<String>) {
        if self.provider.streams_text() {
            return self.run_streamed(text).await;
        }
        let token = self.live.token.clone();
        let mut queue: VecDeque<String> = VecDeque::new();
        let mut inflight: VecDeque<InFlight> = VecDeque::new();
        let mut text_open = true;
        let mut failure: Option<TtsError> = None;
        // The number of the chunk whose audio is being delivered.
        let mut delivered = 0usize;
        loop {
            while failure.is_none() && inflight.len() < self.limits.in_flight.max(1) {
                match queue.pop_front() {
                    Some(t) => inflight.push_back(self.spawn(t)),
                    None => break,
                }
            }
            if !text_open && inflight.is_empty() && (queue.is_empty() || failure.is_some()) {
                break;
            }
            let step = tokio::select! {
                biased;
                _ = token.cancelled() => Step::Cancelled,
                a = async {
                    match inflight.front_mut() {
                        Some(f) => f.audio.recv().await,
                        None => std::future::pending().await,
                    }
                }, if !inflight.is_empty() => Step::Audio(a),
                t = text.recv(), if text_open => Step::Text(t),
            };
            match step {
                Step::Cancelled => return,
                Step::Text(Some(t)) => {
                    if failure.is_none() {
                        queue.push_back(t)
                    }
                }
                Step::Text(None) => text_open = false,
                Step::Audio(Some(pcm)) => {
                    if let Some(f) = inflight.front() {
                        self.live
                            .progress
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .audio(delivered, &f.text, (pcm.len() / 2) as u64);
                    }
                    if !self.send_audio(&token, pcm).await {
                        return;
                    }
                }
                Step::Audio(None) => {
                    let Some(mut done) = inflight.pop_front() else {
                        continue;
                    };
                    delivered += 1;
                    let r = (&mut done.result).await.unwrap_or(Ok(()));
                    crate::metrics::metrics().speech_chunk(if r.is_ok() {
                        crate::metrics::Outcome::Ok
                    } else {
                        crate::metrics::Outcome::Error
                    });
                    if let Err(e) = r {
                        tracing::warn!("speech {}: {e}", self.live.id);
                        self.emit(SpeechEvent::Failed {
                            code: e.code(),
                            message: e.to_string(),
                        });
                        failure = Some(e);
                        inflight.clear();
                        queue.clear();
                    }
                }
            }
        }
        if token.is_cancelled() {
            return;
        }
        self.live.ended.store(true, Ordering::Release);
        self.emit(SpeechEvent::End(if failure.is_some() {
            EndReason::Error
        } else {
            EndReason::Done
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_heard_part_follows_playback_time() {
        let mut p = Progress::default();
        let t0 = Instant::now();
        assert_eq!(p.heard(t0), Some(String::new()));
        // Two chunks of one second each.
        p.audio(0, "Hello there, my friend.", 24_000);
        p.audio(0, "Hello there, my friend.", 24_000);
        p.audio(1, "The weather is lovely today.", 48_000);
        let start = p.first_audio.unwrap_or(t0);
        assert_eq!(p.heard(start), Some(String::new()));
        assert_eq!(
            p.heard(start + Duration::from_millis(500)).as_deref(),
            Some("Hello there,")
        );
        assert_eq!(
            p.heard(start + Duration::from_millis(1_600)).as_deref(),
            Some("Hello there, my friend. The weather is")
        );
        assert_eq!(
            p.heard(start + Duration::from_secs(5)).as_deref(),
            Some("Hello there, my friend. The weather is lovely today.")
        );
        p.unknown = true;
        assert_eq!(p.heard(start), None);
    }
}

//! One microphone session of a chat connection: frames go through the
//! [`Ear`]; each utterance is queued (at most `queued_utterances`) for one
//! worker task that asks the recogniser, drops empty and echoed texts, and
//! hands the result to the connection as [`HeardEvent`]s on its queue, in
//! order. Stopping the session ends the open utterance (push-to-talk
//! released); closing the connection cancels the worker.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::mpsc;
pub use tokio_util::sync::CancellationToken;

use super::ear::{AudioBudget, Ear, VadEvent};
use super::echo::EchoLog;
use super::frame::MicFrame;
use super::recognizer::{self, AsrChoice, AsrError, Recognizer};
use super::HearingLimits;
use crate::sessions::{Outbound, SessionManager};
use crate::state::AppState;

/// What came of an utterance (sent to the connection through its queue).
#[derive(Debug, Clone, PartialEq)]
pub enum HeardEvent {
    /// A final transcript: a voice turn.
    Transcript { text: String, utterance: u64 },
    /// Nothing to say: `reason` is `empty` (the recogniser heard no words) or
    /// `echo` (only what the character said lately).
    Dropped {
        reason: &'static str,
        text: String,
        utterance: u64,
    },
    /// The recogniser failed.
    Failed { error: AsrError, utterance: u64 },
}

/// A frame that was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// More audio than real time allows (reported at most once per
    /// [`FLOOD_REPORT_EVERY`]; the other refused frames are dropped quietly).
    Flood,
    /// Too many utterances wait for the recogniser; this one was dropped.
    Busy,
}

/// How often a flood is reported at most.
pub const FLOOD_REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// What one frame (or a flush) did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Step {
    /// Speech began: barge-in.
    pub speech_started: bool,
    /// An utterance went to the recogniser (its number).
    pub queued: Option<u64>,
    pub refused: Option<Refused>,
}

/// The recogniser the core configuration chooses.
pub async fn recogniser(
    st: &AppState,
    limits: &HearingLimits,
) -> Result<Arc<dyn Recognizer>, AsrError> {
    let cfg = st.llm.core_config().await;
    Ok(match recognizer::resolve(&cfg)? {
        AsrChoice::OpenAi {
            url,
            model,
            api_key,
        } => Arc::new(recognizer::OpenAiRecognizer {
            http: crate::speech::openai::client().clone(),
            url,
            model,
            api_key,
            timeout: limits.recognise_timeout,
        }),
        AsrChoice::Wyoming { host, port, model } => Arc::new(recognizer::WyomingRecognizer {
            host,
            port,
            model,
            timeout: limits.recognise_timeout,
        }),
    })
}

/// `noiseReductionEnabled` for a session: the live session's setting, else
/// the stored conversation settings, else on.
pub async fn noise_reduction(st: &AppState, mgr: &SessionManager) -> bool {
    if let Some(Value::Bool(b)) = mgr.settings().get("noiseReductionEnabled") {
        return *b;
    }
    let doc: Option<Value> = st
        .store
        .read("config/conversation_settings.json")
        .await
        .ok()
        .flatten();
    doc.as_ref()
        .and_then(|d| d.get("settings"))
        .and_then(|s| s.get("noiseReductionEnabled"))
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

/// One microphone session.
pub struct Listener {
    ear: Ear,
    budget: AudioBudget,
    limits: HearingLimits,
    work: mpsc::Sender<(u64, Vec<i16>)>,
    last_frame: Instant,
    last_speech: Instant,
    flood_reported: Option<Instant>,
    utterances: u64,
    name: &'static str,
}

impl Listener {
    /// Open a session hearing with `rec`; results go to `tx`; `stop`
    /// (the connection closing) cancels the recognition in progress.
    pub fn open(
        rec: Arc<dyn Recognizer>,
        limits: HearingLimits,
        tx: mpsc::UnboundedSender<Outbound>,
        echo: Arc<EchoLog>,
        noise_reduction: bool,
        stop: CancellationToken,
    ) -> Listener {
        let now = Instant::now();
        let (work, mut rx) = mpsc::channel::<(u64, Vec<i16>)>(limits.queued_utterances.max(1));
        let name = rec.name();
        let window = limits.echo_window;
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    _ = stop.cancelled() => return,
                    n = rx.recv() => n,
                };
                let Some((utterance, pcm)) = next else { return };
                let r = tokio::select! {
                    _ = stop.cancelled() => return,
                    r = rec.transcribe(&pcm) => r,
                };
                drop(pcm);
                let ev = match r {
                    Err(error) => {
                        tracing::warn!("speech recognition failed: {error}");
                        HeardEvent::Failed { error, utterance }
                    }
                    Ok(text) if !text.chars().any(char::is_alphanumeric) => HeardEvent::Dropped {
                        reason: "empty",
                        text,
                        utterance,
                    },
                    Ok(text) if echo.is_echo(&text, window) => HeardEvent::Dropped {
                        reason: "echo",
                        text,
                        utterance,
                    },
                    Ok(text) => HeardEvent::Transcript { text, utterance },
                };
                if tx.send(Outbound::Heard(ev)).is_err() {
                    return;
                }
            }
        });
        Listener {
            ear: Ear::new(limits.endpointing.clone(), noise_reduction),
            budget: AudioBudget::new(limits.burst, limits.rate, now),
            limits,
            work,
            last_frame: now,
            last_speech: now,
            flood_reported: None,
            utterances: 0,
            name,
        }
    }

    /// The recogniser's name.
    pub fn recogniser(&self) -> &'static str {
        self.name
    }

    pub fn set_noise_reduction(&mut self, on: bool) {
        self.ear.set_noise_reduction(on);
    }

    pub fn noise_reduction(&self) -> bool {
        self.ear.noise_reduction()
    }

    /// One frame of microphone audio.
    pub fn push(&mut self, frame: &MicFrame, now: Instant) -> Step {
        if !self.budget.admit(now, frame.millis()) {
            let report = self
                .flood_reported
                .is_none_or(|at| now.saturating_duration_since(at) >= FLOOD_REPORT_EVERY);
            if report {
                self.flood_reported = Some(now);
            }
            return Step {
                refused: report.then_some(Refused::Flood),
                ..Step::default()
            };
        }
        self.last_frame = now;
        let mut events = Vec::new();
        self.ear.push(frame, &mut events);
        self.handle(events, now)
    }

    fn handle(&mut self, events: Vec<VadEvent>, now: Instant) -> Step {
        let mut step = Step::default();
        for e in events {
            match e {
                VadEvent::SpeechStarted => {
                    step.speech_started = true;
                    self.last_speech = now;
                }
                VadEvent::Utterance(pcm) => {
                    self.last_speech = now;
                    self.utterances += 1;
                    match self.work.try_send((self.utterances, pcm)) {
                        Ok(()) => step.queued = Some(self.utterances),
                        Err(_) => step.refused = Some(Refused::Busy),
                    }
                }
                VadEvent::Dropped => {}
            }
        }
        step
    }

    /// The stream stopped (push-to-talk released, the session paused or
    /// ended): the open utterance goes to the recogniser.
    pub fn flush(&mut self, now: Instant) -> Step {
        let mut events = Vec::new();
        self.ear.flush(&mut events);
        self.handle(events, now)
    }

    /// Forget the open utterance (the microphone was taken away).
    pub fn discard(&mut self) {
        self.ear.discard();
    }

    /// When [`tick`](Listener::tick) has something to do.
    pub fn deadline(&self) -> Instant {
        let idle = self.last_speech + self.limits.idle_close;
        if self.ear.endpointer().in_utterance() {
            (self.last_frame + self.limits.stall).min(idle)
        } else {
            idle
        }
    }

    /// Time passed: a stalled stream ends its utterance; `None` when the
    /// microphone has heard no speech for `idle_close` and should close.
    pub fn tick(&mut self, now: Instant) -> Option<Step> {
        if self.ear.endpointer().in_utterance() && now >= self.last_frame + self.limits.stall {
            return Some(self.flush(now));
        }
        if now >= self.last_speech + self.limits.idle_close {
            return None;
        }
        Some(Step::default())
    }
}

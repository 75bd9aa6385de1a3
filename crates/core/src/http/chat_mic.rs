//! The microphone of one chat connection (docs/chat-protocol.md,
//! "Microphone"): opening and closing the session in both protocols, frames,
//! ownership, and the frames that tell the page what was heard. The hearing
//! itself is `crate::hearing`; `super::chat_socket` calls this.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::chat_dialect::Dialect;
use crate::frames::ServerFrame;
use crate::hearing::echo::EchoLog;
use crate::hearing::frame::{FrameError, MicFrame, INVALID_CODE};
use crate::hearing::lease::{Control, Lease};
use crate::hearing::listener::{self, HeardEvent, Listener, Refused, Step};
use crate::hearing::HearingLimits;
use crate::sessions::{Outbound, SessionManager};
use crate::state::AppState;

/// Code of the frames refused because audio came faster than real time.
pub const FLOOD_CODE: &str = "VOICE_INPUT_FLOOD";

pub(super) struct Mic {
    st: AppState,
    tx: mpsc::UnboundedSender<Outbound>,
    echo: Arc<EchoLog>,
    stop: CancellationToken,
    listener: Option<Listener>,
    lease: Lease,
    /// A frame without an open session was reported (once until one opens).
    told_closed: bool,
    limits: HearingLimits,
}

/// What the connection does after a microphone event.
#[derive(Default)]
pub(super) struct Outcome {
    pub frames: Vec<ServerFrame>,
    /// Speech began: cut the character's speech off (barge-in).
    pub barge_in: bool,
    /// A transcript to run as a voice turn.
    pub turn: Option<String>,
}

impl Outcome {
    fn frames(frames: Vec<ServerFrame>) -> Outcome {
        Outcome {
            frames,
            ..Outcome::default()
        }
    }
}

/// An error in the connection's protocol: companiond's `error`, the original's `status`.
fn failure(d: Dialect, code: &str, msg: &str) -> ServerFrame {
    match d {
        Dialect::Native => ServerFrame::error(code, msg),
        Dialect::Original => ServerFrame::status(code, json!({"msg": msg})),
    }
}

impl Mic {
    pub fn new(st: &AppState, tx: &mpsc::UnboundedSender<Outbound>, echo: Arc<EchoLog>) -> Mic {
        Mic {
            st: st.clone(),
            tx: tx.clone(),
            echo,
            stop: CancellationToken::new(),
            listener: None,
            lease: Lease::default(),
            told_closed: false,
            limits: st.ext::<HearingLimits>().as_ref().clone(),
        }
    }

    /// Open the microphone session.
    pub async fn start(
        &mut self,
        mgr: &SessionManager,
        d: Dialect,
        request_id: Option<String>,
    ) -> Vec<ServerFrame> {
        let mut out = Vec::new();
        if d == Dialect::Original {
            out.push(ServerFrame::SessionPreparing {
                input_mode: "audio".into(),
            });
        }
        let fail = |code: &str, msg: String, out: &mut Vec<ServerFrame>| {
            match d {
                Dialect::Native => out.push(failure(d, code, &msg)),
                Dialect::Original => {
                    out.push(ServerFrame::status(
                        "SESSION_START_FAILED",
                        json!({"error": msg, "code": code, "count": 1}),
                    ));
                    out.push(ServerFrame::SessionFailed {
                        input_mode: "audio".into(),
                        message: msg,
                        reason: Some(code.to_string()),
                    });
                }
            };
        };
        if !self.lease.start_session() {
            fail(
                "VOICE_INPUT_LEASE_REQUIRED",
                "the microphone lease is not synchronised (voice_input_control lease_sync)".into(),
                &mut out,
            );
            return out;
        }
        let rec = match listener::recogniser(&self.st, &self.limits).await {
            Ok(r) => r,
            Err(e) => {
                fail(e.code(), e.to_string(), &mut out);
                return out;
            }
        };
        let nr = listener::noise_reduction(&self.st, mgr).await;
        if let Some(mut old) = self.listener.take() {
            let _ = old.flush(Instant::now());
        }
        let l = Listener::open(
            rec,
            self.limits.clone(),
            self.tx.clone(),
            self.echo.clone(),
            nr,
            self.stop.child_token(),
        );
        let name = l.recogniser();
        self.listener = Some(l);
        self.told_closed = false;
        match d {
            Dialect::Native => out.push(ServerFrame::MicState {
                state: "listening",
                recognizer: Some(name),
                noise_reduction: Some(nr),
                reason: None,
            }),
            Dialect::Original => {
                out.push(ServerFrame::SessionStarted {
                    persona_name: None,
                    input_mode: "audio".into(),
                    request_id,
                });
                out.push(ServerFrame::status(
                    "ASR_INDEPENDENT_READY",
                    json!({"provider": name, "noise_reduction": nr}),
                ));
            }
        }
        out
    }

    /// Close the session; the open utterance is still recognised.
    pub fn stop(&mut self, d: Dialect, reason: &'static str) -> Outcome {
        let Some(mut l) = self.listener.take() else {
            return Outcome::default();
        };
        let step = l.flush(Instant::now());
        let mut o = self.step(d, step);
        if d == Dialect::Native {
            o.frames.push(ServerFrame::MicState {
                state: "closed",
                recognizer: None,
                noise_reduction: None,
                reason: Some(reason),
            });
        }
        o
    }

    /// One frame of audio (or why it is not one).
    pub fn frame(&mut self, d: Dialect, f: Result<MicFrame, FrameError>) -> Outcome {
        let f = match f {
            Ok(f) => f,
            Err(e) => return Outcome::frames(vec![failure(d, INVALID_CODE, &e.to_string())]),
        };
        if !self.lease.hears() {
            if let Some(l) = self.listener.as_mut() {
                l.discard();
            }
            return Outcome::default();
        }
        let Some(l) = self.listener.as_mut() else {
            if std::mem::replace(&mut self.told_closed, true) {
                return Outcome::default();
            }
            let msg = match d {
                Dialect::Native => {
                    "the microphone is not open: send {\"type\":\"mic\",\"state\":\"start\"} first"
                }
                Dialect::Original => {
                    "no audio session: send start_session with input_type audio first"
                }
            };
            return Outcome::frames(vec![failure(d, "VOICE_SESSION_NOT_STARTED", msg)]);
        };
        let step = l.push(&f, Instant::now());
        self.step(d, step)
    }

    fn step(&self, d: Dialect, step: Step) -> Outcome {
        let mut o = Outcome::default();
        if step.speech_started {
            o.barge_in = true;
            if d == Dialect::Native {
                o.frames.push(ServerFrame::Vad { state: "speech" });
            }
        }
        if step.queued.is_some() && d == Dialect::Native {
            o.frames.push(ServerFrame::Vad { state: "silence" });
        }
        match step.refused {
            Some(Refused::Flood) => o.frames.push(failure(
                d,
                FLOOD_CODE,
                "audio arrives faster than real time: frames are dropped until it slows down",
            )),
            Some(Refused::Busy) => o.frames.push(failure(
                d,
                "asr_busy",
                "the speech recogniser is behind: this utterance was dropped",
            )),
            None => {}
        }
        o
    }

    /// A `voice_input_control` message.
    pub fn control(&mut self, msg: &Value) -> Vec<ServerFrame> {
        match self.lease.control(msg) {
            Control::Ignored => return Vec::new(),
            Control::Rejected => {
                return vec![ServerFrame::status(
                    "VOICE_INPUT_CONTROL_REJECTED",
                    json!({"reason": "invalid_or_stale_control",
                           "lease_generation": msg.get("lease_generation").cloned().unwrap_or(Value::Null),
                           "current_generation": self.lease.generation()}),
                )]
            }
            Control::Applied => {}
        }
        if !self.lease.hears() {
            if let Some(l) = self.listener.as_mut() {
                l.discard();
            }
        }
        Vec::new()
    }

    /// When [`tick`](Mic::tick) is due.
    pub fn deadline(&self) -> Option<Instant> {
        self.listener.as_ref().map(Listener::deadline)
    }

    /// Time passed: a stalled utterance ends; a silent microphone closes.
    pub fn tick(&mut self, d: Dialect) -> Outcome {
        let Some(l) = self.listener.as_mut() else {
            return Outcome::default();
        };
        match l.tick(Instant::now()) {
            Some(step) => self.step(d, step),
            None => {
                self.listener = None;
                let msg = "no speech for a long time: the microphone was closed";
                Outcome::frames(vec![match d {
                    Dialect::Native => ServerFrame::MicState {
                        state: "closed",
                        recognizer: None,
                        noise_reduction: None,
                        reason: Some("idle"),
                    },
                    Dialect::Original => ServerFrame::AutoCloseMic {
                        reason_code: "SILENCE_TIMEOUT".into(),
                        api_type: "independent_asr".into(),
                        message: msg.into(),
                    },
                }])
            }
        }
    }

    /// What came of an utterance.
    pub fn heard(&mut self, d: Dialect, ev: HeardEvent) -> Outcome {
        match ev {
            HeardEvent::Transcript { text, utterance } => Outcome {
                frames: vec![match d {
                    Dialect::Native => ServerFrame::Transcript {
                        text: text.clone(),
                        is_final: true,
                        utterance,
                    },
                    Dialect::Original => ServerFrame::UserTranscript { text: text.clone() },
                }],
                barge_in: false,
                turn: Some(text),
            },
            HeardEvent::Dropped {
                reason,
                text,
                utterance,
            } => Outcome::frames(vec![match d {
                Dialect::Native => ServerFrame::TranscriptDropped {
                    reason,
                    text,
                    utterance,
                },
                Dialect::Original => ServerFrame::status(
                    "ASR_TRANSCRIPT_DROPPED",
                    json!({"reason": reason, "text": text}),
                ),
            }]),
            HeardEvent::Failed { error, .. } => Outcome::frames(vec![match d {
                Dialect::Native => failure(d, error.code(), &error.to_string()),
                Dialect::Original => ServerFrame::status(
                    &error.code().to_ascii_uppercase(),
                    json!({"msg": error.to_string()}),
                ),
            }]),
        }
    }

    /// A frame the session sends: a saved `noiseReductionEnabled` reaches the
    /// live microphone (companiond's protocol is told with a new `mic_state`).
    pub fn observe(&mut self, d: Option<Dialect>, frame: &ServerFrame) -> Option<ServerFrame> {
        let ServerFrame::SettingsChanged { settings } = frame else {
            return None;
        };
        let on = settings
            .get("noiseReductionEnabled")
            .and_then(Value::as_bool)?;
        let l = self.listener.as_mut()?;
        l.set_noise_reduction(on);
        (d == Some(Dialect::Native)).then(|| ServerFrame::MicState {
            state: "listening",
            recognizer: Some(l.recogniser()),
            noise_reduction: Some(on),
            reason: None,
        })
    }
}

impl Drop for Mic {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

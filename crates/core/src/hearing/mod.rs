//! The character hears (docs/voice.md, "Hearing"): microphone audio on the
//! chat socket becomes chat turns.
//!
//! * [`frame`]: the `NEKO` binary frame and the JSON int16 fallback;
//! * [`ear`]: noise reduction (RNNoise), 48 → 16 kHz, voice-activity
//!   endpointing (earshot), the flood bound;
//! * [`recognizer`]: the [`recognizer::Recognizer`] trait, the
//!   OpenAI-compatible and Wyoming recognisers and the `asrModel*` keys;
//! * [`lease`]: microphone ownership (`voice_input_control`);
//! * [`listener`]: one microphone session of a connection (frames in,
//!   transcripts out through the connection's queue);
//! * [`echo`]: what the character said lately, to drop transcripts that only
//!   echo it.

pub mod ear;
pub mod echo;
pub mod frame;
pub mod lease;
pub mod listener;
pub mod recognizer;

use std::time::Duration;

pub use ear::Endpointing;

/// The limits of hearing (the defaults; tests and benches provide their own
/// through `AppState::provide`).
#[derive(Debug, Clone)]
pub struct HearingLimits {
    pub endpointing: Endpointing,
    /// A stream whose frames stop this long in an utterance ends the utterance.
    pub stall: Duration,
    /// No speech for this long closes the microphone (`auto_close_mic`).
    pub idle_close: Duration,
    /// Audio a client may send at once ahead of real time.
    pub burst: Duration,
    /// Sustained audio rate admitted, × real time.
    pub rate: f64,
    /// One recognition at most this long.
    pub recognise_timeout: Duration,
    /// Utterances waiting for the recogniser at most (more are refused).
    pub queued_utterances: usize,
    /// A transcript that repeats what the character said this recently is dropped.
    pub echo_window: Duration,
}

impl Default for HearingLimits {
    fn default() -> Self {
        HearingLimits {
            endpointing: Endpointing::default(),
            stall: Duration::from_millis(700),
            idle_close: Duration::from_secs(120),
            burst: Duration::from_secs(20),
            rate: 1.5,
            recognise_timeout: Duration::from_secs(20),
            queued_utterances: 2,
            echo_window: Duration::from_secs(15),
        }
    }
}

//! The front end of hearing, per microphone session: noise reduction
//! (RNNoise through `nnnoiseless`, 48 kHz streams only, as in the original),
//! the step down to 16 kHz, and the voice-activity endpointer (`earshot`)
//! that cuts the stream into utterances. Pure and synchronous: the chat
//! socket feeds it frames; it costs well under 5 % of a core for one
//! 48 kHz stream (`cargo bench --bench hearing`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use nnnoiseless::DenoiseState;

use super::frame::MicFrame;

/// The recognisers' rate.
pub const RATE: u32 = 16_000;
/// Samples per VAD frame (16 ms at 16 kHz; earshot's frame).
pub const VAD_FRAME: usize = 256;
const VAD_FRAME_MS: u64 = 16;

/// Endpointing settings.
#[derive(Debug, Clone)]
pub struct Endpointing {
    /// A VAD frame is voiced at or above this score (0–1).
    pub threshold: f32,
    /// Audio kept from before the speech started (first syllables).
    pub pre_roll: Duration,
    /// Voiced audio an utterance needs; shorter ones (a cough, a click) are dropped.
    pub min_speech: Duration,
    /// Unvoiced audio that ends an utterance.
    pub end_silence: Duration,
    /// An utterance is cut (and recognised) at this length.
    pub max_utterance: Duration,
}

impl Default for Endpointing {
    fn default() -> Self {
        Endpointing {
            threshold: 0.5,
            pre_roll: Duration::from_millis(300),
            min_speech: Duration::from_millis(200),
            end_silence: Duration::from_millis(700),
            max_utterance: Duration::from_secs(15),
        }
    }
}

/// The detector still scores this many frames after the speech stopped as
/// voiced (its analysis window reaches back 64 ms, 3 frames, plus the frame
/// the speech ended in): the silence it reports
/// started that much earlier, and the end-of-speech count takes it off.
const DETECTOR_LAG_FRAMES: usize = 4;

/// RNNoise delays the audio and smears its end over about 30 ms: two more
/// frames taken off the end-of-speech count while it runs.
const DENOISE_LAG_FRAMES: usize = 2;

/// Above this share of sign changes a frame is noise, not voice.
const MAX_VOICED_ZCR: f32 = 0.3;

fn zero_crossing_rate(f: &[i16]) -> f32 {
    let crossings = f.windows(2).filter(|w| (w[0] >= 0) != (w[1] >= 0)).count();
    crossings as f32 / f.len().max(1) as f32
}

fn frames(d: Duration) -> usize {
    (d.as_millis() as u64).div_ceil(VAD_FRAME_MS) as usize
}

/// What the endpointer saw.
#[derive(Debug, Clone, PartialEq)]
pub enum VadEvent {
    /// Speech began (enough voiced audio: barge-in may cut the character off).
    SpeechStarted,
    /// An utterance ended: its 16 kHz audio (pre-roll included).
    Utterance(Vec<i16>),
    /// Voice too short to be speech was dropped.
    Dropped,
}

/// Voice-activity endpointing over 16 kHz audio.
pub struct Endpointer {
    cfg: Endpointing,
    vad: Box<earshot::Detector>,
    /// Samples not yet a whole VAD frame.
    partial: Vec<i16>,
    /// The last pre-roll frames while no utterance is open.
    roll: VecDeque<Vec<i16>>,
    /// The open utterance.
    current: Option<Open>,
    /// Frames of delay before this endpointer (noise reduction).
    front_lag: usize,
}

struct Open {
    audio: Vec<i16>,
    voiced: usize,
    silent_run: usize,
    started: bool,
}

impl Endpointer {
    pub fn new(cfg: Endpointing) -> Endpointer {
        Endpointer {
            cfg,
            vad: earshot::Detector::default_boxed(),
            partial: Vec::with_capacity(VAD_FRAME),
            roll: VecDeque::new(),
            current: None,
            front_lag: 0,
        }
    }

    /// The audio reaches the endpointer this many VAD frames late.
    pub fn set_front_lag(&mut self, frames: usize) {
        self.front_lag = frames;
    }

    pub fn settings(&self) -> &Endpointing {
        &self.cfg
    }

    /// Is an utterance open (voice heard, its end not yet)?
    pub fn in_utterance(&self) -> bool {
        self.current.is_some()
    }

    /// 16 kHz samples in; what happened.
    pub fn push(&mut self, samples: &[i16], out: &mut Vec<VadEvent>) {
        let mut rest = samples;
        while !rest.is_empty() {
            let take = (VAD_FRAME - self.partial.len()).min(rest.len());
            self.partial.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.partial.len() == VAD_FRAME {
                let f = std::mem::replace(&mut self.partial, Vec::with_capacity(VAD_FRAME));
                self.frame(f, out);
            }
        }
    }

    fn frame(&mut self, f: Vec<i16>, out: &mut Vec<VadEvent>) {
        // The network's score, and a zero-crossing gate: broadband noise
        // (hiss, static) crosses zero about every other sample, voiced speech
        // far less often.
        let score = self.vad.predict_i16(&f);
        let voiced = score >= self.cfg.threshold && zero_crossing_rate(&f) <= MAX_VOICED_ZCR;
        let Some(cur) = self.current.as_mut() else {
            if voiced {
                let mut audio: Vec<i16> = self.roll.drain(..).flatten().collect();
                audio.extend_from_slice(&f);
                self.current = Some(Open {
                    audio,
                    voiced: 1,
                    silent_run: 0,
                    started: false,
                });
                self.check_start(out);
            } else {
                self.roll.push_back(f);
                while self.roll.len() > frames(self.cfg.pre_roll) {
                    self.roll.pop_front();
                }
            }
            return;
        };
        cur.audio.extend_from_slice(&f);
        if voiced {
            cur.voiced += 1;
            cur.silent_run = 0;
        } else {
            cur.silent_run += 1;
        }
        self.check_start(out);
        let Some(cur) = self.current.as_ref() else {
            return;
        };
        let end = frames(self.cfg.end_silence)
            .saturating_sub(DETECTOR_LAG_FRAMES + self.front_lag)
            .max(1);
        if cur.silent_run >= end || cur.audio.len() >= frames(self.cfg.max_utterance) * VAD_FRAME {
            self.close(out);
        }
    }

    fn check_start(&mut self, out: &mut Vec<VadEvent>) {
        if let Some(cur) = self.current.as_mut() {
            if !cur.started && cur.voiced >= frames(self.cfg.min_speech) {
                cur.started = true;
                out.push(VadEvent::SpeechStarted);
            }
        }
    }

    fn close(&mut self, out: &mut Vec<VadEvent>) {
        let Some(cur) = self.current.take() else {
            return;
        };
        self.vad.reset();
        if cur.started {
            // Keep a little of the trailing silence, not all of it.
            let keep_tail = frames(Duration::from_millis(200)).min(cur.silent_run);
            let cut = (cur.silent_run - keep_tail) * VAD_FRAME;
            let mut audio = cur.audio;
            audio.truncate(audio.len().saturating_sub(cut));
            out.push(VadEvent::Utterance(audio));
        } else {
            out.push(VadEvent::Dropped);
        }
    }

    /// The stream stopped (push-to-talk released, the session paused): the
    /// open utterance ends now.
    pub fn flush(&mut self, out: &mut Vec<VadEvent>) {
        self.partial.clear();
        self.roll.clear();
        self.close(out);
    }

    /// Forget the open utterance (the microphone was taken away).
    pub fn discard(&mut self) {
        self.partial.clear();
        self.roll.clear();
        self.current = None;
        self.vad.reset();
    }
}

/// 48 kHz → 16 kHz: a windowed-sinc low-pass (cut-off 7.2 kHz) evaluated at
/// every third sample.
pub struct Decimator {
    taps: Vec<f32>,
    history: Vec<f32>,
    phase: usize,
}

const TAPS: usize = 48;

impl Default for Decimator {
    fn default() -> Self {
        let fc = 7_200.0 / 48_000.0;
        let mid = (TAPS - 1) as f32 / 2.0;
        let mut taps: Vec<f32> = (0..TAPS)
            .map(|i| {
                let x = i as f32 - mid;
                let sinc = if x == 0.0 {
                    2.0 * fc
                } else {
                    (2.0 * std::f32::consts::PI * fc * x).sin() / (std::f32::consts::PI * x)
                };
                let w = 0.42
                    - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / (TAPS - 1) as f32).cos()
                    + 0.08 * (4.0 * std::f32::consts::PI * i as f32 / (TAPS - 1) as f32).cos();
                sinc * w
            })
            .collect();
        let sum: f32 = taps.iter().sum();
        for t in &mut taps {
            *t /= sum;
        }
        Decimator {
            taps,
            history: vec![0.0; TAPS],
            phase: 0,
        }
    }
}

impl Decimator {
    /// 48 kHz samples (as f32 in the i16 range) in, 16 kHz out.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<i16>) {
        for &s in input {
            self.history.rotate_left(1);
            if let Some(last) = self.history.last_mut() {
                *last = s;
            }
            self.phase += 1;
            if self.phase == 3 {
                self.phase = 0;
                let y: f32 = self
                    .history
                    .iter()
                    .zip(self.taps.iter())
                    .map(|(a, b)| a * b)
                    .sum();
                out.push(y.round().clamp(-32768.0, 32767.0) as i16);
            }
        }
    }
}

/// Noise reduction, the step to 16 kHz and endpointing for one microphone.
pub struct Ear {
    rate: u32,
    noise_reduction: bool,
    denoise: Option<Box<DenoiseState<'static>>>,
    nr_in: Vec<f32>,
    nr_out: Vec<f32>,
    decimator: Decimator,
    scratch: Vec<i16>,
    vad: Endpointer,
}

impl Ear {
    pub fn new(cfg: Endpointing, noise_reduction: bool) -> Ear {
        let mut ear = Ear {
            rate: RATE,
            noise_reduction,
            denoise: None,
            nr_in: Vec::new(),
            nr_out: vec![0.0; DenoiseState::FRAME_SIZE],
            decimator: Decimator::default(),
            scratch: Vec::new(),
            vad: Endpointer::new(cfg),
        };
        ear.set_lag();
        ear
    }

    fn set_lag(&mut self) {
        let denoising = self.noise_reduction && self.rate == 48_000;
        self.vad
            .set_front_lag(if denoising { DENOISE_LAG_FRAMES } else { 0 });
    }

    /// Turn noise reduction on or off (a live session follows the setting).
    pub fn set_noise_reduction(&mut self, on: bool) {
        self.noise_reduction = on;
        if !on {
            self.denoise = None;
            self.nr_in.clear();
        }
        self.set_lag();
    }

    pub fn noise_reduction(&self) -> bool {
        self.noise_reduction
    }

    pub fn endpointer(&self) -> &Endpointer {
        &self.vad
    }

    /// One microphone frame.
    pub fn push(&mut self, frame: &MicFrame, out: &mut Vec<VadEvent>) {
        if frame.rate != self.rate {
            // A new rate: the filters start over, the utterance goes on.
            self.rate = frame.rate;
            self.denoise = None;
            self.nr_in.clear();
            self.decimator = Decimator::default();
            self.set_lag();
        }
        self.scratch.clear();
        if self.rate == 48_000 {
            if self.noise_reduction {
                let nr = self.denoise.get_or_insert_with(DenoiseState::new);
                self.nr_in
                    .extend(frame.samples.iter().map(|s| f32::from(*s)));
                let mut done = 0;
                while self.nr_in.len() - done >= DenoiseState::FRAME_SIZE {
                    nr.process_frame(
                        &mut self.nr_out,
                        &self.nr_in[done..done + DenoiseState::FRAME_SIZE],
                    );
                    done += DenoiseState::FRAME_SIZE;
                    self.decimator.push(&self.nr_out, &mut self.scratch);
                }
                self.nr_in.drain(..done);
            } else {
                let f: Vec<f32> = frame.samples.iter().map(|s| f32::from(*s)).collect();
                self.decimator.push(&f, &mut self.scratch);
            }
        } else {
            self.scratch.extend_from_slice(&frame.samples);
        }
        let s = std::mem::take(&mut self.scratch);
        self.vad.push(&s, out);
        self.scratch = s;
    }

    /// The stream stopped: the open utterance ends now.
    pub fn flush(&mut self, out: &mut Vec<VadEvent>) {
        self.nr_in.clear();
        self.vad.flush(out);
    }

    /// Forget the open utterance.
    pub fn discard(&mut self) {
        self.nr_in.clear();
        self.vad.discard();
    }
}

/// How much audio a client may send: a token bucket of audio time, refilled
/// in real time (× `rate`) up to `burst`. A frame that does not fit is
/// refused, not buffered, so a flood costs no memory.
#[derive(Debug, Clone)]
pub struct AudioBudget {
    burst_ms: f64,
    rate: f64,
    tokens_ms: f64,
    at: Instant,
}

impl AudioBudget {
    pub fn new(burst: Duration, rate: f64, now: Instant) -> AudioBudget {
        let burst_ms = burst.as_secs_f64() * 1000.0;
        AudioBudget {
            burst_ms,
            rate,
            tokens_ms: burst_ms,
            at: now,
        }
    }

    /// May a frame of `millis` be taken now?
    pub fn admit(&mut self, now: Instant, millis: u64) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64() * 1000.0;
        self.at = now;
        self.tokens_ms = (self.tokens_ms + elapsed * self.rate).min(self.burst_ms);
        if self.tokens_ms >= millis as f64 {
            self.tokens_ms -= millis as f64;
            true
        } else {
            false
        }
    }
}

/// A voice-like test signal: a 140 Hz glottal pulse train through two
/// formant-ish resonances, amplitude-modulated as syllables (tests, benches).
pub fn synthetic_voice(rate: u32, ms: u64) -> Vec<i16> {
    let n = (rate as u64 * ms / 1000) as usize;
    (0..n)
        .map(|i| {
            let t = i as f32 / rate as f32;
            let syl = 0.6 + 0.4 * (2.0 * std::f32::consts::PI * 4.0 * t).sin();
            let mut v = 0.0;
            for h in 1..30 {
                let f = 140.0 * h as f32;
                if f > rate as f32 / 2.0 {
                    break;
                }
                let formant = (-((f - 700.0) / 300.0).powi(2)).exp()
                    + 0.6 * (-((f - 1_200.0) / 400.0).powi(2)).exp()
                    + 0.2 * (-((f - 2_600.0) / 500.0).powi(2)).exp();
                v += formant * (2.0 * std::f32::consts::PI * f * t).sin();
            }
            (v * syl * 6_000.0).clamp(-32_000.0, 32_000.0) as i16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voiced(rate: u32, ms: u64) -> Vec<i16> {
        synthetic_voice(rate, ms)
    }

    fn run(ep: &mut Endpointer, audio: &[i16]) -> Vec<VadEvent> {
        let mut out = Vec::new();
        for c in audio.chunks(320) {
            ep.push(c, &mut out);
        }
        out
    }

    #[test]
    fn silence_and_noise_open_nothing() {
        let mut ep = Endpointer::new(Endpointing::default());
        assert!(run(&mut ep, &vec![0; 16_000 * 3]).is_empty());
        let mut seed = 1u32;
        let noise: Vec<i16> = (0..16_000 * 3)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                ((seed >> 16) as i16) / 16
            })
            .collect();
        let ev = run(&mut ep, &noise);
        assert!(
            !ev.iter().any(|e| matches!(e, VadEvent::Utterance(_))),
            "{ev:?}"
        );
    }

    #[test]
    fn an_utterance_is_cut_after_the_end_silence() {
        let cfg = Endpointing::default();
        let mut ep = Endpointer::new(cfg.clone());
        let mut audio = vec![0i16; 8_000];
        let speech = voiced(16_000, 1_504);
        audio.extend_from_slice(&speech);
        let before_end = audio.len();
        audio.extend(vec![0i16; 16_000]);
        let mut out = Vec::new();
        let mut ended_at = None;
        for (i, c) in audio.chunks(160).enumerate() {
            ep.push(c, &mut out);
            if ended_at.is_none() && out.iter().any(|e| matches!(e, VadEvent::Utterance(_))) {
                ended_at = Some((i + 1) * 160);
            }
        }
        assert_eq!(out.first(), Some(&VadEvent::SpeechStarted), "{out:?}");
        let Some(VadEvent::Utterance(u)) = out.get(1) else {
            panic!("{out:?}")
        };
        // Pre-roll kept, trailing silence trimmed, whole speech inside.
        assert!(u.len() >= speech.len(), "{} < {}", u.len(), speech.len());
        assert!(u.len() <= speech.len() + 16 * 700, "{}", u.len());
        let ended_at = ended_at.unwrap_or(usize::MAX);
        let silence_ms = (ended_at - before_end) as u64 / 16;
        assert!(
            silence_ms >= cfg.end_silence.as_millis() as u64 - 20
                && silence_ms <= cfg.end_silence.as_millis() as u64 + 30,
            "ended {silence_ms} ms after the speech"
        );
        assert!(!ep.in_utterance());
    }

    #[test]
    fn short_blips_are_dropped_and_long_speech_is_cut() {
        let mut ep = Endpointer::new(Endpointing::default());
        let mut audio = voiced(16_000, 60);
        audio.extend(vec![0i16; 16_000]);
        let ev = run(&mut ep, &audio);
        assert!(
            !ev.iter().any(|e| matches!(e, VadEvent::Utterance(_))),
            "{ev:?}"
        );
        let cfg = Endpointing {
            max_utterance: Duration::from_secs(2),
            ..Endpointing::default()
        };
        let mut ep = Endpointer::new(cfg);
        let ev = run(&mut ep, &voiced(16_000, 5_000));
        let cuts: Vec<usize> = ev
            .iter()
            .filter_map(|e| match e {
                VadEvent::Utterance(u) => Some(u.len()),
                _ => None,
            })
            .collect();
        assert!(cuts.len() >= 2, "{ev:?}");
        assert!(
            cuts.iter().all(|n| *n <= 2 * 16_000 + VAD_FRAME),
            "{cuts:?}"
        );
    }

    #[test]
    fn a_stream_that_stops_flushes_its_utterance() {
        let mut ep = Endpointer::new(Endpointing::default());
        let mut ev = run(&mut ep, &voiced(16_000, 800));
        assert!(ep.in_utterance());
        ep.flush(&mut ev);
        assert!(matches!(ev.last(), Some(VadEvent::Utterance(_))), "{ev:?}");
    }

    #[test]
    fn the_ear_hears_48k_with_and_without_noise_reduction() {
        for nr in [false, true] {
            let mut ear = Ear::new(Endpointing::default(), nr);
            let mut audio = voiced(48_000, 1_500);
            audio.extend(vec![0i16; 48_000]);
            let mut out = Vec::new();
            for c in audio.chunks(480) {
                ear.push(
                    &MicFrame {
                        rate: 48_000,
                        samples: c.to_vec(),
                    },
                    &mut out,
                );
            }
            let Some(VadEvent::Utterance(u)) =
                out.iter().find(|e| matches!(e, VadEvent::Utterance(_)))
            else {
                panic!("nr={nr}: {out:?}")
            };
            assert!(u.len() >= 16_000, "nr={nr}: {}", u.len());
        }
    }

    #[test]
    fn at_48k_the_utterance_ends_after_the_silence_with_or_without_denoising() {
        for nr in [false, true] {
            let mut ear = Ear::new(Endpointing::default(), nr);
            let mut a = vec![0i16; 4_800];
            a.extend(voiced(48_000, 1_500));
            let end = a.len();
            a.extend(vec![0i16; 96_000]);
            let mut out = Vec::new();
            let mut decided = None;
            for (i, c) in a.chunks(480).enumerate() {
                ear.push(
                    &MicFrame {
                        rate: 48_000,
                        samples: c.to_vec(),
                    },
                    &mut out,
                );
                if out.iter().any(|e| matches!(e, VadEvent::Utterance(_))) {
                    decided = Some(((i + 1) * 480 - end) / 48);
                    break;
                }
            }
            let ms = decided.unwrap_or(usize::MAX);
            assert!(
                (680..=730).contains(&ms),
                "nr={nr}: decided {ms} ms after the speech"
            );
        }
    }

    #[test]
    fn the_decimator_keeps_the_length_and_the_level() {
        let mut d = Decimator::default();
        let input: Vec<f32> = (0..48_000)
            .map(|i| 10_000.0 * (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 48_000.0).sin())
            .collect();
        let mut out = Vec::new();
        d.push(&input, &mut out);
        assert_eq!(out.len(), 16_000);
        let peak = out[1_000..]
            .iter()
            .map(|s| s.unsigned_abs())
            .max()
            .unwrap_or(0);
        assert!((9_000..=10_500).contains(&peak), "{peak}");
    }

    #[test]
    fn a_flood_is_refused_not_buffered() {
        let t0 = Instant::now();
        let mut b = AudioBudget::new(Duration::from_secs(2), 1.5, t0);
        // 2 s of audio at once is fine, then nothing until time passes.
        let taken = (0..100).filter(|_| b.admit(t0, 100)).count();
        assert_eq!(taken, 20);
        assert!(!b.admit(t0 + Duration::from_millis(10), 100));
        // Real time (and a bit faster) is always admitted.
        let mut t = t0 + Duration::from_secs(10);
        for _ in 0..600 {
            t += Duration::from_millis(100);
            assert!(b.admit(t, 120));
        }
        // A long pause does not bank more than the burst.
        let later = t + Duration::from_secs(3_600);
        let taken = (0..1_000).filter(|_| b.admit(later, 100)).count();
        assert_eq!(taken, 20);
    }
}

//! Microphone frames from the chat page (docs/chat-protocol.md, "Microphone").
//!
//! Binary: ASCII `NEKO`, the sample rate (u32 LE: 16000 or 48000), then mono
//! PCM16 LE — not empty, an even number of bytes, at most [`MAX_FRAME_MS`] of
//! audio. JSON fallback: `data` is an array of int16 samples (`sample_rate_hz`
//! optional, 16000 when absent), with the same limits.

use serde_json::Value;

/// The 4-byte tag of a microphone frame.
pub const MIC_MAGIC: &[u8; 4] = b"NEKO";
/// Longest audio in one frame.
pub const MAX_FRAME_MS: u32 = 120;
/// The rates a page may send.
pub const RATES: [u32; 2] = [16_000, 48_000];
/// The code every invalid frame is answered with.
pub const INVALID_CODE: &str = "VOICE_BINARY_FRAME_INVALID";

/// One frame of microphone audio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MicFrame {
    pub rate: u32,
    pub samples: Vec<i16>,
}

impl MicFrame {
    /// The frame's length in milliseconds.
    pub fn millis(&self) -> u64 {
        self.samples.len() as u64 * 1000 / u64::from(self.rate.max(1))
    }
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Not longer than the 8-byte header.
    TooShort,
    /// Not `NEKO`.
    Magic,
    /// A rate other than 16000 or 48000.
    Rate(u64),
    /// An odd number of PCM bytes.
    OddLength,
    /// Longer than [`MAX_FRAME_MS`].
    TooLong { millis: u64 },
    /// No samples.
    Empty,
    /// JSON samples that are not integers in the int16 range.
    NotSamples,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{INVALID_CODE}: ")?;
        match self {
            FrameError::TooShort => f.write_str("frame is too short"),
            FrameError::Magic => f.write_str("the frame does not start with NEKO"),
            FrameError::Rate(r) => write!(f, "sample rate {r} is not 16000 or 48000"),
            FrameError::OddLength => f.write_str("odd number of PCM bytes"),
            FrameError::TooLong { millis } => {
                write!(f, "frame is too large ({millis} ms > {MAX_FRAME_MS} ms)")
            }
            FrameError::Empty => f.write_str("frame holds no samples"),
            FrameError::NotSamples => f.write_str("data must be an array of int16 samples"),
        }
    }
}

fn check(rate: u64, samples: usize) -> Result<u32, FrameError> {
    let rate = match u32::try_from(rate) {
        Ok(r) if RATES.contains(&r) => r,
        _ => return Err(FrameError::Rate(rate)),
    };
    if samples == 0 {
        return Err(FrameError::Empty);
    }
    let max = rate as usize * MAX_FRAME_MS as usize / 1000;
    if samples > max {
        return Err(FrameError::TooLong {
            millis: samples as u64 * 1000 / u64::from(rate),
        });
    }
    Ok(rate)
}

/// A binary frame.
pub fn parse_binary(b: &[u8]) -> Result<MicFrame, FrameError> {
    if b.len() < 8 {
        return Err(FrameError::TooShort);
    }
    if &b[..4] != MIC_MAGIC {
        return Err(FrameError::Magic);
    }
    let rate = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let pcm = &b[8..];
    if !pcm.len().is_multiple_of(2) {
        return Err(FrameError::OddLength);
    }
    let rate = check(u64::from(rate), pcm.len() / 2)?;
    let samples = pcm
        .chunks_exact(2)
        .map(|p| i16::from_le_bytes([p[0], p[1]]))
        .collect();
    Ok(MicFrame { rate, samples })
}

/// The JSON fallback: `data` (int16 array) and the optional `sample_rate_hz`.
pub fn parse_json(frame: &Value) -> Result<MicFrame, FrameError> {
    let rate = match frame
        .get("sample_rate_hz")
        .or_else(|| frame.get("sample_rate"))
    {
        None | Some(Value::Null) => 16_000,
        Some(v) => v.as_u64().ok_or(FrameError::Rate(0))?,
    };
    let Some(data) = frame.get("data").and_then(Value::as_array) else {
        return Err(FrameError::NotSamples);
    };
    // The length is checked before the samples are materialised.
    let rate = check(rate, data.len())?;
    let samples = data
        .iter()
        .map(|v| {
            v.as_i64()
                .and_then(|n| i16::try_from(n).ok())
                .ok_or(FrameError::NotSamples)
        })
        .collect::<Result<Vec<i16>, _>>()?;
    Ok(MicFrame { rate, samples })
}

/// A binary frame of `samples` at `rate` (tests, benches, clients).
pub fn encode(rate: u32, samples: &[i16]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + samples.len() * 2);
    b.extend_from_slice(MIC_MAGIC);
    b.extend_from_slice(&rate.to_le_bytes());
    for s in samples {
        b.extend_from_slice(&s.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn binary_frames() {
        let ok = parse_binary(&encode(48_000, &[1, -2, 3])).unwrap();
        assert_eq!((ok.rate, ok.samples), (48_000, vec![1, -2, 3]));
        // 120 ms exactly is allowed at both rates, one sample more is not.
        assert!(parse_binary(&encode(48_000, &vec![0; 5_760])).is_ok());
        assert!(parse_binary(&encode(16_000, &vec![0; 1_920])).is_ok());
        assert_eq!(
            parse_binary(&encode(16_000, &vec![0; 1_921])),
            Err(FrameError::TooLong { millis: 120 })
        );
        assert!(matches!(
            parse_binary(&encode(48_000, &vec![0; 5_761])),
            Err(FrameError::TooLong { .. })
        ));
        assert_eq!(
            parse_binary(&encode(44_100, &[1])),
            Err(FrameError::Rate(44_100))
        );
        assert_eq!(parse_binary(&encode(16_000, &[])), Err(FrameError::Empty));
        let mut odd = encode(16_000, &[1, 2]);
        odd.push(7);
        assert_eq!(parse_binary(&odd), Err(FrameError::OddLength));
        assert_eq!(parse_binary(b"NEK"), Err(FrameError::TooShort));
        let mut wrong = encode(16_000, &[1]);
        wrong[0] = b'X';
        assert_eq!(parse_binary(&wrong), Err(FrameError::Magic));
        assert_eq!(parse_binary(&[]), Err(FrameError::TooShort));
        for e in [FrameError::Empty, FrameError::Rate(8000), FrameError::Magic] {
            assert!(e.to_string().starts_with("VOICE_BINARY_FRAME_INVALID: "));
        }
    }

    #[test]
    fn json_frames() {
        let f = parse_json(&json!({"data": [0, 32767, -32768]})).unwrap();
        assert_eq!((f.rate, f.samples.len()), (16_000, 3));
        let f = parse_json(&json!({"data": [1], "sample_rate_hz": 48000})).unwrap();
        assert_eq!(f.rate, 48_000);
        assert_eq!(
            parse_json(&json!({"data": [40000]})),
            Err(FrameError::NotSamples)
        );
        assert_eq!(
            parse_json(&json!({"data": ["a"]})),
            Err(FrameError::NotSamples)
        );
        assert_eq!(parse_json(&json!({"data": []})), Err(FrameError::Empty));
        assert_eq!(
            parse_json(&json!({"data": "hi"})),
            Err(FrameError::NotSamples)
        );
        assert!(matches!(
            parse_json(&json!({"data": vec![0; 2_000]})),
            Err(FrameError::TooLong { .. })
        ));
        assert_eq!(
            parse_json(&json!({"data": [1], "sample_rate_hz": 8000})),
            Err(FrameError::Rate(8000))
        );
    }
}

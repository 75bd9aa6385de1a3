//! Audio plumbing of the speech pipeline: little-endian PCM16 bytes to samples,
//! a streaming WAV header reader, MP3 decoding (`symphonia`) and the resampler
//! to mono PCM16 48 kHz (`rubato`).

use rubato::{FftFixedIn, Resampler as _};

/// The rate every speech is delivered at.
pub const OUTPUT_RATE: u32 = 48_000;

/// Lowest and highest input rate accepted from a provider.
pub const MIN_RATE: u32 = 8_000;
pub const MAX_RATE: u32 = 192_000;

/// Why audio could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadAudio(pub String);

/// Turns a byte stream of PCM16 LE into samples, keeping an odd byte for the
/// next piece.
#[derive(Debug, Default)]
pub struct PcmBytes {
    carry: Option<u8>,
}

impl PcmBytes {
    pub fn samples(&mut self, bytes: &[u8]) -> Vec<i16> {
        let mut out = Vec::with_capacity(bytes.len() / 2 + 1);
        let mut rest = bytes;
        if let Some(lo) = self.carry.take() {
            match rest.split_first() {
                Some((hi, tail)) => {
                    out.push(i16::from_le_bytes([lo, *hi]));
                    rest = tail;
                }
                None => {
                    self.carry = Some(lo);
                    return out;
                }
            }
        }
        let mut it = rest.chunks_exact(2);
        out.extend(it.by_ref().map(|p| i16::from_le_bytes([p[0], p[1]])));
        self.carry = it.remainder().first().copied();
        out
    }
}

/// The format of a WAV stream, read from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavFormat {
    pub rate: u32,
    pub channels: u16,
}

/// Reads a WAV header from the start of a stream and then passes the samples of
/// its data chunk (PCM16 only), mixed down to mono.
///
/// Hand-written rather than `hound`: `hound` reads whole files from a blocking
/// reader, while here the body arrives in network pieces and the first samples
/// must go on at once; streamed WAVs also carry a data length of 0 or
/// `0xFFFFFFFF`, which is accepted (the data runs to the end of the stream).
#[derive(Debug, Default)]
pub struct WavStream {
    head: Vec<u8>,
    format: Option<WavFormat>,
    pcm: PcmBytes,
    /// A sample of a frame not yet complete (multi-channel input).
    partial: Vec<i16>,
}

/// Longest header accepted before the data chunk.
const MAX_WAV_HEAD: usize = 64 * 1024;

impl WavStream {
    pub fn new() -> WavStream {
        WavStream::default()
    }

    pub fn format(&self) -> Option<WavFormat> {
        self.format
    }

    /// Feed bytes; the mono samples they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<i16>, BadAudio> {
        let data: Vec<u8>;
        let body = if self.format.is_none() {
            self.head.extend_from_slice(bytes);
            match parse_header(&self.head)? {
                None => {
                    if self.head.len() > MAX_WAV_HEAD {
                        return Err(BadAudio("the WAV header is too long".into()));
                    }
                    return Ok(Vec::new());
                }
                Some((fmt, offset)) => {
                    self.format = Some(fmt);
                    data = self.head.split_off(offset);
                    self.head = Vec::new();
                    &data[..]
                }
            }
        } else {
            bytes
        };
        let samples = self.pcm.samples(body);
        let channels = self.format.map_or(1, |f| f.channels as usize);
        if channels == 1 {
            return Ok(samples);
        }
        self.partial.extend(samples);
        let frames = self.partial.len() / channels;
        let mono = self
            .partial
            .chunks_exact(channels)
            .map(|f| (f.iter().map(|s| *s as i32).sum::<i32>() / channels as i32) as i16)
            .collect();
        self.partial.drain(..frames * channels);
        Ok(mono)
    }
}

/// The format and the offset of the data of a WAV header, `None` while more
/// bytes are needed.
fn parse_header(b: &[u8]) -> Result<Option<(WavFormat, usize)>, BadAudio> {
    let bad = |m: &str| Err(BadAudio(m.to_string()));
    if b.len() < 12 {
        if !b"RIFF".starts_with(&b[..b.len().min(4)]) {
            return bad("not a WAV file");
        }
        return Ok(None);
    }
    if &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return bad("not a WAV file");
    }
    let mut pos = 12;
    let mut format = None;
    loop {
        if b.len() < pos + 8 {
            return Ok(None);
        }
        let id = &b[pos..pos + 4];
        let len = u32::from_le_bytes([b[pos + 4], b[pos + 5], b[pos + 6], b[pos + 7]]) as usize;
        let body = pos + 8;
        if id == b"data" {
            let Some(f) = format else {
                return bad("the WAV data comes before its format");
            };
            return Ok(Some((f, body)));
        }
        if len > MAX_WAV_HEAD {
            return bad("a WAV header chunk is too long");
        }
        if b.len() < body + len {
            return Ok(None);
        }
        if id == b"fmt " {
            if len < 16 {
                return bad("the WAV format chunk is too short");
            }
            let f = &b[body..body + 16];
            let tag = u16::from_le_bytes([f[0], f[1]]);
            let channels = u16::from_le_bytes([f[2], f[3]]);
            let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
            let bits = u16::from_le_bytes([f[14], f[15]]);
            if !(tag == 1 || tag == 0xFFFE) || bits != 16 {
                return bad("only 16-bit PCM WAV is supported");
            }
            if !(1..=8).contains(&channels) {
                return bad("the WAV header names an impossible channel count");
            }
            if !(MIN_RATE..=MAX_RATE).contains(&rate) {
                return bad("the WAV header names an impossible sample rate");
            }
            format = Some(WavFormat { rate, channels });
        }
        pos = body + len + (len & 1);
    }
}

/// Decode a whole MP3 answer to mono samples and its rate.
pub fn decode_mp3(bytes: Vec<u8>) -> Result<(u32, Vec<i16>), BadAudio> {
    use symphonia::core::audio::SampleBuffer;
    use symphonia::core::codecs::DecoderOptions;
    use symphonia::core::formats::FormatOptions;
    use symphonia::core::io::MediaSourceStream;
    use symphonia::core::meta::MetadataOptions;
    use symphonia::core::probe::Hint;

    let bad = |e: &dyn std::fmt::Display| BadAudio(format!("cannot decode the MP3 answer: {e}"));
    let mss = MediaSourceStream::new(Box::new(std::io::Cursor::new(bytes)), Default::default());
    let mut hint = Hint::new();
    hint.with_extension("mp3");
    let probed = symphonia::default::get_probe()
        .format(
            &hint,
            mss,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(|e| bad(&e))?;
    let mut format = probed.format;
    let track = format
        .default_track()
        .ok_or_else(|| BadAudio("the MP3 answer has no audio track".into()))?;
    let track_id = track.id;
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .map_err(|e| bad(&e))?;
    let mut rate = track.codec_params.sample_rate.unwrap_or(0);
    let mut out = Vec::new();
    while let Ok(packet) = format.next_packet() {
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(d) => d,
            Err(symphonia::core::errors::Error::DecodeError(_)) => continue,
            Err(e) => return Err(bad(&e)),
        };
        let spec = *decoded.spec();
        rate = spec.rate;
        let channels = spec.channels.count().max(1);
        let mut buf = SampleBuffer::<i16>::new(decoded.capacity() as u64, spec);
        buf.copy_interleaved_ref(decoded);
        out.extend(
            buf.samples()
                .chunks(channels)
                .map(|f| (f.iter().map(|s| *s as i32).sum::<i32>() / channels as i32) as i16),
        );
    }
    if out.is_empty() || !(MIN_RATE..=MAX_RATE).contains(&rate) {
        return Err(BadAudio("the MP3 answer holds no audio".into()));
    }
    Ok((rate, out))
}

/// Input frames per resampler call.
const RESAMPLE_CHUNK: usize = 1024;

/// Streams mono samples at any rate to 48 kHz, without the resampler's delay:
/// the output of `n` input samples is `n × 48000 / rate` samples (rounded).
pub struct To48k {
    rate: u32,
    inner: Option<FftFixedIn<f32>>,
    pending: Vec<f32>,
    /// Output samples still to drop (the resampler's delay).
    skip: usize,
    taken_in: u64,
    given_out: u64,
}

impl To48k {
    pub fn new(rate: u32) -> Result<To48k, BadAudio> {
        if !(MIN_RATE..=MAX_RATE).contains(&rate) {
            return Err(BadAudio(format!("unsupported sample rate {rate}")));
        }
        let inner = if rate == OUTPUT_RATE {
            None
        } else {
            Some(
                FftFixedIn::<f32>::new(rate as usize, OUTPUT_RATE as usize, RESAMPLE_CHUNK, 2, 1)
                    .map_err(|e| BadAudio(format!("cannot resample from {rate} Hz: {e}")))?,
            )
        };
        let skip = inner.as_ref().map_or(0, |r| r.output_delay());
        Ok(To48k {
            rate,
            inner,
            pending: Vec::new(),
            skip,
            taken_in: 0,
            given_out: 0,
        })
    }

    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Resample `samples`; what is ready.
    pub fn push(&mut self, samples: &[i16]) -> Vec<i16> {
        self.taken_in += samples.len() as u64;
        let Some(r) = self.inner.as_mut() else {
            self.given_out += samples.len() as u64;
            return samples.to_vec();
        };
        self.pending
            .extend(samples.iter().map(|s| *s as f32 / 32768.0));
        let mut out = Vec::new();
        while self.pending.len() >= r.input_frames_next() {
            let need = r.input_frames_next();
            match r.process(&[&self.pending[..need]], None) {
                Ok(w) => out.extend(w.into_iter().next().unwrap_or_default()),
                Err(_) => break,
            }
            self.pending.drain(..need);
        }
        self.take(out)
    }

    /// The input ended: the rest of the output.
    pub fn finish(&mut self) -> Vec<i16> {
        let expected =
            (self.taken_in * OUTPUT_RATE as u64 + self.rate as u64 / 2) / self.rate as u64;
        let Some(r) = self.inner.as_mut() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.pending);
        if let Ok(w) = r.process_partial(Some(&[&rest[..]]), None) {
            out.extend(w.into_iter().next().unwrap_or_default());
        }
        // Push the delayed tail out with silence.
        for _ in 0..4 {
            if self.given_out + (out.len().saturating_sub(self.skip)) as u64 >= expected {
                break;
            }
            match r.process_partial(None::<&[&[f32]]>, None) {
                Ok(w) => out.extend(w.into_iter().next().unwrap_or_default()),
                Err(_) => break,
            }
        }
        let mut tail = self.take(out);
        let left = expected.saturating_sub(self.given_out - tail.len() as u64);
        tail.truncate(left as usize);
        self.given_out = expected;
        tail
    }

    fn take(&mut self, out: Vec<f32>) -> Vec<i16> {
        let drop = self.skip.min(out.len());
        self.skip -= drop;
        let v: Vec<i16> = out[drop..]
            .iter()
            .map(|s| (s * 32768.0).round().clamp(-32768.0, 32767.0) as i16)
            .collect();
        self.given_out += v.len() as u64;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"RIFF");
        b.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        b.extend_from_slice(b"WAVEfmt ");
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&channels.to_le_bytes());
        b.extend_from_slice(&rate.to_le_bytes());
        b.extend_from_slice(&(rate * 2 * channels as u32).to_le_bytes());
        b.extend_from_slice(&(2 * channels).to_le_bytes());
        b.extend_from_slice(&16u16.to_le_bytes());
        b.extend_from_slice(b"data");
        b.extend_from_slice(&0u32.to_le_bytes());
        for s in samples {
            b.extend_from_slice(&s.to_le_bytes());
        }
        b
    }

    #[test]
    fn wav_in_any_pieces() {
        let samples: Vec<i16> = (0..1000).map(|i| (i * 7) as i16).collect();
        let bytes = wav(22050, 1, &samples);
        for piece in [1, 3, 44, 45, 4096] {
            let mut w = WavStream::new();
            let mut out = Vec::new();
            for p in bytes.chunks(piece) {
                out.extend(w.push(p).unwrap());
            }
            assert_eq!(out, samples, "pieces of {piece}");
            assert_eq!(w.format().unwrap().rate, 22050);
        }
        let stereo = wav(24000, 2, &[100, 300, -100, -300]);
        assert_eq!(WavStream::new().push(&stereo).unwrap(), vec![200, -200]);
    }

    #[test]
    fn lying_wav_headers_are_refused() {
        let mut b = wav(0, 1, &[1, 2]);
        assert!(WavStream::new().push(&b).is_err());
        b = wav(24000, 0, &[1, 2]);
        assert!(WavStream::new().push(&b).is_err());
        assert!(WavStream::new().push(b"ID3garbage").is_err());
        // A chunk length pointing far away is an error, not a wait forever.
        let mut b = wav(24000, 1, &[1]);
        b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(WavStream::new().push(&b).is_err());
    }

    #[test]
    fn resampled_lengths_are_exact() {
        for rate in [16000u32, 22050, 24000, 44100, 48000] {
            let n = rate as usize / 3 + 17;
            let input: Vec<i16> = (0..n)
                .map(|i| ((i as f32 * 0.05).sin() * 8000.0) as i16)
                .collect();
            let mut r = To48k::new(rate).unwrap();
            let mut out = Vec::new();
            for p in input.chunks(700) {
                out.extend(r.push(p));
            }
            out.extend(r.finish());
            let expected = (n as u64 * 48000 + rate as u64 / 2) / rate as u64;
            assert_eq!(out.len() as u64, expected, "from {rate}");
            let loud = out.iter().filter(|s| s.abs() > 2000).count();
            assert!(loud > out.len() / 3, "from {rate}: mostly silent");
        }
        assert!(To48k::new(0).is_err());
    }

    #[test]
    fn pcm_bytes_keep_odd_bytes() {
        let mut p = PcmBytes::default();
        assert_eq!(p.samples(&[1]), Vec::<i16>::new());
        assert_eq!(p.samples(&[0, 2]), vec![1]);
        assert_eq!(p.samples(&[0]), vec![2]);
    }
}

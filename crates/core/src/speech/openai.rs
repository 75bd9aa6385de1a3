//! The OpenAI-compatible speech provider: `POST <base>/audio/speech` with
//! `{model, voice, input, response_format: "pcm"}` (what Kokoro-FastAPI,
//! Speaches, LocalAI, openedai-speech and OpenAI serve). The answer is read as
//! it streams: raw PCM16 LE at 24 kHz, or a WAV (streamed through its header,
//! any rate) when the body starts with `RIFF`; an MP3 (`ID3` or an MPEG frame
//! sync, or an `audio/mpeg` type) is read whole (at most
//! `SpeechLimits::max_encoded`) and decoded.

use std::sync::OnceLock;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::json;

use super::audio::{decode_mp3, PcmBytes, WavStream};
use super::config::OpenAiTarget;
use super::{PcmSink, Provider, SpeechLimits, TtsError};

/// The rate of `response_format: "pcm"`.
pub const PCM_RATE: u32 = 24_000;

/// One client for every speech request: proxy from the environment (never for
/// loopback), no redirects.
pub(crate) fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .proxy(reqwest::Proxy::custom(crate::net::proxy_for))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default()
    })
}

/// The provider.
pub struct OpenAiSpeech {
    pub target: OpenAiTarget,
    pub limits: SpeechLimits,
}

enum Body {
    Unknown(Vec<u8>),
    Pcm(PcmBytes),
    Wav(WavStream),
    Mp3(Vec<u8>),
}

impl Provider for OpenAiSpeech {
    fn name(&self) -> &'static str {
        "openai_compatible"
    }

    fn synthesize<'a>(
        &'a self,
        text: &'a str,
        sink: &'a mut PcmSink,
    ) -> BoxFuture<'a, Result<(), TtsError>> {
        Box::pin(self.run(text, sink))
    }
}

impl OpenAiSpeech {
    async fn run(&self, text: &str, sink: &mut PcmSink) -> Result<(), TtsError> {
        let t = &self.target;
        let body =
            json!({"model": t.model, "voice": t.voice, "input": text, "response_format": "pcm"});
        let mut req = client().post(t.speech_url.clone()).json(&body);
        if !t.api_key.is_empty() {
            req = req.bearer_auth(&t.api_key);
        }
        let resp = tokio::time::timeout(self.limits.first_byte, req.send())
            .await
            .map_err(|_| TtsError::Timeout)?
            .map_err(|e| {
                if e.is_timeout() {
                    TtsError::Timeout
                } else {
                    TtsError::Unavailable(super::describe(&e))
                }
            })?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            if status == 401 || status == 403 {
                return Err(TtsError::Auth(status));
            }
            let text = tokio::time::timeout(Duration::from_secs(2), resp.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(TtsError::Upstream(status, text.chars().take(200).collect()));
        }
        let kind = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut state = if kind.contains("mpeg") || kind.contains("mp3") {
            Body::Mp3(Vec::new())
        } else {
            Body::Unknown(Vec::new())
        };
        let mut stream = resp.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.limits.idle, stream.next())
                .await
                .map_err(|_| TtsError::Timeout)?;
            let bytes = match next {
                None => break,
                Some(Ok(b)) => b,
                Some(Err(e)) if e.is_timeout() => return Err(TtsError::Timeout),
                Some(Err(e)) => return Err(TtsError::Unavailable(super::describe(&e))),
            };
            if let Body::Unknown(head) = &mut state {
                head.extend_from_slice(&bytes);
                if head.len() < 4 {
                    continue;
                }
                let head = std::mem::take(head);
                state = if head.starts_with(b"RIFF") {
                    Body::Wav(WavStream::new())
                } else if head.starts_with(b"ID3") || (head[0] == 0xFF && head[1] & 0xE0 == 0xE0) {
                    Body::Mp3(Vec::new())
                } else {
                    Body::Pcm(PcmBytes::default())
                };
                self.feed(&mut state, &head, sink).await?;
                continue;
            }
            self.feed(&mut state, &bytes, sink).await?;
        }
        match state {
            Body::Unknown(head) => {
                // A body shorter than four bytes: PCM (or nothing).
                let samples = PcmBytes::default().samples(&head);
                sink.push(PCM_RATE, &samples).await?;
            }
            Body::Mp3(all) => {
                let (rate, samples) = tokio::task::spawn_blocking(move || decode_mp3(all))
                    .await
                    .map_err(|_| TtsError::BadAudio("the MP3 decoder failed".into()))??;
                for part in samples.chunks(super::FRAME_SAMPLES) {
                    sink.push(rate, part).await?;
                }
            }
            Body::Wav(w) if w.format().is_none() => {
                return Err(TtsError::BadAudio("the WAV answer has no data".into()))
            }
            _ => {}
        }
        sink.finish().await
    }

    async fn feed(
        &self,
        state: &mut Body,
        bytes: &[u8],
        sink: &mut PcmSink,
    ) -> Result<(), TtsError> {
        match state {
            Body::Pcm(p) => {
                let s = p.samples(bytes);
                sink.push(PCM_RATE, &s).await
            }
            Body::Wav(w) => {
                let s = w.push(bytes)?;
                match w.format() {
                    Some(f) if !s.is_empty() => sink.push(f.rate, &s).await,
                    _ => Ok(()),
                }
            }
            Body::Mp3(all) => {
                if all.len() + bytes.len() > self.limits.max_encoded {
                    return Err(TtsError::BadAudio("the MP3 answer is too large".into()));
                }
                all.extend_from_slice(bytes);
                Ok(())
            }
            Body::Unknown(_) => Ok(()),
        }
    }
}

//! Speech recognisers behind one trait: 16 kHz mono PCM of one utterance in,
//! its text out. Two kinds, chosen by `asrModelUrl` in the core
//! configuration (docs/voice.md, "Hearing"):
//!
//! * `http(s)://…` — OpenAI-compatible `POST <base>/audio/transcriptions`
//!   (multipart: `file` = a WAV, `model` = `asrModelId`, `response_format=json`;
//!   `Authorization: Bearer asrModelApiKey` only when a key is set): Speaches,
//!   whisper.cpp's `whisper-server` (its `/inference` path is kept as given),
//!   LocalAI, OpenAI;
//! * `tcp://host:port` — Wyoming `transcribe`, `audio-start`, `audio-chunk`…,
//!   `audio-stop` → `transcript {text}` (wyoming-faster-whisper and friends),
//!   with the framing of `crate::speech::wyoming`.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use tokio::io::BufReader;
use url::Url;

use super::ear::RATE;
use crate::speech::wyoming;
use crate::speech::TtsError;

/// Why an utterance could not be recognised; its [`code`](AsrError::code) is
/// the error frame's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsrError {
    /// No recogniser is configured (`asrModelUrl` empty).
    NotConfigured,
    /// The settings cannot be used.
    Config(String),
    /// The recogniser cannot be reached.
    Unavailable(String),
    /// No answer in time.
    Timeout,
    /// The key was refused (HTTP 401/403).
    Auth(u16),
    /// Another HTTP error, a Wyoming `error`, an unreadable answer.
    Upstream(u16, String),
}

impl AsrError {
    pub fn code(&self) -> &'static str {
        match self {
            AsrError::NotConfigured => "asr_not_configured",
            AsrError::Config(_) => "asr_config_invalid",
            AsrError::Unavailable(_) => "asr_unavailable",
            AsrError::Timeout => "asr_timeout",
            AsrError::Auth(_) => "asr_auth_failed",
            AsrError::Upstream(..) => "asr_upstream_error",
        }
    }
}

impl std::fmt::Display for AsrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsrError::NotConfigured => f.write_str(
                "no speech recogniser is configured (asrModelUrl, POST /api/config/core_api)",
            ),
            AsrError::Config(e) => write!(f, "the speech recogniser settings cannot be used: {e}"),
            AsrError::Unavailable(e) => write!(f, "cannot reach the speech recogniser: {e}"),
            AsrError::Timeout => f.write_str("the speech recogniser did not answer in time"),
            AsrError::Auth(s) => write!(f, "the speech recogniser refused the key (HTTP {s})"),
            AsrError::Upstream(0, b) => write!(f, "the speech recogniser failed: {b}"),
            AsrError::Upstream(s, b) => write!(f, "the speech recogniser answered HTTP {s}: {b}"),
        }
    }
}

impl From<TtsError> for AsrError {
    fn from(e: TtsError) -> Self {
        match e {
            TtsError::Unavailable(m) => AsrError::Unavailable(m),
            TtsError::Timeout => AsrError::Timeout,
            TtsError::Auth(s) => AsrError::Auth(s),
            TtsError::Upstream(s, m) => AsrError::Upstream(s, m),
            TtsError::BadAudio(m) => AsrError::Upstream(0, m),
            TtsError::Config(m) => AsrError::Config(m),
        }
    }
}

/// A recogniser: one utterance (16 kHz mono PCM16) → its text. Dropping the
/// future cancels the request.
pub trait Recognizer: Send + Sync {
    /// `openai_compatible` or `wyoming`.
    fn name(&self) -> &'static str;
    fn transcribe<'a>(&'a self, pcm: &'a [i16]) -> BoxFuture<'a, Result<String, AsrError>>;
}

/// Default model name sent to OpenAI-compatible servers.
pub const DEFAULT_MODEL: &str = "whisper-1";

/// What the settings choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsrChoice {
    OpenAi {
        url: Url,
        model: String,
        api_key: String,
    },
    Wyoming {
        host: String,
        port: u16,
        model: String,
    },
}

fn field<'a>(cfg: &'a Map<String, Value>, key: &str) -> &'a str {
    cfg.get(key).and_then(Value::as_str).map_or("", str::trim)
}

/// The recogniser `cfg` (the core configuration) chooses.
pub fn resolve(cfg: &Map<String, Value>) -> Result<AsrChoice, AsrError> {
    let url = field(cfg, "asrModelUrl");
    let model = field(cfg, "asrModelId");
    if url.is_empty() {
        return Err(AsrError::NotConfigured);
    }
    if url.to_ascii_lowercase().starts_with("tcp://") {
        let (host, port) = crate::speech::config::tcp_address(url)
            .ok_or_else(|| AsrError::Config("a Wyoming asrModelUrl is tcp://host:port".into()))?;
        return Ok(AsrChoice::Wyoming {
            host,
            port,
            model: model.to_string(),
        });
    }
    let url = crate::speech::config::service_url(url, "/audio/transcriptions", &["/inference"])
        .map_err(|e| AsrError::Config(e.replace("{key}", "asrModel")))?;
    Ok(AsrChoice::OpenAi {
        url,
        model: if model.is_empty() {
            DEFAULT_MODEL.to_string()
        } else {
            model.to_string()
        },
        api_key: field(cfg, "asrModelApiKey").to_string(),
    })
}

/// A WAV file (16-bit mono) of `pcm` at `rate`.
pub fn wav(rate: u32, pcm: &[i16]) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut cur = std::io::Cursor::new(Vec::with_capacity(44 + pcm.len() * 2));
    let written = match hound::WavWriter::new(&mut cur, spec) {
        Ok(mut w) => {
            let mut i16w = w.get_i16_writer(pcm.len() as u32);
            for s in pcm {
                i16w.write_sample(*s);
            }
            i16w.flush().is_ok() && w.finalize().is_ok()
        }
        Err(_) => false,
    };
    if written {
        cur.into_inner()
    } else {
        Vec::new()
    }
}

/// The OpenAI-compatible recogniser.
pub struct OpenAiRecognizer {
    pub http: reqwest::Client,
    pub url: Url,
    pub model: String,
    pub api_key: String,
    pub timeout: Duration,
}

/// Longest answer read.
const MAX_ANSWER: usize = 256 * 1024;

impl Recognizer for OpenAiRecognizer {
    fn name(&self) -> &'static str {
        "openai_compatible"
    }

    fn transcribe<'a>(&'a self, pcm: &'a [i16]) -> BoxFuture<'a, Result<String, AsrError>> {
        Box::pin(async move {
            tokio::time::timeout(self.timeout, self.run(pcm))
                .await
                .map_err(|_| AsrError::Timeout)?
        })
    }
}

impl OpenAiRecognizer {
    async fn run(&self, pcm: &[i16]) -> Result<String, AsrError> {
        let file = reqwest::multipart::Part::bytes(wav(RATE, pcm))
            .file_name("utterance.wav")
            .mime_str("audio/wav")
            .map_err(|e| AsrError::Config(e.to_string()))?;
        let form = reqwest::multipart::Form::new()
            .part("file", file)
            .text("model", self.model.clone())
            .text("response_format", "json");
        let mut req = self.http.post(self.url.clone()).multipart(form);
        if !self.api_key.is_empty() {
            req = req.bearer_auth(&self.api_key);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| AsrError::Unavailable(crate::error_chain(&e)))?;
        let status = resp.status().as_u16();
        let ctype = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let body = read_capped(resp).await?;
        let text = String::from_utf8_lossy(&body).to_string();
        match status {
            200..=299 => {}
            401 | 403 => return Err(AsrError::Auth(status)),
            _ => return Err(AsrError::Upstream(status, text.chars().take(200).collect())),
        }
        if ctype.contains("json") || text.trim_start().starts_with('{') {
            let v: Value = serde_json::from_str(&text).map_err(|_| {
                AsrError::Upstream(status, "the transcription answer is not JSON".into())
            })?;
            return v
                .get("text")
                .and_then(Value::as_str)
                .map(|t| t.trim().to_string())
                .ok_or_else(|| {
                    AsrError::Upstream(status, "the transcription answer has no text".into())
                });
        }
        Ok(text.trim().to_string())
    }
}

async fn read_capped(mut resp: reqwest::Response) -> Result<Vec<u8>, AsrError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| AsrError::Unavailable(crate::error_chain(&e)))?
    {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(AsrError::Upstream(
                resp.status().as_u16(),
                "the transcription answer is too large".into(),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The Wyoming recogniser.
pub struct WyomingRecognizer {
    pub host: String,
    pub port: u16,
    /// Sent as `transcribe.name` when set.
    pub model: String,
    pub timeout: Duration,
}

/// Bytes of PCM per `audio-chunk` sent.
const WYOMING_CHUNK: usize = 16_000 * 2 / 10;

impl Recognizer for WyomingRecognizer {
    fn name(&self) -> &'static str {
        "wyoming"
    }

    fn transcribe<'a>(&'a self, pcm: &'a [i16]) -> BoxFuture<'a, Result<String, AsrError>> {
        Box::pin(async move {
            tokio::time::timeout(self.timeout, self.run(pcm))
                .await
                .map_err(|_| AsrError::Timeout)?
        })
    }
}

impl WyomingRecognizer {
    async fn run(&self, pcm: &[i16]) -> Result<String, AsrError> {
        let mut s = wyoming::connect_to(
            &self.host,
            self.port,
            self.timeout.min(Duration::from_secs(5)),
        )
        .await?;
        let mut ask = json!({});
        if !self.model.is_empty() {
            ask["name"] = json!(self.model);
        }
        let fmt = json!({"rate": RATE, "width": 2, "channels": 1});
        wyoming::send_event_with(&mut s, "transcribe", ask, &[]).await?;
        wyoming::send_event_with(&mut s, "audio-start", fmt.clone(), &[]).await?;
        let bytes: Vec<u8> = pcm.iter().flat_map(|v| v.to_le_bytes()).collect();
        for chunk in bytes.chunks(WYOMING_CHUNK) {
            wyoming::send_event_with(&mut s, "audio-chunk", fmt.clone(), chunk).await?;
        }
        wyoming::send_event_with(&mut s, "audio-stop", json!({}), &[]).await?;
        let mut r = BufReader::new(s);
        loop {
            let ev = wyoming::read_event(&mut r).await?;
            match ev.kind.as_str() {
                "transcript" => {
                    return Ok(ev
                        .data
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .trim()
                        .to_string())
                }
                "error" => {
                    let msg = ev
                        .data
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    return Err(AsrError::Upstream(0, format!("Wyoming: {msg}")));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn keys_choose_the_recogniser() {
        assert_eq!(resolve(&cfg(json!({}))), Err(AsrError::NotConfigured));
        let Ok(AsrChoice::OpenAi {
            url,
            model,
            api_key,
        }) = resolve(&cfg(json!({"asrModelUrl": "http://127.0.0.1:8000/v1"})))
        else {
            panic!("openai")
        };
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8000/v1/audio/transcriptions"
        );
        assert_eq!((model.as_str(), api_key.as_str()), (DEFAULT_MODEL, ""));
        let Ok(AsrChoice::OpenAi { url, .. }) = resolve(&cfg(
            json!({"asrModelUrl": "http://127.0.0.1:8080/inference"}),
        )) else {
            panic!("whisper.cpp")
        };
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/inference");
        assert_eq!(
            resolve(&cfg(
                json!({"asrModelUrl": "tcp://127.0.0.1:10300", "asrModelId": "tiny-int8"})
            )),
            Ok(AsrChoice::Wyoming {
                host: "127.0.0.1".into(),
                port: 10300,
                model: "tiny-int8".into()
            })
        );
        for bad in ["ftp://x", "tcp://h", "http://u:p@h/v1", "nonsense"] {
            let e = resolve(&cfg(json!({ "asrModelUrl": bad }))).unwrap_err();
            assert_eq!(e.code(), "asr_config_invalid", "{bad}");
            assert!(e.to_string().contains("asrModel"), "{e}");
        }
    }

    #[test]
    fn a_wav_of_the_utterance() {
        let w = wav(16_000, &[0, 1, -1, 32767]);
        assert_eq!(&w[..4], b"RIFF");
        assert_eq!(w.len(), 44 + 8);
        let r = hound::WavReader::new(std::io::Cursor::new(w)).unwrap();
        assert_eq!(r.spec().sample_rate, 16_000);
        assert_eq!(r.len(), 4);
    }
}

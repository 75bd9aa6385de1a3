//! The voice server (GPT-SoVITS v3 `stream-input`): one WebSocket per speech
//! on `ws://<host>/api/v3/tts/stream-input`. `{"cmd":"init","voice_id",…}` →
//! `{"type":"ready"}`; every chunk of the reply goes as
//! `{"cmd":"append","data"}`; `{"cmd":"end"}` when the reply is complete →
//! binary frames, each a complete WAV (its own header and rate) → `{"type":"done"}`.
//! An interrupted speech closes the socket without `end`.
//!
//! Chosen by `gptsovitsEnabled: true` or a character `voice_id` of the form
//! `gsv:<id>` or `gsv:<id>|{extra init fields}`; the server is `ttsModelUrl`
//! when it is an `http://` URL, else `http://127.0.0.1:9881`. Only `ws://` is
//! spoken (a voice server runs on the user's machine).

use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use url::Url;

use super::audio::WavStream;
use super::{PcmSink, Provider, SpeechLimits, TtsError};

/// The voice server's address when `ttsModelUrl` names none.
pub const DEFAULT_URL: &str = "http://127.0.0.1:9881";

/// Largest frame accepted from the server.
const MAX_FRAME: usize = 8 * 1024 * 1024;

/// A voice server and the voice to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoiceServerTarget {
    /// `ws://…/api/v3/tts/stream-input`.
    pub stream_url: Url,
    /// `http://…` (the voice list is `GET <base>/api/v3/voices`).
    pub base: Url,
    pub voice_id: String,
    /// Extra `init` fields (`cmd` and `voice_id` are never taken from here).
    pub extra: Map<String, Value>,
}

/// `gsv:<id>` or `gsv:<id>|{json}` (the prefix is optional) → id and extras.
pub fn parse_voice(raw: &str) -> (String, Map<String, Value>) {
    let raw = raw.trim();
    let raw = raw.strip_prefix("gsv:").unwrap_or(raw);
    match raw.split_once('|') {
        Some((id, extra)) => {
            let mut extra = match serde_json::from_str(extra) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            extra.remove("cmd");
            extra.remove("voice_id");
            (id.trim().to_string(), extra)
        }
        None => (raw.to_string(), Map::new()),
    }
}

/// The target for a base URL (`http://host:port[/path]`) and a voice.
pub fn target(base: &str, voice: &str) -> Result<VoiceServerTarget, TtsError> {
    let bad = || TtsError::Config("the voice server URL must be http://host:port".into());
    let base = Url::parse(base.trim().trim_end_matches('/')).map_err(|_| bad())?;
    if base.scheme() != "http" || base.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    let mut stream_url = base.clone();
    stream_url.set_scheme("ws").map_err(|_| bad())?;
    let path = format!(
        "{}/api/v3/tts/stream-input",
        base.path().trim_end_matches('/')
    );
    stream_url.set_path(&path);
    stream_url.set_query(None);
    let (voice_id, extra) = parse_voice(voice);
    Ok(VoiceServerTarget {
        stream_url,
        base,
        voice_id,
        extra,
    })
}

/// The provider.
pub struct VoiceServerSpeech {
    pub target: VoiceServerTarget,
    pub limits: SpeechLimits,
}

impl Provider for VoiceServerSpeech {
    fn name(&self) -> &'static str {
        "gptsovits"
    }

    fn synthesize<'a>(
        &'a self,
        text: &'a str,
        sink: &'a mut PcmSink,
    ) -> BoxFuture<'a, Result<(), TtsError>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(text.to_string());
        drop(tx);
        Box::pin(self.run(rx, sink))
    }

    fn streams_text(&self) -> bool {
        true
    }

    fn stream<'a>(
        &'a self,
        text: mpsc::UnboundedReceiver<String>,
        sink: &'a mut PcmSink,
    ) -> BoxFuture<'a, Result<(), TtsError>> {
        Box::pin(self.run(text, sink))
    }
}

fn ws_err(e: tokio_tungstenite::tungstenite::Error) -> TtsError {
    TtsError::Unavailable(super::describe(&e))
}

impl VoiceServerSpeech {
    async fn run(
        &self,
        mut text: mpsc::UnboundedReceiver<String>,
        sink: &mut PcmSink,
    ) -> Result<(), TtsError> {
        let t = &self.target;
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
            max_message_size: Some(MAX_FRAME),
            max_frame_size: Some(MAX_FRAME),
            ..Default::default()
        };
        let (mut ws, _) = tokio::time::timeout(
            self.limits.first_byte,
            tokio_tungstenite::connect_async_with_config(t.stream_url.as_str(), Some(config), true),
        )
        .await
        .map_err(|_| TtsError::Timeout)?
        .map_err(|e| match e {
            tokio_tungstenite::tungstenite::Error::Http(r)
                if matches!(r.status().as_u16(), 401 | 403) =>
            {
                TtsError::Auth(r.status().as_u16())
            }
            e => ws_err(e),
        })?;
        let mut init = t.extra.clone();
        init.insert("cmd".into(), json!("init"));
        init.insert("voice_id".into(), json!(t.voice_id));
        ws.send(Message::Text(Value::Object(init).to_string()))
            .await
            .map_err(ws_err)?;
        // Wait for ready.
        loop {
            let m = tokio::time::timeout(self.limits.first_byte, ws.next())
                .await
                .map_err(|_| TtsError::Timeout)?;
            match m {
                Some(Ok(Message::Text(s))) => {
                    let v: Value = serde_json::from_str(&s).unwrap_or(Value::Null);
                    match v.get("type").and_then(Value::as_str) {
                        Some("ready") => break,
                        Some("error") => return Err(server_error(&v)),
                        _ => {}
                    }
                }
                Some(Ok(Message::Close(_))) | None => {
                    return Err(TtsError::Unavailable(
                        "the voice server closed the socket before ready".into(),
                    ))
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(ws_err(e)),
            }
        }
        let mut text_open = true;
        loop {
            let wait = if text_open {
                Duration::from_secs(3600)
            } else {
                self.limits.idle
            };
            tokio::select! {
                t = text.recv(), if text_open => match t {
                    Some(chunk) => ws
                        .send(Message::Text(json!({"cmd": "append", "data": chunk}).to_string()))
                        .await
                        .map_err(ws_err)?,
                    None => {
                        text_open = false;
                        ws.send(Message::Text(json!({"cmd": "end"}).to_string()))
                            .await
                            .map_err(ws_err)?;
                    }
                },
                m = tokio::time::timeout(wait, ws.next()) => match m.map_err(|_| TtsError::Timeout)? {
                    Some(Ok(Message::Binary(b))) => {
                        // Every frame is a complete WAV with its own header.
                        let mut wav = WavStream::new();
                        let samples = wav.push(&b)?;
                        let rate = wav
                            .format()
                            .ok_or_else(|| TtsError::BadAudio("a voice-server frame is not a whole WAV".into()))?
                            .rate;
                        sink.push(rate, &samples).await?;
                    }
                    Some(Ok(Message::Text(s))) => {
                        let v: Value = serde_json::from_str(&s).unwrap_or(Value::Null);
                        match v.get("type").and_then(Value::as_str) {
                            Some("done") => break,
                            Some("error") => return Err(server_error(&v)),
                            _ => {}
                        }
                    }
                    Some(Ok(Message::Close(_))) | None => {
                        if text_open {
                            return Err(TtsError::Unavailable("the voice server closed the socket".into()));
                        }
                        break;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(ws_err(e)),
                },
            }
        }
        let _ = ws.close(None).await;
        sink.finish().await
    }
}

fn server_error(v: &Value) -> TtsError {
    let msg = v.get("message").and_then(Value::as_str).unwrap_or("error");
    TtsError::Upstream(0, format!("voice server: {msg}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voices_and_urls() {
        let (id, extra) = parse_voice("gsv:mika|{\"speed\":1.2,\"cmd\":\"x\",\"voice_id\":\"y\"}");
        assert_eq!(id, "mika");
        assert_eq!(Value::Object(extra), json!({"speed": 1.2}));
        assert_eq!(parse_voice("gsv:mika").0, "mika");
        let t = target("http://127.0.0.1:9881/", "gsv:a").unwrap();
        assert_eq!(
            t.stream_url.as_str(),
            "ws://127.0.0.1:9881/api/v3/tts/stream-input"
        );
        assert!(target("file:///x", "a").is_err());
        assert!(target("https://h", "a").is_err());
    }
}

//! The Wyoming provider (`ttsModelUrl: "tcp://host:port"`): Home Assistant's
//! piper server and other local engines. One TCP connection per chunk:
//! `synthesize {text, voice?}` → `audio-start` → `audio-chunk` (PCM payload)… →
//! `audio-stop`; `describe` → `info` lists the voices.
//!
//! An event is one JSON header line `{"type", "data"?, "data_length"?,
//! "payload_length"?}`, then `data_length` bytes of JSON data (merged into
//! `data`), then `payload_length` bytes of payload. Hand-written (about a
//! hundred lines) rather than the `wyoming` crate: only these four events are
//! needed, and every read here is bounded in size and time. Hearing
//! (`crate::hearing::recognizer`, `transcribe`) uses the same framing.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{PcmSink, Provider, SpeechLimits, TtsError};

/// Longest header line, JSON data and payload of one event.
const MAX_LINE: usize = 64 * 1024;
const MAX_DATA: usize = 1024 * 1024;
const MAX_PAYLOAD: usize = 4 * 1024 * 1024;

/// A Wyoming server and the voice to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WyomingTarget {
    pub host: String,
    pub port: u16,
    /// Empty: the server's default voice.
    pub voice: String,
}

/// One event as read.
#[derive(Debug)]
pub struct Event {
    pub kind: String,
    pub data: Map<String, Value>,
    pub payload: Vec<u8>,
}

/// Read one event.
pub async fn read_event<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> Result<Event, TtsError> {
    let bad = |m: &str| TtsError::BadAudio(format!("Wyoming: {m}"));
    let mut line = Vec::new();
    let n = (&mut *r)
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| TtsError::Unavailable(e.to_string()))?;
    if n == 0 {
        return Err(TtsError::Unavailable(
            "the Wyoming server closed the connection".into(),
        ));
    }
    if line.len() > MAX_LINE {
        return Err(bad("an event header is too long"));
    }
    let head: Value =
        serde_json::from_slice(&line).map_err(|_| bad("an event header is not JSON"))?;
    let kind = head
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("an event has no type"))?
        .to_string();
    let mut data = head
        .get("data")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let len = |k: &str, max: usize| -> Result<usize, TtsError> {
        match head.get(k).and_then(Value::as_u64) {
            None => Ok(0),
            Some(n) if n as usize <= max => Ok(n as usize),
            Some(_) => Err(bad("an event is too large")),
        }
    };
    let data_len = len("data_length", MAX_DATA)?;
    let payload_len = len("payload_length", MAX_PAYLOAD)?;
    if data_len > 0 {
        let mut buf = vec![0; data_len];
        r.read_exact(&mut buf)
            .await
            .map_err(|e| TtsError::Unavailable(e.to_string()))?;
        if let Ok(Value::Object(extra)) = serde_json::from_slice(&buf) {
            data.extend(extra);
        }
    }
    let mut payload = vec![0; payload_len];
    if payload_len > 0 {
        r.read_exact(&mut payload)
            .await
            .map_err(|e| TtsError::Unavailable(e.to_string()))?;
    }
    Ok(Event {
        kind,
        data,
        payload,
    })
}

async fn connect(t: &WyomingTarget, limits: &SpeechLimits) -> Result<TcpStream, TtsError> {
    connect_to(
        &t.host,
        t.port,
        limits.first_byte.min(Duration::from_secs(5)),
    )
    .await
}

/// Open a connection to a Wyoming server (text-to-speech and recognition).
pub async fn connect_to(host: &str, port: u16, within: Duration) -> Result<TcpStream, TtsError> {
    let s = tokio::time::timeout(within, TcpStream::connect((host, port)))
        .await
        .map_err(|_| TtsError::Timeout)?
        .map_err(|e| TtsError::Unavailable(e.to_string()))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

async fn send_event(s: &mut TcpStream, kind: &str, data: Value) -> Result<(), TtsError> {
    send_event_with(s, kind, data, &[]).await
}

/// An event's header line.
#[derive(serde::Serialize)]
struct Header<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    data: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_length: Option<usize>,
}

/// Write one event: the header line (`data` inline, `payload_length` when
/// there is a payload), then the payload.
pub async fn send_event_with<W: tokio::io::AsyncWrite + Unpin>(
    s: &mut W,
    kind: &str,
    data: Value,
    payload: &[u8],
) -> Result<(), TtsError> {
    let head = Header {
        kind,
        data,
        payload_length: (!payload.is_empty()).then_some(payload.len()),
    };
    let mut bytes = serde_json::to_vec(&head).map_err(|e| TtsError::Unavailable(e.to_string()))?;
    bytes.push(b'\n');
    bytes.extend_from_slice(payload);
    s.write_all(&bytes)
        .await
        .map_err(|e| TtsError::Unavailable(e.to_string()))
}

/// The provider.
pub struct WyomingSpeech {
    pub target: WyomingTarget,
    pub limits: SpeechLimits,
}

impl Provider for WyomingSpeech {
    fn name(&self) -> &'static str {
        "wyoming"
    }

    fn synthesize<'a>(
        &'a self,
        text: &'a str,
        sink: &'a mut PcmSink,
    ) -> BoxFuture<'a, Result<(), TtsError>> {
        Box::pin(self.run(text, sink))
    }
}

impl WyomingSpeech {
    async fn run(&self, text: &str, sink: &mut PcmSink) -> Result<(), TtsError> {
        let mut s = connect(&self.target, &self.limits).await?;
        let mut data = json!({"text": text});
        if !self.target.voice.is_empty() {
            data["voice"] = json!({"name": self.target.voice});
        }
        send_event(&mut s, "synthesize", data).await?;
        let mut r = BufReader::new(s);
        let mut wait = self.limits.first_byte;
        loop {
            let ev = tokio::time::timeout(wait, read_event(&mut r))
                .await
                .map_err(|_| TtsError::Timeout)??;
            wait = self.limits.idle;
            match ev.kind.as_str() {
                "audio-chunk" => {
                    let num = |k: &str| ev.data.get(k).and_then(Value::as_u64).unwrap_or(0);
                    let (rate, width, channels) = (num("rate"), num("width"), num("channels"));
                    if width != 2 || !(1..=8).contains(&channels) {
                        return Err(TtsError::BadAudio(
                            "Wyoming: only 16-bit PCM audio is supported".into(),
                        ));
                    }
                    let rate = u32::try_from(rate).unwrap_or(0);
                    let samples: Vec<i16> = ev
                        .payload
                        .chunks_exact(2 * channels as usize)
                        .map(|f| {
                            let sum: i32 = f
                                .chunks_exact(2)
                                .map(|p| i16::from_le_bytes([p[0], p[1]]) as i32)
                                .sum();
                            (sum / channels as i32) as i16
                        })
                        .collect();
                    sink.push(rate, &samples).await?;
                }
                "audio-stop" => break,
                "error" => {
                    let msg = ev
                        .data
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("error");
                    return Err(TtsError::Upstream(0, format!("Wyoming: {msg}")));
                }
                _ => {}
            }
        }
        sink.finish().await
    }
}

/// The voices a Wyoming server describes (`info.tts[].voices[]`):
/// `{id, name, description, languages}`.
pub async fn voices(t: &WyomingTarget, limits: &SpeechLimits) -> Result<Vec<Value>, TtsError> {
    let mut s = connect(t, limits).await?;
    send_event(&mut s, "describe", json!({})).await?;
    let mut r = BufReader::new(s);
    let ev = loop {
        let ev = tokio::time::timeout(limits.first_byte, read_event(&mut r))
            .await
            .map_err(|_| TtsError::Timeout)??;
        if ev.kind == "info" {
            break ev;
        }
    };
    let mut out = Vec::new();
    for prog in ev
        .data
        .get("tts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for v in prog
            .get("voices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = v.get("name").and_then(Value::as_str).unwrap_or("");
            out.push(json!({
                "id": name,
                "name": name,
                "description": v.get("description").cloned().unwrap_or(Value::Null),
                "languages": v.get("languages").cloned().unwrap_or(json!([])),
            }));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_with_data_and_payload() {
        let bytes = b"{\"type\":\"audio-chunk\",\"data\":{\"rate\":22050},\"data_length\":15,\"payload_length\":4}\n{\"channels\": 1}\x01\x00\x02\x00{\"type\":\"audio-stop\"}\n".to_vec();
        let mut r = BufReader::new(&bytes[..]);
        let e = read_event(&mut r).await.unwrap();
        assert_eq!(e.kind, "audio-chunk");
        assert_eq!(e.data["rate"], 22050);
        assert_eq!(e.data["channels"], 1);
        assert_eq!(e.payload, vec![1, 0, 2, 0]);
        assert_eq!(read_event(&mut r).await.unwrap().kind, "audio-stop");
        assert!(read_event(&mut r).await.is_err());
        let huge = b"{\"type\":\"audio-chunk\",\"payload_length\":999999999}\n".to_vec();
        assert!(read_event(&mut BufReader::new(&huge[..])).await.is_err());
        let garbage = b"not json\n".to_vec();
        assert!(read_event(&mut BufReader::new(&garbage[..])).await.is_err());
    }
}

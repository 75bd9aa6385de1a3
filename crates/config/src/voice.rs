//! The voice server (a GPT-SoVITS-style TTS server): `list_voices` proxies
//! `GET <api_url>/api/v3/voices`; `test_connectivity` runs the WebSocket flow on
//! `ws(s)://<host>/api/v3/tts/stream-input`:
//! `{"cmd":"init","voice_id"}` → `{"type":"ready"}` → `{"cmd":"append","data"}`,
//! `{"cmd":"end"}` → binary audio chunks and/or `{"type":"sentence"}` events →
//! `{"type":"done"}` (or `{"type":"error","message"}`). Audio is counted, never played.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Map, Value};
use tokio_tungstenite::tungstenite::Message;
use url::Url;

use crate::error::{ConfigError, Upstream};
use crate::net::{self, NetFail};

/// Default voice-server address.
pub const DEFAULT_URL: &str = "http://127.0.0.1:9881";
/// Time budget of `list_voices`.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// Overall time budget of the synthesis test.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(10);
const READY_WAIT: Duration = Duration::from_secs(5);
const FIRST_REPLY_WAIT: Duration = Duration::from_secs(10);
const NEXT_REPLY_WAIT: Duration = Duration::from_secs(5);
const MAX_TEXT_CHARS: usize = 500;
const MAX_VOICE_CHARS: usize = 1024;
const DEFAULT_TEXT: &str = "Connectivity test.";

fn upstream(
    failure: Upstream,
    code: &'static str,
    stage: &'static str,
    error: impl Into<String>,
) -> ConfigError {
    ConfigError::Upstream {
        failure,
        error: error.into(),
        code,
        stage,
    }
}

fn from_net(f: NetFail, stage: &'static str) -> ConfigError {
    match f {
        NetFail::Timeout => upstream(
            Upstream::TimedOut,
            "timeout",
            stage,
            "the voice server did not answer in time",
        ),
        NetFail::Refused(e) => upstream(
            Upstream::Failed,
            "connection_refused",
            stage,
            format!("cannot connect to the voice server: {e}"),
        ),
        f => upstream(Upstream::Failed, f.code(), stage, f.message()),
    }
}

/// The validated base URL (`http`/`https` with a host, no trailing slash).
/// `None`/empty → `TTS_GPT_SOVITS_URL_REQUIRED`; anything else → `TTS_GPT_SOVITS_URL_INVALID`.
pub fn base_url(v: Option<&str>, default: Option<&str>) -> Result<Url, ConfigError> {
    let raw = v.map(str::trim).unwrap_or_else(|| default.unwrap_or(""));
    let raw = if raw.is_empty() {
        default.unwrap_or("")
    } else {
        raw
    };
    if raw.is_empty() {
        return Err(ConfigError::bad_code(
            "api_url is required",
            "TTS_GPT_SOVITS_URL_REQUIRED",
        ));
    }
    let u = net::parse_url(raw.trim_end_matches('/'), &["http", "https"]).ok_or_else(|| {
        ConfigError::bad_code(
            "api_url must be an http:// or https:// URL with a host",
            "TTS_GPT_SOVITS_URL_INVALID",
        )
    })?;
    Ok(u)
}

fn base_str(u: &Url) -> String {
    u.as_str().trim_end_matches('/').to_string()
}

/// The voices a voice server lists.
#[derive(Debug)]
pub struct VoiceList {
    /// The server's answer as it sent it.
    pub voices: Value,
    /// The server's base URL (no trailing slash).
    pub api_url: String,
}

/// A synthesis flow that produced audio or sentences.
#[derive(Debug)]
pub struct SynthesisCheck {
    pub api_url: String,
    pub voice_id: String,
    pub audio_chunks: u64,
    pub audio_bytes: u64,
    pub sentences: u64,
    pub elapsed_ms: u64,
}

/// `list_voices`: the upstream's voice list.
pub async fn list_voices(base: &Url, timeout: Duration) -> Result<VoiceList, ConfigError> {
    let base = base_str(base);
    let url = net::join(&base, "api/v3/voices");
    let parsed = net::parse_url(&url, &["http", "https"])
        .ok_or_else(|| ConfigError::bad_code("invalid api_url", "TTS_GPT_SOVITS_URL_INVALID"))?;
    let client = net::http_client(&parsed, timeout).map_err(|f| from_net(f, "connect"))?;
    let (status, body) = net::send_capped(client.get(url), net::MAX_PROBE_BODY, timeout)
        .await
        .map_err(|f| from_net(f, "list"))?;
    if !(200..300).contains(&status) {
        return Err(upstream(
            Upstream::Failed,
            "upstream_error",
            "list",
            format!("the voice server answered HTTP {status}"),
        ));
    }
    let voices: Value = serde_json::from_slice(&body).map_err(|_| {
        upstream(
            Upstream::Failed,
            "upstream_error",
            "list",
            "the voice server did not answer with JSON",
        )
    })?;
    Ok(VoiceList {
        voices,
        api_url: base,
    })
}

/// Parameters of the synthesis test.
#[derive(Debug)]
pub struct TestParams {
    pub base: Url,
    pub voice_id: String,
    pub text: String,
    pub timeout: Duration,
}

/// `api_url` given but not text.
pub fn api_url_not_text() -> ConfigError {
    ConfigError::bad_code("api_url must be a string", "TTS_GPT_SOVITS_URL_INVALID")
}

/// Validate the test request: the server's URL (default [`DEFAULT_URL`]), the
/// voice, the text (default [`DEFAULT_TEXT`]) and a shorter time budget.
pub fn test_params(
    api_url: Option<&str>,
    voice_id: Option<&str>,
    test_text: Option<&str>,
    timeout_seconds: Option<f64>,
) -> Result<TestParams, ConfigError> {
    let base = base_url(api_url, Some(DEFAULT_URL))?;
    let voice_id = match voice_id {
        None => String::new(),
        Some(s) if s.chars().count() <= MAX_VOICE_CHARS => s.trim().to_string(),
        Some(_) => return Err(ConfigError::bad("voice_id is too long")),
    };
    let text = match test_text {
        None => DEFAULT_TEXT.to_string(),
        Some(s) if s.trim().is_empty() => DEFAULT_TEXT.to_string(),
        Some(s) if s.chars().count() <= MAX_TEXT_CHARS => s.trim().to_string(),
        Some(_) => {
            return Err(ConfigError::bad(format!(
                "test_text is longer than {MAX_TEXT_CHARS} characters"
            )))
        }
    };
    let timeout = net::pick_timeout(timeout_seconds, TEST_TIMEOUT);
    Ok(TestParams {
        base,
        voice_id,
        text,
        timeout,
    })
}

/// `gsv:` prefix removed; `id|{json}` carries extra init parameters; empty → `init`.
fn parse_voice(raw: &str) -> (String, Map<String, Value>) {
    let raw = raw.strip_prefix("gsv:").unwrap_or(raw);
    let (id, extra) = match raw.split_once('|') {
        Some((id, json)) => (
            id.trim(),
            serde_json::from_str::<Map<String, Value>>(json).unwrap_or_default(),
        ),
        None => (raw.trim(), Map::new()),
    };
    let id = if id.is_empty() { "init" } else { id };
    (id.to_string(), extra)
}

/// The WebSocket URL of the streaming endpoint.
pub fn stream_url(base: &Url) -> Result<Url, ConfigError> {
    let scheme = if base.scheme() == "https" {
        "wss"
    } else {
        "ws"
    };
    let http = net::join(&base_str(base), "api/v3/tts/stream-input");
    let ws = format!("{scheme}{}", &http[base.scheme().len()..]);
    Url::parse(&ws)
        .map_err(|_| ConfigError::bad_code("invalid api_url", "TTS_GPT_SOVITS_URL_INVALID"))
}

/// Run the init → ready → synthesis flow.
pub async fn test_connectivity(p: TestParams) -> Result<SynthesisCheck, ConfigError> {
    let url = stream_url(&p.base)?;
    let started = Instant::now();
    let deadline = started + p.timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let mut ws = net::ws_connect(&url, None, p.timeout)
        .await
        .map_err(|f| from_net(f, "connect"))?;
    let (voice, extra) = parse_voice(&p.voice_id);
    let mut init = Map::new();
    init.insert("cmd".into(), json!("init"));
    init.insert("voice_id".into(), json!(voice));
    for (k, v) in extra {
        if k != "cmd" && k != "voice_id" {
            init.insert(k, v);
        }
    }
    let send_err = |e: tokio_tungstenite::tungstenite::Error| {
        upstream(
            Upstream::Failed,
            "ws_error",
            "init",
            format!("sending to the voice server failed: {e}"),
        )
    };
    ws.send(Message::Text(Value::Object(init).to_string()))
        .await
        .map_err(send_err)?;

    // Stage 1: wait for ready.
    let ready_wait = READY_WAIT.min(left());
    let ready = tokio::time::timeout(ready_wait, async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    if v.get("type").and_then(Value::as_str) == Some("ready") {
                        return Ok(());
                    }
                    let msg = v
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| t.chars().take(200).collect());
                    return Err(msg);
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                Some(Ok(Message::Binary(_))) => return Err("binary data before ready".to_string()),
                Some(Ok(Message::Close(_))) | None => {
                    return Err("the connection was closed before ready".to_string())
                }
                Some(Err(e)) => return Err(e.to_string()),
            }
        }
    })
    .await;
    match ready {
        Err(_) => {
            let _ = ws.close(None).await;
            return Err(upstream(
                Upstream::TimedOut,
                "timeout",
                "init",
                "the voice server did not become ready in time",
            ));
        }
        Ok(Err(msg)) => {
            let _ = ws.close(None).await;
            return Err(upstream(
                Upstream::Failed,
                "init_failed",
                "init",
                format!("init failed: {msg}"),
            ));
        }
        Ok(Ok(())) => {}
    }

    // Stage 2: synthesis.
    let synth_err = |e: tokio_tungstenite::tungstenite::Error| {
        upstream(
            Upstream::Failed,
            "ws_error",
            "synthesis",
            format!("sending to the voice server failed: {e}"),
        )
    };
    ws.send(Message::Text(
        json!({"cmd": "append", "data": p.text}).to_string(),
    ))
    .await
    .map_err(synth_err)?;
    tokio::time::sleep(Duration::from_millis(100).min(left())).await;
    ws.send(Message::Text(json!({"cmd": "end"}).to_string()))
        .await
        .map_err(synth_err)?;
    let mut chunks = 0u64;
    let mut bytes = 0u64;
    let mut sentences = 0u64;
    let mut server_error: Option<String> = None;
    let mut timed_out = false;
    let mut first = true;
    loop {
        let wait = if first {
            FIRST_REPLY_WAIT
        } else {
            NEXT_REPLY_WAIT
        }
        .min(left());
        if wait.is_zero() {
            timed_out = true;
            break;
        }
        let next = match tokio::time::timeout(wait, ws.next()).await {
            Err(_) => {
                timed_out = true;
                break;
            }
            Ok(n) => n,
        };
        first = false;
        match next {
            Some(Ok(Message::Binary(b))) => {
                chunks += 1;
                bytes += b.len() as u64;
            }
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                match v.get("type").and_then(Value::as_str) {
                    Some("sentence") => sentences += 1,
                    Some("done") => break,
                    Some("error") => {
                        server_error = Some(
                            v.get("message")
                                .and_then(Value::as_str)
                                .map(str::to_string)
                                .unwrap_or_else(|| t.chars().take(200).collect()),
                        );
                        break;
                    }
                    _ => {}
                }
            }
            Some(Ok(Message::Close(_))) | None => break,
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                server_error.get_or_insert_with(|| e.to_string());
                break;
            }
        }
    }
    let _ = ws.close(None).await;
    if chunks > 0 || sentences > 0 {
        return Ok(SynthesisCheck {
            api_url: base_str(&p.base),
            voice_id: voice,
            audio_chunks: chunks,
            audio_bytes: bytes,
            sentences,
            elapsed_ms: started.elapsed().as_millis() as u64,
        });
    }
    if let Some(e) = server_error {
        return Err(upstream(
            Upstream::Failed,
            "synthesis_failed",
            "synthesis",
            format!("the voice server reported an error: {e}"),
        ));
    }
    if timed_out {
        return Err(upstream(
            Upstream::TimedOut,
            "timeout",
            "synthesis",
            "the voice server sent no audio in time",
        ));
    }
    Err(upstream(
        Upstream::Failed,
        "synthesis_failed",
        "synthesis",
        "the voice server returned no audio",
    ))
}

//! The voices of the configured speech provider, for the settings pages'
//! voice pickers: the OpenAI-compatible `GET <base>/audio/voices` where the
//! server offers it (Kokoro-FastAPI does), the voice server's
//! `GET <base>/api/v3/voices`, Wyoming `describe`.

use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use super::config::{self, Choice};
use super::{SpeechLimits, TtsError};

/// Largest voice list read.
const MAX_LIST: usize = 4 * 1024 * 1024;

/// A provider's voices.
#[derive(Debug, Clone, Serialize)]
pub struct VoiceList {
    /// `openai_compatible`, `wyoming`, `gptsovits`, or `none` (speech is off).
    pub provider: &'static str,
    /// Does the provider list its voices (false: type the voice's name)?
    pub offered: bool,
    /// `{id, name, ...}` each.
    pub voices: Vec<Value>,
}

/// The voices of what `cfg` configures.
pub async fn list(
    cfg: &serde_json::Map<String, Value>,
    limits: &SpeechLimits,
) -> Result<VoiceList, TtsError> {
    match config::resolve(cfg, None)? {
        None => Ok(VoiceList {
            provider: "none",
            offered: false,
            voices: Vec::new(),
        }),
        Some(Choice::Wyoming(t)) => Ok(VoiceList {
            provider: "wyoming",
            offered: true,
            voices: super::wyoming::voices(&t, limits).await?,
        }),
        Some(Choice::VoiceServer(t)) => {
            let mut url = t.base.clone();
            let path = format!("{}/api/v3/voices", t.base.path().trim_end_matches('/'));
            url.set_path(&path);
            let v = get_json(url, None, limits).await?;
            let voices = match v {
                Value::Array(a) => a,
                Value::Object(mut o) => match o.remove("voices") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            Ok(VoiceList {
                provider: "gptsovits",
                offered: true,
                voices,
            })
        }
        Some(Choice::OpenAi(t)) => {
            let mut url = t.speech_url.clone();
            let path = t.speech_url.path().trim_end_matches("/speech").to_string() + "/voices";
            url.set_path(&path);
            let key = Some(t.api_key.as_str()).filter(|k| !k.is_empty());
            match get_json(url, key, limits).await {
                Ok(v) => Ok(VoiceList {
                    provider: "openai_compatible",
                    offered: true,
                    voices: openai_voices(&v),
                }),
                // The endpoint is optional.
                Err(TtsError::Upstream(404 | 405, _)) => Ok(VoiceList {
                    provider: "openai_compatible",
                    offered: false,
                    voices: Vec::new(),
                }),
                Err(e) => Err(e),
            }
        }
    }
}

/// `{"voices": ["af_bella", ...]}`, `{"voices": [{id|voice_id|name, ...}]}` or a
/// bare array → `{id, name}` each.
fn openai_voices(v: &Value) -> Vec<Value> {
    let items = match v {
        Value::Array(a) => a.as_slice(),
        Value::Object(o) => match o.get("voices").or_else(|| o.get("data")) {
            Some(Value::Array(a)) => a.as_slice(),
            _ => &[],
        },
        _ => &[],
    };
    items
        .iter()
        .filter_map(|i| match i {
            Value::String(s) => Some(json!({"id": s, "name": s})),
            Value::Object(o) => {
                let id = ["id", "voice_id", "name"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_str))?;
                let name = o.get("name").and_then(Value::as_str).unwrap_or(id);
                Some(json!({"id": id, "name": name}))
            }
            _ => None,
        })
        .collect()
}

async fn get_json(
    url: url::Url,
    key: Option<&str>,
    limits: &SpeechLimits,
) -> Result<Value, TtsError> {
    let mut req = super::openai::client().get(url);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = tokio::time::timeout(limits.first_byte, req.send())
        .await
        .map_err(|_| TtsError::Timeout)?
        .map_err(|e| TtsError::Unavailable(super::describe(&e)))?;
    let status = resp.status().as_u16();
    if matches!(status, 401 | 403) {
        return Err(TtsError::Auth(status));
    }
    if !resp.status().is_success() {
        return Err(TtsError::Upstream(status, String::new()));
    }
    if resp.content_length().is_some_and(|n| n as usize > MAX_LIST) {
        return Err(TtsError::BadAudio("the voice list is too large".into()));
    }
    let body = tokio::time::timeout(limits.idle.max(Duration::from_secs(1)), resp.bytes())
        .await
        .map_err(|_| TtsError::Timeout)?
        .map_err(|e| TtsError::Unavailable(super::describe(&e)))?;
    if body.len() > MAX_LIST {
        return Err(TtsError::BadAudio("the voice list is too large".into()));
    }
    serde_json::from_slice(&body)
        .map_err(|_| TtsError::Upstream(status, "the voice list is not JSON".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_shapes() {
        assert_eq!(
            openai_voices(&json!({"voices": ["af_bella", {"voice_id": "x", "name": "X"}, 3]})),
            vec![
                json!({"id": "af_bella", "name": "af_bella"}),
                json!({"id": "x", "name": "X"})
            ]
        );
        assert_eq!(
            openai_voices(&json!([{"id": "a"}])),
            vec![json!({"id": "a", "name": "a"})]
        );
        assert!(openai_voices(&json!("nope")).is_empty());
    }
}

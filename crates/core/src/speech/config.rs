//! Which provider the stored settings choose (`config/core_config.json`, the
//! original application's keys; docs/voice.md "Configuration").
//!
//! * `disableTts: true` → no speech;
//! * `ttsModelUrl` (`http(s)://…`, given as an origin, a `/v1` base or the full
//!   `…/audio/speech` URL; a query string is kept) → the OpenAI-compatible
//!   provider with `ttsModelId` (default `gpt-4o-mini-tts`), the character's
//!   `voice_id` or else `ttsVoiceId` (default `marin`) and `ttsModelApiKey`
//!   (no `Authorization` header when blank);
//! * `ttsModelProvider: "openai"` without a URL → `https://api.openai.com/v1`;
//! * nothing set → no speech.
//!
//! A URL must be `http`/`https` with a host (the model URLs' rule); the request
//! never follows a redirect, so a key is never sent on to another host.

use serde_json::{Map, Value};
use url::Url;

use super::TtsError;

/// Default model and voice (the original's).
pub const DEFAULT_MODEL: &str = "gpt-4o-mini-tts";
pub const DEFAULT_VOICE: &str = "marin";
const OPENAI_BASE: &str = "https://api.openai.com/v1";

/// A resolved OpenAI-compatible speech endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiTarget {
    /// The full `…/audio/speech` URL (with the base URL's query string).
    pub speech_url: Url,
    pub model: String,
    pub voice: String,
    pub api_key: String,
}

/// What the settings choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    OpenAi(OpenAiTarget),
}

fn field<'a>(cfg: &'a Map<String, Value>, key: &str) -> &'a str {
    cfg.get(key).and_then(Value::as_str).map_or("", str::trim)
}

/// The provider chosen by `cfg` for a character whose `voice_id` is
/// `character_voice`; `Ok(None)` when speech is off or not configured.
pub fn resolve(
    cfg: &Map<String, Value>,
    character_voice: Option<&str>,
) -> Result<Option<Choice>, TtsError> {
    if cfg.get("disableTts").and_then(Value::as_bool) == Some(true) {
        return Ok(None);
    }
    let provider = field(cfg, "ttsModelProvider");
    let mut url = field(cfg, "ttsModelUrl");
    if url.is_empty() {
        if provider != "openai" {
            return Ok(None);
        }
        url = OPENAI_BASE;
    }
    let voice = character_voice
        .map(str::trim)
        .filter(|v| !v.is_empty() && !v.starts_with("gsv:"))
        .or(Some(field(cfg, "ttsVoiceId")).filter(|v| !v.is_empty()))
        .unwrap_or(DEFAULT_VOICE);
    let model = Some(field(cfg, "ttsModelId"))
        .filter(|m| !m.is_empty())
        .unwrap_or(DEFAULT_MODEL);
    Ok(Some(Choice::OpenAi(OpenAiTarget {
        speech_url: speech_url(url)?,
        model: model.to_string(),
        voice: voice.to_string(),
        api_key: field(cfg, "ttsModelApiKey").to_string(),
    })))
}

/// `…/audio/speech` from an origin, a `/v1` base or the full URL; the query
/// string of the given URL is kept.
pub fn speech_url(raw: &str) -> Result<Url, TtsError> {
    let bad =
        || TtsError::Config("ttsModelUrl must be an http:// or https:// URL with a host".into());
    let mut u = Url::parse(raw.trim()).map_err(|_| bad())?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(TtsError::Config(
            "ttsModelUrl must not carry credentials; use ttsModelApiKey".into(),
        ));
    }
    let path = u.path().trim_end_matches('/').to_string();
    let path = if path.ends_with("/audio/speech") {
        path
    } else if path.is_empty() {
        "/v1/audio/speech".to_string()
    } else {
        format!("{path}/audio/speech")
    };
    u.set_path(&path);
    u.set_fragment(None);
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn urls_are_normalised() {
        for (given, want) in [
            (
                "http://127.0.0.1:8880",
                "http://127.0.0.1:8880/v1/audio/speech",
            ),
            (
                "http://127.0.0.1:8880/v1/",
                "http://127.0.0.1:8880/v1/audio/speech",
            ),
            (
                "http://h/v1/audio/speech?k=1",
                "http://h/v1/audio/speech?k=1",
            ),
            ("https://h/api/v1?x=y", "https://h/api/v1/audio/speech?x=y"),
        ] {
            assert_eq!(speech_url(given).unwrap().as_str(), want);
        }
        for bad in [
            "file:///etc/passwd",
            "ftp://h",
            "http://",
            "nonsense",
            "http://u:p@h/v1",
        ] {
            assert_eq!(
                speech_url(bad).unwrap_err().code(),
                "tts_config_invalid",
                "{bad}"
            );
        }
    }

    #[test]
    fn keys_choose_the_provider() {
        assert_eq!(resolve(&cfg(json!({})), None), Ok(None));
        let c = cfg(
            json!({"ttsModelProvider": "custom", "ttsModelUrl": "http://127.0.0.1:1/v1",
                           "ttsModelId": "kokoro", "ttsVoiceId": "af_bella"}),
        );
        let Some(Choice::OpenAi(t)) = resolve(&c, None).unwrap() else {
            panic!("openai")
        };
        assert_eq!(
            (t.model.as_str(), t.voice.as_str(), t.api_key.as_str()),
            ("kokoro", "af_bella", "")
        );
        let Some(Choice::OpenAi(t)) = resolve(&c, Some("am_adam")).unwrap() else {
            panic!("openai")
        };
        assert_eq!(t.voice, "am_adam");
        let mut off = c.clone();
        off.insert("disableTts".into(), json!(true));
        assert_eq!(resolve(&off, None), Ok(None));
        let Some(Choice::OpenAi(t)) = resolve(
            &cfg(json!({"ttsModelProvider": "openai", "ttsModelApiKey": "sk"})),
            None,
        )
        .unwrap() else {
            panic!("openai")
        };
        assert_eq!(
            t.speech_url.as_str(),
            "https://api.openai.com/v1/audio/speech"
        );
        assert_eq!(
            (t.model.as_str(), t.voice.as_str()),
            (DEFAULT_MODEL, DEFAULT_VOICE)
        );
    }
}

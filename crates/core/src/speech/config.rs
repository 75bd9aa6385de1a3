//! Which provider the stored settings choose (`config/core_config.json`, the
//! original application's keys; docs/voice.md "Configuration").
//!
//! * `disableTts: true` → no speech;
//! * `ttsModelUrl` (`http(s)://…`, given as an origin, a `/v1` base or the full
//!   `…/audio/speech` URL; a query string is kept) → the OpenAI-compatible
//!   provider with `ttsModelId` (default `gpt-4o-mini-tts`), the character's
//!   `voice_id` or else `ttsVoiceId` (default `marin`) and `ttsModelApiKey`
//!   (no `Authorization` header when blank);
//! * `ttsModelUrl: "tcp://host:port"` → the Wyoming provider with the voice
//!   named by the character's `voice_id` or `ttsVoiceId` (else the server's own);
//! * `gptsovitsEnabled: true` or a character `voice_id` `gsv:<id>[|{json}]` → the
//!   voice server (GPT-SoVITS v3 `stream-input`) at `ttsModelUrl` when it is an
//!   `http://` URL, else `http://127.0.0.1:9881`, voice from `voice_id` or `ttsVoiceId`;
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
    Wyoming(super::wyoming::WyomingTarget),
    VoiceServer(super::voice_server::VoiceServerTarget),
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
    let gsv_voice = character_voice
        .map(str::trim)
        .filter(|v| v.starts_with("gsv:"));
    if gsv_voice.is_some() || cfg.get("gptsovitsEnabled").and_then(Value::as_bool) == Some(true) {
        let base = if url.starts_with("http://") {
            url
        } else {
            super::voice_server::DEFAULT_URL
        };
        let voice = gsv_voice.unwrap_or(field(cfg, "ttsVoiceId"));
        return Ok(Some(Choice::VoiceServer(super::voice_server::target(
            base, voice,
        )?)));
    }
    if url.is_empty() {
        if provider != "openai" {
            return Ok(None);
        }
        url = OPENAI_BASE;
    }
    let chosen_voice = character_voice
        .map(str::trim)
        .filter(|v| !v.is_empty() && !v.starts_with("gsv:"))
        .or(Some(field(cfg, "ttsVoiceId")).filter(|v| !v.is_empty()));
    if url.to_ascii_lowercase().starts_with("tcp://") {
        return Ok(Some(Choice::Wyoming(wyoming_target(
            url,
            chosen_voice.unwrap_or(""),
        )?)));
    }
    let voice = chosen_voice.unwrap_or(DEFAULT_VOICE);
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

/// `tcp://host:port` (both required).
pub fn wyoming_target(raw: &str, voice: &str) -> Result<super::wyoming::WyomingTarget, TtsError> {
    let (host, port) = tcp_address(raw)
        .ok_or_else(|| TtsError::Config("a Wyoming ttsModelUrl is tcp://host:port".into()))?;
    Ok(super::wyoming::WyomingTarget {
        host,
        port,
        voice: voice.to_string(),
    })
}

/// `tcp://host:port` (both required) as host and port.
pub fn tcp_address(raw: &str) -> Option<(String, u16)> {
    let u = Url::parse(raw.trim()).ok()?;
    let host = match u.host() {
        Some(url::Host::Domain(d)) if !d.is_empty() => d.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        _ => return None,
    };
    let port = u.port()?;
    if u.scheme() != "tcp" || !matches!(u.path(), "" | "/") {
        return None;
    }
    Some((host, port))
}

/// `…/audio/speech` from an origin, a `/v1` base or the full URL; the query
/// string of the given URL is kept.
pub fn speech_url(raw: &str) -> Result<Url, TtsError> {
    service_url(raw, "/audio/speech", &[])
        .map_err(|e| TtsError::Config(e.replace("{key}", "ttsModel")))
}

/// `<base><tail>` from an origin (`/v1` added), a base or the full URL (a path
/// that already ends in `tail` or one of `also`); the query string is kept.
/// The error text names the key as `{key}Url` / `{key}ApiKey`.
pub fn service_url(raw: &str, tail: &str, also: &[&str]) -> Result<Url, String> {
    let bad = || "{key}Url must be an http:// or https:// URL with a host".to_string();
    let mut u = Url::parse(raw.trim()).map_err(|_| bad())?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("{key}Url must not carry credentials; use {key}ApiKey".into());
    }
    let path = u.path().trim_end_matches('/').to_string();
    let path = if path.ends_with(tail) || also.iter().any(|a| path.ends_with(a)) {
        path
    } else if path.is_empty() {
        format!("/v1{tail}")
    } else {
        format!("{path}{tail}")
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
        let w =
            cfg(json!({"ttsModelUrl": "tcp://127.0.0.1:10200", "ttsVoiceId": "en_US-joe-medium"}));
        assert_eq!(
            resolve(&w, None).unwrap(),
            Some(Choice::Wyoming(super::super::wyoming::WyomingTarget {
                host: "127.0.0.1".into(),
                port: 10200,
                voice: "en_US-joe-medium".into()
            }))
        );
        for bad in ["tcp://127.0.0.1", "tcp://:10200", "tcp://h:1/x"] {
            let w = cfg(json!({"ttsModelUrl": bad}));
            assert_eq!(
                resolve(&w, None).unwrap_err().code(),
                "tts_config_invalid",
                "{bad}"
            );
        }
        assert_eq!(
            (t.model.as_str(), t.voice.as_str()),
            (DEFAULT_MODEL, DEFAULT_VOICE)
        );
    }
}

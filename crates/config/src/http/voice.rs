//! `/api/config/voiceserver/list_voices`, `/api/config/voiceserver/test_connectivity`
//! and `/api/config/tts_voices`.

use axum::Json;
use companiond_core::envelope::{BodyFault, BodyOf, BodyRejection};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::ConfigError;
use crate::{net, voice};

/// The body of the voice-server routes.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"api_url": "http://127.0.0.1:9880", "voice_id": "default"}))]
pub struct VoiceServerRequest {
    /// The voice server's base URL (http or https).
    api_url: Option<String>,
    /// Shorter time budget in seconds (never longer than the default).
    timeout_seconds: Option<f64>,
    /// test_connectivity: the voice to synthesise with.
    voice_id: Option<String>,
    /// test_connectivity: the text to synthesise (at most 500 characters).
    test_text: Option<String>,
}

/// The voice server's list.
#[derive(Serialize, ToSchema)]
pub struct VoiceListAnswer {
    success: bool,
    /// The server's answer as it sent it.
    #[schema(value_type = Object)]
    voices: Value,
    api_url: String,
}

/// A synthesis flow that produced audio or sentences.
#[derive(Serialize, ToSchema)]
pub struct VoiceTestAnswer {
    success: bool,
    api_url: String,
    voice_id: String,
    audio_chunks: u64,
    audio_bytes: u64,
    sentences: u64,
    elapsed_ms: u64,
}

/// An `api_url` that is not text keeps its URL error code.
impl BodyRejection for VoiceServerRequest {
    type Error = ConfigError;
    fn rejected(fault: BodyFault) -> ConfigError {
        match &fault {
            BodyFault::Invalid { field, .. } if field == "api_url" => voice::api_url_not_text(),
            _ => ConfigError::body(fault),
        }
    }
}

/// `POST /api/config/voiceserver/list_voices`.
pub async fn list_voices(
    BodyOf(body): BodyOf<VoiceServerRequest>,
) -> Result<Json<VoiceListAnswer>, ConfigError> {
    let base = voice::base_url(body.api_url.as_deref(), None)?;
    let timeout = net::pick_timeout(body.timeout_seconds, voice::LIST_TIMEOUT);
    let list = voice::list_voices(&base, timeout).await?;
    Ok(Json(VoiceListAnswer {
        success: true,
        voices: list.voices,
        api_url: list.api_url,
    }))
}

/// `POST /api/config/voiceserver/test_connectivity`.
pub async fn test_connectivity(
    BodyOf(body): BodyOf<VoiceServerRequest>,
) -> Result<Json<VoiceTestAnswer>, ConfigError> {
    let p = voice::test_params(
        body.api_url.as_deref(),
        body.voice_id.as_deref(),
        body.test_text.as_deref(),
        body.timeout_seconds,
    )?;
    let c = voice::test_connectivity(p).await?;
    Ok(Json(VoiceTestAnswer {
        success: true,
        api_url: c.api_url,
        voice_id: c.voice_id,
        audio_chunks: c.audio_chunks,
        audio_bytes: c.audio_bytes,
        sentences: c.sentences,
        elapsed_ms: c.elapsed_ms,
    }))
}

/// The configured speech provider's voices (docs/voice.md).
#[derive(Serialize, ToSchema)]
pub struct TtsVoicesAnswer {
    success: bool,
    /// `openai_compatible`, `wyoming`, `gptsovits`, or `none` (speech is off).
    provider: &'static str,
    /// Does the provider list its voices (false: the voice is typed by name)?
    offered: bool,
    /// `{id, name, ...}` each.
    #[schema(value_type = Vec<Object>)]
    voices: Vec<Value>,
}

/// `GET /api/config/tts_voices`: a failing provider is `success:false` with
/// `error_code` (`tts_unavailable`, `tts_timeout`, ...).
pub async fn tts_voices(
    axum::extract::State(st): axum::extract::State<companiond_core::AppState>,
) -> Result<Json<TtsVoicesAnswer>, ConfigError> {
    let cfg = st.llm.core_config().await;
    let limits = st.ext::<companiond_core::speech::SpeechLimits>();
    match companiond_core::speech::voices::list(&cfg, &limits).await {
        Ok(l) => Ok(Json(TtsVoicesAnswer {
            success: true,
            provider: l.provider,
            offered: l.offered,
            voices: l.voices,
        })),
        Err(e) => Err(ConfigError::probe(e.code(), e.to_string())),
    }
}

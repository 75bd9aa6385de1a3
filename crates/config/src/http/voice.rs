//! `/api/config/voiceserver/list_voices` and `/api/config/voiceserver/test_connectivity`.

use std::time::Duration;

use axum::Json;
use serde_json::{json, Map, Value};

use super::RawJson;
use crate::error::ConfigError;
use crate::{net, voice};

fn timeout_field(body: &Map<String, Value>, default: Duration) -> Result<Duration, ConfigError> {
    match body.get("timeout_seconds") {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .map(|s| net::pick_timeout(Some(s), default))
            .ok_or_else(|| ConfigError::bad("timeout_seconds must be a number")),
    }
}

/// `POST /api/config/voiceserver/list_voices`.
pub async fn list_voices(body: RawJson) -> Result<Json<Value>, ConfigError> {
    let body = body.object()?;
    let base = voice::base_url(body.get("api_url"), None)?;
    let timeout = timeout_field(&body, voice::LIST_TIMEOUT)?;
    let list = voice::list_voices(&base, timeout).await?;
    Ok(Json(
        json!({"success": true, "voices": list.voices, "api_url": list.api_url}),
    ))
}

/// `POST /api/config/voiceserver/test_connectivity`.
pub async fn test_connectivity(body: RawJson) -> Result<Json<Value>, ConfigError> {
    let body = body.object()?;
    let p = voice::test_params(&body)?;
    let c = voice::test_connectivity(p).await?;
    Ok(Json(json!({
        "success": true,
        "api_url": c.api_url,
        "voice_id": c.voice_id,
        "audio_chunks": c.audio_chunks,
        "audio_bytes": c.audio_bytes,
        "sentences": c.sentences,
        "elapsed_ms": c.elapsed_ms,
    })))
}

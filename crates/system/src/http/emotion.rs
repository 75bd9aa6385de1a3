//! `POST /api/emotion/analysis`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::BodyOf;
use companiond_core::frames::ServerFrame;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::bodies::EmotionBody;
use crate::emotion;
use crate::error::SystemError;

/// The emotion of a text; `success:false` with `error` and `error_code` when
/// the model failed and no heuristic answer was possible (`source: failed`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "emotion": "happy", "confidence": 0.8,
    "source": "heuristic"}))]
pub struct Emotion {
    success: bool,
    /// `happy`, `sad`, `angry`, `surprised`, `neutral`, ...
    emotion: String,
    #[schema(minimum = 0.0, maximum = 1.0)]
    confidence: f64,
    /// `blank`, `model`, `heuristic`, `model+heuristic` or `failed`.
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The model's failure code.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<String>,
}

/// `POST /api/emotion/analysis`: the emotion of `text`; the open chat of the named
/// character is told the result.
pub async fn emotion(
    State(st): State<AppState>,
    BodyOf(b): BodyOf<EmotionBody>,
) -> Result<Json<Emotion>, Response> {
    let Some(text) = b.text else {
        return Err(SystemError::MissingText("text is required".into())
            .with_fields(json!({"emotion": "neutral", "confidence": 0.0})));
    };
    let name = b
        .persona
        .named()
        .filter(|n| st.characters.exists(n))
        .unwrap_or_default();
    let o = emotion::analyse(&st, &text, &name, b.api_key, b.model).await;
    if !name.is_empty() {
        if let Some(m) = st.sessions.get(&name) {
            m.notify(ServerFrame::Emotion {
                emotion: o.emotion.to_string(),
                confidence: o.confidence,
            });
        }
    }
    let (error_code, error) = o.error.unzip();
    Ok(Json(Emotion {
        success: o.source != "failed",
        emotion: o.emotion,
        confidence: o.confidence,
        source: o.source,
        error,
        error_code,
    }))
}

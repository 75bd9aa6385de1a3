//! `POST /api/translate`.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::BodyOf;
use companiond_core::{AppState, Ext};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::bodies::TranslateBody;
use crate::error::SystemError;
use crate::state::SystemState;
use crate::translate;

/// The answer of `POST /api/translate`; `success:false` with `error_code:
/// translation_failed` (status 200) and the original text when every
/// translator failed.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "translated_text": "こんにちは", "source_lang": "en",
    "target_lang": "ja", "provider": "google"}))]
pub struct Translated {
    success: bool,
    translated_text: String,
    source_lang: String,
    target_lang: String,
    /// `google`, `llm`, `none`, ...
    provider: &'static str,
    /// Present when Google was tried: whether it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    google_failed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// `translation_failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<&'static str>,
}

/// `POST /api/translate`: Google first (unless disabled or skipped), then the model.
pub async fn translate(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    BodyOf(b): BodyOf<TranslateBody>,
) -> Result<Json<Translated>, Response> {
    let raw_target = b.target_lang.unwrap_or_else(|| "zh".to_string());
    let text = b.text.as_deref().unwrap_or("");
    if text.trim().is_empty() {
        return Err(
            SystemError::MissingText("text is required".into()).with_fields(
                json!({"translated_text": "", "source_lang": "unknown", "target_lang": raw_target}),
            ),
        );
    }
    if text.chars().count() > translate::MAX_TEXT {
        return Err(
            SystemError::TextTooLong("text is too long".into()).with_fields(json!({
                "translated_text": text,
                "source_lang": "unknown",
                "target_lang": translate::normalize_lang(&raw_target),
            })),
        );
    }
    let skip_google = b.skip_google.unwrap_or(false);
    let source = b.source_lang.as_deref();
    let google = sys.google.as_deref();
    let t = translate::translate(&st, google, text, source, &raw_target, skip_google).await;
    let failed = t.failure.is_some();
    Ok(Json(Translated {
        success: !failed,
        translated_text: t.text,
        source_lang: t.source,
        target_lang: t.target,
        provider: t.provider,
        google_failed: t.google_failed,
        error: t.failure.map(|f| format!("translation failed: {f}")),
        error_code: failed.then_some("translation_failed"),
    }))
}

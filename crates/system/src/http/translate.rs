//! `POST /api/translate`.

use axum::response::Response;
use axum::Json;
use serde_json::{json, Value};

use super::ObjectCall;
use crate::error::SystemError;
use crate::translate;

/// `POST /api/translate`: Google first (unless disabled or skipped), then the model.
pub async fn translate(ObjectCall(st, sys, b): ObjectCall) -> Result<Json<Value>, Response> {
    let raw_target = b
        .get("target_lang")
        .and_then(Value::as_str)
        .unwrap_or("zh")
        .to_string();
    let text = b.get("text").and_then(Value::as_str).unwrap_or("");
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
    let skip_google = b
        .get("skip_google")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let source = b.get("source_lang").and_then(Value::as_str);
    let google = sys.google.as_deref();
    let t = translate::translate(&st, google, text, source, &raw_target, skip_google).await;
    let mut v = json!({"success": t.failure.is_none(), "translated_text": t.text,
                       "source_lang": t.source, "target_lang": t.target, "provider": t.provider});
    if let Some(g) = t.google_failed {
        v["google_failed"] = json!(g);
    }
    if let Some(f) = t.failure {
        v["error"] = json!(format!("translation failed: {f}"));
        v["error_code"] = json!("translation_failed");
    }
    Ok(Json(v))
}

//! `passive-guard` (soccer): whether the player has become passive (idle,
//! frustrated, wanting to stop), classified by the language model and
//! normalised into a recommended action. Every failure answers the fallback
//! (`observe_more`).

use std::time::Duration;

use companiond_core::llm::{ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::text::reply_json_object;
use companiond_core::AppState;
use serde_json::{json, Map, Value};

use super::Games;
use crate::model::call_options;
use crate::text::truncate_chars;

/// The fallback fields of every passive-guard failure.
pub fn guard_fallback(reason: &str) -> Value {
    json!({"ok": false, "reason": reason, "recommendedAction": "observe_more", "exitPromptType": "none"})
}

const GUARD_ACTIONS: &[&str] = &[
    "observe_more",
    "cancel_candidate",
    "send_rescue_hint",
    "prepare_exit_prompt",
];

/// Normalise the classifier's JSON into the passive-guard reply.
pub fn normalize_guard(raw: Option<Map<String, Value>>, stage: &Value, prompt_type: &str) -> Value {
    let raw = raw.unwrap_or_default();
    let s = |k: &str, max: usize| {
        raw.get(k)
            .and_then(Value::as_str)
            .map(|v| truncate_chars(v.trim(), max))
            .unwrap_or_default()
    };
    let classification = Some(s("classification", 40))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "inconclusive".into());
    let confidence = raw
        .get("confidence")
        .and_then(Value::as_f64)
        .filter(|f| f.is_finite())
        .unwrap_or(0.0)
        .clamp(0.0, 1.0);
    let mut action = s("recommendedAction", 40);
    if !GUARD_ACTIONS.contains(&action.as_str()) {
        action = "observe_more".into();
    }
    let stage_str = stage.as_str().unwrap_or("");
    let stage_num = stage
        .as_f64()
        .or_else(|| stage.as_str().and_then(|s| s.trim().parse::<f64>().ok()));
    let mut exit = "none";
    if matches!(stage_str, "user_soothing" | "user_recovery")
        && matches!(classification.as_str(), "soothed" | "recovered")
    {
        action = "cancel_candidate".into();
    } else if action == "prepare_exit_prompt" {
        if stage_num.is_some_and(|n| n < 8.0) {
            action = "observe_more".into();
        } else {
            exit = if prompt_type == "rest" {
                "rest"
            } else {
                "surrender"
            };
        }
    }
    let tags: Vec<String> = raw
        .get("evidenceTags")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|t| truncate_chars(t, 40))
                .take(8)
                .collect()
        })
        .unwrap_or_default();
    json!({
        "ok": true,
        "classification": classification,
        "confidence": confidence,
        "recommendedAction": action,
        "exitPromptType": exit,
        "evidenceTags": tags,
        "counterAction": s("counterAction", 80),
        "reasonForDebug": s("reasonForDebug", 160),
    })
}

/// `POST /api/game/soccer/passive-guard` once the route is checked.
pub async fn passive_guard(
    st: &AppState,
    games: &Games,
    persona: &str,
    body: &Map<String, Value>,
    route_state: Value,
) -> Value {
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return guard_fallback("llm_api_not_configured");
    };
    let stage = body.get("stage").cloned().unwrap_or(Value::Null);
    let prompt_type = match body.get("promptType").and_then(Value::as_str) {
        Some("rest") => "rest",
        _ => "surrender",
    };
    let payload = json!({
        "staticRules": {"schemaVersion": 1, "stageLessThan8CannotOpenPrompt": true,
            "ordinaryExitType": "surrender", "withdrawnExitType": "rest", "teachingNeverUsesPrompt": true},
        "preGameContext": body.get("preGameContext").cloned().unwrap_or_else(|| route_state.get("preGameContext").cloned().unwrap_or(json!({}))),
        "recentDialogues": route_state.get("last_dialogues").cloned().unwrap_or(json!([])),
        "currentState": body.get("currentState").cloned().unwrap_or(json!({})),
        "passiveGuardState": body.get("passiveGuardState").cloned().unwrap_or(json!({})),
        "stage": stage,
        "trigger": body.get("trigger").cloned().unwrap_or(Value::Null),
        "promptType": prompt_type,
        "userSpeech": body.get("userSpeech").and_then(Value::as_str).map(|s| truncate_chars(s, 240)).unwrap_or_default(),
    });
    let prompt = format!(
        "You classify whether the player of a soccer mini-game with {persona} has become passive \
         (idle, frustrated, wanting to stop). Answer with ONLY a JSON object: {{\"classification\": string, \
         \"confidence\": 0..1, \"recommendedAction\": one of {}, \"evidenceTags\": [strings], \
         \"counterAction\": string, \"reasonForDebug\": string}}.",
        GUARD_ACTIONS.join("|")
    );
    let opts = call_options(persona, games.cfg.passive_guard_timeout, 500);
    let messages = [
        ChatMessage::system(prompt),
        ChatMessage::user(truncate_chars(&payload.to_string(), 12000)),
    ];
    let call = st
        .llm
        .complete_at(&ep, Slot::Conversation, &messages, &[], &opts);
    let c = match tokio::time::timeout(
        games.cfg.passive_guard_timeout + Duration::from_millis(500),
        call,
    )
    .await
    {
        Err(_) | Ok(Err(LlmError::Timeout)) => return guard_fallback("timeout"),
        Ok(Err(e)) => {
            let mut v = guard_fallback("exception");
            v["error"] = json!(e.to_string());
            return v;
        }
        Ok(Ok(c)) => c,
    };
    normalize_guard(
        reply_json_object(&c.content),
        &body.get("stage").cloned().unwrap_or(Value::Null),
        prompt_type,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_rules() {
        let raw = |a: &str, c: &str| {
            let v = json!({"recommendedAction": a, "classification": c});
            v.as_object().cloned()
        };
        let v = normalize_guard(raw("prepare_exit_prompt", "x"), &json!(3), "surrender");
        assert_eq!(v["recommendedAction"], "observe_more");
        assert_eq!(v["exitPromptType"], "none");
        let v = normalize_guard(raw("prepare_exit_prompt", "x"), &json!(9), "rest");
        assert_eq!(v["exitPromptType"], "rest");
        let v = normalize_guard(
            raw("send_rescue_hint", "soothed"),
            &json!("user_soothing"),
            "rest",
        );
        assert_eq!(v["recommendedAction"], "cancel_candidate");
        let v = normalize_guard(None, &Value::Null, "surrender");
        assert_eq!(v["classification"], "inconclusive");
        assert_eq!(v["recommendedAction"], "observe_more");
    }
}

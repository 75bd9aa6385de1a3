//! `passive-guard` (soccer): whether the player has become passive (idle,
//! frustrated, wanting to stop), classified by the language model and
//! normalised into a recommended action. Every failure answers the fallback
//! (`observe_more`).

use std::time::Duration;

use companiond_core::llm::{ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::text::reply_json_object;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::game_routes::PublicRoute;
use super::Games;
use crate::model::call_options;
use crate::text::truncate_chars;

/// The classifier's verdict, normalised.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub classification: String,
    /// 0 to 1.
    pub confidence: f64,
    /// One of the guard actions.
    pub recommended_action: String,
    /// `none`, `rest` or `surrender`.
    pub exit_prompt_type: &'static str,
    pub evidence_tags: Vec<String>,
    pub counter_action: String,
    pub reason_for_debug: String,
}

/// Why there is no verdict (the caller answers the fallback, `observe_more`).
#[derive(Debug)]
pub struct NoVerdict {
    /// `llm_api_not_configured`, `timeout` or `exception`.
    pub reason: &'static str,
    /// The model call's error (`exception`).
    pub error: Option<String>,
}

impl NoVerdict {
    fn new(reason: &'static str) -> NoVerdict {
        NoVerdict {
            reason,
            error: None,
        }
    }
}

/// What the page sends with a guard call (passed on to the classifier; read
/// by the route's body, `PassiveGuardBody`).
pub struct GuardRequest {
    pub stage: Value,
    /// The page's prompt type: `rest`, else `surrender`.
    pub prompt_type: &'static str,
    pub pre_game_context: Option<Value>,
    pub current_state: Option<Value>,
    pub passive_guard_state: Option<Value>,
    pub trigger: Option<Value>,
    pub user_speech: String,
}

const GUARD_ACTIONS: &[&str] = &[
    "observe_more",
    "cancel_candidate",
    "send_rescue_hint",
    "prepare_exit_prompt",
];

/// Normalise the classifier's JSON into the passive-guard reply.
pub fn normalize_guard(
    raw: Option<Map<String, Value>>,
    stage: &Value,
    prompt_type: &str,
) -> Verdict {
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
    Verdict {
        classification,
        confidence,
        recommended_action: action,
        exit_prompt_type: exit,
        evidence_tags: tags,
        counter_action: s("counterAction", 80),
        reason_for_debug: s("reasonForDebug", 160),
    }
}

/// `POST /api/game/soccer/passive-guard` once the route is checked.
pub async fn passive_guard(
    st: &AppState,
    games: &Games,
    persona: &str,
    req: &GuardRequest,
    route: PublicRoute,
) -> Result<Verdict, NoVerdict> {
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return Err(NoVerdict::new("llm_api_not_configured"));
    };
    let payload = json!({
        "staticRules": {"schemaVersion": 1, "stageLessThan8CannotOpenPrompt": true,
            "ordinaryExitType": "surrender", "withdrawnExitType": "rest", "teachingNeverUsesPrompt": true},
        "preGameContext": req.pre_game_context.clone().unwrap_or(route.pre_game_context),
        "recentDialogues": route.last_dialogues,
        "currentState": req.current_state.clone().unwrap_or(json!({})),
        "passiveGuardState": req.passive_guard_state.clone().unwrap_or(json!({})),
        "stage": req.stage,
        "trigger": req.trigger.clone().unwrap_or(Value::Null),
        "promptType": req.prompt_type,
        "userSpeech": req.user_speech,
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
        Err(_) | Ok(Err(LlmError::Timeout)) => return Err(NoVerdict::new("timeout")),
        Ok(Err(e)) => {
            return Err(NoVerdict {
                reason: "exception",
                error: Some(e.to_string()),
            })
        }
        Ok(Ok(c)) => c,
    };
    Ok(normalize_guard(
        reply_json_object(&c.content),
        &req.stage,
        req.prompt_type,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict as the wire shows it.
    fn verdict(v: Verdict) -> Value {
        serde_json::to_value(v).unwrap_or_default()
    }

    #[test]
    fn guard_rules() {
        let raw = |a: &str, c: &str| {
            let v = json!({"recommendedAction": a, "classification": c});
            v.as_object().cloned()
        };
        let v = verdict(normalize_guard(
            raw("prepare_exit_prompt", "x"),
            &json!(3),
            "surrender",
        ));
        assert_eq!(v["recommendedAction"], "observe_more");
        assert_eq!(v["exitPromptType"], "none");
        let v = verdict(normalize_guard(
            raw("prepare_exit_prompt", "x"),
            &json!(9),
            "rest",
        ));
        assert_eq!(v["exitPromptType"], "rest");
        let v = verdict(normalize_guard(
            raw("send_rescue_hint", "soothed"),
            &json!("user_soothing"),
            "rest",
        ));
        assert_eq!(v["recommendedAction"], "cancel_candidate");
        let v = verdict(normalize_guard(None, &Value::Null, "surrender"));
        assert_eq!(v["classification"], "inconclusive");
        assert_eq!(v["recommendedAction"], "observe_more");
    }
}

//! The free-text answer of an onboarding question: the options offered, one
//! model call that interprets what the user typed, and the normalised result.

use std::time::Duration;

use companiond_core::llm::{ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::text::reply_json_object;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::model::call_options;
use crate::text::{collapse_ws, truncate_chars};

/// One option of a free-text question.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub id: String,
    pub label: String,
}

/// Normalise `options`: a list (first 4 items) of `{choice|id, label}` objects or
/// plain strings (then lettered A, B, C, D). `None` when the value is not a list.
pub fn normalize_options(v: &Value) -> Option<Vec<Choice>> {
    let items = v.as_array()?;
    let letters = ["A", "B", "C", "D"];
    let mut out: Vec<Choice> = Vec::new();
    for (i, item) in items.iter().take(4).enumerate() {
        let (id, label) = match item {
            Value::String(s) => (letters[i].to_string(), s.clone()),
            Value::Object(m) => {
                let id = m
                    .get("choice")
                    .or_else(|| m.get("id"))
                    .map(|v| match v {
                        Value::String(s) => s.trim().to_string(),
                        Value::Number(n) => n.to_string(),
                        _ => String::new(),
                    })
                    .unwrap_or_default();
                let label = m
                    .get("label")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                (id, label)
            }
            _ => continue,
        };
        let id = id.trim().to_uppercase();
        let label = truncate_chars(&collapse_ws(&label), 200);
        if id.is_empty() || id.chars().count() > 16 || out.iter().any(|c| c.id == id) {
            continue;
        }
        out.push(Choice { id, label });
    }
    Some(out)
}

/// An option as an answer names it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SelectedOption {
    pub choice: String,
    pub label: String,
}

/// What the user's free text means.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Interpretation {
    /// `choose`, `respond_and_keep_options` or `release`.
    pub action: String,
    /// The chosen option's id (`choose`), else empty.
    pub choice: String,
    /// The character's short reply (not with `choose`).
    pub reply: String,
    /// `on_topic`, `soft_derail` or `hard_exit`.
    pub topic_state: String,
    pub selected_option: Option<SelectedOption>,
}

/// Normalise the interpreter's JSON reply; `None` when it is not usable JSON.
pub fn normalize_interpretation(
    raw: Option<Map<String, Value>>,
    options: &[Choice],
) -> Option<Interpretation> {
    let raw = raw?;
    let s = |k: &str| {
        raw.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let mut action = s("action").to_ascii_lowercase();
    if !matches!(
        action.as_str(),
        "choose" | "respond_and_keep_options" | "release"
    ) {
        action = "respond_and_keep_options".into();
    }
    let mut choice = s("choice").to_uppercase();
    let mut reply = truncate_chars(&collapse_ws(&s("reply")), 240);
    if action == "choose" {
        if !options.iter().any(|o| o.id == choice) {
            action = "respond_and_keep_options".into();
            choice.clear();
        } else {
            reply.clear();
        }
    } else {
        choice.clear();
    }
    let mut topic = s("topic_state").to_ascii_lowercase();
    if !matches!(topic.as_str(), "on_topic" | "soft_derail" | "hard_exit") {
        topic = if action == "release" {
            "hard_exit"
        } else {
            "on_topic"
        }
        .into();
    }
    let selected_option = options
        .iter()
        .find(|o| o.id == choice)
        .map(|o| SelectedOption {
            choice: o.id.clone(),
            label: o.label.clone(),
        });
    Some(Interpretation {
        action,
        choice,
        reply,
        topic_state: topic,
        selected_option,
    })
}

/// A free-text answer to interpret (checked by the handler).
pub struct FreeText {
    pub persona: String,
    pub options: Vec<Choice>,
    pub assistant_line: String,
    pub user_text: String,
    /// The last (at most 4) free-text turns, as the client sent them.
    pub recent_turns: Vec<Value>,
    /// 1 when the user drifted off topic before, else 0.
    pub derail_streak: i64,
    pub day: Option<Value>,
    pub node_id: Option<Value>,
}

/// Why a free-text answer was not interpreted (each with the model error's message).
#[derive(Debug)]
pub enum InterpretError {
    NotConfigured(String),
    Timeout(String),
    ModelFailed(String),
    /// The model's reply held no usable JSON object.
    NotJson,
}

/// Interpret a free-text answer through the conversation model: the normalised
/// interpretation.
pub async fn interpret(
    st: &AppState,
    timeout: Duration,
    req: &FreeText,
) -> Result<Interpretation, InterpretError> {
    let persona = &req.persona;
    let Some(ep) = st.llm.endpoint(Slot::Conversation).await else {
        return Err(InterpretError::NotConfigured(
            LlmError::NotConfigured.to_string(),
        ));
    };
    let opts_text: Vec<String> = req
        .options
        .iter()
        .map(|c| format!("{}) {}", c.id, c.label))
        .collect();
    let system = format!(
        "You interpret what a new user typed during {persona}'s onboarding conversation. \
         The question offered these options:\n{}\nIf the user clearly picks one, answer action \"choose\" \
         with its letter in \"choice\". If they said something else, answer action \
         \"respond_and_keep_options\" with a short in-character \"reply\" (at most 2 sentences). If they \
         want to stop, answer action \"release\". Also give \"topic_state\": on_topic, soft_derail or \
         hard_exit. Reply with ONLY a JSON object {{\"action\", \"choice\", \"reply\", \"topic_state\"}}.",
        opts_text.join("\n")
    );
    let payload = json!({
        "assistant_line": truncate_chars(&req.assistant_line, 800),
        "user_text": truncate_chars(&req.user_text, 800),
        "recent_free_text_turns": req.recent_turns,
        "free_text_derail_streak": req.derail_streak,
        "day": req.day,
        "node_id": req.node_id,
    });
    let call = call_options(persona, timeout, 512);
    let messages = [
        ChatMessage::system(system),
        ChatMessage::user(payload.to_string()),
    ];
    let c = st
        .llm
        .complete_at(&ep, Slot::Conversation, &messages, &[], &call)
        .await
        .map_err(|e| {
            if e == LlmError::Timeout {
                InterpretError::Timeout(e.to_string())
            } else {
                InterpretError::ModelFailed(e.to_string())
            }
        })?;
    normalize_interpretation(reply_json_object(&c.content), &req.options)
        .ok_or(InterpretError::NotJson)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interpretation as the wire shows it.
    fn wire(i: Option<Interpretation>) -> Option<Value> {
        i.map(|i| serde_json::to_value(i).unwrap_or_default())
    }

    #[test]
    fn interpretation_rules() {
        let opts = normalize_options(&json!([{"choice": "a", "label": "Yes"}, "No"])).unwrap();
        assert_eq!(opts[0].id, "A");
        assert_eq!(opts[1].id, "B");
        let v = wire(normalize_interpretation(
            json!({"action": "choose", "choice": "b", "reply": "hi"})
                .as_object()
                .cloned(),
            &opts,
        ))
        .unwrap();
        assert_eq!(v["choice"], "B");
        assert_eq!(v["reply"], "");
        let v = wire(normalize_interpretation(
            json!({"action": "choose", "choice": "z"})
                .as_object()
                .cloned(),
            &opts,
        ))
        .unwrap();
        assert_eq!(v["action"], "respond_and_keep_options");
        let v = wire(normalize_interpretation(
            json!({"action": "release"}).as_object().cloned(),
            &opts,
        ))
        .unwrap();
        assert_eq!(v["topic_state"], "hard_exit");
        assert!(normalize_interpretation(None, &opts).is_none());
    }
}

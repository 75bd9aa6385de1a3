//! The context budget of a model call (docs/models.md): how many tokens a
//! slot's model takes (`contextWindow`), a conservative estimate of the tokens
//! of a message, and how much of a history fits beside the fixed parts of a
//! prompt. The oldest history goes first.

use serde_json::{Map, Value};

use crate::llm::{ChatMessage, ToolSpec};
use crate::providers::Slot;

/// The context window assumed when neither the settings nor the server tell:
/// what a small local server (llama.cpp, Ollama) runs with by default.
pub const DEFAULT_CONTEXT_WINDOW: usize = 4096;
/// Smallest and largest accepted `contextWindow`.
pub const MIN_CONTEXT_WINDOW: usize = 512;
pub const MAX_CONTEXT_WINDOW: usize = 10_000_000;

/// The configured window of `slot`: `<slot>ContextWindow`, else `contextWindow`
/// (a number or a numeric string in `config/core_config.json`), clamped to
/// [`MIN_CONTEXT_WINDOW`]..=[`MAX_CONTEXT_WINDOW`]; `None` when unset.
pub fn configured_window(cfg: &Map<String, Value>, slot: Slot) -> Option<usize> {
    let read = |k: &str| -> Option<usize> {
        let v = cfg.get(k)?;
        let n = match v {
            Value::Number(n) => n.as_u64()?,
            Value::String(s) => s.trim().parse::<u64>().ok()?,
            _ => return None,
        };
        Some(usize::try_from(n).unwrap_or(MAX_CONTEXT_WINDOW))
    };
    read(&format!("{}ContextWindow", slot.as_str()))
        .or_else(|| read("contextWindow"))
        .filter(|n| *n > 0)
        .map(|n| n.clamp(MIN_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW))
}

/// The window a server reports: llama.cpp's `/props`
/// (`default_generation_settings.n_ctx` or `n_ctx`), or a `/v1/models` entry's
/// `context_length`/`context_window`/`max_model_len` (vLLM, LM Studio, OpenRouter)
/// for `model`.
pub fn reported_window(
    props: Option<&Value>,
    models: Option<&Value>,
    model: &str,
) -> Option<usize> {
    let as_n = |v: Option<&Value>| {
        v.and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    if let Some(p) = props {
        let n = as_n(p.pointer("/default_generation_settings/n_ctx"))
            .or_else(|| as_n(p.get("n_ctx")))
            .or_else(|| as_n(p.pointer("/default_generation_settings/params/n_ctx")));
        if let Some(n) = n.filter(|n| *n > 0) {
            return Some(n.clamp(MIN_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW));
        }
    }
    let data = models?.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    ["context_length", "context_window", "max_model_len"]
        .iter()
        .find_map(|k| as_n(entry.get(*k)))
        .filter(|n| *n > 0)
        .map(|n| n.clamp(MIN_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW))
}

/// What Ollama runs a model with when its `num_ctx` is not set: its docs
/// (docs.ollama.com/context-length) give 4k below 24 GiB of VRAM and more above;
/// companiond cannot see the VRAM, so it takes the smallest (docs/models.md).
pub const OLLAMA_DEFAULT_NUM_CTX: usize = 4096;

/// The window of a model Ollama reports in its `{base}/api/show` answer: the
/// `num_ctx` of its `parameters` (Modelfile lines such as `"num_ctx 8192"`, or an
/// object) when set, else the model's `<arch>.context_length` from `model_info`
/// capped to [`OLLAMA_DEFAULT_NUM_CTX`]; `None` when the answer holds neither
/// (not Ollama, or not a model it knows).
pub fn ollama_window(show: &Value) -> Option<usize> {
    let positive = |n: u64| usize::try_from(n).ok().filter(|n| *n > 0);
    let num_ctx = match show.get("parameters") {
        Some(Value::String(lines)) => lines.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some("num_ctx"), Some(n)) => n.trim_matches('"').parse::<u64>().ok(),
                _ => None,
            }
        }),
        Some(Value::Object(m)) => m.get("num_ctx").and_then(|v| match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        }),
        _ => None,
    }
    .and_then(positive);
    let window = match num_ctx {
        Some(n) => n,
        None => {
            let info = show.get("model_info")?.as_object()?;
            let arch = info.get("general.architecture").and_then(Value::as_str);
            let trained = arch
                .and_then(|a| info.get(&format!("{a}.context_length")))
                .or_else(|| {
                    info.iter()
                        .find(|(k, _)| k.ends_with(".context_length"))
                        .map(|(_, v)| v)
                })
                .and_then(Value::as_u64)
                .and_then(positive)?;
            trained.min(OLLAMA_DEFAULT_NUM_CTX)
        }
    };
    Some(window.clamp(MIN_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW))
}

/// Tokens kept free for the answer of a call in a window of `window` tokens
/// (also its `max_tokens`).
pub fn reply_reserve(window: usize) -> usize {
    (window / 4).clamp(128, 2048)
}

/// A conservative token estimate of `text`: about three ASCII characters a
/// token, one and a half tokens a character for the rest (CJK, emoji).
pub fn estimate_tokens(text: &str) -> usize {
    let (mut ascii, mut other) = (0usize, 0usize);
    for c in text.chars() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
    }
    ascii.div_ceil(3) + other + other.div_ceil(2)
}

/// Tokens of one message, with the chat template's per-message overhead.
pub fn message_tokens(m: &ChatMessage) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| estimate_tokens(&c.function.name) + estimate_tokens(&c.function.arguments) + 8)
        .sum();
    8 + m.content.as_deref().map_or(0, estimate_tokens) + calls
}

/// Tokens of messages.
pub fn messages_tokens(ms: &[ChatMessage]) -> usize {
    ms.iter().map(message_tokens).sum()
}

/// Tokens of the tool definitions sent with a call.
pub fn tools_tokens(tools: &[ToolSpec]) -> usize {
    tools
        .iter()
        .map(|t| {
            16 + estimate_tokens(&t.name)
                + estimate_tokens(&t.description)
                + estimate_tokens(&t.parameters.to_string())
        })
        .sum()
}

/// How many of the newest `history` messages fit in `budget` tokens (the
/// oldest are dropped first).
pub fn fitting_tail(history: &[ChatMessage], budget: usize) -> usize {
    let mut used = 0usize;
    let mut n = 0usize;
    for m in history.iter().rev() {
        used += message_tokens(m);
        if used > budget {
            break;
        }
        n += 1;
    }
    n
}

/// The longest prefix of `text` (cut at a character boundary) that stays within
/// `budget` estimated tokens.
pub fn truncate_to(text: &str, budget: usize) -> &str {
    if estimate_tokens(text) <= budget {
        return text;
    }
    let (mut lo, mut hi) = (0usize, text.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let mut m = mid;
        while !text.is_char_boundary(m) {
            m -= 1;
        }
        if estimate_tokens(&text[..m]) <= budget {
            if m == lo {
                break;
            }
            lo = m;
        } else {
            hi = mid - 1;
        }
    }
    let mut end = lo.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn windows_from_settings_and_servers() {
        let cfg = json!({"contextWindow": 8192, "summaryContextWindow": "2048"});
        let cfg = cfg.as_object().unwrap();
        assert_eq!(configured_window(cfg, Slot::Conversation), Some(8192));
        assert_eq!(configured_window(cfg, Slot::Summary), Some(2048));
        assert_eq!(configured_window(&Map::new(), Slot::Summary), None);
        let tiny = json!({"contextWindow": 10});
        assert_eq!(
            configured_window(tiny.as_object().unwrap(), Slot::Agent),
            Some(MIN_CONTEXT_WINDOW)
        );
        let props = json!({"default_generation_settings": {"n_ctx": 2048}});
        assert_eq!(reported_window(Some(&props), None, "m"), Some(2048));
        let models = json!({"data": [{"id": "a", "context_length": 32768}, {"id": "m"}]});
        assert_eq!(reported_window(None, Some(&models), "a"), Some(32768));
        assert_eq!(reported_window(None, Some(&models), "m"), None);
    }

    #[test]
    fn windows_from_ollamas_show() {
        // The shape of Ollama's `{base}/api/show` answer (its API reference, "Show Model Information").
        let show = json!({
            "modelfile": "FROM llama3.2",
            "parameters": "stop                           \"<|start_header_id|>\"\nnum_ctx                        8192",
            "template": "{{ .Prompt }}",
            "details": {"format": "gguf", "family": "llama"},
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
            "capabilities": ["completion", "tools"]
        });
        assert_eq!(ollama_window(&show), Some(8192));
        // No num_ctx: the model's length capped to what Ollama runs by default.
        let show = json!({
            "parameters": "stop \"<|eot_id|>\"",
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072}
        });
        assert_eq!(ollama_window(&show), Some(OLLAMA_DEFAULT_NUM_CTX));
        let small =
            json!({"model_info": {"general.architecture": "gpt2", "gpt2.context_length": 1024}});
        assert_eq!(ollama_window(&small), Some(1024));
        let no_arch = json!({"model_info": {"qwen2.context_length": 2048}});
        assert_eq!(ollama_window(&no_arch), Some(2048));
        let object = json!({"parameters": {"num_ctx": "16384"}});
        assert_eq!(ollama_window(&object), Some(16384));
        // Garbage is no window, never a panic.
        for bad in [
            json!(null),
            json!([]),
            json!("num_ctx 4096"),
            json!({"error": "model 'x' not found"}),
            json!({"parameters": "num_ctx lots", "model_info": {"llama.context_length": "big"}}),
            json!({"parameters": "num_ctx 0", "model_info": {"general.architecture": 7}}),
            json!({"parameters": 12, "model_info": []}),
            json!({"parameters": "num_ctx -5\nnum_ctx", "model_info": {"llama.context_length": -1}}),
        ] {
            assert_eq!(ollama_window(&bad), None, "{bad}");
        }
        let huge = json!({"parameters": "num_ctx 99999999999999999999"});
        assert_eq!(ollama_window(&huge), None);
        let tiny = json!({"parameters": "num_ctx 16"});
        assert_eq!(ollama_window(&tiny), Some(MIN_CONTEXT_WINDOW));
    }

    #[test]
    fn the_oldest_history_goes_first() {
        let h: Vec<ChatMessage> = (0..10)
            .map(|i| ChatMessage::user(format!("{i} {}", "x".repeat(300))))
            .collect();
        let one = message_tokens(&h[9]);
        assert_eq!(fitting_tail(&h, one * 3), 3);
        assert_eq!(fitting_tail(&h, one * 100), 10);
        assert_eq!(fitting_tail(&h, 0), 0);
        assert!(estimate_tokens("你好世界") >= 4);
        let t = truncate_to("héllo wörld, a longer text", 3);
        assert!(estimate_tokens(t) <= 3 && !t.is_empty());
    }
}

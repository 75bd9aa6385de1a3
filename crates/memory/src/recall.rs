//! Long-term memory in the chat turn (`companiond_core::state::MemoryRecall`):
//!
//! * [`context`]: the persona and the few facts and reflections most relevant
//!   to the new message (BM25 search fused with recency and, when an
//!   embedding endpoint is configured, vector similarity), within
//!   [`CONTEXT_CHARS`], appended to the turn's system prompt;
//! * the built-in tool [`TOOL`] (`recall_memory`): search by words and/or a
//!   time window over facts, reflections and the history lines;
//! * `after_turn`: index the new lines and schedule an extraction
//!   ([`crate::extract::note_activity`]); never waits.

use std::sync::Weak;

use companiond_core::llm::ToolSpec;
use companiond_core::state::{Inner, MemoryRecall};
use companiond_core::tools::ToolResult;
use companiond_core::AppState;
use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::index::{self, Hit, Query};
use crate::longterm::{self, with_index};
use crate::{extract, timefmt, vectors, MemoryRuntime};

/// The built-in tool's name.
pub const TOOL: &str = "recall_memory";
/// Characters of memory text added to a turn's system prompt.
pub const CONTEXT_CHARS: usize = 3000;
/// Of which the persona may use at most.
pub const PERSONA_CHARS: usize = 1500;
/// Most characters of the folded history's summary in a turn's memory text.
pub const SUMMARY_CHARS: usize = 2000;
/// Facts and reflections added to a turn at most.
pub const CONTEXT_ITEMS: usize = 8;
/// History lines matching the new message added to a turn at most (recall
/// that does not depend on extraction).
pub const CONTEXT_LINES: usize = 4;
/// Characters of one such line.
const LINE_CHARS: usize = 300;

/// Results of one `recall_memory` call at most.
pub const TOOL_MAX_RESULTS: usize = 20;

/// The hook installed in `state.hooks`.
pub struct Recall {
    pub state: Weak<Inner>,
}

impl Recall {
    fn state(&self) -> Option<AppState> {
        self.state.upgrade().map(AppState)
    }
}

impl MemoryRecall for Recall {
    fn context(&self, character: String, user_text: String) -> BoxFuture<'static, Option<String>> {
        let state = self.state();
        Box::pin(async move { context(&state?, &character, &user_text).await })
    }

    fn tools(&self, _character: &str) -> Vec<ToolSpec> {
        vec![tool_spec()]
    }

    fn call(
        &self,
        character: String,
        name: String,
        arguments: String,
    ) -> BoxFuture<'static, Option<ToolResult>> {
        let state = self.state();
        Box::pin(async move {
            if name != TOOL {
                return None;
            }
            let Some(state) = state else {
                return Some(ToolResult {
                    content: "tool error: the server is stopping".into(),
                    is_error: true,
                });
            };
            Some(run_tool(&state, &character, &arguments).await)
        })
    }

    fn add_fact(
        &self,
        character: String,
        text: String,
        importance: i64,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let state = self.state();
        Box::pin(async move {
            let state = state.ok_or("the server is stopping")?;
            add_fact(&state, &character, &text, importance).await
        })
    }

    fn knowledge(&self, character: String) -> BoxFuture<'static, Result<Value, String>> {
        let state = self.state();
        Box::pin(async move {
            let state = state.ok_or("the server is stopping")?;
            knowledge(&state, &character).await
        })
    }

    fn after_turn(&self, character: &str) {
        if let Some(state) = self.state() {
            extract::note_activity(&state, character);
            // A history past its bound is folded (docs/memory.md § Folding).
            crate::fold::schedule(&state, character);
            // Picks up a changed embedding model; nothing when all is embedded.
            vectors::schedule(&state, character);
        }
    }
}

/// Most characters of a fact added from outside.
pub const FACT_MAX_CHARS: usize = 1000;

/// Add a fact stated from outside (companiond's MCP endpoint): stored like a
/// fact the user stated (`source` `user_observation`, one piece of evidence),
/// promoted into the persona by the usual rule.
pub async fn add_fact(
    state: &AppState,
    name: &str,
    text: &str,
    importance: i64,
) -> Result<Value, String> {
    let text = text.trim().to_string();
    if text.is_empty() || text.chars().count() > FACT_MAX_CHARS {
        return Err(format!("the fact must be 1 to {FACT_MAX_CHARS} characters"));
    }
    if !state.characters.exists(name) {
        return Err(format!("no character named {name}"));
    }
    let importance = importance.clamp(1, 10);
    longterm::commit(state, name, "add_fact", move |s| {
        let now = companiond_core::now_millis();
        let mut fact = crate::stores::new_fact(&text, "master", importance, now);
        fact.insert("evidence_count".into(), json!(1));
        s.facts.push(fact.clone());
        crate::extract::promote_persona(s, now);
        Ok(Value::Object(fact))
    })
    .await
    .map_err(|e| e.to_string())
}

/// `{persona, facts}` of `name` (see `MemoryRecall::knowledge`).
pub async fn knowledge(state: &AppState, name: &str) -> Result<Value, String> {
    if !state.characters.exists(name) {
        return Err(format!("no character named {name}"));
    }
    let s = longterm::load(state, name)
        .await
        .map_err(|e| e.to_string())?;
    let facts: Vec<Value> = s
        .active_facts()
        .map(|f| {
            let picked = ["id", "text", "importance", "entity", "created_at"]
                .iter()
                .filter_map(|k| f.get(*k).map(|v| (k.to_string(), v.clone())));
            Value::Object(picked.collect())
        })
        .collect();
    Ok(json!({"persona": Value::Object(s.persona.clone()), "facts": facts}))
}

fn usable(state: &AppState, name: &str) -> bool {
    state.characters.exists(name)
        && companiond_core::fence::is_normal(state.data_dir())
        // A rename is moving the files: this turn goes without.
        && MemoryRuntime::of(state).rename_lock.try_read().is_ok()
}

/// The memory text of a turn of `name` answering `user_text`, or `None`.
pub async fn context(state: &AppState, name: &str, user_text: &str) -> Option<String> {
    if !usable(state, name) {
        return None;
    }
    let text = user_text.chars().take(2000).collect::<String>();
    let line_query = text.clone();
    // Bounded: a slow or failing embedding endpoint leaves the turn to BM25.
    let qv = vectors::query_vector(state, &text, vectors::TURN_TIMEOUT).await;
    let found = with_index(state, name, move |conn, dir| {
        let summary = crate::fold::head_summary(&dir.join(crate::unit::RECENT));
        let persona = index::search_docs(
            conn,
            &Query {
                limit: 200,
                ..Default::default()
            },
            &["persona"],
        )?;
        let relevant = index::search_docs(
            conn,
            &Query {
                text,
                limit: 12,
                ..Default::default()
            },
            &["fact", "reflection"],
        )?;
        let semantic = match &qv {
            Some(qv) => vectors::search(
                conn,
                &Query {
                    limit: 12,
                    ..Default::default()
                },
                &["fact", "reflection"],
                qv,
                &relevant,
            )?,
            None => Vec::new(),
        };
        let recent = index::search_docs(
            conn,
            &Query {
                limit: 6,
                ..Default::default()
            },
            &["fact", "reflection"],
        )?;
        // The history lines that best match the message, older than the ones
        // the turn's prompt already holds.
        let newest: i64 = conn
            .query_row("SELECT COALESCE(MAX(id), 0) FROM memory_lines", [], |r| {
                r.get(0)
            })
            .map_err(|e| e.to_string())?;
        let horizon = newest - companiond_core::sessions::CONTEXT_MESSAGES as i64;
        let lines: Vec<Hit> = if line_query.chars().any(char::is_alphanumeric) && horizon > 0 {
            index::search_lines(
                conn,
                &Query {
                    text: line_query,
                    limit: 24,
                    ..Default::default()
                },
            )?
            .into_iter()
            .filter(|h| h.score != 0.0 && h.id.parse::<i64>().is_ok_and(|id| id <= horizon))
            .take(CONTEXT_LINES)
            .collect()
        } else {
            Vec::new()
        };
        Ok((summary, persona, relevant, semantic, recent, lines))
    })
    .await;
    let (summary, mut persona, relevant, semantic, recent, lines) = match found {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!("no memory context for {name}: {e}");
            return None;
        }
    };
    Some(render(
        name,
        summary.as_deref(),
        &mut persona,
        &[&relevant, &semantic, &recent],
        &lines,
    ))
    .filter(|s| !s.is_empty())
}

/// `summary`: the summary of the history folded out of `recent.json`
/// ([`crate::fold`]). `ranked`: the lists fused into "things you remember"
/// (BM25, vector, recency). `lines`: history lines matching the message
/// (oldest first in the text).
fn render(
    name: &str,
    summary: Option<&str>,
    persona: &mut [Hit],
    ranked: &[&[Hit]],
    lines: &[Hit],
) -> String {
    persona.sort_by_key(|h| h.ts);
    let mut out = String::new();
    if let Some(s) = summary.map(str::trim).filter(|s| !s.is_empty()) {
        out.push_str("Summary of your earlier conversations:\n");
        out.extend(s.chars().take(SUMMARY_CHARS));
        out.push('\n');
    }
    let mut used = 0usize;
    let mut seen: Vec<String> = Vec::new();
    for (entity, title) in [
        ("master", "About the user:".to_string()),
        ("neko", format!("About you ({name}):")),
        ("relationship", "Your relationship:".to_string()),
    ] {
        let mut section = String::new();
        for h in persona.iter().filter(|h| h.who == entity) {
            let line = format!("- {}\n", h.text);
            if used + line.len() > PERSONA_CHARS {
                break;
            }
            used += line.len();
            section.push_str(&line);
            seen.push(crate::stores::normalised(&h.text));
        }
        if !section.is_empty() {
            out.push_str(&title);
            out.push('\n');
            out.push_str(&section);
        }
    }
    let fused = index::rrf(ranked);
    let mut items = String::new();
    let mut n = 0;
    for h in fused {
        if n >= CONTEXT_ITEMS {
            break;
        }
        let norm = crate::stores::normalised(&h.text);
        if seen.contains(&norm) {
            continue;
        }
        let line = format!("- [{}] {}\n", timefmt::date(h.ts), h.text);
        if used + line.len() > CONTEXT_CHARS {
            break;
        }
        used += line.len();
        seen.push(norm);
        items.push_str(&line);
        n += 1;
    }
    if !items.is_empty() {
        out.push_str("Things you remember that may matter now:\n");
        out.push_str(&items);
    }
    let mut said: Vec<&Hit> = lines
        .iter()
        // Lines by the user or the character (not summaries or notes).
        .filter(|h| h.who != "system")
        .filter(|h| !seen.contains(&crate::stores::normalised(&h.text)))
        .collect();
    said.sort_by_key(|h| h.ts);
    if !said.is_empty() {
        out.push_str("Earlier lines of your conversations that may matter now:\n");
        for h in said {
            let who = if h.who == "human" { "the user" } else { "you" };
            let text: String = h.text.chars().take(LINE_CHARS).collect();
            out.push_str(&format!("- [{}] {who}: {text}\n", timefmt::date(h.ts)));
        }
    }
    if out.is_empty() {
        return out;
    }
    format!(
        "Long-term memory (today is {} UTC). Use it naturally; do not recite it.\n{out}\
         Older conversations can be searched with the {TOOL} tool.",
        timefmt::date(companiond_core::now_millis())
    )
}

/// The tool as the model sees it.
pub fn tool_spec() -> ToolSpec {
    ToolSpec {
        name: TOOL.into(),
        description: "Search your long-term memory: what you learned about the user and your past \
            conversations. Use it when the user refers to something from before (\"what did I tell \
            you about my sister?\", \"what did we talk about last Tuesday?\"). Give words to look \
            for, a time window, or both. Times are UTC."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words to look for"},
                "since": {"type": "string", "description": "start of the time window: a date (YYYY-MM-DD) or date-time"},
                "until": {"type": "string", "description": "end of the time window (a date includes that whole day)"},
                "days": {"type": "integer", "minimum": 1, "maximum": 3650, "description": "or: the last N days"},
                "limit": {"type": "integer", "minimum": 1, "maximum": TOOL_MAX_RESULTS}
            }
        }),
    }
}

fn tool_error(msg: impl Into<String>) -> ToolResult {
    ToolResult {
        content: format!("tool error: {}", msg.into()),
        is_error: true,
    }
}

/// Parse the tool's arguments into a query.
pub fn parse_args(raw: &str) -> Result<Query, String> {
    let v: Value = if raw.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(raw).map_err(|_| "the arguments must be a JSON object".to_string())?
    };
    let Some(o) = v.as_object() else {
        return Err("the arguments must be a JSON object".into());
    };
    let text = match o.get("query") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if s.chars().count() <= 500 => s.clone(),
        Some(Value::String(_)) => return Err("query is longer than 500 characters".into()),
        Some(_) => return Err("query must be a string".into()),
    };
    let time = |k: &str, end: bool| -> Result<Option<i64>, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => timefmt::bound(s, end)
                .map(Some)
                .ok_or_else(|| format!("{k} must be a date (YYYY-MM-DD) or a date-time")),
            Some(_) => Err(format!("{k} must be a string")),
        }
    };
    let mut since = time("since", false)?;
    let until = time("until", true)?;
    match o.get("days") {
        None | Some(Value::Null) => {}
        Some(d) => match d.as_u64() {
            Some(n @ 1..=3650) => {
                since = Some(companiond_core::now_millis() - n as i64 * 86_400_000);
            }
            _ => return Err("days must be an integer from 1 to 3650".into()),
        },
    }
    let limit = match o.get("limit") {
        None | Some(Value::Null) => 8,
        Some(l) => match l.as_u64() {
            Some(n @ 1..=20) => n as usize,
            _ => {
                return Err(format!(
                    "limit must be an integer from 1 to {TOOL_MAX_RESULTS}"
                ))
            }
        },
    };
    if index::fts_query(&text).is_none() && since.is_none() && until.is_none() {
        return Err("give words to look for or a time window".into());
    }
    Ok(Query {
        text,
        since,
        until,
        limit,
        offset: 0,
    })
}

async fn run_tool(state: &AppState, name: &str, raw: &str) -> ToolResult {
    let q = match parse_args(raw) {
        Ok(q) => q,
        Err(e) => return tool_error(e),
    };
    if !usable(state, name) {
        return tool_error("memory is not available right now");
    }
    let q2 = q.clone();
    let hits = match longterm::search(state, name, q2, vec!["fact", "reflection", "line"]).await {
        Ok(h) => h,
        Err(e) => return tool_error(e),
    };
    if hits.is_empty() {
        return ToolResult {
            content: "No memory matches.".into(),
            is_error: false,
        };
    }
    let mut out = format!("{} memories found:\n", hits.len());
    for h in &hits {
        let text: String = h.text.chars().take(500).collect();
        let line = match h.kind.as_str() {
            "line" => {
                let who = if h.who == "human" { "user" } else { "you" };
                format!("- conversation {} ({who}): {text}\n", timefmt::short(h.ts))
            }
            k => format!("- {k} learned {}: {text}\n", timefmt::date(h.ts)),
        };
        out.push_str(&line);
    }
    ToolResult {
        content: out,
        is_error: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_arguments() {
        assert!(parse_args("").is_err());
        assert!(parse_args("[1]").is_err());
        assert!(parse_args(r#"{"query": "the"}"#).is_err());
        let q = parse_args(r#"{"query": "cat", "limit": 3}"#).unwrap();
        assert_eq!((q.text.as_str(), q.limit), ("cat", 3));
        let q = parse_args(r#"{"since": "2024-05-01", "until": "2024-05-01"}"#).unwrap();
        assert_eq!(q.since, Some(1_714_521_600_000));
        assert_eq!(q.until, Some(1_714_521_600_000 + 86_399_999));
        for bad in [
            r#"{"query": 5}"#,
            r#"{"since": "last tuesday"}"#,
            r#"{"days": 0}"#,
            r#"{"days": -1, "query": "x y"}"#,
            r#"{"query": "cat", "limit": 21}"#,
            r#"{"query": "cat", "limit": 1.5}"#,
        ] {
            assert!(parse_args(bad).is_err(), "{bad}");
        }
    }
}

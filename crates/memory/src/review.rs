//! Automatic recent-memory review (toggle `recent_memory_auto_review`).
//!
//! A review asks the `summary` model slot to correct the last ordinary messages
//! of a character's `recent.json` (transcription slips, accidental repeats) and
//! returns one corrected text per message. The result is applied with a
//! compare-and-swap under the history lock: if the file changed meanwhile (a
//! chat append, a browser save) or the review was cancelled (a save cancels
//! it, a rename drains it), nothing is written. Theater messages are never
//! sent nor touched.
//!
//! A watcher started with the routes reviews a character once at least
//! [`REVIEW_EVERY`] messages were added since its last review, while the toggle
//! is on and a model is configured.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use companiond_core::llm::{CallOptions, ChatMessage};
use companiond_core::providers::Slot;
use companiond_core::store::atomic_write;
use companiond_core::AppState;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::recent::snapshot;
use crate::tasks::{Refused, TaskInfo, TaskKind};
use crate::toggles::{self, Toggle};
use crate::MemoryRuntime;
use companiond_core::history::line::{content_str, is_theater, kind_of, set_content, text_of};

/// Messages sent to one review.
pub const REVIEW_WINDOW: usize = 30;
/// New messages since the last review before the watcher starts another.
pub const REVIEW_EVERY: usize = 20;
/// How often the watcher looks.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(15);

/// How a review ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewOutcome {
    /// This many messages were corrected and written.
    Applied(usize),
    /// The model found nothing to correct (or there was nothing to review).
    Unchanged,
    /// The history changed while the model worked; nothing was written.
    Superseded,
    /// Cancelled (a save or a rename); nothing was written.
    Cancelled,
    /// The model call failed or its answer was unusable.
    Failed(String),
}

/// A started review.
pub struct ReviewHandle {
    pub task: TaskInfo,
    pub outcome: oneshot::Receiver<ReviewOutcome>,
}

/// Start a review of `name`'s recent history.
pub fn start(state: &AppState, name: &str) -> Result<ReviewHandle, Refused> {
    let (task, outcome) =
        crate::spawn_task(state, name, TaskKind::Review, |st, n, cancel| async move {
            let outcome = run(&st, &n, &cancel).await;
            if let ReviewOutcome::Failed(e) = &outcome {
                tracing::info!("recent-memory review of {n} failed: {e}");
            }
            outcome
        })?;
    Ok(ReviewHandle { task, outcome })
}

async fn run(state: &AppState, name: &str, cancel: &CancellationToken) -> ReviewOutcome {
    let path = state.history.path(name);
    let p = path.clone();
    let snap = match tokio::task::spawn_blocking(move || snapshot(&p)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return ReviewOutcome::Failed(format!("cannot read the history: {e}")),
        Err(e) => return ReviewOutcome::Failed(e.to_string()),
    };
    let Some(bytes) = snap.bytes else {
        return ReviewOutcome::Unchanged;
    };
    let Ok(history) = serde_json::from_slice::<Vec<Value>>(&bytes) else {
        return ReviewOutcome::Failed("the history is not a JSON array".into());
    };
    let picked: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, v)| !is_theater(v) && content_str(v).is_some())
        .map(|(i, _)| i)
        .collect();
    let mut picked = &picked[picked.len().saturating_sub(REVIEW_WINDOW)..];
    // The answer repeats the messages: they take at most half of what the
    // summary model's context leaves (the oldest are left out first).
    let (window, _) = crate::extract::budget(state, Slot::Summary).await;
    let half = window.saturating_sub(300) / 2;
    let mut size = 0;
    let mut keep = 0;
    for &i in picked.iter().rev() {
        size += companiond_core::context::estimate_tokens(&text_of(&history[i])) + 12;
        if size > half {
            break;
        }
        keep += 1;
    }
    picked = &picked[picked.len() - keep..];
    if picked.is_empty() {
        return ReviewOutcome::Unchanged;
    }
    let items: Vec<Value> = picked
        .iter()
        .map(|&i| json!({"role": kind_of(&history[i]), "text": text_of(&history[i])}))
        .collect();
    let messages = vec![
        ChatMessage::system(format!(
            "You review the recent chat history of the character {name}. Correct obvious \
             speech-recognition slips and accidental word repetitions; never change the \
             meaning, never add or remove messages. Answer with only a JSON array of \
             strings: the corrected text of each message, in the same order."
        )),
        ChatMessage::user(Value::Array(items).to_string()),
    ];
    let opts = CallOptions {
        character: name.to_string(),
        timeout: Duration::from_secs(120),
        max_tokens: u32::try_from(half + 64).ok(),
        ..Default::default()
    };
    let reply = tokio::select! {
        _ = cancel.cancelled() => return ReviewOutcome::Cancelled,
        r = state.llm.complete(Slot::Summary, &messages, &opts) => r,
    };
    let reply = match reply {
        Ok(c) => c.content,
        Err(e) => return ReviewOutcome::Failed(e.to_string()),
    };
    let Some(fixed) = parse_reply(&reply, picked.len()) else {
        return ReviewOutcome::Failed(
            "the model's answer is not a JSON array of the same length".into(),
        );
    };
    let edits: Vec<(usize, String)> = picked
        .iter()
        .zip(fixed)
        .filter(|(&i, t)| text_of(&history[i]) != *t)
        .map(|(&i, t)| (i, t))
        .collect();
    if edits.is_empty() {
        return ReviewOutcome::Unchanged;
    }
    // Apply under the history lock, only if nothing changed meanwhile.
    let lock = state.history.lock(name);
    let _g = tokio::select! {
        _ = cancel.cancelled() => return ReviewOutcome::Cancelled,
        g = lock.lock_owned() => g,
    };
    if cancel.is_cancelled() {
        return ReviewOutcome::Cancelled;
    }
    let expected = snap.fingerprint;
    let (data_dir, snap_name) = (state.data_dir().to_path_buf(), name.to_string());
    let r = tokio::task::spawn_blocking(move || -> Result<ReviewOutcome, String> {
        let now = snapshot(&path).map_err(|e| e.to_string())?;
        if now.fingerprint != expected {
            return Ok(ReviewOutcome::Superseded);
        }
        let mut history = history;
        let n = edits.len();
        for (i, text) in edits {
            set_content(&mut history[i], text);
        }
        let bytes = companiond_core::history::encode(&history).map_err(|e| e.to_string())?;
        let snap = crate::recent::keep_before(
            &data_dir,
            &snap_name,
            companiond_core::snapshots::Kind::Review,
        );
        if let Err(e) = atomic_write(&path, &bytes) {
            if let Some(m) = snap {
                companiond_core::snapshots::discard(&data_dir, &snap_name, &m.id);
            }
            return Err(e.to_string());
        }
        Ok(ReviewOutcome::Applied(n))
    })
    .await;
    match r {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => ReviewOutcome::Failed(e),
        Err(e) => ReviewOutcome::Failed(e.to_string()),
    }
}

/// The JSON array of `n` strings in a model answer (code fences tolerated).
pub fn parse_reply(reply: &str, n: usize) -> Option<Vec<String>> {
    let start = reply.find('[')?;
    let end = reply.rfind(']')?;
    if end < start {
        return None;
    }
    let v: Vec<String> =
        serde_json::from_value(companiond_core::llm::lenient_json(&reply[start..=end])?).ok()?;
    (v.len() == n).then_some(v)
}

/// The background watcher (one per server). Ends when the server state is gone.
pub(crate) fn spawn_watcher(state: &AppState) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak: Weak<companiond_core::state::Inner> = Arc::downgrade(&state.0);
    handle.spawn(async move {
        let mut seen: HashMap<String, usize> = HashMap::new();
        loop {
            tokio::time::sleep(WATCH_INTERVAL).await;
            let Some(inner) = weak.upgrade() else { return };
            let state = AppState(inner);
            watch_once(&state, &mut seen).await;
        }
    });
}

async fn watch_once(state: &AppState, seen: &mut HashMap<String, usize>) {
    if !matches!(
        toggles::read(state, &MemoryRuntime::of(state), Toggle::Review).await,
        Ok(true)
    ) {
        return;
    }
    if state.llm.endpoint(Slot::Summary).await.is_none() {
        return;
    }
    for name in state.characters.names() {
        let path = state.history.path(&name);
        let len = tokio::task::spawn_blocking(move || {
            std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Vec<Value>>(&b).ok())
                .map(|v| v.len())
        })
        .await
        .ok()
        .flatten()
        .unwrap_or(0);
        let last = *seen.entry(name.clone()).or_insert(len);
        if len < last {
            seen.insert(name.clone(), len);
        } else if len - last >= REVIEW_EVERY && start(state, &name).is_ok() {
            seen.insert(name, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies() {
        assert_eq!(
            parse_reply("```json\n[\"a\", \"b\"]\n```", 2),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(parse_reply("[\"a\"]", 2), None);
        assert_eq!(parse_reply("no", 1), None);
        assert_eq!(parse_reply("] [", 1), None);
    }
}

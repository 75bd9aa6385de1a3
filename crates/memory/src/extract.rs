//! Long-term memory extraction, off the chat's hot path.
//!
//! After a conversation goes quiet ([`Scheduler::quiet`]), or as soon as
//! [`Scheduler::every`] unread lines piled up, a background task reads the
//! history lines the extraction has not seen (the cursor lives in the time
//! index, so it travels with the character unit) and:
//!
//! 1. asks the `summary` model slot for durable facts, each with the numbers
//!    of the lines it came from (its evidence);
//! 2. asks the `correction` slot to reconcile every candidate with the known
//!    facts the index finds related: `add`, `duplicate` (the known fact gains
//!    evidence), `merge` (the known fact is rewritten) or `contradicts` (the
//!    known fact goes to `facts_archive.json`, superseded by the new one); an
//!    answer that cannot be read adds the candidates (exact duplicates of a
//!    known fact still only reinforce it);
//! 3. writes the stores atomically (archives first) and moves the cursor;
//! 4. once enough facts were not summarised yet, asks the `summary` slot for
//!    reflections (patterns over several facts; the facts get `absorbed`);
//! 5. keeps the persona: facts seen often ([`PERSONA_MIN_EVIDENCE`]) or very
//!    important ([`PERSONA_MIN_IMPORTANCE`]) become persona entries; entries
//!    follow their fact (corrected, replaced, forgotten).
//!
//! Both memory toggles must be on (`recent_memory_auto_review`,
//! `powerful_memory_enabled`); off = no extraction. A failed model call
//! leaves the cursor where it was (the lines are read again next time). The
//! chat never waits for any of it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use companiond_core::context;
use companiond_core::llm::{CallOptions, ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::AppState;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::index::{self, Line, Query};
use crate::longterm::{self, with_index};
use crate::stores::{self, int_of, str_of, Obj, Stores, ENTITIES};
use crate::tasks::{Refused, TaskKind};
use crate::toggles::{self, Toggle};
use crate::{timefmt, MemoryRuntime};

/// Unread lines that start an extraction without waiting for quiet.
pub const EVERY: usize = 20;
/// Silence after the last turn before an extraction starts.
pub const QUIET: Duration = Duration::from_secs(90);
/// Lines per model call, and batches per extraction.
pub const BATCH: usize = 40;
pub const MAX_BATCHES: usize = 10;
/// Facts not summarised yet before a reflection is attempted.
pub const MIN_FACTS_FOR_REFLECTION: usize = 5;
/// Facts per reflection request.
pub const REFLECTION_WINDOW: usize = 30;
/// A fact seen this often, or this important, joins the persona.
pub const PERSONA_MIN_EVIDENCE: i64 = 3;
pub const PERSONA_MIN_IMPORTANCE: i64 = 9;
/// Evidence lines kept per fact.
pub const EVIDENCE_KEPT: usize = 5;
/// Known facts shown to the extraction model.
const KNOWN_IN_PROMPT: usize = 30;
/// Related known facts per candidate for the reconciliation.
const NEIGHBOURS: usize = 5;
const MAX_FACT_CHARS: usize = 500;
const LINE_CHARS: usize = 1000;

/// Task markers (first line of each memory prompt).
pub const MARK_EXTRACT: &str = "TASK: extract-facts";
pub const MARK_RECONCILE: &str = "TASK: reconcile-facts";
pub const MARK_REFLECT: &str = "TASK: reflect";

/// What one extraction did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq, ToSchema)]
#[schema(as = ExtractionOutcome)]
pub struct Outcome {
    pub lines_read: usize,
    pub added: usize,
    pub reinforced: usize,
    pub merged: usize,
    pub replaced: usize,
    pub reflections: usize,
    pub persona: usize,
    /// Why nothing ran (`disabled`, `no_model`, `fenced`, `no_character`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl Outcome {
    fn skipped(why: &str) -> Outcome {
        Outcome {
            skipped: Some(why.into()),
            ..Default::default()
        }
    }
}

/// Why an extraction failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    Cancelled,
    Model(String),
    Storage(String),
}

impl From<Failure> for MemoryError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Cancelled => MemoryError::Busy("the extraction was cancelled".into()),
            Failure::Model(e) => MemoryError::ModelFailed(e),
            Failure::Storage(e) => MemoryError::Storage(e),
        }
    }
}

/// Are both memory toggles on? `Err(reason)` otherwise.
pub async fn allowed(state: &AppState) -> Result<(), String> {
    for t in [Toggle::Review, Toggle::Powerful] {
        match toggles::read(state, &MemoryRuntime::of(state), t).await {
            Ok(true) => {}
            Ok(false) => return Err(format!("{} is off", t.key())),
            Err(e) => return Err(format!("{} cannot be read: {}", t.key(), e.error)),
        }
    }
    Ok(())
}

/// Start an extraction of `name` in the background.
pub fn start(
    state: &AppState,
    name: &str,
) -> Result<oneshot::Receiver<Result<Outcome, Failure>>, Refused> {
    let (_info, rx) = crate::spawn_task(
        state,
        name,
        TaskKind::Extraction,
        |st, n, cancel| async move {
            let r = run(&st, &n, &cancel).await;
            let sched = &MemoryRuntime::of(&st).extract;
            match &r {
                Err(Failure::Model(e)) | Err(Failure::Storage(e)) => {
                    let (failures, wait) = sched.failed(&n, e);
                    tracing::warn!(
                        character = %n,
                        failures,
                        "memory extraction of {n} failed: {e}; the next background attempt waits {}s",
                        wait.as_secs()
                    )
                }
                Ok(o) => {
                    sched.succeeded(&n);
                    if o.skipped.is_none() {
                        tracing::debug!("memory extraction of {n}: {o:?}")
                    }
                }
                _ => {}
            }
            r
        },
    )?;
    Ok(rx)
}

/// Run an extraction now and wait for it (the `extract` route).
pub async fn run_now(state: &AppState, name: &str) -> Result<Outcome, MemoryError> {
    longterm::character(state, name)?;
    allowed(state).await.map_err(MemoryError::Disabled)?;
    let rx = start(state, name).map_err(|r| match r {
        Refused::Busy => MemoryError::ExtractionRunning,
        Refused::Draining => MemoryError::Busy("the character is being renamed or imported".into()),
    })?;
    match rx.await {
        Ok(Ok(o)) => Ok(o),
        Ok(Err(f)) => Err(f.into()),
        Err(_) => Err(MemoryError::Internal("the extraction stopped".into())),
    }
}

fn model_err(e: impl std::fmt::Display) -> Failure {
    Failure::Model(e.to_string())
}

/// Most tokens of one memory answer.
pub const MAX_ANSWER_TOKENS: usize = 1024;

/// The context window of the model `slot` goes to, with the room kept for the
/// answer (docs/models.md): `(window, answer cap)`.
pub async fn budget(state: &AppState, slot: Slot) -> (usize, usize) {
    let window = match state.llm.endpoint(slot).await {
        Some(ep) => state.llm.context_window(slot, &ep).await,
        None => context::DEFAULT_CONTEXT_WINDOW,
    };
    (
        window,
        context::reply_reserve(window).min(MAX_ANSWER_TOKENS),
    )
}

/// One memory call: JSON matching `schema` (named `what`), within the model's
/// context (the user text is cut to fit) and with a capped answer.
async fn call(
    state: &AppState,
    name: &str,
    slot: Slot,
    (system, user): (String, String),
    (what, schema): (&str, Value),
    cancel: &CancellationToken,
) -> Result<String, Failure> {
    // The correction slot may be unset: the summary model plays both roles.
    let slot = if state.llm.endpoint(slot).await.is_some() {
        slot
    } else {
        Slot::Summary
    };
    let (window, answer) = budget(state, slot).await;
    let room = window
        .saturating_sub(answer)
        .saturating_sub(context::message_tokens(&ChatMessage::system(system.as_str())) + 16);
    let user = context::truncate_to(&user, room).to_string();
    let messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
    let opts = CallOptions {
        character: name.to_string(),
        timeout: Duration::from_secs(120),
        temperature: Some(0.2),
        max_tokens: u32::try_from(answer).ok(),
        ..Default::default()
    };
    // Chat first: a local server answers one request at a time.
    tokio::select! {
        _ = cancel.cancelled() => return Err(Failure::Cancelled),
        _ = state.llm.wait_for_quiet_chat(slot, Duration::ZERO) => {}
    }
    tokio::select! {
        _ = cancel.cancelled() => Err(Failure::Cancelled),
        r = state.llm.complete_json(slot, &messages, &opts, what, &schema) => match r {
            Ok(c) if c.content.trim().is_empty() => Err(model_err(LlmError::EmptyReply)),
            Ok(c) => Ok(c.content),
            Err(e) => Err(model_err(e)),
        },
    }
}

fn facts_schema() -> Value {
    serde_json::from_str(include_str!("schemas/facts.json")).unwrap_or_default()
}

fn decisions_schema() -> Value {
    serde_json::from_str(include_str!("schemas/decisions.json")).unwrap_or_default()
}

fn reflections_schema() -> Value {
    serde_json::from_str(include_str!("schemas/reflections.json")).unwrap_or_default()
}

async fn run(state: &AppState, name: &str, cancel: &CancellationToken) -> Result<Outcome, Failure> {
    if !state.characters.exists(name) {
        return Ok(Outcome::skipped("no_character"));
    }
    if !companiond_core::fence::is_normal(state.data_dir()) {
        return Ok(Outcome::skipped("fenced"));
    }
    if allowed(state).await.is_err() {
        return Ok(Outcome::skipped("disabled"));
    }
    if state.llm.endpoint(Slot::Summary).await.is_none() {
        return Ok(Outcome::skipped("no_model"));
    }
    longterm::index_lines(state, name)
        .await
        .map_err(Failure::Storage)?;
    let mut out = Outcome::default();
    for _ in 0..MAX_BATCHES {
        if cancel.is_cancelled() {
            return Err(Failure::Cancelled);
        }
        let lines = with_index(state, name, |conn, _| {
            let c = index::cursor(conn)?;
            index::lines_after(conn, c, BATCH)
        })
        .await
        .map_err(Failure::Storage)?;
        if lines.is_empty() {
            break;
        }
        // The batch is cut to what fits the model's context; the rest waits.
        let used = batch(state, name, &lines, cancel, &mut out).await?;
        let lines = &lines[..used.clamp(1, lines.len())];
        let Some(last) = lines.last().map(|l| l.id) else {
            break;
        };
        with_index(state, name, move |conn, _| {
            index::meta_set(conn, index::META_CURSOR, &last.to_string())
        })
        .await
        .map_err(Failure::Storage)?;
        out.lines_read += lines.len();
    }
    if let Err(e) = reflect(state, name, cancel, &mut out).await {
        match e {
            Failure::Cancelled => return Err(e),
            Failure::Model(m) | Failure::Storage(m) => {
                tracing::info!("memory reflection of {name} failed: {m}")
            }
        }
    }
    Ok(out)
}

/// A proposed fact.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub text: String,
    pub entity: String,
    pub importance: i64,
    /// Indexes into the batch's lines.
    pub evidence: Vec<usize>,
}

/// The first JSON object (or array) of a model answer (code fences tolerated).
pub fn json_in(reply: &str) -> Option<Value> {
    let candidates = [('{', '}'), ('[', ']')];
    for (open, close) in candidates {
        if let (Some(s), Some(e)) = (reply.find(open), reply.rfind(close)) {
            if s < e {
                if let Some(v) = companiond_core::llm::lenient_json(&reply[s..=e]) {
                    return Some(v);
                }
            }
        }
    }
    None
}

fn list_in<'a>(v: &'a Value, key: &str) -> Option<&'a Vec<Value>> {
    match v {
        Value::Array(a) => Some(a),
        Value::Object(m) => m.get(key).and_then(Value::as_array),
        _ => None,
    }
}

fn clean_text(s: &str) -> Option<String> {
    let t = s.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then(|| t.chars().take(MAX_FACT_CHARS).collect())
}

fn entity_of(v: &Value) -> String {
    match v.get("entity").and_then(Value::as_str) {
        Some(e) if ENTITIES.contains(&e) => e.to_string(),
        Some("user") => "master".into(),
        Some("ai" | "character") => "neko".into(),
        _ => "master".into(),
    }
}

/// Parse the extraction answer against a batch of `n` lines.
pub fn parse_candidates(reply: &str, n: usize) -> Option<Vec<Candidate>> {
    let v = json_in(reply)?;
    let items = list_in(&v, "facts")?;
    let mut out: Vec<Candidate> = Vec::new();
    for it in items {
        let text = match it {
            Value::String(s) => clean_text(s),
            _ => it.get("text").and_then(Value::as_str).and_then(clean_text),
        };
        let Some(text) = text else { continue };
        if out
            .iter()
            .any(|c| stores::normalised(&c.text) == stores::normalised(&text))
        {
            continue;
        }
        let importance = it
            .as_object()
            .and_then(|o| int_of(o, "importance"))
            .unwrap_or(5)
            .clamp(1, 10);
        let evidence = it
            .get("evidence")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .filter(|i| (1..=n as u64).contains(i))
                    .map(|i| i as usize - 1)
                    .collect()
            })
            .unwrap_or_default();
        out.push(Candidate {
            text,
            entity: entity_of(it),
            importance,
            evidence,
        });
    }
    Some(out)
}

/// A reconciliation decision.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Add,
    Duplicate(String),
    Merge(String, Option<String>),
    Contradicts(String),
}

/// Parse the reconciliation answer: decision per candidate index (0-based).
/// `known` maps handles (`F1`..) to fact ids; raw ids are accepted too.
pub fn parse_decisions(reply: &str, known: &[String]) -> Option<HashMap<usize, Decision>> {
    let v = json_in(reply)?;
    let items = list_in(&v, "decisions")?;
    let resolve = |t: Option<&str>| -> Option<String> {
        let t = t?.trim();
        if let Some(n) = t
            .strip_prefix(['F', 'f'])
            .and_then(|n| n.parse::<usize>().ok())
        {
            return known.get(n.checked_sub(1)?).cloned();
        }
        known.iter().find(|k| k.as_str() == t).cloned()
    };
    let mut out = HashMap::new();
    for it in items {
        let Some(c) = it.get("candidate").and_then(Value::as_u64) else {
            continue;
        };
        let Some(i) = (c as usize).checked_sub(1) else {
            continue;
        };
        let target = resolve(it.get("target").and_then(Value::as_str));
        let action = it
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("add")
            .to_ascii_lowercase();
        let d = match (action.as_str(), target) {
            ("duplicate" | "same" | "known", Some(t)) => Decision::Duplicate(t),
            ("merge" | "update", Some(t)) => Decision::Merge(
                t,
                it.get("text").and_then(Value::as_str).and_then(clean_text),
            ),
            ("contradicts" | "contradiction" | "replace" | "supersede", Some(t)) => {
                Decision::Contradicts(t)
            }
            _ => Decision::Add,
        };
        out.insert(i, d);
    }
    Some(out)
}

fn speaker_label(speaker: &str, name: &str) -> String {
    match speaker {
        "human" => "user".into(),
        _ => name.to_string(),
    }
}

fn evidence_json(l: &Line) -> Value {
    json!({
        "line_id": l.id,
        "speaker": l.speaker,
        "text": l.text.chars().take(300).collect::<String>(),
        "at": timefmt::iso(l.ts),
    })
}

/// Facts the index finds related to `texts` (best first), then the newest.
async fn related_facts(
    state: &AppState,
    name: &str,
    texts: Vec<String>,
    per_text: usize,
    cap: usize,
) -> Result<Vec<String>, Failure> {
    with_index(state, name, move |conn, _| {
        let mut ids: Vec<String> = Vec::new();
        for t in &texts {
            let q = Query {
                text: t.clone(),
                limit: per_text,
                ..Default::default()
            };
            for h in index::search_docs(conn, &q, &["fact"])? {
                if !ids.contains(&h.id) {
                    ids.push(h.id);
                }
            }
        }
        let recent = Query {
            limit: cap,
            ..Default::default()
        };
        for h in index::search_docs(conn, &recent, &["fact"])? {
            if ids.len() >= cap {
                break;
            }
            if !ids.contains(&h.id) {
                ids.push(h.id);
            }
        }
        ids.truncate(cap);
        Ok(ids)
    })
    .await
    .map_err(Failure::Storage)
}

async fn batch(
    state: &AppState,
    name: &str,
    lines: &[Line],
    cancel: &CancellationToken,
    out: &mut Outcome,
) -> Result<usize, Failure> {
    let stores = longterm::load(state, name)
        .await
        .map_err(|e| Failure::Storage(e.to_string()))?;
    // 1. Candidates from the summary model.
    let known_ids = related_facts(
        state,
        name,
        lines.iter().map(|l| l.text.clone()).collect(),
        2,
        KNOWN_IN_PROMPT,
    )
    .await?;
    let known: Vec<String> = known_ids
        .iter()
        .filter_map(|id| stores.facts.find(id))
        .filter_map(|f| str_of(f, "text").map(|t| format!("- {t}")))
        .collect();
    let mut numbered: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let text: String = l.text.chars().take(LINE_CHARS).collect();
            format!("[{}] {}: {}", i + 1, speaker_label(&l.speaker, name), text)
        })
        .collect();
    let system = format!(
        "{MARK_EXTRACT}\nYou keep the long-term memory of {name}, a companion character, about the user \
         and their relationship. Read the numbered new chat lines and list the durable facts worth \
         remembering for weeks: who the user is, what they like and dislike, their plans, the people \
         and pets in their life, important events, and how the relationship with {name} is going. \
         Skip small talk, questions, jokes and anything only true for a moment. Write each fact as \
         one short self-contained sentence in the language of the chat, about \"the user\" or \
         \"{name}\". entity is \"master\" (about the user), \"neko\" (about {name}) or \
         \"relationship\". importance is 1 to 10 (10: names, identity, things the user asked to be \
         remembered). evidence lists the numbers of the lines the fact comes from.\n\
         Answer with only JSON: {{\"facts\": [{{\"text\": \"...\", \"entity\": \"master\", \
         \"importance\": 5, \"evidence\": [1]}}]}}, or {{\"facts\": []}} when there is nothing to remember."
    );
    // As many lines as fit the summary model's context (at least one).
    let (window, answer) = budget(state, Slot::Summary).await;
    let mut room = window
        .saturating_sub(answer)
        .saturating_sub(context::estimate_tokens(&system) + 64)
        .saturating_sub(known.iter().map(|k| context::estimate_tokens(k) + 1).sum());
    let mut used = 0;
    for l in &numbered {
        let t = context::estimate_tokens(l) + 1;
        if used > 0 && t > room {
            break;
        }
        room = room.saturating_sub(t);
        used += 1;
    }
    numbered.truncate(used);
    let lines = &lines[..used];
    let user = format!(
        "Already known (do not repeat):\n{}\n\nNew lines:\n{}",
        if known.is_empty() {
            "(nothing yet)".to_string()
        } else {
            known.join("\n")
        },
        numbered.join("\n")
    );
    let reply = call(
        state,
        name,
        Slot::Summary,
        (system, user),
        ("facts", facts_schema()),
        cancel,
    )
    .await?;
    let candidates = parse_candidates(&reply, lines.len())
        .ok_or_else(|| Failure::Model("the extraction answer is not the expected JSON".into()))?;
    if candidates.is_empty() {
        return Ok(used);
    }
    // 2. Reconciliation against related known facts (correction slot).
    let neighbour_ids = related_facts(
        state,
        name,
        candidates.iter().map(|c| c.text.clone()).collect(),
        NEIGHBOURS,
        NEIGHBOURS * candidates.len(),
    )
    .await?;
    let neighbours: Vec<(String, String)> = neighbour_ids
        .iter()
        .filter_map(|id| stores.facts.find(id))
        .filter_map(|f| Some((str_of(f, "id")?.to_string(), str_of(f, "text")?.to_string())))
        .collect();
    let mut decisions: HashMap<usize, Decision> = HashMap::new();
    if !neighbours.is_empty() {
        let known_list: Vec<String> = neighbours
            .iter()
            .enumerate()
            .map(|(i, (_, t))| format!("F{}: {t}", i + 1))
            .collect();
        let cand_list: Vec<String> = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}: {}", i + 1, c.text))
            .collect();
        let system = format!(
            "{MARK_RECONCILE}\nYou keep {name}'s memory of the user consistent. For each numbered \
             candidate fact decide against the known facts (F1, F2, ...): \"add\" (new information), \
             \"duplicate\" (already known; target = that fact), \"merge\" (same subject and the \
             candidate adds detail; target = that fact, text = the merged sentence) or \"contradicts\" \
             (the candidate says the known fact is no longer true; target = that fact).\n\
             Answer with only JSON: {{\"decisions\": [{{\"candidate\": 1, \"action\": \"add\", \
             \"target\": null, \"text\": null}}]}}"
        );
        let user = format!(
            "Known facts:\n{}\n\nCandidates:\n{}",
            known_list.join("\n"),
            cand_list.join("\n")
        );
        let reply = call(
            state,
            name,
            Slot::Correction,
            (system, user),
            ("decisions", decisions_schema()),
            cancel,
        )
        .await?;
        let ids: Vec<String> = neighbours.iter().map(|(id, _)| id.clone()).collect();
        // An unusable answer must not stall the memory: the candidates are
        // added (exact duplicates are still caught below).
        decisions = parse_decisions(&reply, &ids).unwrap_or_else(|| {
            tracing::info!(
                "the memory reconciliation answer for {name} is unusable; adding the facts"
            );
            HashMap::new()
        });
    }
    if cancel.is_cancelled() {
        return Err(Failure::Cancelled);
    }
    // 3. Commit.
    let lines = lines.to_vec();
    let counts = longterm::commit(state, name, "extract", move |s| {
        Ok(apply(
            s,
            &candidates,
            &decisions,
            &lines,
            companiond_core::now_millis(),
        ))
    })
    .await
    .map_err(|e| Failure::Storage(e.to_string()))?;
    out.added += counts.added;
    out.reinforced += counts.reinforced;
    out.merged += counts.merged;
    out.replaced += counts.replaced;
    out.persona += counts.persona;
    Ok(used)
}

fn add_evidence(f: &mut Obj, ev: &[Value], now: i64) {
    let list = f.entry("evidence").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(l) = list.as_array_mut() {
        l.extend(ev.iter().cloned());
        let excess = l.len().saturating_sub(EVIDENCE_KEPT);
        l.drain(..excess);
    }
    let n = int_of(f, "evidence_count").unwrap_or(1).max(1);
    f.insert("evidence_count".into(), json!(n + 1));
    f.insert("updated_at".into(), json!(timefmt::iso(now)));
}

/// Apply candidates and decisions to the stores; the persona follows.
pub fn apply(
    s: &mut Stores,
    candidates: &[Candidate],
    decisions: &HashMap<usize, Decision>,
    lines: &[Line],
    now: i64,
) -> Outcome {
    let mut out = Outcome::default();
    for (i, c) in candidates.iter().enumerate() {
        let ev: Vec<Value> = c
            .evidence
            .iter()
            .filter_map(|&k| lines.get(k))
            .map(evidence_json)
            .collect();
        // An exact duplicate needs no model to tell.
        let same = s
            .active_facts()
            .find(|f| {
                str_of(f, "text").map(stores::normalised) == Some(stores::normalised(&c.text))
            })
            .and_then(|f| str_of(f, "id"))
            .map(str::to_string);
        let decision = match same {
            Some(id) => Decision::Duplicate(id),
            None => decisions.get(&i).cloned().unwrap_or(Decision::Add),
        };
        let target = |s: &mut Stores, id: &str| s.facts.find(id).is_some();
        match decision {
            Decision::Duplicate(id) if target(s, &id) => {
                if let Some(f) = s.facts.find_mut(&id) {
                    add_evidence(f, &ev, now);
                    if int_of(f, "importance").unwrap_or(5) < c.importance {
                        f.insert("importance".into(), json!(c.importance));
                    }
                }
                s.facts.dirty = true;
                out.reinforced += 1;
            }
            Decision::Merge(id, text) if target(s, &id) => {
                let text = text.unwrap_or_else(|| c.text.clone());
                if let Some(f) = s.facts.find_mut(&id) {
                    f.insert("text".into(), json!(text));
                    f.insert("hash".into(), json!(stores::content_hash(&text)));
                    f.insert("embedding".into(), Value::Null);
                    add_evidence(f, &ev, now);
                    if int_of(f, "importance").unwrap_or(5) < c.importance {
                        f.insert("importance".into(), json!(c.importance));
                    }
                }
                s.facts.dirty = true;
                out.merged += 1;
            }
            Decision::Contradicts(id) if target(s, &id) => {
                let mut new = stores::new_fact(&c.text, &c.entity, c.importance, now);
                let new_id = str_of(&new, "id").unwrap_or_default().to_string();
                new.insert("evidence_count".into(), json!(1));
                new.insert("evidence".into(), Value::Array(ev));
                new.insert("supersedes".into(), json!(id));
                for old in s.facts.remove(&id) {
                    s.facts_archive.push(stores::archived(
                        old,
                        "contradiction",
                        Some(&new_id),
                        now,
                    ));
                }
                s.persona_remove(&id);
                s.facts.push(new);
                out.replaced += 1;
            }
            _ => {
                let mut new = stores::new_fact(&c.text, &c.entity, c.importance, now);
                new.insert("evidence_count".into(), json!(1));
                new.insert("evidence".into(), Value::Array(ev));
                s.facts.push(new);
                out.added += 1;
            }
        }
    }
    out.persona = promote_persona(s, now);
    out
}

/// Keep the persona in step with the facts: frequent or very important facts
/// become entries; an entry follows its fact's text. New entries' count.
pub fn promote_persona(s: &mut Stores, now: i64) -> usize {
    let facts: Vec<(String, String, String, i64, i64)> = s
        .active_facts()
        .map(|f| {
            (
                str_of(f, "id").unwrap_or_default().to_string(),
                str_of(f, "text").unwrap_or_default().to_string(),
                str_of(f, "entity").unwrap_or("master").to_string(),
                int_of(f, "evidence_count").unwrap_or(1),
                int_of(f, "importance").unwrap_or(5),
            )
        })
        .collect();
    let by_id: HashMap<&str, &str> = facts.iter().map(|f| (f.0.as_str(), f.1.as_str())).collect();
    // Entries follow their fact's text.
    let mut changed = false;
    for section in s.persona.values_mut() {
        let Some(list) = section.get_mut("facts").and_then(Value::as_array_mut) else {
            continue;
        };
        for e in list.iter_mut().filter_map(Value::as_object_mut) {
            if str_of(e, "source") != Some("fact") {
                continue;
            }
            let Some(text) = str_of(e, "source_id").and_then(|id| by_id.get(id)) else {
                continue;
            };
            if str_of(e, "text") != Some(*text) {
                e.insert("text".into(), json!(text));
                changed = true;
            }
        }
    }
    if changed {
        s.persona_dirty = true;
    }
    let present: HashSet<String> = s
        .persona_entries()
        .iter()
        .filter_map(|(_, e)| str_of(e, "source_id").map(str::to_string))
        .collect();
    let mut added = 0;
    for (id, text, entity, evidence, importance) in &facts {
        if present.contains(id) {
            continue;
        }
        if *evidence >= PERSONA_MIN_EVIDENCE || *importance >= PERSONA_MIN_IMPORTANCE {
            s.persona_push(entity, stores::new_persona_entry(text, id, now));
            added += 1;
        }
    }
    added
}

async fn reflect(
    state: &AppState,
    name: &str,
    cancel: &CancellationToken,
    out: &mut Outcome,
) -> Result<(), Failure> {
    let s = longterm::load(state, name)
        .await
        .map_err(|e| Failure::Storage(e.to_string()))?;
    let open: Vec<(String, String)> = s
        .active_facts()
        .filter(|f| f.get("absorbed").and_then(Value::as_bool) != Some(true))
        .filter_map(|f| Some((str_of(f, "id")?.to_string(), str_of(f, "text")?.to_string())))
        .take(REFLECTION_WINDOW)
        .collect();
    if open.len() < MIN_FACTS_FOR_REFLECTION {
        return Ok(());
    }
    let list: Vec<String> = open
        .iter()
        .enumerate()
        .map(|(i, (_, t))| format!("{}: {t}", i + 1))
        .collect();
    let system = format!(
        "{MARK_REFLECT}\nThese are facts {name} remembers about the user that were not summarised yet. \
         Find the patterns that at least two of them share (habits, values, what the user cares \
         about, how the relationship develops) and write each as one short sentence. entity is \
         \"master\", \"neko\" or \"relationship\"; facts lists the numbers of the facts it \
         summarises.\nAnswer with only JSON: {{\"reflections\": [{{\"text\": \"...\", \"entity\": \
         \"master\", \"facts\": [1, 2]}}]}}, or {{\"reflections\": []}}."
    );
    let reply = call(
        state,
        name,
        Slot::Summary,
        (system, list.join("\n")),
        ("reflections", reflections_schema()),
        cancel,
    )
    .await?;
    let v = json_in(&reply)
        .ok_or_else(|| Failure::Model("the reflection answer is not the expected JSON".into()))?;
    let items = list_in(&v, "reflections")
        .ok_or_else(|| Failure::Model("the reflection answer has no reflections".into()))?;
    let mut proposals: Vec<(String, String, Vec<String>)> = Vec::new();
    for it in items {
        let Some(text) = it.get("text").and_then(Value::as_str).and_then(clean_text) else {
            continue;
        };
        let ids: Vec<String> = it
            .get("facts")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .filter_map(|n| open.get((n as usize).checked_sub(1)?))
                    .map(|(id, _)| id.clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let mut uniq: Vec<String> = Vec::new();
        for id in ids {
            if !uniq.contains(&id) {
                uniq.push(id);
            }
        }
        if uniq.len() >= 2 {
            proposals.push((text, entity_of(it), uniq));
        }
    }
    if proposals.is_empty() || cancel.is_cancelled() {
        return Ok(());
    }
    let n = longterm::commit(state, name, "reflect", move |s| {
        let now = companiond_core::now_millis();
        let mut n = 0;
        for (text, entity, ids) in proposals {
            let dup = s.reflections.objects().any(|r| {
                str_of(r, "text").map(stores::normalised) == Some(stores::normalised(&text))
            });
            if dup {
                continue;
            }
            for id in &ids {
                if let Some(f) = s.facts.find_mut(id) {
                    f.insert("absorbed".into(), json!(true));
                }
            }
            s.facts.dirty = true;
            s.reflections
                .push(stores::new_reflection(&text, &entity, ids, now));
            n += 1;
        }
        Ok(n)
    })
    .await
    .map_err(|e| Failure::Storage(e.to_string()))?;
    out.reflections += n;
    Ok(())
}

// ------------------------------------------------------------------ scheduling

/// When extractions start (per server).
pub struct Scheduler {
    quiet_ms: AtomicU64,
    every: AtomicUsize,
    generations: Mutex<HashMap<String, u64>>,
    /// Consecutive failures per character, when the background may try
    /// again, and the last error.
    failures: Mutex<HashMap<String, Failing>>,
    /// When each character's last extraction succeeded (ms since the epoch).
    successes: Mutex<HashMap<String, i64>>,
}

/// A character whose extractions fail.
struct Failing {
    count: u32,
    retry_at: std::time::Instant,
    last_error: String,
    at_ms: i64,
}

/// How the background extraction of a character fares
/// (`GET /api/memory/extraction`; since this server started).
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct Health {
    /// Consecutive failed extractions (0 after a success).
    pub failures: u32,
    /// The background waits this long before it tries again (ms; 0: it does not wait).
    pub retry_in_ms: u64,
    /// Why the last extraction failed (`null` when the last one succeeded).
    pub last_error: Option<String>,
    /// When it failed (ms since the epoch).
    pub last_error_at: Option<i64>,
    /// When the last extraction succeeded (ms since the epoch).
    pub last_success_at: Option<i64>,
}

/// The wait of the background extraction after `n` consecutive failures:
/// none after the first, then one minute doubling up to an hour.
pub fn backoff(n: u32) -> Duration {
    if n < 2 {
        return Duration::ZERO;
    }
    Duration::from_secs(60u64.saturating_mul(1 << (n - 2).min(6)).min(3600))
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler {
            quiet_ms: AtomicU64::new(QUIET.as_millis() as u64),
            every: AtomicUsize::new(EVERY),
            generations: Mutex::default(),
            failures: Mutex::default(),
            successes: Mutex::default(),
        }
    }
}

impl Scheduler {
    pub fn quiet(&self) -> Duration {
        Duration::from_millis(self.quiet_ms.load(Ordering::Relaxed))
    }
    pub fn every(&self) -> usize {
        self.every.load(Ordering::Relaxed)
    }
    /// Change the quiet period and the line threshold (tests, tuning).
    pub fn configure(&self, quiet: Duration, every: usize) {
        self.quiet_ms
            .store(quiet.as_millis() as u64, Ordering::Relaxed);
        self.every.store(every.max(1), Ordering::Relaxed);
    }
    /// Count a failed extraction of `name`: (consecutive failures, wait).
    fn failed(&self, name: &str, error: &str) -> (u32, Duration) {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let e = f.entry(name.to_string()).or_insert(Failing {
            count: 0,
            retry_at: std::time::Instant::now(),
            last_error: String::new(),
            at_ms: 0,
        });
        e.count = e.count.saturating_add(1);
        let wait = backoff(e.count);
        e.retry_at = std::time::Instant::now() + wait;
        e.last_error = error.chars().take(500).collect();
        e.at_ms = companiond_core::now_millis();
        (e.count, wait)
    }
    fn succeeded(&self, name: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.successes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), companiond_core::now_millis());
    }
    /// How the extractions of `name` fared since the server started.
    pub fn health(&self, name: &str) -> Health {
        let mut h = Health {
            last_success_at: self
                .successes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(name)
                .copied(),
            ..Health::default()
        };
        if let Some(f) = self
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            h.failures = f.count;
            h.retry_in_ms = f
                .retry_at
                .saturating_duration_since(std::time::Instant::now())
                .as_millis() as u64;
            h.last_error = Some(f.last_error.clone());
            h.last_error_at = Some(f.at_ms);
        }
        h
    }
    /// Consecutive failed extractions of `name` (0 after a success).
    pub fn failures(&self, name: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .map_or(0, |e| e.count)
    }
    /// Is the background extraction of `name` waiting after failures?
    pub fn backing_off(&self, name: &str) -> bool {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .is_some_and(|e| e.retry_at > std::time::Instant::now())
    }
    fn bump(&self, name: &str) -> u64 {
        let mut g = self.generations.lock().unwrap_or_else(|e| e.into_inner());
        let e = g.entry(name.to_string()).or_insert(0);
        *e += 1;
        *e
    }
    fn current(&self, name: &str) -> u64 {
        self.generations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
            .unwrap_or(0)
    }
}

/// After a turn (or at start-up): index the new lines, then start an
/// extraction now (enough unread lines) or once the conversation stays quiet.
pub fn note_activity(state: &AppState, name: &str) {
    spawn_pending(state, name, None);
}

/// At start-up, for an index known to be in step with its files: `pending`
/// lines await extraction; start it as [`note_activity`] does, without
/// reading the history again.
pub fn note_pending(state: &AppState, name: &str, pending: usize) {
    spawn_pending(state, name, Some(pending));
}

/// [`note_activity`] (`pending` unknown: index the new lines first) and
/// [`note_pending`].
fn spawn_pending(state: &AppState, name: &str, pending: Option<usize>) {
    crate::spawn_for(state, name, move |st, name| async move {
        if !companiond_core::fence::is_normal(st.data_dir()) {
            return;
        }
        let pending = match pending {
            Some(p) => p,
            None => match longterm::index_lines(&st, &name).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!("cannot index the history of {name}: {e}");
                    return;
                }
            },
        };
        let rt = MemoryRuntime::of(&st);
        if pending == 0 || allowed(&st).await.is_err() || rt.extract.backing_off(&name) {
            return;
        }
        let generation = rt.extract.bump(&name);
        if pending < rt.extract.every() {
            tokio::time::sleep(rt.extract.quiet()).await;
            if rt.extract.current(&name) != generation {
                return; // the conversation went on; a later turn re-arms
            }
        }
        // Chat first: start once the chat has been quiet for a moment.
        st.llm
            .wait_for_quiet_chat(Slot::Summary, companiond_core::llm::CHAT_QUIET)
            .await;
        let _ = start(&st, &name);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_schemas_are_object_schemas() {
        for (schema, key) in [
            (facts_schema(), "facts"),
            (decisions_schema(), "decisions"),
            (reflections_schema(), "reflections"),
        ] {
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["required"][0], key);
            assert_eq!(schema["properties"][key]["type"], "array");
        }
    }

    #[test]
    fn answers_are_parsed_leniently() {
        let c = parse_candidates(
            "```json\n{\"facts\": [{\"text\": \" The user  lives in Berlin \", \"entity\": \"user\", \"importance\": 42, \"evidence\": [1, 9, 0]}, \"Likes tea\", {\"text\": \"\"}, {\"text\": \"the user lives in berlin.\"}]}\n```",
            2,
        )
        .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].text, "The user lives in Berlin");
        assert_eq!(c[0].entity, "master");
        assert_eq!(c[0].importance, 10);
        assert_eq!(c[0].evidence, vec![0]);
        assert_eq!(c[1].importance, 5);
        assert!(parse_candidates("nothing", 2).is_none());
        let known = vec!["fact_a".to_string(), "fact_b".to_string()];
        let d = parse_decisions(
            r#"{"decisions": [{"candidate": 1, "action": "contradicts", "target": "F2"},
               {"candidate": 2, "action": "merge", "target": "fact_a", "text": "x"},
               {"candidate": 3, "action": "duplicate", "target": "F9"}, {"candidate": 0}]}"#,
            &known,
        )
        .unwrap();
        assert_eq!(d[&0], Decision::Contradicts("fact_b".into()));
        assert_eq!(d[&1], Decision::Merge("fact_a".into(), Some("x".into())));
        assert_eq!(d[&2], Decision::Add);
    }

    #[test]
    fn contradiction_archives_and_persona_follows() {
        let mut s = Stores::default();
        let mut old = stores::new_fact("The user lives in Berlin", "master", 9, 1000);
        old.insert("evidence_count".into(), json!(1));
        let old_id = str_of(&old, "id").unwrap().to_string();
        s.facts.push(old);
        assert_eq!(promote_persona(&mut s, 1000), 1);
        let cand = Candidate {
            text: "The user lives in Paris".into(),
            entity: "master".into(),
            importance: 6,
            evidence: vec![0],
        };
        let line = Line {
            id: 7,
            speaker: "human".into(),
            text: "I moved to Paris".into(),
            ts: 2000,
        };
        let mut d = HashMap::new();
        d.insert(0, Decision::Contradicts(old_id.clone()));
        let o = apply(
            &mut s,
            std::slice::from_ref(&cand),
            &d,
            std::slice::from_ref(&line),
            3000,
        );
        assert_eq!(o.replaced, 1);
        assert_eq!(s.facts.items.len(), 1);
        assert_eq!(s.facts_archive.items.len(), 1);
        let arch = s.facts_archive.find(&old_id).unwrap();
        assert_eq!(arch["arbitration_reason"], "contradiction");
        assert!(s.persona_entries().is_empty());
        // The same candidate again is a duplicate: evidence grows, persona follows.
        let o = apply(
            &mut s,
            std::slice::from_ref(&cand),
            &HashMap::new(),
            std::slice::from_ref(&line),
            4000,
        );
        assert_eq!(o.reinforced, 1);
        let o = apply(&mut s, &[cand], &HashMap::new(), &[line], 5000);
        assert_eq!(o.persona, 1);
        let f = s.facts.objects().next().unwrap();
        assert_eq!(f["evidence_count"], 3);
        assert_eq!(f["evidence"].as_array().unwrap().len(), 3);
    }
}

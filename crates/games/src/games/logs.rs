//! Game diagnostic logs: in memory only, bounded (retained sessions and entries
//! per session, oldest dropped first), read with a `since` sequence cursor, and
//! rendered as an escaped HTML page.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use companiond_core::{now_rfc3339, now_secs};
use serde::Serialize;
use serde_json::{json, Value};

use crate::text::{html_escape, query_escape, truncate_chars};

/// Longest stored message (longer ones are cut with a `...<truncated +N chars>` marker).
pub const MAX_MESSAGE_CHARS: usize = 1200;
/// Largest stored `details` object, serialized.
pub const MAX_DETAILS_BYTES: usize = 16 * 1024;
/// Default and largest `limit` of a read.
pub const DEFAULT_LIMIT: usize = 300;
pub const MAX_LIMIT: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Active,
    Ended,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Ended => "ended",
        }
    }
}

#[derive(Debug)]
struct LogSession {
    game_type: String,
    session_id: String,
    persona_name: String,
    status: Status,
    created_at: f64,
    created_time: String,
    updated_at: f64,
    updated_time: String,
    /// Monotonic update counter (orders sessions even within one clock tick).
    touched: u64,
    ended_at: Option<f64>,
    seq: u64,
    entries: VecDeque<Value>,
}

impl LogSession {
    fn summary(&self) -> Value {
        json!({
            "key": format!("{}:{}", self.game_type, self.session_id),
            "game_type": self.game_type,
            "session_id": self.session_id,
            "persona_name": self.persona_name,
            "status": self.status.as_str(),
            "created_at": self.created_at,
            "created_time": self.created_time,
            "updated_at": self.updated_at,
            "updated_time": self.updated_time,
            "ended_at": self.ended_at,
            "entry_count": self.entries.len(),
            "latest_seq": self.seq,
        })
    }
}

/// `GET /api/game/logs`: the session list, a missing session, or a session's entries.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum LogRead {
    /// No `session_id` asked: every log's summary, newest first.
    Sessions {
        ok: bool,
        /// Summaries: `key`, `game_type`, `session_id`, `persona_name`, `status`,
        /// times, `entry_count`, `latest_seq`.
        #[schema(value_type = Vec<Object>)]
        sessions: Vec<Value>,
        /// `{retained_session_limit, entry_limit}`.
        #[schema(value_type = Object)]
        retention: Value,
    },
    /// No log of that session.
    Missing {
        ok: bool,
        missing: bool,
        #[schema(value_type = Vec<Object>)]
        entries: Vec<Value>,
        session_id: String,
        game_type: Option<String>,
    },
    /// The session's summary with its `entries` after `since`.
    Log {
        ok: bool,
        #[schema(value_type = Object)]
        log: Value,
        since: Option<u64>,
        limit: usize,
        /// The cursor of the next read (the last entry's `seq`).
        #[schema(value_type = u64)]
        next_since: Value,
        has_more: bool,
    },
}

/// One entry to append.
#[derive(Debug, Clone)]
pub struct NewEntry {
    pub level: String,
    pub category: String,
    pub event: String,
    pub source: String,
    pub message: String,
    pub sensitive_possible: bool,
    pub details: Value,
}

impl NewEntry {
    /// A backend event (route start/end, enable).
    pub fn backend(category: &str, event: &str, message: &str, details: Value) -> Self {
        NewEntry {
            level: "info".into(),
            category: category.into(),
            event: event.into(),
            source: "backend".into(),
            message: message.into(),
            sensitive_possible: false,
            details,
        }
    }
}

fn clip_message(m: &str) -> String {
    let n = m.chars().count();
    if n <= MAX_MESSAGE_CHARS {
        return m.to_string();
    }
    format!(
        "{}...<truncated +{} chars>",
        truncate_chars(m, MAX_MESSAGE_CHARS),
        n - MAX_MESSAGE_CHARS
    )
}

fn clip_details(d: Value) -> Value {
    let text = d.to_string();
    if text.len() <= MAX_DETAILS_BYTES {
        return d;
    }
    json!({"_truncated": true, "original_bytes": text.len(), "preview": truncate_chars(&text, 2000)})
}

/// What a read asked for.
#[derive(Debug, Clone, Default)]
pub struct ReadQuery {
    pub session_id: Option<String>,
    pub game_type: Option<String>,
    pub since: Option<u64>,
    pub limit: usize,
}

/// All logs.
pub struct LogStore {
    session_limit: usize,
    entry_limit: usize,
    inner: Mutex<Inner>,
    clock: AtomicU64,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<String, LogSession>,
}

fn key(game_type: &str, session_id: &str) -> String {
    format!("{game_type}:{session_id}")
}

impl LogStore {
    pub fn new(session_limit: usize, entry_limit: usize) -> Self {
        LogStore {
            session_limit: session_limit.max(1),
            entry_limit: entry_limit.max(1),
            inner: Mutex::default(),
            clock: AtomicU64::new(1),
        }
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The retention figures (reported with the session list).
    pub fn retention(&self) -> Value {
        json!({"retained_session_limit": self.session_limit, "entry_limit": self.entry_limit})
    }

    fn get_or_create<'a>(
        &self,
        inner: &'a mut Inner,
        game_type: &str,
        session_id: &str,
        persona: &str,
    ) -> &'a mut LogSession {
        let k = key(game_type, session_id);
        if !inner.sessions.contains_key(&k) {
            // Make room: drop the least recently updated sessions first.
            while inner.sessions.len() >= self.session_limit {
                let oldest = inner
                    .sessions
                    .iter()
                    .min_by_key(|(_, s)| s.touched)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(o) => {
                        inner.sessions.remove(&o);
                    }
                    None => break,
                }
            }
        }
        let clock = self.tick();
        let s = inner
            .sessions
            .entry(k)
            .or_insert_with(|| new_session(game_type, session_id));
        s.touched = clock;
        if !persona.is_empty() {
            s.persona_name = persona.to_string();
        }
        s
    }

    fn append_to(&self, s: &mut LogSession, e: NewEntry) -> u64 {
        s.seq += 1;
        let now = now_secs();
        let t = now_rfc3339();
        s.entries.push_back(json!({
            "seq": s.seq,
            "ts": now,
            "time": t,
            "level": e.level,
            "category": e.category,
            "event": e.event,
            "source": e.source,
            "message": clip_message(&e.message),
            "sensitive_possible": e.sensitive_possible,
            "details": clip_details(e.details),
        }));
        while s.entries.len() > self.entry_limit {
            s.entries.pop_front();
        }
        s.updated_at = now;
        s.updated_time = t;
        s.touched = self.tick();
        s.seq
    }

    /// Create or re-activate a session log and append `session_log_enabled`.
    pub fn enable(&self, game_type: &str, session_id: &str, persona: &str, reason: &str) -> u64 {
        let mut inner = self.lock();
        let s = self.get_or_create(&mut inner, game_type, session_id, persona);
        s.status = Status::Active;
        s.ended_at = None;
        self.append_to(
            s,
            NewEntry::backend(
                "route",
                "session_log_enabled",
                "session log enabled",
                json!({"reason": reason}),
            ),
        )
    }

    /// Append a client entry: creates the session log when missing; an ended log refuses.
    pub fn ingest(
        &self,
        game_type: &str,
        session_id: &str,
        persona: &str,
        e: NewEntry,
    ) -> Option<u64> {
        let mut inner = self.lock();
        let s = self.get_or_create(&mut inner, game_type, session_id, persona);
        if s.status != Status::Active {
            return None;
        }
        Some(self.append_to(s, e))
    }

    /// Append a backend entry to an existing active log (no log is created).
    pub fn note(&self, game_type: &str, session_id: &str, e: NewEntry) -> Option<u64> {
        let mut inner = self.lock();
        let s = inner.sessions.get_mut(&key(game_type, session_id))?;
        if s.status != Status::Active {
            return None;
        }
        Some(self.append_to(s, e))
    }

    /// Append `session_ended` and mark the log ended.
    pub fn end(&self, game_type: &str, session_id: &str, reason: &str) {
        let mut inner = self.lock();
        if let Some(s) = inner.sessions.get_mut(&key(game_type, session_id)) {
            if s.status == Status::Active {
                self.append_to(
                    s,
                    NewEntry::backend(
                        "route",
                        "session_ended",
                        "route ended",
                        json!({"reason": reason}),
                    ),
                );
                s.status = Status::Ended;
                s.ended_at = Some(now_secs());
            }
        }
    }

    fn find<'a>(
        inner: &'a Inner,
        session_id: &str,
        game_type: Option<&str>,
    ) -> Option<&'a LogSession> {
        match game_type {
            Some(g) => inner.sessions.get(&key(g, session_id)),
            None => inner
                .sessions
                .values()
                .filter(|s| s.session_id == session_id)
                .max_by_key(|s| s.touched),
        }
    }

    /// `GET /api/game/logs`: one session (with the cursor) or the session list.
    pub fn read(&self, q: &ReadQuery) -> LogRead {
        let inner = self.lock();
        let Some(sid) = &q.session_id else {
            return LogRead::Sessions {
                ok: true,
                sessions: Self::summaries(&inner, q.game_type.as_deref()),
                retention: self.retention(),
            };
        };
        let Some(s) = Self::find(&inner, sid, q.game_type.as_deref()) else {
            return LogRead::Missing {
                ok: true,
                missing: true,
                entries: Vec::new(),
                session_id: sid.clone(),
                game_type: q.game_type.clone(),
            };
        };
        let (entries, has_more) = select(s, q.since, q.limit);
        let next_since = entries
            .last()
            .and_then(|e| e.get("seq").cloned())
            .unwrap_or(json!(q.since.unwrap_or(0)));
        let mut log = s.summary();
        log["entries"] = Value::Array(entries);
        LogRead::Log {
            ok: true,
            log,
            since: q.since,
            limit: q.limit,
            next_since,
            has_more,
        }
    }

    fn summaries(inner: &Inner, game_type: Option<&str>) -> Vec<Value> {
        let mut list: Vec<&LogSession> = inner
            .sessions
            .values()
            .filter(|s| game_type.is_none_or(|g| s.game_type == g))
            .collect();
        list.sort_by_key(|s| std::cmp::Reverse(s.touched));
        list.iter().map(|s| s.summary()).collect()
    }

    /// `GET /api/game/logs/view`: an HTML page; every interpolated value is escaped.
    pub fn view(&self, q: &ReadQuery) -> String {
        let inner = self.lock();
        let mut body = String::new();
        let title;
        match &q.session_id {
            Some(sid) => match Self::find(&inner, sid, q.game_type.as_deref()) {
                Some(s) => {
                    title = format!("{}/{}", s.game_type, s.session_id);
                    let (entries, _) = select(s, None, q.limit);
                    body.push_str(&format!(
                        "<p class=\"meta\">persona: {} · status: {} · entries: {} (showing {}) · latest seq: {}</p>\n",
                        html_escape(&s.persona_name),
                        s.status.as_str(),
                        s.entries.len(),
                        entries.len(),
                        s.seq
                    ));
                    body.push_str("<table>\n<tr><th>seq</th><th>time</th><th>level</th><th>category</th><th>event</th><th>source</th><th>message</th><th>details</th></tr>\n");
                    for e in &entries {
                        let f = |k: &str| {
                            html_escape(&match e.get(k) {
                                Some(Value::String(s)) => s.clone(),
                                Some(v) => v.to_string(),
                                None => String::new(),
                            })
                        };
                        let details = e
                            .get("details")
                            .map(|d| serde_json::to_string_pretty(d).unwrap_or_default())
                            .unwrap_or_default();
                        body.push_str(&format!(
                            "<tr class=\"lvl-{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>\n",
                            f("level"), f("seq"), f("time"), f("level"), f("category"), f("event"),
                            f("source"), f("message"), html_escape(&details)
                        ));
                    }
                    body.push_str("</table>\n");
                }
                None => {
                    title = format!("{} (not found)", sid);
                    body.push_str(&format!(
                        "<p>No log for session <code>{}</code>.</p>\n",
                        html_escape(sid)
                    ));
                }
            },
            None => {
                title = "game logs".to_string();
                body.push_str("<p>Pick a session (add <code>?session_id=</code> to the address).</p>\n<table>\n<tr><th>session</th><th>game</th><th>persona</th><th>status</th><th>entries</th><th>updated</th></tr>\n");
                for s in Self::summaries(&inner, q.game_type.as_deref()) {
                    let g = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    let href = format!(
                        "?session_id={}&game_type={}&limit={}",
                        query_escape(&g("session_id")),
                        query_escape(&g("game_type")),
                        q.limit
                    );
                    body.push_str(&format!(
                        "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        html_escape(&href),
                        html_escape(&g("session_id")),
                        html_escape(&g("game_type")),
                        html_escape(&g("persona_name")),
                        html_escape(&g("status")),
                        s.get("entry_count").and_then(Value::as_u64).unwrap_or(0),
                        html_escape(&g("updated_time")),
                    ));
                }
                body.push_str("</table>\n");
            }
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{t}</title>\n<style>\nbody{{background:#111;color:#ddd;font-family:monospace;margin:1em}}\ntable{{border-collapse:collapse;width:100%}}\ntd,th{{border:1px solid #333;padding:2px 6px;vertical-align:top;text-align:left}}\npre{{margin:0;white-space:pre-wrap}}\na{{color:#8cf}}\n.lvl-error td{{color:#f88}}\n.lvl-warn td,.lvl-warning td{{color:#fc8}}\n</style>\n</head>\n<body>\n<h1>{t}</h1>\n{body}</body>\n</html>\n",
            t = html_escape(&title),
            body = body
        )
    }
}

/// Entries after `since` (the first `limit` of them), or without a cursor the last `limit`.
fn select(s: &LogSession, since: Option<u64>, limit: usize) -> (Vec<Value>, bool) {
    match since {
        Some(c) => {
            let after: Vec<&Value> = s
                .entries
                .iter()
                .filter(|e| e.get("seq").and_then(Value::as_u64).unwrap_or(0) > c)
                .collect();
            let more = after.len() > limit;
            (after.into_iter().take(limit).cloned().collect(), more)
        }
        None => {
            let skip = s.entries.len().saturating_sub(limit);
            (s.entries.iter().skip(skip).cloned().collect(), skip > 0)
        }
    }
}

fn new_session(game_type: &str, session_id: &str) -> LogSession {
    let now = now_secs();
    LogSession {
        game_type: game_type.into(),
        session_id: session_id.into(),
        persona_name: String::new(),
        status: Status::Active,
        created_at: now,
        created_time: now_rfc3339(),
        updated_at: now,
        updated_time: now_rfc3339(),
        touched: 0,
        ended_at: None,
        seq: 0,
        entries: VecDeque::new(),
    }
}

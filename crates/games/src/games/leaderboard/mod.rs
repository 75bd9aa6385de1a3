//! The badminton leaderboard: SQLite at `<data>/state/game_scores/badminton_scores.db`,
//! plus the in-memory *score sessions* the server records when a badminton round
//! ends. A submission is accepted only when it matches a recorded, unexpired,
//! unused score session of the same character, session and mode; the row stored
//! holds the server's totals.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use companiond_core::task::{blocking, TaskFailed};
use rusqlite::Connection;
use serde::Serialize;
use serde_json::{Map, Value};

mod store;

pub use store::{import_scores, ScoreRow};

/// Largest integer total.
const MAX_INT: i64 = 999_999;
/// Largest distance in pixels.
const MAX_DISTANCE_PX: f64 = 10_000.0;
/// Remembered score sessions (oldest dropped first).
const MAX_SCORE_SESSIONS: usize = 256;
/// Largest page.
pub const MAX_PAGE: i64 = 100;
pub const MAX_OFFSET: i64 = 100_000;

/// A figure of a round as a page states it, under its spellings (each is
/// read as the first spelling that is not `null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Score,
    Streak,
    Distance,
    LineIn,
    NetTouch,
    ZoneIn,
}

impl Figure {
    /// The spellings of the figure, in the order read.
    pub const fn keys(self) -> &'static [&'static str] {
        match self {
            Figure::Score => &["score", "totalScore", "total_score", "player"],
            Figure::Streak => &[
                "streak",
                "best_streak",
                "bestStreak",
                "final_streak",
                "finalStreak",
            ],
            Figure::Distance => &[
                "max_distance_px",
                "maxDistancePx",
                "max_distance",
                "maxDistance",
                "final_distance",
                "finalDistance",
            ],
            Figure::LineIn => &["line_in_count", "lineInCount"],
            Figure::NetTouch => &["net_touch_count", "netTouchCount"],
            Figure::ZoneIn => &["zone_in_count", "zoneInCount"],
        }
    }
}

/// The totals of one round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Totals {
    pub score: i64,
    pub streak: i64,
    pub max_distance_px: f64,
}

/// `spectator` or `duel`; anything else is `spectator`.
pub fn normalize_mode(raw: Option<&str>) -> String {
    match raw.map(|m| m.trim().to_ascii_lowercase()).as_deref() {
        Some("duel") => "duel".into(),
        _ => "spectator".into(),
    }
}

/// A number (or numeric string) as a finite float.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|f| f.is_finite())
}

fn first<'a>(m: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| m.get(*k).filter(|v| !v.is_null()))
}

/// A finite float as an integer total in `0..=MAX_INT` (clamped before the cast).
fn clamp_int(f: f64) -> i64 {
    if !f.is_finite() {
        return 0;
    }
    // In range by construction, so the cast is exact.
    f.trunc().clamp(0.0, MAX_INT as f64) as i64
}

/// Read totals from an object (top level, then its `finalScore` object; a
/// `finalScore` that is a number is the score total itself).
/// `Ok(None)` when no score is present; `Err` when a present total is not a number.
pub fn totals_of(m: &Map<String, Value>) -> Result<Option<Totals>, String> {
    totals_from(|f| first(m, f.keys()), m.get("finalScore"))
}

/// Read totals: each figure as `top` reads it, else from the `finalScore`
/// object; a `finalScore` that is a number (or text) is the score itself.
/// `Ok(None)` when no score is present; `Err` when a present total is not a number.
pub fn totals_from<'a>(
    top: impl Fn(Figure) -> Option<&'a Value>,
    final_score: Option<&'a Value>,
) -> Result<Option<Totals>, String> {
    let nested = final_score.and_then(Value::as_object);
    let pick = |f: Figure| top(f).or_else(|| nested.and_then(|n| first(n, f.keys())));
    let score = pick(Figure::Score)
        .or_else(|| final_score.filter(|v| matches!(v, Value::Number(_) | Value::String(_))));
    let Some(score) = score else {
        return Ok(None);
    };
    let score = number(score).ok_or("score must be a number")?;
    let streak = match pick(Figure::Streak) {
        Some(v) => number(v).ok_or("streak must be a number")?,
        None => 0.0,
    };
    let dist = match pick(Figure::Distance) {
        Some(v) => number(v).ok_or("max_distance_px must be a number")?,
        None => 0.0,
    };
    Ok(Some(Totals {
        score: clamp_int(score),
        streak: clamp_int(streak),
        max_distance_px: dist.clamp(0.0, MAX_DISTANCE_PX),
    }))
}

/// A count (`LineIn`, `NetTouch`, `ZoneIn`) as `top` reads it, else from the
/// `finalScore` object; clamped to `0..=999999`, 0 when absent or no number.
pub fn count_from<'a>(
    top: impl Fn(Figure) -> Option<&'a Value>,
    final_score: Option<&'a Value>,
    figure: Figure,
) -> i64 {
    let nested = final_score.and_then(Value::as_object);
    top(figure)
        .or_else(|| nested.and_then(|n| first(n, figure.keys())))
        .and_then(number)
        .map(clamp_int)
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
struct ScoreSession {
    mode: String,
    totals: Totals,
    at: Instant,
}

/// A submission: as claimed ([`Leaderboard::validate`]), then validated (the
/// server's totals).
#[derive(Debug, Clone)]
pub struct Submission {
    pub persona_name: String,
    pub session_id: String,
    pub mode: String,
    pub totals: Totals,
    pub line_in_count: i64,
    pub net_touch_count: i64,
    pub zone_in_count: i64,
}

/// What a leaderboard page asks for.
#[derive(Debug, Clone)]
pub struct PageQuery {
    pub persona_name: Option<String>,
    pub session_id: Option<String>,
    pub limit: i64,
    pub offset: i64,
}

/// One row of a page.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BoardRow {
    pub rank: i64,
    pub name: String,
    pub score: i64,
    pub streak: i64,
    /// Metres, one decimal, as text.
    pub max_distance_m: String,
    pub mode: String,
    /// `YYYY-MM-DD`.
    pub date: String,
}

/// A rank and score.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Best {
    pub rank: i64,
    pub score: i64,
}

/// A page of the board.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Page {
    pub top: Vec<BoardRow>,
    pub total_players: i64,
    pub total_scores: i64,
    pub limit: i64,
    pub offset: i64,
    pub has_more: bool,
    /// The best of the asked character (else session), if any.
    pub your_best: Option<Best>,
}

/// A stored submission.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Submitted {
    pub rank: i64,
    pub total_players: i64,
    pub is_personal_best: bool,
    pub score: i64,
    pub mode: String,
}

/// Why the board refused a submission or could not answer.
#[derive(Debug)]
pub enum BoardError {
    /// The submission matches no recorded, unexpired score session (with what
    /// was wrong with the body, when it was the body).
    InvalidSession(Option<String>),
    /// The SQLite file failed (its message).
    Storage(String),
}

/// A failure of the board's file (its message).
struct StoreFailed(String);

impl From<TaskFailed> for StoreFailed {
    fn from(e: TaskFailed) -> StoreFailed {
        StoreFailed(e.0)
    }
}

/// The leaderboard store.
pub struct Leaderboard {
    path: PathBuf,
    conn: Arc<Mutex<Option<Connection>>>,
    sessions: Mutex<HashMap<(String, String), ScoreSession>>,
    ttl: Duration,
    /// Told when a damaged database is set aside.
    notices: Option<companiond_core::notices::Notices>,
}

impl Leaderboard {
    pub fn new(path: PathBuf, ttl: Duration) -> Self {
        Leaderboard {
            path,
            conn: Arc::default(),
            sessions: Mutex::default(),
            ttl,
            notices: None,
        }
    }

    /// Tell the user through `notices` when the database had to be set aside.
    pub fn with_notices(mut self, notices: companiond_core::notices::Notices) -> Self {
        self.notices = Some(notices);
        self
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), ScoreSession>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember the totals of a finished badminton round (from the end body's
    /// `finalScore` or the route's final state). Returns whether totals were found.
    pub fn record(&self, persona: &str, session_id: &str, mode: &str, final_score: &Value) -> bool {
        let Some(m) = final_score.as_object() else {
            return false;
        };
        let Ok(Some(totals)) = totals_of(m) else {
            return false;
        };
        let mut map = self.sessions();
        map.retain(|_, s| s.at.elapsed() < self.ttl);
        while map.len() >= MAX_SCORE_SESSIONS {
            let oldest = map.iter().min_by_key(|(_, s)| s.at).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    map.remove(&k);
                }
                None => break,
            }
        }
        map.insert(
            (persona.to_string(), session_id.to_string()),
            ScoreSession {
                mode: mode.to_string(),
                totals,
                at: Instant::now(),
            },
        );
        true
    }

    /// Validate a claimed submission (read from its body by the route): one
    /// that does not match a recorded, unexpired score session of the same
    /// character, session and mode with the same totals is `invalid_session`.
    /// The validated submission holds the server's totals; the score session
    /// is used up.
    pub fn validate(&self, claimed: Submission) -> Result<Submission, BoardError> {
        let key = (claimed.persona_name.clone(), claimed.session_id.clone());
        let posted = claimed.totals;
        let mut map = self.sessions();
        let recorded = map.get(&key).cloned();
        let ok = recorded.as_ref().is_some_and(|r| {
            r.at.elapsed() < self.ttl
                && r.mode == claimed.mode
                && r.totals.score == posted.score
                && r.totals.streak == posted.streak
                && (r.totals.max_distance_px - posted.max_distance_px).abs() < 0.001
        });
        let Some(recorded) = recorded.filter(|_| ok) else {
            return Err(BoardError::InvalidSession(None));
        };
        // Reserve: one submission per round.
        map.remove(&key);
        Ok(Submission {
            totals: recorded.totals,
            ..claimed
        })
    }

    /// Give a reserved score session back (the insert failed).
    fn release(&self, s: &Submission) {
        self.sessions().insert(
            (s.persona_name.clone(), s.session_id.clone()),
            ScoreSession {
                mode: s.mode.clone(),
                totals: s.totals,
                at: Instant::now(),
            },
        );
    }

    /// Run `f` on the board's connection (opened on first use) off the async threads.
    async fn with_conn<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    ) -> Result<R, String> {
        let conn = self.conn.clone();
        let path = self.path.clone();
        let notices = self.notices.clone();
        blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|e| e.into_inner());
            if guard.is_none() {
                companiond_core::sqlite::set_aside_if_corrupt(
                    &path,
                    "badminton leaderboard",
                    notices.as_ref(),
                );
                *guard = Some(store::open(&path).map_err(|e| StoreFailed(e.to_string()))?);
            }
            match guard.as_mut() {
                Some(c) => f(c).map_err(|e| StoreFailed(e.to_string())),
                None => Err(StoreFailed(
                    "the leaderboard database is not open".to_string(),
                )),
            }
        })
        .await
        .map_err(|StoreFailed(e)| e)
    }

    /// Store a validated submission: its rank and whether it is the character's best.
    pub async fn submit(&self, s: Submission) -> Result<Submitted, BoardError> {
        let sub = s.clone();
        let r = self.with_conn(move |c| store::insert(c, &sub)).await;
        r.map_err(|e| {
            self.release(&s);
            BoardError::Storage(e)
        })
    }

    /// One page of the board.
    pub async fn page(&self, q: PageQuery) -> Result<Page, BoardError> {
        self.with_conn(move |c| store::page(c, &q))
            .await
            .map_err(BoardError::Storage)
    }
}

/// The same shape for games without a leaderboard.
pub fn empty_page(limit: i64, offset: i64) -> Page {
    Page {
        top: Vec::new(),
        total_players: 0,
        total_scores: 0,
        limit,
        offset,
        has_more: false,
        your_best: None,
    }
}

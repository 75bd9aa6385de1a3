//! The seven-day tutorial store `<data>/state/seven_day_tutorial_state.json`:
//! `{storeVersion:1, initialized, revision, state}` with optimistic concurrency on
//! `expectedRevision`. A legacy `<data>/state/tutorial_prompt.json` that
//! shows the tutorial was completed or suppressed is migrated on the first read.

use serde::Serialize;
use serde_json::{json, Map, Value};

use companiond_core::store::atomic_write_json;
use companiond_core::task::blocking;
use companiond_core::AppState;

use crate::error::{SysResult, SystemError};

pub const DOC: &str = "state/seven_day_tutorial_state.json";
pub const LEGACY_DOC: &str = "state/tutorial_prompt.json";

fn today() -> String {
    let d = time::OffsetDateTime::now_utc().date();
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Ok(y), Ok(m), Ok(d)) = (
        s[..4].parse::<i32>(),
        s[5..7].parse::<u8>(),
        s[8..].parse::<u8>(),
    ) else {
        return false;
    };
    time::Month::try_from(m)
        .ok()
        .and_then(|m| time::Date::from_calendar_date(y, m, d).ok())
        .is_some()
}

fn round(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().filter(|r| (1..=7).contains(r)),
        _ => None,
    }
}

fn rounds(v: Option<&Value>) -> Vec<i64> {
    let mut out: Vec<i64> = match v {
        Some(Value::Array(a)) => a.iter().filter_map(|x| round(Some(x))).collect(),
        _ => Vec::new(),
    };
    out.sort_unstable();
    out.dedup();
    out
}

fn text(v: Option<&Value>, max: usize) -> String {
    v.and_then(Value::as_str)
        .map(|s| s.chars().take(max).collect())
        .unwrap_or_default()
}

/// A normalised tutorial state (the `state` the server writes); field names
/// and order as the clients read them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TutorialState {
    /// Always 2.
    pub version: u8,
    /// `YYYY-MM-DD`; today when the client's is no date.
    pub first_seen_date: String,
    /// Rounds 1..=7, sorted, without repeats.
    pub completed_rounds: Vec<i64>,
    /// As `completed_rounds`, without the completed ones.
    pub skipped_rounds: Vec<i64>,
    /// A round 1..=7, else null (so are the three below).
    pub current_round: Option<i64>,
    pub pending_round: Option<i64>,
    pub manual_reset_round: Option<i64>,
    pub last_auto_shown_round: Option<i64>,
    /// `YYYY-MM-DD` or empty.
    pub last_auto_shown_date: String,
    /// At most 128 characters.
    pub last_auto_reservation_id: String,
    pub last_end_state: Option<EndState>,
    /// Always true.
    pub legacy_migration_completed: bool,
    pub updated_at: Option<String>,
    /// The newest 20 resets.
    pub reset_history: Vec<Reset>,
}

/// How the last tutorial round ended.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndState {
    pub day: Option<i64>,
    pub ended: bool,
    /// `complete`, `skip` or `destroy`.
    pub outcome: String,
    pub raw_reason: String,
    pub is_angry_exit: bool,
    pub completed: bool,
    pub skipped: bool,
    pub source: String,
    pub ended_at: i64,
}

/// One reset of the tutorial.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reset {
    pub day: ResetDay,
    pub source: String,
    pub reset_at: String,
}

/// The round a reset cleared, or every round (`"all"`).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ResetDay {
    Round(i64),
    All(&'static str),
}

/// The stored document `{storeVersion, initialized, revision, state}`.
///
/// `storeVersion` and `state` stay open JSON on purpose: a document is answered
/// as stored, so one written by an earlier version reaches the client unchanged;
/// the server only ever writes a [`TutorialState`] there.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[schema(as = TutorialStore)]
pub struct Store {
    /// 1 when the server wrote the document.
    #[serde(rename = "storeVersion")]
    pub store_version: Value,
    pub initialized: bool,
    pub revision: i64,
    /// `null` until the first write; the server writes the normalised state
    /// (`version`, `firstSeenDate`, `completedRounds`, `skippedRounds`,
    /// `currentRound`, ...), a document of an earlier version is answered as stored.
    pub state: Value,
}

impl Store {
    /// A stored document read leniently (missing or mistyped fields take their defaults).
    pub fn from_stored(store: &Value) -> Store {
        Store {
            store_version: store.get("storeVersion").cloned().unwrap_or(json!(1)),
            initialized: store
                .get("initialized")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            revision: store.get("revision").and_then(Value::as_i64).unwrap_or(0),
            state: store.get("state").cloned().unwrap_or(Value::Null),
        }
    }

    /// A document the server writes.
    fn written(revision: i64, state: TutorialState) -> Store {
        Store {
            store_version: json!(1),
            initialized: true,
            revision,
            state: serde_json::to_value(state).unwrap_or(Value::Null),
        }
    }
}

/// The answer of the tutorial routes: `{ok, ...store}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = TutorialDocument)]
pub struct Public {
    pub ok: bool,
    #[serde(flatten)]
    pub store: Store,
}

fn end_state(v: Option<&Value>) -> Option<EndState> {
    let Some(Value::Object(o)) = v else {
        return None;
    };
    let outcome = o
        .get("outcome")
        .and_then(Value::as_str)
        .filter(|x| matches!(*x, "complete" | "skip" | "destroy"))
        .unwrap_or("destroy");
    let b = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    Some(EndState {
        day: round(o.get("day")),
        ended: b("ended"),
        outcome: outcome.to_string(),
        raw_reason: text(o.get("rawReason"), 64),
        is_angry_exit: b("isAngryExit"),
        completed: b("completed"),
        skipped: b("skipped"),
        source: text(o.get("source"), 64),
        ended_at: o
            .get("endedAt")
            .and_then(Value::as_i64)
            .filter(|t| *t >= 0)
            .unwrap_or(0),
    })
}

/// Normalise a client state (unknown fields dropped).
pub fn normalize_state(s: &Map<String, Value>) -> TutorialState {
    let first_seen = s
        .get("firstSeenDate")
        .and_then(Value::as_str)
        .filter(|d| is_date(d))
        .map(str::to_string)
        .unwrap_or_else(today);
    let completed = rounds(s.get("completedRounds"));
    let skipped: Vec<i64> = rounds(s.get("skippedRounds"))
        .into_iter()
        .filter(|r| !completed.contains(r))
        .collect();
    let last_shown_date = s
        .get("lastAutoShownDate")
        .and_then(Value::as_str)
        .filter(|d| is_date(d))
        .unwrap_or("");
    let mut history: Vec<Reset> = match s.get("resetHistory") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|e| {
                let o = e.as_object()?;
                let day = match o.get("day") {
                    Some(Value::String(x)) if x == "all" => ResetDay::All("all"),
                    other => ResetDay::Round(round(other)?),
                };
                Some(Reset {
                    day,
                    source: text(o.get("source"), 64),
                    reset_at: text(o.get("resetAt"), 64),
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    let start = history.len().saturating_sub(20);
    TutorialState {
        version: 2,
        first_seen_date: first_seen,
        completed_rounds: completed,
        skipped_rounds: skipped,
        current_round: round(s.get("currentRound")),
        pending_round: round(s.get("pendingRound")),
        manual_reset_round: round(s.get("manualResetRound")),
        last_auto_shown_round: round(s.get("lastAutoShownRound")),
        last_auto_shown_date: last_shown_date.to_string(),
        last_auto_reservation_id: text(s.get("lastAutoReservationId"), 128),
        last_end_state: end_state(s.get("lastEndState")),
        legacy_migration_completed: true,
        updated_at: s
            .get("updatedAt")
            .and_then(Value::as_str)
            .map(|u| u.chars().take(64).collect::<String>()),
        reset_history: history.split_off(start),
    }
}

/// The default store.
pub fn empty_store() -> Store {
    Store {
        store_version: json!(1),
        initialized: false,
        revision: 0,
        state: Value::Null,
    }
}

/// A store built from the legacy prompt document, when it shows completion or suppression.
pub fn migrate_legacy(legacy: &Value) -> Option<Store> {
    let o = legacy.as_object()?;
    let flag = |k: &str| o.get(k).and_then(Value::as_bool) == Some(true);
    let completed = flag("completed") || flag("tutorial_completed");
    let suppressed = flag("never_remind") || flag("suppressed") || flag("dismissed_forever");
    if !completed && !suppressed {
        return None;
    }
    let mut s = Map::new();
    if completed {
        s.insert("completedRounds".into(), json!([1]));
    } else {
        s.insert("skippedRounds".into(), json!([1]));
    }
    Some(Store::written(1, normalize_state(&s)))
}

/// Validate a PUT body: (state object, expected revision).
pub fn validate_put(
    state: Option<Map<String, Value>>,
    expected_revision: Option<i64>,
) -> SysResult<(Map<String, Value>, i64)> {
    let Some(state) = state else {
        return Err(SystemError::InvalidState("state must be an object".into()));
    };
    let rev = expected_revision.filter(|r| *r >= 0).ok_or_else(|| {
        SystemError::InvalidExpectedRevision(
            "expectedRevision must be a non-negative integer".into(),
        )
    })?;
    Ok((state, rev))
}

/// Apply a PUT to the current store; `Err` on a stale revision (409 with the store).
pub fn apply_put(current: &Store, state: &Map<String, Value>, expected: i64) -> SysResult<Store> {
    if current.revision != expected {
        return Err(SystemError::TutorialRevisionConflict(Box::new(
            current.clone(),
        )));
    }
    Ok(Store::written(current.revision + 1, normalize_state(state)))
}

// ------------------------------------------------------------------ stored document

/// Write the document directly (atomically): the caller holds its lock.
async fn write_locked(st: &AppState, doc: Store) -> SysResult<()> {
    let path = st.store.path(DOC);
    blocking(move || {
        atomic_write_json(&path, &doc).map_err(|e| SystemError::Storage(e.to_string()))
    })
    .await
}

/// The stored document, migrated from the legacy one on first use (the caller
/// holds the document lock).
async fn load_locked(st: &AppState) -> SysResult<Store> {
    if let Some(v) = st.store.read_held::<Value>(DOC).await? {
        let stored = Store::from_stored(&v);
        if stored.initialized {
            return Ok(stored);
        }
    }
    let legacy: Option<Value> = st.store.read(LEGACY_DOC).await.ok().flatten();
    match legacy.as_ref().and_then(migrate_legacy) {
        Some(m) => {
            write_locked(st, m.clone()).await?;
            Ok(m)
        }
        None => Ok(empty_store()),
    }
}

/// The stored document (migrated on first use).
pub async fn load(st: &AppState) -> SysResult<Store> {
    let lock = st.store.lock_for(DOC);
    let _g = lock.lock().await;
    load_locked(st).await
}

/// Replace the state when `expected` is the stored revision; the new document.
pub async fn replace(st: &AppState, state: &Map<String, Value>, expected: i64) -> SysResult<Store> {
    let lock = st.store.lock_for(DOC);
    let _g = lock.lock().await;
    let current = load_locked(st).await?;
    let next = apply_put(&current, state, expected)?;
    write_locked(st, next.clone()).await?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        let s = json!({"completedRounds": [3, 1, 1, 9, true, "2"], "skippedRounds": [1, 2],
                       "firstSeenDate": "bad", "currentRound": 8, "pendingRound": 2,
                       "lastEndState": {"outcome": "weird", "day": 2}, "junk": 1,
                       "resetHistory": (0..30).map(|i| json!({"day": "all", "source": format!("s{i}")})).collect::<Vec<_>>()});
        let n = serde_json::to_value(normalize_state(s.as_object().unwrap())).unwrap();
        assert_eq!(n["completedRounds"], json!([1, 3]));
        assert_eq!(n["skippedRounds"], json!([2]));
        assert_eq!(n["currentRound"], Value::Null);
        assert_eq!(n["pendingRound"], 2);
        assert_eq!(n["lastEndState"]["outcome"], "destroy");
        assert!(n.get("junk").is_none());
        assert_eq!(n["resetHistory"].as_array().unwrap().len(), 20);
        assert_eq!(n["resetHistory"][19]["source"], "s29");
        assert!(is_date(n["firstSeenDate"].as_str().unwrap()));
        assert!(validate_put(Some(Map::new()), None).is_err());
        assert!(validate_put(Some(Map::new()), Some(-1)).is_err());
        assert!(validate_put(None, Some(0)).is_err());
        assert!(validate_put(Some(Map::new()), Some(0)).is_ok());
        assert!(migrate_legacy(&json!({"completed": true})).is_some());
        assert!(migrate_legacy(&json!({"completed": false})).is_none());
    }
}

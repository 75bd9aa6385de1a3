//! The local platform integration: achievements configured by `<bundle>/achievements.json`
//! and play time, persisted in `<data>/state/platform_achievements.json`.
//!
//! `achievements.json` is either a list of names or `{"achievements": [name | {name,
//! playtime_seconds?, ...}]}`; an entry with `playtime_seconds` unlocks itself once the
//! accumulated play time reaches it (what the platform does for progress stats).
//! Without the file the integration is unavailable (503 failure envelope).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use companiond_core::task::blocking;
use companiond_core::AppState;

use crate::error::{SysResult, SystemError};

pub const DOC: &str = "state/platform_achievements.json";
pub const STAT: &str = "PLAY_TIME_SECONDS";
pub const MAX_DELTA: i64 = 3600;
pub const DEFAULT_DELTA: i64 = 10;
const MAX_CONFIG: u64 = 1024 * 1024;

/// One configured achievement.
#[derive(Clone, Debug, PartialEq)]
pub struct Achievement {
    pub name: String,
    pub playtime_seconds: Option<i64>,
    pub meta: Value,
}

/// Stored progress.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Progress {
    /// name → unlock time (ms).
    pub unlocked: BTreeMap<String, i64>,
    pub play_time_seconds: i64,
}

fn unavailable(msg: &str) -> SystemError {
    SystemError::PlatformUnavailable(msg.into())
}

/// Is a name plausible (1–128 of `[A-Za-z0-9_.-]`)?
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 128
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Load the configuration (blocking); unavailable when missing or invalid.
pub fn load_config(bundle: &Path) -> SysResult<Vec<Achievement>> {
    let p = bundle.join("achievements.json");
    let meta = std::fs::metadata(&p)
        .map_err(|_| unavailable("the platform integration is not configured"))?;
    if meta.len() > MAX_CONFIG {
        return Err(unavailable("achievements.json is too large"));
    }
    let v: Value = std::fs::read(&p)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| unavailable("achievements.json is unreadable"))?;
    let list = match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) => match o.get("achievements") {
            Some(Value::Array(a)) => a.clone(),
            _ => return Err(unavailable("achievements.json has no achievements list")),
        },
        _ => return Err(unavailable("achievements.json has no achievements list")),
    };
    let mut out: Vec<Achievement> = Vec::new();
    for item in list {
        let (name, playtime, meta) = match &item {
            Value::String(s) => (s.clone(), None, Value::Null),
            Value::Object(o) => match o.get("name").and_then(Value::as_str) {
                Some(n) => (
                    n.to_string(),
                    o.get("playtime_seconds")
                        .and_then(Value::as_i64)
                        .filter(|s| *s > 0),
                    item.clone(),
                ),
                None => continue,
            },
            _ => continue,
        };
        if valid_name(&name) && !out.iter().any(|a| a.name == name) {
            out.push(Achievement {
                name,
                playtime_seconds: playtime,
                meta,
            });
        }
    }
    Ok(out)
}

/// Unlock `name`; `(newly_unlocked)`.
pub fn unlock(config: &[Achievement], p: &mut Progress, name: &str, now: i64) -> SysResult<bool> {
    if !valid_name(name) {
        return Err(SystemError::InvalidAchievement(
            "invalid achievement name".into(),
        ));
    }
    if !config.iter().any(|a| a.name == name) {
        return Err(SystemError::AchievementNotFound(format!(
            "achievement {name} is not configured"
        )));
    }
    if p.unlocked.contains_key(name) {
        return Ok(false);
    }
    p.unlocked.insert(name.to_string(), now);
    Ok(true)
}

/// `POST /api/platform/update-playtime`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"seconds": 60}))]
pub struct PlaytimeBody {
    /// Seconds played since the last report (an integer, its decimal text, a
    /// boolean, or a number truncated); counted up to 3600 per report.
    #[serde(default = "default_seconds", deserialize_with = "seconds")]
    #[schema(schema_with = seconds_schema, default = 10)]
    pub seconds: i64,
}

/// The forms [`parse_seconds`] reads: a number from 0 (truncated), its decimal
/// text, a boolean (1 or 0) or null (the default).
fn seconds_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Type};
    AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0.0))
                .maximum(Some(1e15)),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^ *0*[0-9]{1,15} *$")),
        )
        .item(ObjectBuilder::new().schema_type(Type::Boolean))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .build()
        .into()
}

fn default_seconds() -> i64 {
    DEFAULT_DELTA
}

/// `seconds` read by [`parse_seconds`]; its refusal is the error's message
/// (the body's rejection, in `http::bodies`, answers it as `invalid_seconds`).
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = Value::deserialize(d)?;
    parse_seconds(Some(&v)).map_err(|e| serde::de::Error::custom(e.message()))
}

/// Parse `seconds` the reference way: default 10, int conversion (`"12"`, `10.7`, `true`).
pub fn parse_seconds(v: Option<&Value>) -> SysResult<i64> {
    let bad = || SystemError::InvalidSeconds("seconds must be a valid integer".into());
    let n = match v {
        None | Some(Value::Null) => DEFAULT_DELTA,
        Some(Value::Bool(b)) => i64::from(*b),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) => i,
            None => {
                let f = n.as_f64().filter(|f| f.is_finite()).ok_or_else(bad)?;
                if f.abs() > 1e15 {
                    return Err(bad());
                }
                if f < 0.0 {
                    return Err(SystemError::InvalidSeconds(
                        "seconds must be non-negative".into(),
                    ));
                }
                f.trunc() as i64
            }
        },
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse::<i64>().map_err(|_| bad())?
        }
        Some(_) => return Err(bad()),
    };
    if n < 0 {
        return Err(SystemError::InvalidSeconds(
            "seconds must be non-negative".into(),
        ));
    }
    if n > 1_000_000_000_000_000 {
        return Err(bad());
    }
    Ok(n.min(MAX_DELTA))
}

/// Add play time; returns the progress achievements now unlocked (all of them, as the
/// platform reports) and which were newly unlocked.
pub fn add_playtime(
    config: &[Achievement],
    p: &mut Progress,
    seconds: i64,
    now: i64,
) -> Vec<String> {
    p.play_time_seconds = p.play_time_seconds.saturating_add(seconds);
    let mut unlocked = Vec::new();
    for a in config {
        if let Some(t) = a.playtime_seconds {
            if p.play_time_seconds >= t {
                p.unlocked.entry(a.name.clone()).or_insert(now);
                unlocked.push(a.name.clone());
            }
        }
    }
    unlocked
}

/// One configured achievement and its state.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = AchievementState)]
pub struct AchievementState {
    pub name: String,
    pub unlocked: bool,
    /// Milliseconds since the epoch.
    pub unlocked_at: Option<i64>,
    pub playtime_seconds: Option<i64>,
}

/// Every configured achievement and its state, in configuration order.
pub fn list(config: &[Achievement], p: &Progress) -> Vec<AchievementState> {
    config
        .iter()
        .map(|a| AchievementState {
            name: a.name.clone(),
            unlocked: p.unlocked.contains_key(&a.name),
            unlocked_at: p.unlocked.get(&a.name).copied(),
            playtime_seconds: a.playtime_seconds,
        })
        .collect()
}

// ------------------------------------------------------------------ stored progress

/// The configured achievements (`<bundle>/achievements.json`).
pub async fn configured(st: &AppState) -> SysResult<Vec<Achievement>> {
    let bundle = st.bundle_dir().to_path_buf();
    blocking(move || load_config(&bundle)).await
}

/// Unlock the configured achievement `name`; whether it was newly unlocked.
pub async fn set_achievement(st: &AppState, name: &str) -> SysResult<bool> {
    let cfg = configured(st).await?;
    let now = companiond_core::now_millis();
    let name = name.to_string();
    st.store
        .try_update(DOC, move |cur: Option<Progress>| {
            let mut p = cur.unwrap_or_default();
            let newly = unlock(&cfg, &mut p, &name, now)?;
            Ok::<_, SystemError>((p, newly))
        })
        .await?
}

/// Add `seconds` of playtime; the new total and the achievements of `cfg` it unlocked.
pub async fn record_playtime(
    st: &AppState,
    cfg: Vec<Achievement>,
    seconds: i64,
) -> SysResult<(i64, Vec<String>)> {
    let now = companiond_core::now_millis();
    Ok(st
        .store
        .update(DOC, move |cur: Option<Progress>| {
            let mut p = cur.unwrap_or_default();
            let unlocked = add_playtime(&cfg, &mut p, seconds, now);
            let total = p.play_time_seconds;
            (p, (total, unlocked))
        })
        .await?)
}

/// Every configured achievement with its state, and the total playtime.
pub async fn listing(st: &AppState) -> SysResult<(Vec<AchievementState>, i64)> {
    let cfg = configured(st).await?;
    let p: Progress = st.store.read(DOC).await?.unwrap_or_default();
    Ok((list(&cfg, &p), p.play_time_seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seconds_rules() {
        assert_eq!(parse_seconds(None).unwrap(), 10);
        assert_eq!(parse_seconds(Some(&json!("12"))).unwrap(), 12);
        assert_eq!(parse_seconds(Some(&json!(10.7))).unwrap(), 10);
        assert_eq!(parse_seconds(Some(&json!(true))).unwrap(), 1);
        assert_eq!(parse_seconds(Some(&json!(99999))).unwrap(), 3600);
        assert!(parse_seconds(Some(&json!(-1))).is_err());
        assert!(parse_seconds(Some(&json!("x"))).is_err());
        assert!(parse_seconds(Some(&json!([1]))).is_err());
        assert!(parse_seconds(Some(&json!(1e300))).is_err());
    }

    #[test]
    fn unlock_and_playtime() {
        let cfg = vec![
            Achievement {
                name: "A".into(),
                playtime_seconds: None,
                meta: Value::Null,
            },
            Achievement {
                name: "T".into(),
                playtime_seconds: Some(20),
                meta: Value::Null,
            },
        ];
        let mut p = Progress::default();
        assert!(unlock(&cfg, &mut p, "A", 1).unwrap());
        assert!(!unlock(&cfg, &mut p, "A", 2).unwrap());
        assert!(unlock(&cfg, &mut p, "B", 2).is_err());
        assert!(unlock(&cfg, &mut p, "../x", 2).is_err());
        assert!(add_playtime(&cfg, &mut p, 10, 3).is_empty());
        assert_eq!(add_playtime(&cfg, &mut p, 10, 3), vec!["T".to_string()]);
    }
}

//! `POST /api/activity_signal`: a bounded activity heartbeat fed to the per-character
//! activity tracker (in memory). Proactive chat reads the tracker: a pushed snapshot is
//! authoritative for [`FRESH_FOR`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::{SysResult, SystemError};

/// Largest accepted body.
pub const MAX_BODY: usize = 16 * 1024;
/// One accepted push per character per this interval.
pub const MIN_INTERVAL: Duration = Duration::from_secs(5);
/// Names tracked by the throttle (oldest dropped).
pub const MAX_THROTTLED: usize = 64;
/// How long a pushed snapshot counts as current.
pub const FRESH_FOR: Duration = Duration::from_secs(20);
/// Longest kept string signal.
pub const MAX_STRING: usize = 512;

/// One validated snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub idle_seconds: Option<f64>,
    pub cpu_avg_30s: Option<f64>,
    pub gpu_utilization: Option<f64>,
    pub window_title: Option<String>,
    pub process_name: Option<String>,
}

/// A field as sent: its value when it has the field's type, `Other` when it
/// does not (judged after the name, so a missing name is answered first).
#[derive(Debug, Default)]
pub enum Sent<T> {
    /// Absent or `null`.
    #[default]
    Absent,
    Is(T),
    Other,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Sent<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Sent::Absent,
            v => serde_json::from_value(v).map_or(Sent::Other, Sent::Is),
        })
    }
}

/// `POST /api/activity_signal`: at least one signal besides the name. A signal
/// of another type or out of its range is `invalid_signal` (after the name is
/// checked); its own 16 KiB limit, and an empty body is `invalid_json`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Companion", "idle_seconds": 12.5,
    "window_title": "Editor"}))]
pub struct ActivityBody {
    /// The character; must be registered.
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub persona_name: Sent<String>,
    /// The older spelling of `persona_name` (read when that is not text).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub lanlan_name: Sent<String>,
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0.0)]
    pub idle_seconds: Sent<f64>,
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0.0, maximum = 100.0)]
    pub cpu_avg_30s: Sent<f64>,
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 0.0, maximum = 100.0)]
    pub gpu_utilization: Sent<f64>,
    /// Trimmed and cut at 512 characters.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub window_title: Sent<String>,
    /// Trimmed and cut at 512 characters.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub process_name: Sent<String>,
}

fn number(v: &Sent<f64>, key: &str, lo: f64, hi: f64) -> SysResult<Option<f64>> {
    let bad = |m: String| SystemError::InvalidSignal(m);
    match *v {
        Sent::Absent => Ok(None),
        Sent::Other => Err(bad(format!("{key} must be a number"))),
        Sent::Is(f) if !f.is_finite() => Err(bad(format!("{key} must be finite"))),
        Sent::Is(f) if f < lo => Err(bad(format!("{key} must be >= {lo}"))),
        Sent::Is(f) if f > hi => Err(bad(format!("{key} must be <= {hi}"))),
        Sent::Is(f) => Ok(Some(f)),
    }
}

fn string(v: &Sent<String>, key: &str) -> SysResult<Option<String>> {
    match v {
        Sent::Absent => Ok(None),
        Sent::Is(s) => {
            let t = s.trim();
            Ok((!t.is_empty()).then(|| t.chars().take(MAX_STRING).collect()))
        }
        Sent::Other => Err(SystemError::InvalidSignal(format!(
            "{key} must be a string"
        ))),
    }
}

/// Validate a body; returns the character name and the snapshot.
pub fn validate(body: &ActivityBody) -> SysResult<(String, Snapshot)> {
    let text = |v: &Sent<String>| match v {
        Sent::Is(s) => Some(s.clone()),
        _ => None,
    };
    let name = text(&body.persona_name)
        .or_else(|| text(&body.lanlan_name))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| SystemError::MissingPersonaName("persona_name required".into()))?;
    let snap = Snapshot {
        idle_seconds: number(&body.idle_seconds, "idle_seconds", 0.0, f64::MAX)?,
        cpu_avg_30s: number(&body.cpu_avg_30s, "cpu_avg_30s", 0.0, 100.0)?,
        gpu_utilization: number(&body.gpu_utilization, "gpu_utilization", 0.0, 100.0)?,
        window_title: string(&body.window_title, "window_title")?,
        process_name: string(&body.process_name, "process_name")?,
    };
    if snap == Snapshot::default() {
        return Err(SystemError::MissingSignal(
            "at least one signal field required".into(),
        ));
    }
    Ok((name, snap))
}

/// The tracker: latest snapshot per character plus the push throttle.
#[derive(Default)]
pub struct Tracker {
    snapshots: Mutex<HashMap<String, (Instant, Snapshot)>>,
    throttle: Mutex<HashMap<String, Instant>>,
}

impl Tracker {
    /// Accept a push unless the character pushed less than [`MIN_INTERVAL`] ago.
    pub fn push(&self, name: &str, snap: Snapshot) -> SysResult<()> {
        let now = Instant::now();
        {
            let mut t = self.throttle.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(last) = t.get(name) {
                let since = now.duration_since(*last);
                if since < MIN_INTERVAL {
                    let remaining = (MIN_INTERVAL - since).as_secs_f64();
                    return Err(SystemError::RateLimited {
                        retry_after_seconds: (remaining * 1000.0).round() / 1000.0,
                    });
                }
            }
            t.insert(name.to_string(), now);
            while t.len() > MAX_THROTTLED {
                let oldest = t.iter().min_by_key(|(_, at)| **at).map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => t.remove(&k),
                    None => break,
                };
            }
        }
        let mut s = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        s.insert(name.to_string(), (now, snap));
        while s.len() > MAX_THROTTLED {
            let oldest = s.iter().min_by_key(|(_, v)| v.0).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => s.remove(&k),
                None => break,
            };
        }
        Ok(())
    }

    /// The current snapshot of a character (pushed within [`FRESH_FOR`]).
    pub fn current(&self, name: &str) -> Option<Snapshot> {
        let s = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        s.get(name)
            .filter(|(at, _)| at.elapsed() < FRESH_FOR)
            .map(|(_, snap)| snap.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_rules() {
        let validate = |v: Value| {
            let b = companiond_core::envelope::parse_body::<ActivityBody>(v.to_string().as_bytes())
                .map_err(SystemError::body)?;
            super::validate(&b)
        };
        assert!(validate(json!([])).is_err());
        assert!(validate(json!({"idle_seconds": 1})).is_err());
        assert!(validate(json!({"persona_name": "A"})).is_err());
        assert!(validate(json!({"persona_name": "A", "window_title": "  "})).is_err());
        assert!(validate(json!({"persona_name": "A", "cpu_avg_30s": 101})).is_err());
        assert!(validate(json!({"persona_name": "A", "cpu_avg_30s": true})).is_err());
        assert!(validate(json!({"persona_name": "A", "idle_seconds": -1})).is_err());
        assert!(validate(json!({"persona_name": "A", "window_title": 5})).is_err());
        let (n, s) = validate(json!({"lanlan_name": " A ", "idle_seconds": 3})).unwrap();
        assert_eq!(n, "A");
        assert_eq!(s.idle_seconds, Some(3.0));
    }

    #[test]
    fn throttle() {
        let t = Tracker::default();
        let s = Snapshot {
            idle_seconds: Some(1.0),
            ..Default::default()
        };
        t.push("A", s.clone()).unwrap();
        let e = t.push("A", s.clone()).unwrap_err();
        assert!(matches!(e, SystemError::RateLimited { .. }));
        t.push("B", s.clone()).unwrap();
        assert_eq!(t.current("A"), Some(s));
    }
}

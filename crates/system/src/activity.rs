//! `POST /api/activity_signal`: a bounded activity heartbeat fed to the per-character
//! activity tracker (in memory). Proactive chat reads the tracker: a pushed snapshot is
//! authoritative for [`FRESH_FOR`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

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

fn number(body: &Map<String, Value>, key: &str, lo: f64, hi: f64) -> SysResult<Option<f64>> {
    let bad = |m: String| SystemError::InvalidSignal(m);
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let Some(f) = n.as_f64() else {
                return Err(bad(format!("{key} must be a number")));
            };
            if !f.is_finite() {
                return Err(bad(format!("{key} must be finite")));
            }
            if f < lo {
                return Err(bad(format!("{key} must be >= {lo}")));
            }
            if f > hi {
                return Err(bad(format!("{key} must be <= {hi}")));
            }
            Ok(Some(f))
        }
        Some(_) => Err(bad(format!("{key} must be a number"))),
    }
}

fn string(body: &Map<String, Value>, key: &str) -> SysResult<Option<String>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let t = s.trim();
            Ok((!t.is_empty()).then(|| t.chars().take(MAX_STRING).collect()))
        }
        Some(_) => Err(SystemError::InvalidSignal(format!(
            "{key} must be a string"
        ))),
    }
}

/// Validate a body; returns the character name and the snapshot.
pub fn validate(body: &Value) -> SysResult<(String, Snapshot)> {
    let Some(obj) = body.as_object() else {
        return Err(SystemError::InvalidBody(
            "body must be a JSON object".into(),
        ));
    };
    let name = ["persona_name", "lanlan_name"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| SystemError::MissingPersonaName("persona_name required".into()))?
        .to_string();
    let snap = Snapshot {
        idle_seconds: number(obj, "idle_seconds", 0.0, f64::MAX)?,
        cpu_avg_30s: number(obj, "cpu_avg_30s", 0.0, 100.0)?,
        gpu_utilization: number(obj, "gpu_utilization", 0.0, 100.0)?,
        window_title: string(obj, "window_title")?,
        process_name: string(obj, "process_name")?,
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
        assert!(validate(&json!([])).is_err());
        assert!(validate(&json!({"idle_seconds": 1})).is_err());
        assert!(validate(&json!({"persona_name": "A"})).is_err());
        assert!(validate(&json!({"persona_name": "A", "window_title": "  "})).is_err());
        assert!(validate(&json!({"persona_name": "A", "cpu_avg_30s": 101})).is_err());
        assert!(validate(&json!({"persona_name": "A", "cpu_avg_30s": true})).is_err());
        assert!(validate(&json!({"persona_name": "A", "idle_seconds": -1})).is_err());
        assert!(validate(&json!({"persona_name": "A", "window_title": 5})).is_err());
        let (n, s) = validate(&json!({"lanlan_name": " A ", "idle_seconds": 3})).unwrap();
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

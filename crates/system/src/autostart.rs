//! The autostart prompt state machine (docs/system.md, "Routes in short"):
//! `<data>/state/autostart_prompt_state.json`, optional overrides in
//! `<data>/state/autostart_prompt_config.json` (clamped).

use companiond_core::envelope::loose;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use companiond_core::AppState;

use crate::error::{SysResult, SystemError};

pub const DOC: &str = "state/autostart_prompt_state.json";
pub const CONFIG_DOC: &str = "state/autostart_prompt_config.json";

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
/// No new prompt within this long of the last one shown; tokens are reused within it.
pub const PENDING_GUARD_MS: i64 = 5 * MIN;
/// Heartbeat caps.
pub const MAX_FOREGROUND_DELTA: i64 = 30 * MIN;
pub const MAX_COUNTER_DELTA: i64 = 20;

/// Runtime configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub min_prompt_foreground_ms: i64,
    pub later_cooldown_ms: i64,
    pub failure_cooldown_ms: i64,
    pub max_prompt_shows: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_prompt_foreground_ms: 15 * MIN,
            later_cooldown_ms: DAY,
            failure_cooldown_ms: 2 * HOUR,
            max_prompt_shows: 2,
        }
    }
}

impl Config {
    /// Defaults with overrides clamped to their ranges.
    pub fn from_overrides(v: Option<&Value>) -> Config {
        let mut c = Config::default();
        let Some(o) = v.and_then(Value::as_object) else {
            return c;
        };
        let get = |k: &str| o.get(k).and_then(Value::as_i64);
        if let Some(x) = get("min_prompt_foreground_ms") {
            c.min_prompt_foreground_ms = x.clamp(15 * MIN, 12 * HOUR);
        }
        if let Some(x) = get("later_cooldown_ms") {
            c.later_cooldown_ms = x.clamp(5 * MIN, 30 * DAY);
        }
        if let Some(x) = get("failure_cooldown_ms") {
            c.failure_cooldown_ms = x.clamp(MIN, 7 * DAY);
        }
        if let Some(x) = get("max_prompt_shows") {
            c.max_prompt_shows = x.clamp(1, 10);
        }
        c
    }
}

/// Funnel counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(default)]
pub struct Funnel {
    pub issued: i64,
    pub shown: i64,
    pub later: i64,
    pub never: i64,
    pub accept: i64,
    pub started: i64,
    pub completed: i64,
    pub failed: i64,
}

/// The stored state (times in epoch milliseconds).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = AutostartState)]
pub struct State {
    pub schema_version: i64,
    pub prompt_kind: String,
    pub first_seen_at: i64,
    pub foreground_ms: i64,
    pub home_interactions: i64,
    pub last_weak_home_interaction_at: i64,
    pub chat_turns: i64,
    pub voice_sessions: i64,
    pub status: String,
    pub shown_count: i64,
    pub last_shown_at: i64,
    pub active_prompt_token: Option<String>,
    pub active_prompt_issued_at: i64,
    pub last_acknowledged_prompt_token: Option<String>,
    pub last_decision_prompt_token: Option<String>,
    pub deferred_until: i64,
    pub never_remind: bool,
    pub accepted_at: i64,
    pub started_at: i64,
    pub started_via_prompt: bool,
    pub completed_at: i64,
    pub last_error: String,
    pub funnel_counts: Funnel,
    pub autostart_enabled: bool,
    pub enabled_at: i64,
    pub enabled_provider: String,
}

impl Default for State {
    fn default() -> Self {
        State {
            schema_version: 3,
            prompt_kind: "autostart_prompt".into(),
            first_seen_at: 0,
            foreground_ms: 0,
            home_interactions: 0,
            last_weak_home_interaction_at: 0,
            chat_turns: 0,
            voice_sessions: 0,
            status: "observing".into(),
            shown_count: 0,
            last_shown_at: 0,
            active_prompt_token: None,
            active_prompt_issued_at: 0,
            last_acknowledged_prompt_token: None,
            last_decision_prompt_token: None,
            deferred_until: 0,
            never_remind: false,
            accepted_at: 0,
            started_at: 0,
            started_via_prompt: false,
            completed_at: 0,
            last_error: String::new(),
            funnel_counts: Funnel::default(),
            autostart_enabled: false,
            enabled_at: 0,
            enabled_provider: String::new(),
        }
    }
}

/// The reduced view of the state that `GET /api/autostart-prompt/state` answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = AutostartPublicState)]
pub struct PublicState<'a> {
    pub status: &'a str,
    pub shown_count: i64,
    pub deferred_until: i64,
    pub never_remind: bool,
    pub accepted_at: i64,
    pub started_at: i64,
    pub completed_at: i64,
    pub last_error: &'a str,
    pub autostart_enabled: bool,
    pub enabled_at: i64,
}

const STATUSES: [&str; 7] = [
    "observing",
    "prompted",
    "deferred",
    "started",
    "completed",
    "never",
    "error",
];

impl State {
    /// Resolve the status from the flags.
    pub fn normalize(&mut self) {
        self.schema_version = 3;
        self.prompt_kind = "autostart_prompt".into();
        if !STATUSES.contains(&self.status.as_str()) {
            self.status = "observing".into();
        }
        if self.never_remind {
            self.status = "never".into();
        } else if self.autostart_enabled || self.completed_at > 0 {
            self.status = "completed".into();
            self.autostart_enabled = true;
        } else if self.started_at > 0 {
            self.status = "started".into();
        }
    }

    /// The reduced view of `GET state`.
    pub fn public(&self) -> PublicState<'_> {
        PublicState {
            status: &self.status,
            shown_count: self.shown_count,
            deferred_until: self.deferred_until,
            never_remind: self.never_remind,
            accepted_at: self.accepted_at,
            started_at: self.started_at,
            completed_at: self.completed_at,
            last_error: &self.last_error,
            autostart_enabled: self.autostart_enabled,
            enabled_at: self.enabled_at,
        }
    }

    fn mark_enabled(&mut self, provider: &str, now: i64) {
        self.autostart_enabled = true;
        if self.enabled_at == 0 {
            self.enabled_at = now;
        }
        if self.completed_at == 0 {
            self.completed_at = now;
        }
        if !provider.is_empty() {
            self.enabled_provider = provider.to_string();
        }
        self.last_error.clear();
    }

    fn acknowledge(&mut self, token: &str, cfg: &Config, now: i64) -> SysResult<bool> {
        if !token.is_empty() && self.last_acknowledged_prompt_token.as_deref() == Some(token) {
            return Ok(true);
        }
        if token.is_empty() || self.active_prompt_token.as_deref() != Some(token) {
            return Err(SystemError::InvalidPromptToken(
                "invalid prompt_token".into(),
            ));
        }
        self.shown_count = (self.shown_count + 1).min(cfg.max_prompt_shows);
        self.last_shown_at = now;
        self.status = "prompted".into();
        self.funnel_counts.shown += 1;
        self.last_acknowledged_prompt_token = Some(token.to_string());
        self.active_prompt_token = None;
        self.active_prompt_issued_at = 0;
        Ok(false)
    }
}

/// A usage counter: an integer, or a number truncated; anything else is 0.
fn delta<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => Ok(n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
            .unwrap_or(0)),
        Value::Null => Ok(0),
        _ => Err(serde::de::Error::custom("a usage delta must be a number")),
    }
}

/// The first text of a field and its older spelling, trimmed ("" when neither is).
fn first_text<'a>(a: &'a Option<String>, b: &'a Option<String>) -> &'a str {
    a.as_deref().or(b.as_deref()).unwrap_or("").trim()
}

/// The provider named (at most 64 characters).
fn provider_of(a: &Option<String>, b: &Option<String>) -> String {
    first_text(a, b).chars().take(64).collect()
}

/// `POST /api/autostart-prompt/heartbeat`: usage since the last heartbeat
/// (deltas: numbers, truncated and clamped; null is 0).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"foreground_ms_delta": 60000, "home_interactions_delta": 2,
    "autostart_supported": true}))]
pub struct AutostartHeartbeatBody {
    /// Clamped to 0..=1800000 (30 minutes).
    #[serde(default, deserialize_with = "delta")]
    #[schema(value_type = Option<f64>)]
    foreground_ms_delta: i64,
    /// Clamped to 0..=20 (so are the two below).
    #[serde(default, deserialize_with = "delta")]
    #[schema(value_type = Option<f64>)]
    home_interactions_delta: i64,
    #[serde(default, deserialize_with = "delta")]
    #[schema(value_type = Option<f64>)]
    chat_turns_delta: i64,
    #[serde(default, deserialize_with = "delta")]
    #[schema(value_type = Option<f64>)]
    voice_sessions_delta: i64,
    #[serde(default, deserialize_with = "loose::or_none")]
    autostart_enabled: Option<bool>,
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(default = true)]
    autostart_supported: Option<bool>,
    /// `autostart_enabled` is the system's own answer.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(default = false)]
    autostart_status_authoritative: Option<bool>,
    /// At most 64 characters (`provider` is accepted too).
    #[serde(default, deserialize_with = "loose::or_none")]
    autostart_provider: Option<String>,
    /// The older spelling of `autostart_provider` (read when that is not text).
    #[serde(default, deserialize_with = "loose::or_none")]
    provider: Option<String>,
}

/// `POST /api/autostart-prompt/shown`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"prompt_token": "pt_1"}))]
pub struct AutostartShownBody {
    /// The token of the prompt shown (`token` is accepted too).
    #[serde(default, deserialize_with = "loose::or_none")]
    prompt_token: Option<String>,
    /// The older spelling of `prompt_token`.
    #[serde(default, deserialize_with = "loose::or_none")]
    token: Option<String>,
}

/// `POST /api/autostart-prompt/decision`. A field of another type counts as absent.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"prompt_token": "pt_1", "decision": "accept", "result": "enabled"}))]
pub struct AutostartDecisionBody {
    /// The token of the prompt answered (`token` is accepted too).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true)]
    prompt_token: Option<String>,
    /// The older spelling of `prompt_token`.
    #[serde(default, deserialize_with = "loose::or_none")]
    token: Option<String>,
    /// `accept`, `later` or `never` (`action` is accepted too).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true)]
    decision: Option<String>,
    /// The older spelling of `decision`.
    #[serde(default, deserialize_with = "loose::or_none")]
    action: Option<String>,
    /// For `accept`: `enabled`, `accepted`, or a failure.
    #[serde(default, deserialize_with = "loose::or_none")]
    result: Option<String>,
    /// For a failed `accept`: what went wrong (at most 200 characters).
    #[serde(default, deserialize_with = "loose::or_none")]
    error: Option<String>,
    /// At most 64 characters (`provider` is accepted too).
    #[serde(default, deserialize_with = "loose::or_none")]
    autostart_provider: Option<String>,
    /// The older spelling of `autostart_provider`.
    #[serde(default, deserialize_with = "loose::or_none")]
    provider: Option<String>,
}

/// A heartbeat; returns `(should_prompt, reason, token)`.
pub fn heartbeat(
    s: &mut State,
    body: &AutostartHeartbeatBody,
    cfg: &Config,
    now: i64,
) -> (bool, &'static str, Option<String>) {
    if s.first_seen_at == 0 {
        s.first_seen_at = now;
    }
    s.foreground_ms += body.foreground_ms_delta.clamp(0, MAX_FOREGROUND_DELTA);
    let hi = body.home_interactions_delta.clamp(0, MAX_COUNTER_DELTA);
    s.home_interactions += hi;
    if hi > 0 {
        s.last_weak_home_interaction_at = now;
    }
    s.chat_turns += body.chat_turns_delta.clamp(0, MAX_COUNTER_DELTA);
    s.voice_sessions += body.voice_sessions_delta.clamp(0, MAX_COUNTER_DELTA);

    let enabled = body.autostart_enabled;
    let supported = body.autostart_supported.unwrap_or(true);
    let authoritative = body.autostart_status_authoritative.unwrap_or(false);
    let provider = provider_of(&body.autostart_provider, &body.provider);
    if authoritative {
        if !provider.is_empty() && !s.enabled_provider.is_empty() && provider != s.enabled_provider
        {
            // A different provider: the old history says nothing about this one.
            s.shown_count = 0;
            s.last_shown_at = 0;
            s.deferred_until = 0;
            s.enabled_provider = provider.clone();
        }
        match enabled {
            Some(true) => s.mark_enabled(&provider, now),
            Some(false) => {
                s.autostart_enabled = false;
                s.enabled_at = 0;
                s.completed_at = 0;
                s.started_at = 0;
                s.started_via_prompt = false;
                if matches!(s.status.as_str(), "completed" | "started") {
                    s.status = "observing".into();
                }
            }
            None => {}
        }
    } else if enabled == Some(true) && !s.autostart_enabled {
        s.mark_enabled(&provider, now);
    }
    s.normalize();

    let reason = if authoritative && !supported && !s.autostart_enabled {
        Some("autostart_unsupported")
    } else if s.autostart_enabled || s.status == "completed" {
        Some("autostart_enabled")
    } else if s.status == "started" {
        Some("autostart_pending")
    } else if s.never_remind {
        Some("never_remind")
    } else if s.shown_count >= cfg.max_prompt_shows {
        Some("show_limit_reached")
    } else if s.last_shown_at > 0 && now - s.last_shown_at < PENDING_GUARD_MS {
        Some("prompt_pending")
    } else if s.deferred_until > now {
        Some("cooldown_active")
    } else if s.foreground_ms < cfg.min_prompt_foreground_ms {
        Some("foreground_insufficient")
    } else {
        None
    };
    match reason {
        Some(r) => {
            s.active_prompt_token = None;
            s.active_prompt_issued_at = 0;
            (false, r, None)
        }
        None => {
            let reuse = s
                .active_prompt_token
                .clone()
                .filter(|_| now - s.active_prompt_issued_at < PENDING_GUARD_MS);
            let token = match reuse {
                Some(t) => t,
                None => {
                    let t = uuid::Uuid::new_v4().simple().to_string();
                    s.active_prompt_token = Some(t.clone());
                    s.active_prompt_issued_at = now;
                    s.funnel_counts.issued += 1;
                    t
                }
            };
            (true, "usage_timeout", Some(token))
        }
    }
}

/// `shown`: returns `already_acknowledged`.
pub fn shown(s: &mut State, body: &AutostartShownBody, cfg: &Config, now: i64) -> SysResult<bool> {
    let token = first_text(&body.prompt_token, &body.token).to_string();
    s.acknowledge(&token, cfg, now)
}

/// `decision`.
pub fn decision(
    s: &mut State,
    body: &AutostartDecisionBody,
    cfg: &Config,
    now: i64,
) -> SysResult<()> {
    let decision = first_text(&body.decision, &body.action).to_ascii_lowercase();
    if !matches!(decision.as_str(), "accept" | "later" | "never") {
        return Err(SystemError::InvalidDecision("invalid decision".into()));
    }
    let token = first_text(&body.prompt_token, &body.token).to_string();
    if token.is_empty() {
        return Err(SystemError::InvalidPromptToken(
            "invalid prompt_token".into(),
        ));
    }
    if s.last_decision_prompt_token.as_deref() == Some(token.as_str()) {
        return Ok(());
    }
    s.acknowledge(&token, cfg, now)?;
    match decision.as_str() {
        "never" => {
            s.never_remind = true;
            s.status = "never".into();
            s.funnel_counts.never += 1;
        }
        "later" => {
            s.status = "deferred".into();
            s.deferred_until = now + cfg.later_cooldown_ms;
            s.funnel_counts.later += 1;
        }
        _ => {
            s.accepted_at = now;
            s.funnel_counts.accept += 1;
            let result = body
                .result
                .as_deref()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            let provider = provider_of(&body.autostart_provider, &body.provider);
            match result.as_str() {
                "enabled" | "autostart_enabled" => {
                    s.started_at = now;
                    s.started_via_prompt = true;
                    s.funnel_counts.started += 1;
                    s.mark_enabled(&provider, now);
                    s.funnel_counts.completed += 1;
                    s.status = "completed".into();
                }
                "" | "accepted" => {
                    s.status = "error".into();
                    s.last_error = "autostart_enable_unconfirmed".into();
                    s.deferred_until = now + cfg.failure_cooldown_ms;
                    s.funnel_counts.failed += 1;
                }
                _ => {
                    s.status = "error".into();
                    s.last_error = body
                        .error
                        .as_deref()
                        .map(|e| e.trim().chars().take(200).collect::<String>())
                        .filter(|e| !e.is_empty())
                        .unwrap_or_else(|| "autostart_enable_failed".into());
                    s.deferred_until = now + cfg.failure_cooldown_ms;
                    s.started_via_prompt = false;
                    s.funnel_counts.failed += 1;
                }
            }
        }
    }
    s.last_decision_prompt_token = Some(token);
    s.normalize();
    Ok(())
}

// ------------------------------------------------------------------ stored state

/// The stored state, normalised.
pub async fn load(st: &AppState) -> SysResult<State> {
    let mut s = st.store.read::<State>(DOC).await?.unwrap_or_default();
    s.normalize();
    Ok(s)
}

/// Apply `f` to the stored state (normalised first) under the document lock, with
/// the configured overrides and the current time; the new state and `f`'s result.
pub async fn update<R: Send + 'static>(
    st: &AppState,
    f: impl FnOnce(&mut State, &Config, i64) -> SysResult<R> + Send + 'static,
) -> SysResult<(State, R)> {
    let cfg: Option<Value> = st.store.read(CONFIG_DOC).await.ok().flatten();
    let cfg = Config::from_overrides(cfg.as_ref());
    let now = companiond_core::now_millis();
    st.store
        .try_update(DOC, move |cur: Option<State>| {
            let mut s = cur.unwrap_or_default();
            s.normalize();
            let r = f(&mut s, &cfg, now)?;
            Ok((s.clone(), (s, r)))
        })
        .await?
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A body as the route parses it.
    fn m<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn prompt_flow() {
        let cfg = Config::default();
        let mut s = State::default();
        let now = 1_000_000_000;
        let (p, r, _) = heartbeat(
            &mut s,
            &m(json!({"foreground_ms_delta": 60_000})),
            &cfg,
            now,
        );
        assert_eq!((p, r), (false, "foreground_insufficient"));
        for _ in 0..20 {
            heartbeat(
                &mut s,
                &m(json!({"foreground_ms_delta": 99_999_999})),
                &cfg,
                now,
            );
        }
        assert!(s.foreground_ms <= 21 * MAX_FOREGROUND_DELTA);
        let (p, r, t) = heartbeat(&mut s, &m(json!({})), &cfg, now);
        assert_eq!((p, r), (true, "usage_timeout"));
        let t = t.unwrap();
        let (_, _, t2) = heartbeat(&mut s, &m(json!({})), &cfg, now + 1000);
        assert_eq!(t2.as_deref(), Some(t.as_str()));
        assert!(shown(&mut s, &m(json!({"prompt_token": "nope"})), &cfg, now).is_err());
        assert!(!shown(&mut s, &m(json!({"prompt_token": t})), &cfg, now).unwrap());
        assert!(shown(&mut s, &m(json!({"prompt_token": t})), &cfg, now).unwrap());
        decision(
            &mut s,
            &m(json!({"decision": "later", "prompt_token": t})),
            &cfg,
            now,
        )
        .unwrap();
        assert_eq!(s.status, "deferred");
        let before = s.clone();
        decision(
            &mut s,
            &m(json!({"decision": "never", "prompt_token": t})),
            &cfg,
            now,
        )
        .unwrap();
        assert_eq!(s, before);
        let (p, r, _) = heartbeat(&mut s, &m(json!({})), &cfg, now + 10 * MIN);
        assert_eq!((p, r), (false, "cooldown_active"));
        let (p, r, _) = heartbeat(&mut s, &m(json!({"autostart_enabled": true})), &cfg, now);
        assert_eq!((p, r), (false, "autostart_enabled"));
        assert_eq!(s.status, "completed");
        heartbeat(
            &mut s,
            &m(
                json!({"autostart_enabled": false, "autostart_status_authoritative": true, "autostart_supported": false}),
            ),
            &cfg,
            now,
        );
        assert!(!s.autostart_enabled);
    }

    #[test]
    fn config_clamps() {
        let c = Config::from_overrides(Some(
            &json!({"max_prompt_shows": 99, "later_cooldown_ms": 1}),
        ));
        assert_eq!(c.max_prompt_shows, 10);
        assert_eq!(c.later_cooldown_ms, 5 * MIN);
    }
}

//! Proactive chat (source selection → model → dedup → delivery), the music
//! feedback signal and the mini-game invitation state machine (reference §§ 15–16).
//!
//! In memory per character: the running-round guard, the proactive messages of the last
//! hour (dedup), the source history (a used source is skipped for [`SOURCE_SKIP`]) and the
//! invitation state. Persisted: `<data>/state/proactive_chat_totals.json`
//! (`{version:2, totals:{name:int}, ever_delivered:{name:true}}`; `ever_delivered` = an
//! invitation was delivered once).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use companiond_core::history::{Entry, Speaker};
use companiond_core::llm::{CallOptions, ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::AppState;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::activity::Tracker;
use crate::error::{Kind, SysResult, SystemError};

pub const TOTALS_DOC: &str = "state/proactive_chat_totals.json";
/// A used source (track, window) is not used again for this long.
pub const SOURCE_SKIP: i64 = 5 * 3600 * 1000;
/// Dedup window and threshold.
pub const DEDUP_WINDOW: i64 = 3600 * 1000;
pub const DEDUP_THRESHOLD: f64 = 0.9;
/// Invitation odds per eligible round, and the forced first invitation.
pub const INVITE_ODDS: f64 = 0.12;
pub const FORCED_INVITE_AFTER: i64 = 3;
/// Invitation cooldowns: (time, later delivered chats).
pub const ACCEPT_COOLDOWN: (i64, u32) = (2 * 3600 * 1000, 10);
pub const DECLINE_COOLDOWN: (i64, u32) = (5 * 3600 * 1000, 10);
pub const LATER_SUPPRESS: i64 = 300 * 1000;
/// The user counts as away beyond this idle time.
pub const AWAY_IDLE_SECONDS: f64 = 600.0;
/// Whole-round timeout.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(45);

pub const GAME_TYPES: [&str; 4] = ["soccer", "badminton", "drawing_guess", "watch-together"];

/// Launch path of a game type (unknown → soccer).
pub fn launch_path(game: &str) -> &'static str {
    match game {
        "badminton" => "/badminton_demo",
        "watch-together" => "/watch_together",
        "drawing_guess" => "/drawing_guess_demo",
        _ => "/soccer_demo",
    }
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The stage of a reason code.
pub fn stage_of(code: &str) -> &'static str {
    match code {
        "CHAT_DELIVERED" | "PASS_DELIVERY_BUSY" | "DELIVERY_PREEMPTED" | "DELIVERY_FAILED" => {
            "delivery"
        }
        "PASS_BUSY" | "PASS_DISABLED" | "PASS_ROUTE_ACTIVE" | "ERROR_CHARACTER_NOT_FOUND" => {
            "entry_guard"
        }
        "PASS_ACTIVITY_BUSY"
        | "PASS_PRIVACY"
        | "PASS_RESTRICTED_SCREEN_ONLY"
        | "PASS_THROTTLED" => "activity_gate",
        "PASS_SOURCE_EMPTY" | "ERROR_SOURCE_FETCH_FAILED" => "source_selection",
        "PASS_MODEL_PASS" => "model_decision",
        "PASS_GENERATION_EMPTY" | "PASS_MODEL_UNAVAILABLE" | "ERROR_MODEL_FAILED" => "generation",
        "PASS_DUPLICATE" => "dedup",
        "ERROR_TIMEOUT" | "ERROR_INTERNAL" => "runtime_error",
        _ => "unknown",
    }
}

/// The choice a chat message expresses about a pending invitation.
pub fn chat_choice(text: &str) -> &'static str {
    const DECLINE: &[&str] = &[
        "不玩",
        "不要",
        "不想",
        "算了",
        "no thanks",
        "not interested",
        "don't want",
        "dont want",
        "decline",
        "no way",
        "nope",
    ];
    const LATER: &[&str] = &[
        "待会",
        "等会",
        "等一下",
        "一会儿",
        "下次",
        "以后再",
        "later",
        "not now",
        "another time",
        "maybe later",
    ];
    const ACCEPT: &[&str] = &[
        "好啊",
        "好的",
        "来吧",
        "一起玩",
        "let's play",
        "lets play",
        "sure",
        "okay",
        "ok",
        "yes",
        "yeah",
        "accept",
    ];
    // Pad and blank out punctuation so ASCII keywords match whole words only.
    let padded: String = format!(" {} ", text.to_lowercase())
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '\'' || !c.is_ascii() {
                c
            } else {
                ' '
            }
        })
        .collect();
    let hit = |words: &[&str]| {
        words.iter().any(|w| {
            if w.is_ascii() {
                padded.contains(&format!(" {w} "))
            } else {
                padded.contains(w)
            }
        })
    };
    if hit(DECLINE) {
        "decline"
    } else if hit(LATER) {
        "later"
    } else if hit(ACCEPT) {
        "accept"
    } else {
        "later"
    }
}

fn pass(code: &str, message: &str) -> Value {
    json!({"success": true, "action": "pass", "reason_code": code, "stage": stage_of(code),
           "message": message, "next_schedule_fixed_mode": false})
}

fn fail(kind: Kind, code: &str, message: impl Into<String>) -> SystemError {
    SystemError::new(kind, &code.to_ascii_lowercase(), message)
        .with("reason_code", code)
        .with("stage", stage_of(code))
}

/// Character-bigram Dice similarity of two texts (whitespace ignored, case folded).
pub fn similarity(a: &str, b: &str) -> f64 {
    let norm = |s: &str| -> Vec<char> {
        s.to_lowercase()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect()
    };
    let (a, b) = (norm(a), norm(b));
    if a == b {
        return 1.0;
    }
    if a.len() < 2 || b.len() < 2 {
        return 0.0;
    }
    let grams = |v: &[char]| -> HashMap<(char, char), usize> {
        let mut m = HashMap::new();
        for w in v.windows(2) {
            *m.entry((w[0], w[1])).or_insert(0) += 1;
        }
        m
    };
    let (ga, gb) = (grams(&a), grams(&b));
    let common: usize = ga
        .iter()
        .map(|(k, n)| (*n).min(*gb.get(k).unwrap_or(&0)))
        .sum();
    2.0 * common as f64 / ((a.len() - 1) + (b.len() - 1)) as f64
}

// -------------------------------------------------------------------- invitations

#[derive(Clone, Debug, Default)]
struct Cooldown {
    until: i64,
    chats_needed: u32,
}

/// Per-character invitation state (idle / pending / responded / suppressed).
#[derive(Clone, Debug, Default)]
pub struct Invite {
    delivered_at: Option<i64>,
    responded_at: Option<i64>,
    pending_session_id: Option<String>,
    game_type: String,
    last_response_choice: Option<String>,
    suppressed_until: i64,
    cooldowns: HashMap<String, Cooldown>,
}

impl Invite {
    fn pending(&self) -> bool {
        self.delivered_at.is_some()
            && self.responded_at.is_none()
            && self.pending_session_id.is_some()
    }
    fn state_name(&self, now: i64) -> &'static str {
        if self.pending() {
            "pending"
        } else if self.responded_at.is_some()
            && self
                .cooldowns
                .values()
                .any(|c| c.until > now || c.chats_needed > 0)
        {
            "responded"
        } else if self.suppressed_until > now {
            "suppressed"
        } else {
            "idle"
        }
    }
    fn available_games(&self, now: i64) -> Vec<&'static str> {
        GAME_TYPES
            .iter()
            .copied()
            .filter(|g| {
                self.cooldowns
                    .get(*g)
                    .is_none_or(|c| c.until <= now && c.chats_needed == 0)
            })
            .collect()
    }
    fn chat_delivered(&mut self) {
        for c in self.cooldowns.values_mut() {
            c.chats_needed = c.chats_needed.saturating_sub(1);
        }
    }
}

#[derive(Clone, Debug)]
struct Sent {
    at: i64,
    text: String,
}

#[derive(Clone, Debug)]
struct SourceUse {
    at: i64,
    channel: &'static str,
    key: String,
}

/// Persisted totals.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    pub version: i64,
    pub totals: HashMap<String, i64>,
    pub ever_delivered: HashMap<String, bool>,
}

/// The in-memory proactive state.
#[derive(Default)]
pub struct Proactive {
    running: Mutex<HashSet<String>>,
    sent: Mutex<HashMap<String, Vec<Sent>>>,
    sources: Mutex<HashMap<String, Vec<SourceUse>>>,
    invites: Mutex<HashMap<String, Invite>>,
}

struct RunGuard<'a> {
    p: &'a Proactive,
    name: String,
}
impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        self.p
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.name);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn persona_of(body: &Map<String, Value>) -> Option<String> {
    ["persona_name", "lanlan_name"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn text_field(body: &Map<String, Value>, key: &str, max: usize) -> Option<String> {
    body.get(key)
        .and_then(Value::as_str)
        .map(|s| s.trim().chars().take(max).collect::<String>())
        .filter(|s| !s.is_empty())
}

/// One chosen source.
struct Material {
    mode: &'static str,
    tag: String,
    prompt: String,
}

impl Proactive {
    fn source_recent(&self, name: &str, channel: &str, key: &str, now: i64) -> bool {
        lock(&self.sources).get(name).is_some_and(|v| {
            v.iter()
                .any(|u| u.channel == channel && u.key == key && now - u.at < SOURCE_SKIP)
        })
    }

    fn record_source(&self, name: &str, channel: &'static str, key: &str, now: i64) {
        let mut s = lock(&self.sources);
        let v = s.entry(name.to_string()).or_default();
        v.retain(|u| now - u.at < SOURCE_SKIP);
        v.push(SourceUse {
            at: now,
            channel,
            key: key.to_string(),
        });
        if v.len() > 200 {
            let excess = v.len() - 200;
            v.drain(..excess);
        }
    }

    /// `music_played_through`: forget the music sources of `name`; how many.
    pub fn clear_music(&self, name: &str) -> usize {
        let mut s = lock(&self.sources);
        let Some(v) = s.get_mut(name) else {
            return 0;
        };
        let before = v.len();
        v.retain(|u| u.channel != "music");
        before - v.len()
    }

    /// The public invitation state of a character.
    pub fn invite_state(&self, name: &str, now: i64) -> Value {
        let inv = lock(&self.invites).get(name).cloned().unwrap_or_default();
        json!({"state": inv.state_name(now), "pending_session_id": inv.pending_session_id,
               "game_type": inv.game_type, "last_response_choice": inv.last_response_choice,
               "suppressed_until": inv.suppressed_until})
    }

    /// Apply the user's response to the pending invitation.
    pub fn respond(&self, st: &AppState, body: &Map<String, Value>, now: i64) -> SysResult<Value> {
        let name = persona_of(body)
            .or_else(|| Some(st.characters.current()).filter(|c| !c.trim().is_empty()))
            .ok_or_else(|| {
                SystemError::bad_request("missing_persona_name", "persona_name missing")
            })?;
        let choice = match body.get("choice") {
            Some(Value::String(s)) => s.trim().to_ascii_lowercase(),
            _ => String::new(),
        };
        if !matches!(choice.as_str(), "accept" | "decline" | "later") {
            return Err(SystemError::bad_request(
                "invalid_choice",
                "choice must be accept, decline or later",
            ));
        }
        let session_id = text_field(body, "session_id", 128).unwrap_or_default();
        let mut invites = lock(&self.invites);
        let inv = invites.entry(name.clone()).or_default();
        if !inv.pending() || inv.pending_session_id.as_deref() != Some(session_id.as_str()) {
            return Ok(
                json!({"success": true, "action": "expired", "lanlan_name": name,
                              "persona_name": name, "session_id": session_id,
                              "message": "the invitation is no longer pending"}),
            );
        }
        let game = inv.game_type.clone();
        let action = match choice.as_str() {
            "accept" | "decline" => {
                let (ms, chats) = if choice == "accept" {
                    ACCEPT_COOLDOWN
                } else {
                    DECLINE_COOLDOWN
                };
                inv.responded_at = Some(now);
                inv.last_response_choice = Some(choice.clone());
                inv.pending_session_id = None;
                inv.cooldowns.insert(
                    game.clone(),
                    Cooldown {
                        until: now + ms,
                        chats_needed: chats,
                    },
                );
                if choice == "accept" {
                    "open_game"
                } else {
                    "cooldown"
                }
            }
            _ => {
                inv.delivered_at = None;
                inv.responded_at = None;
                inv.pending_session_id = None;
                inv.suppressed_until = now + LATER_SUPPRESS;
                "suppress"
            }
        };
        drop(invites);
        if let Some(m) = st.sessions.get(&name) {
            m.notify(json!({"type": "mini_game_invite_resolved", "session_id": session_id, "action": action}));
        }
        let mut out = json!({"success": true, "action": action, "session_id": session_id,
                             "lanlan_name": name, "persona_name": name});
        if action == "open_game" {
            out["game_type"] = json!(game);
            out["game_url"] = json!(format!(
                "{}?lanlan_name={}&session_id={}",
                launch_path(&game),
                enc(&name),
                enc(&session_id)
            ));
        }
        Ok(out)
    }

    /// The user chatted while an invitation was pending: keywords pick a choice
    /// (decline beats later beats accept); any other message dismisses it like
    /// "later" (reference: implicit dismiss). Returns the resolution, if any.
    pub fn on_chat_input(&self, st: &AppState, name: &str, text: &str, now: i64) -> Option<Value> {
        let session_id = {
            let invites = lock(&self.invites);
            let inv = invites.get(name)?;
            if !inv.pending() {
                return None;
            }
            inv.pending_session_id.clone()?
        };
        let mut body = Map::new();
        body.insert("persona_name".into(), json!(name));
        body.insert("session_id".into(), json!(session_id));
        body.insert("choice".into(), json!(chat_choice(text)));
        self.respond(st, &body, now).ok()
    }

    /// Should this round deliver an invitation? Returns the game type.
    fn invite_due(
        &self,
        name: &str,
        snapshot_ok: bool,
        totals: &Totals,
        now: i64,
    ) -> Option<String> {
        if !snapshot_ok {
            return None;
        }
        let mut invites = lock(&self.invites);
        let inv = invites.entry(name.to_string()).or_default();
        if inv.pending() || inv.suppressed_until > now {
            return None;
        }
        let games = inv.available_games(now);
        if games.is_empty() {
            return None;
        }
        let never = !totals.ever_delivered.get(name).copied().unwrap_or(false);
        let total = totals.totals.get(name).copied().unwrap_or(0);
        let forced = never && total >= FORCED_INVITE_AFTER;
        if forced {
            return Some(games[0].to_string());
        }
        let mut rng = rand::thread_rng();
        if rng.gen::<f64>() < INVITE_ODDS {
            return Some(games[rng.gen_range(0..games.len())].to_string());
        }
        None
    }

    fn mark_invited(&self, name: &str, game: &str, now: i64) -> String {
        let sid = uuid::Uuid::new_v4().simple().to_string();
        let mut invites = lock(&self.invites);
        let inv = invites.entry(name.to_string()).or_default();
        inv.delivered_at = Some(now);
        inv.responded_at = None;
        inv.pending_session_id = Some(sid.clone());
        inv.game_type = game.to_string();
        inv.suppressed_until = 0;
        sid
    }

    fn is_duplicate(&self, name: &str, text: &str, now: i64) -> bool {
        let mut sent = lock(&self.sent);
        let v = sent.entry(name.to_string()).or_default();
        v.retain(|s| now - s.at < DEDUP_WINDOW);
        v.iter()
            .any(|s| similarity(&s.text, text) >= DEDUP_THRESHOLD)
    }

    fn record_sent(&self, name: &str, text: &str, now: i64) {
        let mut sent = lock(&self.sent);
        let v = sent.entry(name.to_string()).or_default();
        v.push(Sent {
            at: now,
            text: text.to_string(),
        });
        if v.len() > 100 {
            v.remove(0);
        }
        drop(sent);
        if let Some(inv) = lock(&self.invites).get_mut(name) {
            inv.chat_delivered();
        }
    }

    fn select(
        &self,
        name: &str,
        body: &Map<String, Value>,
        tracker: &Tracker,
        recent: &str,
        now: i64,
    ) -> Option<Material> {
        let modes: Vec<String> = match body.get("enabled_modes") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(|s| s.trim().to_ascii_lowercase())
                .collect(),
            _ => vec!["music".into(), "window".into(), "chat".into()],
        };
        let on = |m: &str| modes.iter().any(|x| x == m);
        let playing = body
            .get("is_playing_music")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if on("music") && playing {
            if let Some(track) = text_field(body, "current_track", 200) {
                if !self.source_recent(name, "music", &track, now) {
                    self.record_source(name, "music", &track, now);
                    return Some(Material {
                        mode: "music",
                        tag: track.clone(),
                        prompt: format!("The user is listening to the song \"{track}\"."),
                    });
                }
            }
        }
        if on("window") {
            let title = text_field(body, "window_title", 200)
                .or_else(|| tracker.current(name).and_then(|s| s.window_title));
            if let Some(t) = title {
                if !self.source_recent(name, "window", &t, now) {
                    self.record_source(name, "window", &t, now);
                    return Some(Material {
                        mode: "window",
                        tag: t.clone(),
                        prompt: format!("The user's active window is titled \"{t}\"."),
                    });
                }
            }
        }
        if on("chat") || on("home") || on("idle") {
            let prompt = if recent.is_empty() {
                "You have not talked with the user for a while.".to_string()
            } else {
                format!("The recent conversation was:\n{recent}")
            };
            return Some(Material {
                mode: "chat",
                tag: "recent_conversation".into(),
                prompt,
            });
        }
        None
    }

    /// `POST /api/proactive_chat`.
    pub async fn run(
        &self,
        st: &AppState,
        tracker: &Tracker,
        body: &Map<String, Value>,
    ) -> SysResult<Value> {
        let name = match persona_of(body) {
            Some(n) => n,
            None => st.characters.current(),
        };
        if name.trim().is_empty() || !st.characters.exists(&name) {
            return Err(fail(
                Kind::NotFound,
                "ERROR_CHARACTER_NOT_FOUND",
                format!("character {name:?} does not exist"),
            )
            .with("action", Value::Null));
        }
        {
            let mut running = lock(&self.running);
            if !running.insert(name.clone()) {
                return Err(fail(
                    Kind::Conflict,
                    "PASS_BUSY",
                    "another proactive round is running",
                )
                .with(
                    "state",
                    json!({"proactive_running": true, "lanlan_name": name}),
                ));
            }
        }
        let _guard = RunGuard {
            p: self,
            name: name.clone(),
        };
        // A mini-game route owns the character's conversation.
        if st.hooks.is_routing(&name) {
            return Ok(pass(
                "PASS_ROUTE_ACTIVE",
                "a mini-game route is active for this character",
            ));
        }
        // The AI is answering the user right now.
        if st.sessions.get(&name).is_some_and(|m| m.is_turn_running()) {
            return Err(
                fail(Kind::Conflict, "PASS_BUSY", "the AI is responding").with(
                    "state",
                    json!({"ai_responding": true, "proactive_running": false, "lanlan_name": name}),
                ),
            );
        }
        match tokio::time::timeout(ROUND_TIMEOUT, self.round(st, tracker, body, &name)).await {
            Ok(r) => r,
            Err(_) => Err(fail(
                Kind::GatewayTimeout,
                "ERROR_TIMEOUT",
                "the proactive round timed out",
            )),
        }
    }

    async fn round(
        &self,
        st: &AppState,
        tracker: &Tracker,
        body: &Map<String, Value>,
        name: &str,
    ) -> SysResult<Value> {
        let now = companiond_core::now_millis();
        let Some(mgr) = st.sessions.get(name).filter(|m| m.is_active()) else {
            return Ok(pass(
                "DELIVERY_FAILED",
                "no chat connection is open for this character",
            ));
        };
        let totals: Totals = st
            .store
            .read(TOTALS_DOC)
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        let snapshot = tracker.current(name);
        let snapshot_ok = snapshot
            .as_ref()
            .is_some_and(|s| s.idle_seconds.is_none_or(|i| i < AWAY_IDLE_SECONDS));
        let invites_on = body
            .get("mini_game_invite_enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        if invites_on {
            if let Some(game) = self.invite_due(name, snapshot_ok, &totals, now) {
                return self.deliver_invite(st, &mgr, name, &game, now).await;
            }
        }
        let recent = recent_context(st, name).await;
        let Some(material) = self.select(name, body, tracker, &recent, now) else {
            return Ok(pass("PASS_SOURCE_EMPTY", "no enabled source has material"));
        };
        let history_len = mgr.history().await.len();
        let lang = ["language", "lang", "i18n_language"]
            .iter()
            .find_map(|k| text_field(body, k, 16));
        let mut sys = system_prompt(st, name);
        sys.push_str(
            "\n\nYou are starting a conversation on your own initiative. Write one short, natural \
             message (at most two sentences) to the user based on the context. If there is \
             nothing natural to say, answer exactly [PASS].",
        );
        if let Some(l) = &lang {
            sys.push_str(&format!(" Reply in the language with code {l}."));
        }
        let opts = CallOptions {
            timeout: Duration::from_secs(30),
            temperature: Some(0.8),
            max_tokens: Some(200),
            character: name.to_string(),
        };
        let msgs = [
            ChatMessage::system(sys),
            ChatMessage::user(material.prompt.clone()),
        ];
        let reply = match st.llm.complete(Slot::Conversation, &msgs, &opts).await {
            Ok(c) => c.content,
            Err(LlmError::NotConfigured) => {
                return Ok(pass(
                    "PASS_MODEL_UNAVAILABLE",
                    "no language model is configured",
                ))
            }
            Err(LlmError::Timeout) => {
                return Err(fail(
                    Kind::GatewayTimeout,
                    "ERROR_TIMEOUT",
                    "the language model timed out",
                ))
            }
            Err(e) => {
                return Err(fail(Kind::BadGateway, "ERROR_MODEL_FAILED", e.to_string())
                    .with("error_detail", e.code()))
            }
        };
        let text = reply.trim().trim_matches('"').trim().to_string();
        if text.contains("[PASS]") {
            return Ok(pass("PASS_MODEL_PASS", "the model chose not to speak"));
        }
        if text.is_empty() {
            return Ok(pass("PASS_GENERATION_EMPTY", "the model returned nothing"));
        }
        if self.is_duplicate(name, &text, now) {
            return Ok(pass(
                "PASS_DUPLICATE",
                "too similar to a recent proactive message",
            ));
        }
        let hist = mgr.history().await;
        if hist.len() != history_len
            && hist[history_len.min(hist.len())..]
                .iter()
                .any(|m| m.role == "user")
        {
            return Ok(pass("DELIVERY_PREEMPTED", "the user took over the turn"));
        }
        let turn_id = uuid::Uuid::new_v4().simple().to_string();
        let channels = mgr.notify(
            json!({"type": "assistant_delta", "text": text, "proactive": true,
                                        "turn_id": turn_id, "source_mode": material.mode}),
        );
        if channels == 0 {
            return Ok(pass(
                "DELIVERY_FAILED",
                "no chat connection accepted the message",
            ));
        }
        mgr.notify(json!({"type": "turn_end", "proactive": true, "turn_id": turn_id}));
        mgr.push_history(ChatMessage::assistant(text.clone())).await;
        append_recent(st, name, &text).await;
        self.record_sent(name, &text, now);
        bump_totals(st, name, false).await;
        Ok(json!({
            "success": true, "action": "chat", "reason_code": "CHAT_DELIVERED", "stage": "delivery",
            "message": text, "lanlan_name": name, "persona_name": name,
            "source_mode": material.mode, "source_tag": material.tag,
            "active_channels": channels, "source_links": [], "turn_id": turn_id,
            "next_schedule_fixed_mode": false,
        }))
    }

    async fn deliver_invite(
        &self,
        st: &AppState,
        mgr: &companiond_core::sessions::SessionManager,
        name: &str,
        game: &str,
        now: i64,
    ) -> SysResult<Value> {
        let sid = self.mark_invited(name, game, now);
        let text = format!("Want to play {} with me?", game.replace(['_', '-'], " "));
        let turn_id = uuid::Uuid::new_v4().simple().to_string();
        let channels = mgr.notify(
            json!({"type": "mini_game_invite", "session_id": sid, "game_type": game,
                                        "text": text, "turn_id": turn_id, "persona_name": name}),
        );
        if channels == 0 {
            if let Some(inv) = lock(&self.invites).get_mut(name) {
                *inv = Invite {
                    cooldowns: std::mem::take(&mut inv.cooldowns),
                    ..Default::default()
                };
            }
            return Ok(pass(
                "DELIVERY_FAILED",
                "no chat connection accepted the invitation",
            ));
        }
        self.record_sent(name, &text, now);
        bump_totals(st, name, true).await;
        Ok(json!({
            "success": true, "action": "chat", "reason_code": "CHAT_DELIVERED", "stage": "delivery",
            "message": text, "lanlan_name": name, "persona_name": name,
            "source_mode": "mini_game_invite", "source_tag": game, "active_channels": channels,
            "source_links": [], "turn_id": turn_id, "next_schedule_fixed_mode": false,
            "invite": {"session_id": sid, "game_type": game, "game_url": format!(
                "{}?lanlan_name={}&session_id={}", launch_path(game), enc(name), enc(&sid))},
        }))
    }
}

fn system_prompt(st: &AppState, name: &str) -> String {
    let profile = st.characters.profile(name).unwrap_or(Value::Null);
    profile
        .get("system_prompt")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(|p| p.replace("{name}", name))
        .unwrap_or_else(|| {
            format!("You are {name}, a warm and playful desktop companion character.")
        })
}

async fn recent_context(st: &AppState, name: &str) -> String {
    st.history
        .tail(name, 6)
        .await
        .iter()
        .filter_map(|e| {
            let who = match e.speaker {
                Speaker::Human => "User",
                Speaker::Ai => name,
                Speaker::System => return None,
            };
            Some(format!(
                "{who}: {}",
                e.text().chars().take(300).collect::<String>()
            ))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn append_recent(st: &AppState, name: &str, text: &str) {
    if let Err(e) = st.history.append(name, vec![Entry::ai(text)]).await {
        tracing::warn!("cannot append the proactive message to the history of {name}: {e}");
    }
}

async fn bump_totals(st: &AppState, name: &str, invited: bool) {
    let name = name.to_string();
    let r = st
        .store
        .update(TOTALS_DOC, move |cur: Option<Totals>| {
            let mut t = cur.unwrap_or_default();
            t.version = 2;
            *t.totals.entry(name.clone()).or_insert(0) += 1;
            if invited {
                t.ever_delivered.insert(name, true);
            }
            (t, ())
        })
        .await;
    if let Err(e) = r {
        tracing::warn!("cannot update the proactive totals: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similarity_measure() {
        assert_eq!(similarity("Hello there!", "hello  there!"), 1.0);
        assert!(
            similarity(
                "Want to watch a movie tonight?",
                "Want to watch a movie tonight"
            ) >= 0.9
        );
        assert!(similarity("Good morning", "The weather is bad") < 0.5);
        assert_eq!(stage_of("PASS_DUPLICATE"), "dedup");
        assert_eq!(launch_path("nope"), "/soccer_demo");
    }

    #[test]
    fn chat_keywords_pick_a_choice() {
        assert_eq!(chat_choice("No thanks, maybe later"), "decline");
        assert_eq!(chat_choice("not now, I'm busy"), "later");
        assert_eq!(chat_choice("sure, let's play!"), "accept");
        assert_eq!(chat_choice("好啊，一起玩"), "accept");
        assert_eq!(chat_choice("我不玩"), "decline");
        assert_eq!(chat_choice("I read a book today"), "later");
        assert_eq!(chat_choice("what's the weather"), "later");
    }

    #[test]
    fn invite_cooldown_needs_time_and_chats() {
        let mut inv = Invite::default();
        inv.cooldowns.insert(
            "soccer".into(),
            Cooldown {
                until: 100,
                chats_needed: 2,
            },
        );
        assert!(!inv.available_games(200).contains(&"soccer"));
        inv.chat_delivered();
        inv.chat_delivered();
        assert!(inv.available_games(200).contains(&"soccer"));
        assert!(!inv.available_games(50).contains(&"soccer"));
    }
}

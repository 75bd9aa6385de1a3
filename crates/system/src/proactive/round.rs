//! One proactive round: entry guards, the activity gate, source selection, the
//! model call, dedup and delivery over the open chat connection; each outcome has a
//! reason code and a stage.

use companiond_core::frames::{Marks, ServerFrame};
use std::collections::HashMap;
use std::time::Duration;

use companiond_core::history::{Entry, Speaker};
use companiond_core::llm::{ChatMessage, LlmError};
use companiond_core::providers::Slot;
use companiond_core::AppState;
use serde::{Deserialize, Serialize};

use super::invitations::game_url;
use super::{lock, Proactive, ProactiveBody};
use crate::activity::Tracker;
use crate::error::{BusyState, SysResult, SystemError};
use crate::model;

pub const TOTALS_DOC: &str = "state/proactive_chat_totals.json";
/// The user counts as away beyond this idle time.
pub const AWAY_IDLE_SECONDS: f64 = 600.0;
/// Whole-round timeout.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(45);

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
/// How a round ended when it did not fail.
#[derive(Debug)]
pub enum Outcome {
    /// Nothing was sent; the reason code says why.
    Pass {
        code: &'static str,
        message: &'static str,
    },
    /// A message or an invitation reached the open chat.
    Delivered(Delivery),
}

/// What a round delivered.
#[derive(Debug)]
pub struct Delivery {
    pub name: String,
    pub text: String,
    /// `music`, `window`, `chat` or `mini_game_invite`.
    pub source_mode: &'static str,
    pub source_tag: String,
    /// How many chat connections received it.
    pub channels: usize,
    pub turn_id: String,
    pub invite: Option<InviteLink>,
}

/// The invitation a round delivered and the page that opens its game.
#[derive(Debug)]
pub struct InviteLink {
    pub session_id: String,
    pub game_type: String,
    pub game_url: String,
}

fn pass(code: &'static str, message: &'static str) -> Outcome {
    Outcome::Pass { code, message }
}

/// Persisted totals.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    pub version: i64,
    pub totals: HashMap<String, i64>,
    pub ever_delivered: HashMap<String, bool>,
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

impl Proactive {
    /// `POST /api/proactive_chat`.
    pub async fn run(
        &self,
        st: &AppState,
        tracker: &Tracker,
        body: &ProactiveBody,
    ) -> SysResult<Outcome> {
        let name = match body.named() {
            Some(n) => n,
            None => st.characters.current(),
        };
        if name.trim().is_empty() || !st.characters.exists(&name) {
            return Err(SystemError::ProactiveCharacterNotFound(format!(
                "character {name:?} does not exist"
            )));
        }
        {
            let mut running = lock(&self.running);
            if !running.insert(name.clone()) {
                return Err(SystemError::ProactiveBusy {
                    message: "another proactive round is running".into(),
                    state: BusyState::RoundRunning {
                        proactive_running: true,
                        lanlan_name: name,
                    },
                });
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
        // The AI is answering the user right now, or a page is still playing
        // its speech (voice_play_start without voice_play_end; docs/voice.md).
        let mgr = st.sessions.get(&name);
        let speaking = mgr.as_ref().is_some_and(|m| m.is_audio_playing());
        if speaking || mgr.is_some_and(|m| m.is_turn_running()) {
            let message = if speaking {
                "the character is speaking"
            } else {
                "the AI is responding"
            };
            return Err(SystemError::ProactiveBusy {
                message: message.into(),
                state: BusyState::Responding {
                    ai_responding: true,
                    proactive_running: false,
                    lanlan_name: name,
                },
            });
        }
        match tokio::time::timeout(ROUND_TIMEOUT, self.round(st, tracker, body, &name)).await {
            Ok(r) => r,
            Err(_) => Err(SystemError::ProactiveTimeout(
                "the proactive round timed out".into(),
            )),
        }
    }

    async fn round(
        &self,
        st: &AppState,
        tracker: &Tracker,
        body: &ProactiveBody,
        name: &str,
    ) -> SysResult<Outcome> {
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
        let invites_on = body.invites_enabled();
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
        let lang = body.language();
        // The character's prompt (companiond_core::prompt), one-shot: the
        // post-history instructions close the system text.
        let scan: Vec<String> = vec![recent.clone(), material.prompt.clone()];
        let mut sys = companiond_core::prompt::for_character(st, name, &scan)
            .await
            .single();
        sys.push_str(
            "\n\nYou are starting a conversation on your own initiative. Write one short, natural \
             message (at most two sentences) to the user based on the context. If there is \
             nothing natural to say, answer exactly [PASS].",
        );
        if let Some(l) = &lang {
            sys.push_str(&format!(" Reply in the language with code {l}."));
        }
        let opts = model::options(name, Duration::from_secs(30), 0.8, Some(200));
        let msgs = model::one_shot(sys, material.prompt.clone());
        let reply = match st.llm.complete(Slot::Conversation, &msgs, &opts).await {
            // Cut at its token cap: keep the whole sentences.
            Ok(c) if c.finish_reason.as_deref() == Some("length") => {
                companiond_core::text::whole_sentences(&c.content).to_string()
            }
            Ok(c) => c.content,
            Err(LlmError::NotConfigured) => {
                return Ok(pass(
                    "PASS_MODEL_UNAVAILABLE",
                    "no language model is configured",
                ))
            }
            Err(LlmError::Timeout) => {
                return Err(SystemError::ProactiveTimeout(
                    "the language model timed out".into(),
                ))
            }
            Err(e) => {
                return Err(SystemError::ProactiveModelFailed {
                    message: e.to_string(),
                    detail: e.code(),
                })
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
        let marks = || Marks {
            proactive: true,
            turn_id: Some(turn_id.clone()),
            ..Marks::default()
        };
        let channels = mgr.notify(ServerFrame::AssistantDelta {
            text: text.clone(),
            marks: Marks {
                source_mode: Some(material.mode.to_string()),
                ..marks()
            },
        });
        if channels == 0 {
            return Ok(pass(
                "DELIVERY_FAILED",
                "no chat connection accepted the message",
            ));
        }
        mgr.notify(ServerFrame::TurnEnd { marks: marks() });
        mgr.push_history(ChatMessage::assistant(text.clone())).await;
        append_recent(st, name, &text).await;
        self.record_sent(name, &text, now);
        bump_totals(st, name, false).await;
        Ok(Outcome::Delivered(Delivery {
            name: name.to_string(),
            text,
            source_mode: material.mode,
            source_tag: material.tag,
            channels,
            turn_id,
            invite: None,
        }))
    }

    async fn deliver_invite(
        &self,
        st: &AppState,
        mgr: &companiond_core::sessions::SessionManager,
        name: &str,
        game: &str,
        now: i64,
    ) -> SysResult<Outcome> {
        let sid = self.mark_invited(name, game, now);
        let text = format!("Want to play {} with me?", game.replace(['_', '-'], " "));
        let turn_id = uuid::Uuid::new_v4().simple().to_string();
        let channels = mgr.notify(ServerFrame::MiniGameInvite {
            session_id: sid.clone(),
            game_type: game.to_string(),
            text: text.clone(),
            turn_id: turn_id.clone(),
            persona_name: name.to_string(),
        });
        if channels == 0 {
            self.withdraw_invite(name);
            return Ok(pass(
                "DELIVERY_FAILED",
                "no chat connection accepted the invitation",
            ));
        }
        self.record_sent(name, &text, now);
        bump_totals(st, name, true).await;
        let game_url = game_url(game, name, &sid);
        Ok(Outcome::Delivered(Delivery {
            name: name.to_string(),
            text,
            source_mode: "mini_game_invite",
            source_tag: game.to_string(),
            channels,
            turn_id,
            invite: Some(InviteLink {
                session_id: sid,
                game_type: game.to_string(),
                game_url,
            }),
        }))
    }
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

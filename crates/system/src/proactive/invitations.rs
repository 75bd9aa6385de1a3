//! The mini-game invitation state machine: a round may invite the user to a game;
//! the user accepts, declines or postpones it (by route or by chatting on), and
//! cooldowns keep a game from being offered again too soon.

use companiond_core::frames::ServerFrame;
use std::collections::HashMap;

use companiond_core::envelope::loose;
use companiond_core::AppState;
use rand::Rng;
use serde::Deserialize;
use utoipa::ToSchema;

use super::round::Totals;
use super::{lock, Proactive};
use crate::error::{SysResult, SystemError};
use crate::persona::PersonaName;

/// Invitation odds per eligible round, and the forced first invitation.
pub const INVITE_ODDS: f64 = 0.12;
pub const FORCED_INVITE_AFTER: i64 = 3;
/// Invitation cooldowns: (time, later delivered chats).
pub const ACCEPT_COOLDOWN: (i64, u32) = (2 * 3600 * 1000, 10);
pub const DECLINE_COOLDOWN: (i64, u32) = (5 * 3600 * 1000, 10);
pub const LATER_SUPPRESS: i64 = 300 * 1000;

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

/// The page that opens `game` for the character `name` and the invitation `session_id`.
pub fn game_url(game: &str, name: &str, session_id: &str) -> String {
    format!(
        "{}?lanlan_name={}&session_id={}",
        launch_path(game),
        enc(name),
        enc(session_id)
    )
}

/// How a response to an invitation ended.
#[derive(Debug)]
pub struct Resolution {
    pub name: String,
    pub session_id: String,
    /// `expired` (nothing was pending under that session), `open_game`, `cooldown`
    /// or `suppress`.
    pub action: &'static str,
    /// For `open_game`: the game type and its page.
    pub game: Option<(String, String)>,
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
    pub(super) fn chat_delivered(&mut self) {
        for c in self.cooldowns.values_mut() {
            c.chats_needed = c.chats_needed.saturating_sub(1);
        }
    }
}

/// `POST /api/mini_game/invite/respond`. A field of another type counts as absent.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"persona_name": "Companion", "session_id": "abc", "choice": "accept"}))]
pub struct InviteRespondBody {
    /// Else the current character.
    #[serde(flatten)]
    persona: PersonaName,
    /// The pending invitation (at most 128 characters).
    #[serde(default, deserialize_with = "loose::or_none")]
    session_id: Option<String>,
    /// `accept`, `decline` or `later` (any case).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(
        value_type = String,
        required = true,
        pattern = "^ *([aA][cC][cC][eE][pP][tT]|[dD][eE][cC][lL][iI][nN][eE]|[lL][aA][tT][eE][rR]) *$"
    )]
    choice: Option<String>,
}

impl Proactive {
    /// Apply the user's response to the pending invitation.
    pub fn respond(
        &self,
        st: &AppState,
        body: &InviteRespondBody,
        now: i64,
    ) -> SysResult<Resolution> {
        let name = body.persona.or_current(st)?;
        let choice = body
            .choice
            .as_deref()
            .map(|s| s.trim().to_ascii_lowercase())
            .unwrap_or_default();
        if !matches!(choice.as_str(), "accept" | "decline" | "later") {
            return Err(SystemError::InvalidChoice(
                "choice must be accept, decline or later".into(),
            ));
        }
        let session_id = body
            .session_id
            .as_deref()
            .map(|s| s.trim().chars().take(128).collect::<String>())
            .unwrap_or_default();
        let mut invites = lock(&self.invites);
        let inv = invites.entry(name.clone()).or_default();
        if !inv.pending() || inv.pending_session_id.as_deref() != Some(session_id.as_str()) {
            return Ok(Resolution {
                name,
                session_id,
                action: "expired",
                game: None,
            });
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
            m.notify(ServerFrame::MiniGameInviteResolved {
                session_id: session_id.clone(),
                action,
            });
        }
        let game = (action == "open_game").then(|| {
            let url = game_url(&game, &name, &session_id);
            (game, url)
        });
        Ok(Resolution {
            name,
            session_id,
            action,
            game,
        })
    }

    /// The user chatted while an invitation was pending: keywords pick a choice
    /// (decline beats later beats accept); any other message dismisses it like
    /// "later". Returns the resolution, if any.
    pub fn on_chat_input(
        &self,
        st: &AppState,
        name: &str,
        text: &str,
        now: i64,
    ) -> Option<Resolution> {
        let session_id = {
            let invites = lock(&self.invites);
            let inv = invites.get(name)?;
            if !inv.pending() {
                return None;
            }
            inv.pending_session_id.clone()?
        };
        let body = InviteRespondBody {
            persona: PersonaName::of(name),
            session_id: Some(session_id),
            choice: Some(chat_choice(text).to_string()),
        };
        self.respond(st, &body, now).ok()
    }

    /// Should this round deliver an invitation? Returns the game type.
    pub(super) fn invite_due(
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

    /// The invitation reached no chat connection: back to idle, cooldowns kept.
    pub(super) fn withdraw_invite(&self, name: &str) {
        if let Some(inv) = lock(&self.invites).get_mut(name) {
            *inv = Invite {
                cooldowns: std::mem::take(&mut inv.cooldowns),
                ..Default::default()
            };
        }
    }

    pub(super) fn mark_invited(&self, name: &str, game: &str, now: i64) -> String {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_keywords_pick_a_choice() {
        crate::testing::assert_maps(
            chat_choice,
            &[
                ("No thanks, maybe later", "decline"),
                ("not now, I'm busy", "later"),
                ("sure, let's play!", "accept"),
                ("好啊，一起玩", "accept"),
                ("我不玩", "decline"),
                ("I read a book today", "later"),
                ("what's the weather", "later"),
            ],
        );
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

//! `/api/proactive_chat`, `/api/proactive/music_played_through` and
//! `/api/mini_game/invite/respond`.

use axum::extract::State;
use axum::Json;
use companiond_core::envelope::BodyOf;
use companiond_core::{now_millis, AppState, Ext};
use serde::Serialize;
use utoipa::ToSchema;

use super::bodies::{InviteRespondBody, MusicPlayedBody, ProactiveBody};
use crate::error::SysResult;
use crate::proactive::invitations::Resolution;
use crate::proactive::round::{stage_of, Outcome};
use crate::state::SystemState;

/// The answer of `POST /api/proactive_chat`: a pass (nothing sent, the reason
/// code says why) or a delivered message.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum ProactiveRound {
    Pass(ProactivePass),
    Chat(Box<ProactiveDelivered>),
}

/// Nothing was sent.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "action": "pass", "reason_code": "DELIVERY_FAILED",
    "stage": "delivery", "message": "no chat connection is open for this character",
    "next_schedule_fixed_mode": false}))]
pub struct ProactivePass {
    success: bool,
    /// Always `pass`.
    action: &'static str,
    /// `PASS_SOURCE_EMPTY`, `DELIVERY_FAILED`, ...
    reason_code: &'static str,
    /// The stage the round ended in.
    stage: &'static str,
    message: &'static str,
    next_schedule_fixed_mode: bool,
}

/// A message (or a mini-game invitation) reached the open chat.
#[derive(Serialize, ToSchema)]
pub struct ProactiveDelivered {
    success: bool,
    /// Always `chat`.
    action: &'static str,
    /// Always `CHAT_DELIVERED`.
    reason_code: &'static str,
    /// Always `delivery`.
    stage: &'static str,
    /// The text sent.
    message: String,
    lanlan_name: String,
    persona_name: String,
    /// `music`, `window`, `chat` or `mini_game_invite`.
    source_mode: &'static str,
    source_tag: String,
    /// How many chat connections received it.
    active_channels: usize,
    /// Always empty.
    source_links: Vec<String>,
    turn_id: String,
    next_schedule_fixed_mode: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    invite: Option<MiniGameInvite>,
}

/// The mini-game invitation a round delivered.
#[derive(Serialize, ToSchema)]
pub struct MiniGameInvite {
    session_id: String,
    game_type: String,
    /// The page that opens the game.
    game_url: String,
}

/// `POST /api/proactive/music_played_through`.
#[derive(Serialize, ToSchema)]
pub struct MusicCleared {
    success: bool,
    /// How many recorded music sources were cleared.
    cleared: usize,
    lanlan_name: String,
    persona_name: String,
}

/// `POST /api/mini_game/invite/respond`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "action": "expired", "session_id": "abc",
    "lanlan_name": "Companion", "persona_name": "Companion",
    "message": "the invitation is no longer pending"}))]
pub struct InviteAnswered {
    success: bool,
    /// `expired` (nothing pending under that session), `open_game`, `cooldown`
    /// or `suppress`.
    action: &'static str,
    session_id: String,
    lanlan_name: String,
    persona_name: String,
    /// For `expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'static str>,
    /// For `open_game` (so is `game_url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    game_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    game_url: Option<String>,
}

/// `POST /api/proactive_chat`: one proactive round.
pub async fn proactive_chat(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    BodyOf(b): BodyOf<ProactiveBody>,
) -> SysResult<Json<ProactiveRound>> {
    let outcome = sys.proactive.run(&st, &sys.tracker, &b).await?;
    Ok(Json(match outcome {
        Outcome::Pass { code, message } => ProactiveRound::Pass(ProactivePass {
            success: true,
            action: "pass",
            reason_code: code,
            stage: stage_of(code),
            message,
            next_schedule_fixed_mode: false,
        }),
        Outcome::Delivered(d) => ProactiveRound::Chat(Box::new(ProactiveDelivered {
            success: true,
            action: "chat",
            reason_code: "CHAT_DELIVERED",
            stage: "delivery",
            message: d.text,
            lanlan_name: d.name.clone(),
            persona_name: d.name,
            source_mode: d.source_mode,
            source_tag: d.source_tag,
            active_channels: d.channels,
            source_links: Vec::new(),
            turn_id: d.turn_id,
            next_schedule_fixed_mode: false,
            invite: d.invite.map(|i| MiniGameInvite {
                session_id: i.session_id,
                game_type: i.game_type,
                game_url: i.game_url,
            }),
        })),
    }))
}

/// `POST /api/proactive/music_played_through`: the recommended song was heard to
/// the end, so its source may be used again.
pub async fn music_played_through(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    BodyOf(b): BodyOf<MusicPlayedBody>,
) -> SysResult<Json<MusicCleared>> {
    let name = b.persona.or_current(&st)?;
    let cleared = sys.proactive.clear_music(&name);
    Ok(Json(MusicCleared {
        success: true,
        cleared,
        lanlan_name: name.clone(),
        persona_name: name,
    }))
}

/// `POST /api/mini_game/invite/respond`.
pub async fn invite_respond(
    State(st): State<AppState>,
    Ext(sys): Ext<SystemState>,
    BodyOf(b): BodyOf<InviteRespondBody>,
) -> SysResult<Json<InviteAnswered>> {
    let r: Resolution = sys.proactive.respond(&st, &b, now_millis())?;
    let (game_type, game_url) = r.game.unzip();
    Ok(Json(InviteAnswered {
        success: true,
        action: r.action,
        session_id: r.session_id,
        lanlan_name: r.name.clone(),
        persona_name: r.name,
        message: (r.action == "expired").then_some("the invitation is no longer pending"),
        game_type,
        game_url,
    }))
}

//! `/api/proactive_chat`, `/api/proactive/music_played_through` and
//! `/api/mini_game/invite/respond`.

use axum::Json;
use companiond_core::now_millis;
use serde_json::{json, Value};

use super::ObjectCall;
use crate::error::SysResult;
use crate::persona;
use crate::proactive::invitations::Resolution;
use crate::proactive::round::{stage_of, Outcome};

/// `POST /api/proactive_chat`: one proactive round.
pub async fn proactive_chat(ObjectCall(st, sys, b): ObjectCall) -> SysResult<Json<Value>> {
    let outcome = sys.proactive.run(&st, &sys.tracker, &b).await?;
    Ok(Json(match outcome {
        Outcome::Pass { code, message } => json!({
            "success": true, "action": "pass", "reason_code": code, "stage": stage_of(code),
            "message": message, "next_schedule_fixed_mode": false,
        }),
        Outcome::Delivered(d) => {
            let mut v = json!({
                "success": true, "action": "chat", "reason_code": "CHAT_DELIVERED",
                "stage": "delivery", "message": d.text, "lanlan_name": d.name,
                "persona_name": d.name, "source_mode": d.source_mode,
                "source_tag": d.source_tag, "active_channels": d.channels, "source_links": [],
                "turn_id": d.turn_id, "next_schedule_fixed_mode": false,
            });
            if let Some(i) = d.invite {
                v["invite"] = json!({"session_id": i.session_id, "game_type": i.game_type,
                                     "game_url": i.game_url});
            }
            v
        }
    }))
}

/// `POST /api/proactive/music_played_through`: the recommended song was heard to
/// the end, so its source may be used again.
pub async fn music_played_through(ObjectCall(st, sys, b): ObjectCall) -> SysResult<Json<Value>> {
    let name = persona::named_or_current(&st, &b)?;
    let cleared = sys.proactive.clear_music(&name);
    Ok(Json(
        json!({"success": true, "cleared": cleared, "lanlan_name": name, "persona_name": name}),
    ))
}

/// `POST /api/mini_game/invite/respond`.
pub async fn invite_respond(ObjectCall(st, sys, b): ObjectCall) -> SysResult<Json<Value>> {
    let r: Resolution = sys.proactive.respond(&st, &b, now_millis())?;
    let mut v = json!({"success": true, "action": r.action, "session_id": r.session_id,
                       "lanlan_name": r.name, "persona_name": r.name});
    if r.action == "expired" {
        v["message"] = json!("the invitation is no longer pending");
    }
    if let Some((game, url)) = r.game {
        v["game_type"] = json!(game);
        v["game_url"] = json!(url);
    }
    Ok(Json(v))
}

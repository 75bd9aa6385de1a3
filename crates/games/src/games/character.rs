//! Game character info (`GET /api/game/{game_type}/character`): the model type
//! and model paths of a character, read from its profile in the characters file.
//!
//! The stored avatar is read by core's one accessor (`Profile::avatar`); this
//! module turns its paths into URLs the game pages load.

use companiond_core::AppState;
use serde::Serialize;

use crate::text::truncate_chars;

fn unsafe_path(p: &str) -> bool {
    p.contains("..") || p.contains('\0') || p.contains('\\')
}

/// Make a stored model path a URL path the frontend can load.
pub fn model_url(kind: &str, raw: &str) -> String {
    let p = raw.trim();
    if p.is_empty() || unsafe_path(p) {
        return String::new();
    }
    if p.starts_with("http://") || p.starts_with("https://") || p.starts_with('/') {
        return p.to_string();
    }
    match kind {
        "live2d" => {
            if !p.contains('/') && !p.contains('.') {
                format!("/static/{p}/{p}.model3.json")
            } else {
                format!("/static/{p}")
            }
        }
        "mmd" | "vrm" => {
            let prefix = format!("{kind}/");
            if p.starts_with(&prefix) {
                format!("/static/{p}")
            } else {
                format!("/static/{kind}/{p}")
            }
        }
        _ => format!("/user_pngtuber/{p}"),
    }
}

/// The model type and model paths of a game character.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CharacterInfo {
    pub persona_name: String,
    pub model_type: String,
    /// `vrm` or `mmd` for a 3D model, else empty.
    pub live3d_sub_type: String,
    pub live2d_path: String,
    pub mmd_path: String,
    pub vrm_path: String,
    pub pngtuber_path: String,
    pub language: String,
}

/// The game character info of `persona` (an existing character).
pub fn info(st: &AppState, persona: &str) -> CharacterInfo {
    let profile = st.characters.profile(persona).unwrap_or_default();
    let avatar = profile.avatar();
    let model_type = avatar.model_type.clone();
    let (live2d_path, mmd_path, vrm_path) = (
        model_url("live2d", &avatar.live2d),
        model_url("mmd", &avatar.mmd),
        model_url("vrm", &avatar.vrm),
    );
    let stored_sub = avatar.live3d_sub_type.clone();
    let live3d_sub_type = if matches!(stored_sub.as_str(), "vrm" | "mmd") {
        stored_sub
    } else if matches!(model_type.as_str(), "vrm" | "mmd") {
        model_type.clone()
    } else if model_type == "live3d" {
        if !mmd_path.is_empty() {
            "mmd".into()
        } else if !vrm_path.is_empty() {
            "vrm".into()
        } else {
            String::new()
        }
    } else {
        String::new()
    };
    CharacterInfo {
        persona_name: persona.to_string(),
        model_type,
        live3d_sub_type,
        live2d_path,
        mmd_path,
        vrm_path,
        pngtuber_path: model_url("pngtuber", &avatar.pngtuber_idle),
        language: profile
            .text("language")
            .map(|l| truncate_chars(l, 2048))
            .unwrap_or_default(),
    }
}

//! Game character info (`GET /api/game/{game_type}/character`): the model type
//! and model paths of a character, read from its profile in the characters file.
//!
//! Lookup order for each field: `_reserved.avatar.<..>`, then `avatar.<..>`, then
//! the legacy top-level profile fields. `model_type` falls back to `live2d`.

use companiond_core::AppState;
use serde::Serialize;
use serde_json::{json, Value};

use crate::text::truncate_chars;

/// The value reported when a profile names no model type.
pub const FALLBACK_MODEL_TYPE: &str = "live2d";

fn avatar_of(profile: &Value) -> Value {
    profile
        .get("_reserved")
        .and_then(|r| r.get("avatar"))
        .filter(|a| a.is_object())
        .or_else(|| profile.get("avatar").filter(|a| a.is_object()))
        .cloned()
        .unwrap_or_else(|| json!({}))
}

fn string_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str().map(str::trim).filter(|s| !s.is_empty())
}

/// The first non-empty string among `candidates` (each a path into avatar or profile).
fn find(avatar: &Value, profile: &Value, in_avatar: &[&[&str]], in_profile: &[&[&str]]) -> String {
    in_avatar
        .iter()
        .find_map(|p| string_at(avatar, p))
        .or_else(|| in_profile.iter().find_map(|p| string_at(profile, p)))
        .map(|s| truncate_chars(s, 2048))
        .unwrap_or_default()
}

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
    let profile = st.characters.profile(persona).unwrap_or_else(|| json!({}));
    let avatar = avatar_of(&profile);
    let model_type = {
        let t =
            find(&avatar, &profile, &[&["model_type"]], &[&["model_type"]]).to_ascii_lowercase();
        if t.is_empty() {
            FALLBACK_MODEL_TYPE.to_string()
        } else {
            t
        }
    };
    let live2d = find(
        &avatar,
        &profile,
        &[&["live2d", "model_path"], &["live2d_path"], &["live2d"]],
        &[&["live2d_path"], &["live2d"]],
    );
    let mmd = find(
        &avatar,
        &profile,
        &[&["mmd", "model_path"], &["mmd_path"], &["mmd"]],
        &[&["mmd_path"], &["mmd", "model_path"], &["mmd"]],
    );
    let vrm = find(
        &avatar,
        &profile,
        &[&["vrm", "model_path"], &["vrm_path"], &["vrm"]],
        &[&["vrm_path"], &["vrm", "model_path"], &["vrm"]],
    );
    let png = find(
        &avatar,
        &profile,
        &[&["pngtuber", "idle_image"]],
        &[&["pngtuber", "idle_image"]],
    );
    let (live2d_path, mmd_path, vrm_path) = (
        model_url("live2d", &live2d),
        model_url("mmd", &mmd),
        model_url("vrm", &vrm),
    );
    let stored_sub = find(
        &avatar,
        &profile,
        &[&["live3d_sub_type"]],
        &[&["live3d_sub_type"]],
    )
    .to_ascii_lowercase();
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
        pngtuber_path: model_url("pngtuber", &png),
        language: find(&avatar, &profile, &[], &[&["language"]]),
    }
}

//! A character's profile: the one type every family reads a character through.
//!
//! The profile is stored as the original application wrote it (a JSON object
//! whose keys are its own, Chinese ones included, plus companiond's
//! `_reserved` block), so [`Profile`] keeps the whole object: unknown keys are
//! preserved on every write, and the JSON stays readable as a value (`Deref`
//! to [`Value`]). What the house interprets is read through the accessors here
//! and nowhere else: the system prompt, the voice, the avatar.

use std::ops::Deref;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::cards::CARD_KEY;

/// A character's profile (always a JSON object).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Profile(Value);

impl Default for Profile {
    fn default() -> Self {
        Profile(Value::Object(Map::new()))
    }
}

impl Deref for Profile {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0
    }
}

impl From<Value> for Profile {
    /// A stored value; anything but an object is an empty profile.
    fn from(v: Value) -> Profile {
        match v {
            Value::Object(_) => Profile(v),
            _ => Profile::default(),
        }
    }
}

impl From<Profile> for Value {
    fn from(p: Profile) -> Value {
        p.0
    }
}

/// The default system prompt of a character named `name`.
pub fn default_system_prompt(name: &str) -> String {
    format!(
        "You are {name}, a warm and playful desktop companion character. Keep answers short and natural."
    )
}

impl Profile {
    /// The profile as a JSON value.
    pub fn into_value(self) -> Value {
        self.0
    }

    /// The profile's keys.
    pub fn as_map(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.0
            .as_object()
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }

    /// A trimmed, non-empty text at `key`.
    pub fn text(&self, key: &str) -> Option<&str> {
        text_of(self.0.get(key))
    }

    /// `_reserved.<key>`: companiond's own block.
    pub fn reserved(&self, key: &str) -> Option<&Value> {
        self.0.get("_reserved").and_then(|r| r.get(key))
    }

    /// The `data` of an imported character card (`_reserved.character_card`).
    pub fn card_data(&self) -> Option<&Map<String, Value>> {
        self.reserved(CARD_KEY)
            .and_then(|c| c.get("data"))
            .and_then(Value::as_object)
    }

    /// The system prompt as written: the profile's `system_prompt`, else the
    /// reserved one, else the card's; `None` when none is set.
    pub fn written_system_prompt(&self) -> Option<&str> {
        self.text("system_prompt")
            .or_else(|| text_of(self.reserved("system_prompt")))
            .or_else(|| {
                self.card_data()
                    .and_then(|d| text_of(d.get("system_prompt")))
            })
    }

    /// The system prompt of the character named `name` (macros not yet applied):
    /// as written, else [`default_system_prompt`].
    pub fn system_prompt(&self, name: &str) -> String {
        self.written_system_prompt()
            .map(str::to_string)
            .unwrap_or_else(|| default_system_prompt(name))
    }

    /// The description: `description`, the original's `描述`, else the card's.
    pub fn description(&self) -> Option<&str> {
        self.text("description")
            .or_else(|| self.text("描述"))
            .or_else(|| self.card_data().and_then(|d| text_of(d.get("description"))))
    }

    /// The voice the character speaks with (`voice_id`).
    pub fn voice_id(&self) -> Option<&str> {
        self.text("voice_id")
    }

    /// The character's avatar (see [`Avatar`]).
    pub fn avatar(&self) -> Avatar {
        let block = self
            .reserved("avatar")
            .filter(|a| a.is_object())
            .or_else(|| self.0.get("avatar").filter(|a| a.is_object()));
        let find = |in_avatar: &[&[&str]], in_profile: &[&[&str]]| -> String {
            in_avatar
                .iter()
                .find_map(|p| block.and_then(|b| string_at(b, p)))
                .or_else(|| in_profile.iter().find_map(|p| string_at(&self.0, p)))
                .map(|s| s.chars().take(2048).collect())
                .unwrap_or_default()
        };
        let model_type = find(&[&["model_type"]], &[&["model_type"]]).to_ascii_lowercase();
        Avatar {
            model_type: if model_type.is_empty() {
                "live2d".into()
            } else {
                model_type
            },
            live3d_sub_type: find(&[&["live3d_sub_type"]], &[&["live3d_sub_type"]])
                .to_ascii_lowercase(),
            live2d: find(
                &[&["live2d", "model_path"], &["live2d_path"], &["live2d"]],
                &[&["live2d_path"], &["live2d"]],
            ),
            mmd: find(
                &[&["mmd", "model_path"], &["mmd_path"], &["mmd"]],
                &[&["mmd_path"], &["mmd", "model_path"], &["mmd"]],
            ),
            vrm: find(
                &[&["vrm", "model_path"], &["vrm_path"], &["vrm"]],
                &[&["vrm_path"], &["vrm", "model_path"], &["vrm"]],
            ),
            pngtuber_idle: find(
                &[&["pngtuber", "idle_image"]],
                &[&["pngtuber", "idle_image"]],
            ),
        }
    }
}

/// What a character looks like, as stored. Each field is read from
/// `_reserved.avatar`, then `avatar`, then the profile's own (legacy) keys;
/// an empty string when none is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Avatar {
    /// `live2d` (the default), `vrm`, `mmd`, `live3d`, `pngtuber`, ... (lower case).
    pub model_type: String,
    /// `vrm` or `mmd` as stored for a `live3d` model (lower case; may be empty).
    pub live3d_sub_type: String,
    /// The Live2D model (a folder name or a path).
    pub live2d: String,
    /// The MMD model path.
    pub mmd: String,
    /// The VRM model path.
    pub vrm: String,
    /// The PNGTuber idle image.
    pub pngtuber_idle: String,
}

fn text_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn string_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    text_of(Some(cur))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_every_key_and_reads_the_known_ones() {
        let v = json!({"描述": "a cat", "voice_id": " v1 ", "extra": {"x": 1},
            "_reserved": {"avatar": {"model_type": "VRM", "vrm": {"model_path": "a.vrm"}}}});
        let p = Profile::from(v.clone());
        assert_eq!(serde_json::to_value(&p).ok(), Some(v));
        assert_eq!(p.description(), Some("a cat"));
        assert_eq!(p.voice_id(), Some("v1"));
        let a = p.avatar();
        assert_eq!((a.model_type.as_str(), a.vrm.as_str()), ("vrm", "a.vrm"));
        assert_eq!(p.system_prompt("Mika"), default_system_prompt("Mika"));
        assert_eq!(Profile::from(json!([1])), Profile::default());
        assert_eq!(Profile::default().avatar().model_type, "live2d");
        let card = Profile::from(
            json!({"_reserved": {"character_card": {"data": {"system_prompt": "be kind"}}}}),
        );
        assert_eq!(card.system_prompt("Mika"), "be kind");
    }
}

//! Emotion mappings: one JSON object per model name, stored as
//! `emotion_config/<model>.json` in the user MMD folder.

use std::path::PathBuf;

use serde_json::{Map, Value};

use companiond_core::paths::{safe_join, safe_name};
use companiond_core::store::read_json;
use companiond_core::task::blocking;

use crate::error::AvatarError;
use crate::layout::EMOTION_DIR;

use super::Mmd;

/// Longest model name accepted for an emotion mapping.
const MAX_MODEL_NAME: usize = 200;

/// A validated model name for an emotion mapping (no separators).
pub(super) fn mapping_name(model: &str) -> Result<&str, AvatarError> {
    let bad = || {
        AvatarError::invalid(
            "invalid_model",
            "model must be a plain model name without path separators",
        )
    };
    if model.is_empty()
        || model.chars().count() > MAX_MODEL_NAME
        || model.starts_with('.')
        || model.contains(['/', '\\'])
    {
        return Err(bad());
    }
    safe_name(model).map_err(|_| bad())
}

impl Mmd {
    fn mapping_path(&self, model: &str) -> Result<PathBuf, AvatarError> {
        let model = mapping_name(model)?;
        Ok(safe_join(
            &self.user.join(EMOTION_DIR),
            &format!("{model}.json"),
        )?)
    }

    /// `GET /emotion_mapping`: the stored mapping, `{}` when absent.
    pub async fn emotion_mapping(
        &self,
        model: Option<&str>,
    ) -> Result<Map<String, Value>, AvatarError> {
        let Some(model) = model.filter(|m| !m.trim().is_empty()) else {
            return Ok(Map::new());
        };
        let path = self.mapping_path(model)?;
        let v = blocking(move || {
            read_json::<Value>(&path).map_err(|e| {
                AvatarError::Internal(format!("the stored emotion mapping is unreadable: {e}"))
            })
        })
        .await?;
        Ok(match v {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        })
    }

    /// `POST /emotion_mapping`: store `mapping` for `model` (atomic write).
    pub async fn save_emotion_mapping(
        &self,
        model: &str,
        mapping: Map<String, Value>,
    ) -> Result<(), AvatarError> {
        let path = self.mapping_path(model)?;
        self.ensure_dirs().await?;
        self.store
            .write(path, Value::Object(mapping))
            .await
            .map_err(|e| AvatarError::io("cannot store the emotion mapping", e))
    }
}

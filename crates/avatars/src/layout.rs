//! Names of the reserved folders inside the user MMD folder
//! (`<data>/user_mmd`, served at `/user_mmd/`), shared by the MMD store and
//! the ZIP import (which must not extract over them).

/// Sub-folder of the user folder holding uploaded animations.
pub const ANIMATION_DIR: &str = "animation";
/// Sub-folder of the user folder holding the emotion mappings.
pub const EMOTION_DIR: &str = "emotion_config";

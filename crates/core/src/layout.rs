//! Every fixed path of the data dir, relative to it (the layout is documented
//! in the README). A document's owner module reads and writes it; this module only
//! names it, so the layout can be read in one place.

/// Provider settings, `recent_memory_auto_review`, `powerful_memory_enabled`.
pub const CORE_CONFIG: &str = "config/core_config.json";
/// The characters file.
pub const CHARACTERS: &str = "config/characters.json";
/// The flat files of a character unit (what a character's memory is made of), in
/// that order, inside `memory/<character>/`: the memory family creates them,
/// cloud save exports exactly those that exist.
pub const CHARACTER_UNIT_FILES: &[&str] = &[
    "recent.json",
    "settings.json",
    "facts.json",
    "facts_archive.json",
    "persona.json",
    "persona_corrections.json",
    "reflections.json",
    "reflections_archive.json",
    "surfaced.json",
    "time_indexed.db",
];
/// Character card images, by a generated file name (crate::cards).
pub const CARD_IMAGES: &str = "character_cards/images";
/// Character card (CHARX) assets, one generated folder per imported card.
pub const CARD_ASSETS: &str = "character_cards/assets";
/// Per-character memory directories: `memory/<character>/`.
pub const MEMORY: &str = "memory";
/// The maintenance / read-only fence (owned by the `fence` module).
pub const ROOT_STATE: &str = "state/root_state.json";
/// Token usage records (SQLite).
pub const TOKEN_USAGE_DB: &str = "state/token_usage.db";

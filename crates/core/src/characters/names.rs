//! The rules of a character name: what a new name may be, what an existing one
//! may be looked up as, and why a name is refused.

/// Route names a new character may not take: the first path segments the
/// application's pages and APIs already use.
pub const RESERVED_ROUTE_NAMES: &[&str] = &[
    "l2d",
    "model_manager",
    "live2d_parameter_editor",
    "live2d_emotion_manager",
    "vrm_emotion_manager",
    "mmd_emotion_manager",
    "voice_clone",
    "voice_identity",
    "api_key",
    "character_card_manager",
    "cloudsave_manager",
    "memory_browser",
    "cookies_login",
    "chat",
    "subtitle",
    "agenthud",
    "toast",
    "card_maker",
    "soccer_demo",
    "badminton_demo",
    "drawing_guess_demo",
    "watch_together",
    "jukebox",
    "static",
    "user_live2d",
    "user_live2d_local",
    "user_vrm",
    "user_mmd",
    "user_mods",
    "workshop",
    "api",
    "ws",
    "health",
];

/// Maximum name length in units (ASCII = 1, other characters = 2).
pub const MAX_NAME_UNITS: usize = 60;

/// Why a character name was refused; `code()` is the stable machine reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    Empty,
    ContainsPathSeparator,
    PathTraversal,
    UnsafeDot,
    ContainsDot,
    ReservedDeviceName,
    ReservedRouteName,
    InvalidCharacter,
    TooLong,
}

impl NameError {
    /// Every reason, in declaration order (the interface description lists them).
    pub const ALL: [NameError; 9] = [
        NameError::Empty,
        NameError::ContainsPathSeparator,
        NameError::PathTraversal,
        NameError::UnsafeDot,
        NameError::ContainsDot,
        NameError::ReservedDeviceName,
        NameError::ReservedRouteName,
        NameError::InvalidCharacter,
        NameError::TooLong,
    ];

    pub fn code(self) -> &'static str {
        match self {
            NameError::Empty => "empty",
            NameError::ContainsPathSeparator => "contains_path_separator",
            NameError::PathTraversal => "path_traversal",
            NameError::UnsafeDot => "unsafe_dot",
            NameError::ContainsDot => "contains_dot",
            NameError::ReservedDeviceName => "reserved_device_name",
            NameError::ReservedRouteName => "reserved_route_name",
            NameError::InvalidCharacter => "invalid_character",
            NameError::TooLong => "too_long_units",
        }
    }
    pub fn message(self) -> &'static str {
        match self {
            NameError::Empty => "the character name is empty",
            NameError::ContainsPathSeparator => "the character name may not contain / or \\",
            NameError::PathTraversal => "the character name may not contain ..",
            NameError::UnsafeDot => "the character name may not be . or end with a dot",
            NameError::ContainsDot => "the character name may not contain a dot",
            NameError::ReservedDeviceName => "the character name is a reserved device name",
            NameError::ReservedRouteName => "the character name is a reserved route name",
            NameError::InvalidCharacter => {
                "the character name contains a character that is not allowed"
            }
            NameError::TooLong => "the character name is too long",
        }
    }
}

/// Which rules apply.
#[derive(Clone, Copy, Debug)]
pub struct NameRules {
    /// Dots are allowed (existing/historical names), never for new names.
    pub allow_dots: bool,
    /// Reserved route names are refused (new names) or accepted (lookups of existing names).
    pub refuse_reserved_routes: bool,
}

impl NameRules {
    /// Rules for a new character or a rename target.
    pub const NEW: NameRules = NameRules {
        allow_dots: false,
        refuse_reserved_routes: true,
    };
    /// Rules for looking up an existing name.
    pub const EXISTING: NameRules = NameRules {
        allow_dots: true,
        refuse_reserved_routes: false,
    };
}

fn is_space_separator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\u{00A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// Validate a character name (trimmed first; the first failing rule wins).
/// Returns the trimmed name.
pub fn validate_name(raw: &str, rules: NameRules) -> Result<String, NameError> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.contains('/') || name.contains('\\') {
        return Err(NameError::ContainsPathSeparator);
    }
    if name.contains("..") {
        return Err(NameError::PathTraversal);
    }
    if name == "." || name.ends_with('.') {
        return Err(NameError::UnsafeDot);
    }
    if !rules.allow_dots && name.contains('.') {
        return Err(NameError::ContainsDot);
    }
    let stem = name
        .split('.')
        .next()
        .unwrap_or(name)
        .trim()
        .to_ascii_uppercase();
    let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CLOCK$")
        || ((stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.len() == 4
            && stem.as_bytes()[3].is_ascii_digit()
            && stem.as_bytes()[3] != b'0');
    if device {
        return Err(NameError::ReservedDeviceName);
    }
    if rules.refuse_reserved_routes && RESERVED_ROUTE_NAMES.contains(&name) {
        return Err(NameError::ReservedRouteName);
    }
    let allowed = |c: char| {
        c.is_alphanumeric()
            || is_space_separator(c)
            || matches!(
                c,
                '_' | '-' | '(' | ')' | '（' | '）' | '·' | '・' | '•' | '\'' | '’'
            )
            || (rules.allow_dots && c == '.')
    };
    if !name.chars().all(allowed) {
        return Err(NameError::InvalidCharacter);
    }
    let units: usize = name
        .chars()
        .map(|c| if (c as u32) <= 0x7F { 1 } else { 2 })
        .sum();
    if units > MAX_NAME_UNITS {
        return Err(NameError::TooLong);
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        let ok = [
            "Mika",
            "猫娘",
            "Anna Lee",
            "a_b-c",
            "x(1)",
            "李·华",
            "O'Neil",
            "ミク・初音",
            "ab\u{3000}cd",
        ];
        for n in ok {
            assert!(validate_name(n, NameRules::NEW).is_ok(), "{n}");
        }
        let bad = [
            ("", NameError::Empty),
            ("  ", NameError::Empty),
            ("a/b", NameError::ContainsPathSeparator),
            ("a\\b", NameError::ContainsPathSeparator),
            ("..", NameError::PathTraversal),
            ("a..b", NameError::PathTraversal),
            (".", NameError::UnsafeDot),
            ("x.", NameError::UnsafeDot),
            ("a.b", NameError::ContainsDot),
            ("CON", NameError::ReservedDeviceName),
            ("nul", NameError::ReservedDeviceName),
            ("com1", NameError::ReservedDeviceName),
            ("LPT9", NameError::ReservedDeviceName),
            ("api", NameError::ReservedRouteName),
            ("static", NameError::ReservedRouteName),
            ("a<b", NameError::InvalidCharacter),
            ("a:b", NameError::InvalidCharacter),
            ("a\tb", NameError::InvalidCharacter),
            ("a\u{200B}b", NameError::InvalidCharacter),
            ("a?b", NameError::InvalidCharacter),
        ];
        for (n, e) in bad {
            assert_eq!(validate_name(n, NameRules::NEW), Err(e), "{n:?}");
        }
        assert_eq!(
            validate_name(&"a".repeat(61), NameRules::NEW),
            Err(NameError::TooLong)
        );
        assert!(validate_name(&"a".repeat(60), NameRules::NEW).is_ok());
        assert_eq!(
            validate_name(&"猫".repeat(31), NameRules::NEW),
            Err(NameError::TooLong)
        );
        assert!(validate_name("COM0", NameRules::NEW).is_ok());
        assert!(validate_name("a.b", NameRules::EXISTING).is_ok());
        assert!(validate_name("api", NameRules::EXISTING).is_ok());
        assert_eq!(
            validate_name("con.txt", NameRules::EXISTING),
            Err(NameError::ReservedDeviceName)
        );
    }
}

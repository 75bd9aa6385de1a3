//! What the request bodies are made of: [`Field`], a key as sent and judged
//! when read; the character and session a call names ([`BodyCharacter`],
//! [`BodyCharacterOptional`], [`BodySession`], [`BodySessionRequired`]); the page's
//! signals ([`PageSignals`]). Each route's body type (beside its handler)
//! derives `Deserialize` and `ToSchema` from these: it is both the parser
//! ([`super::extract::Body`]) and the document (`Api::json_body`).

use companiond_core::AppState;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::error::{Failure, Reason};
use crate::games::game_routes::Signals;

/// Longest character name or session id accepted from a body (or a query).
pub(crate) const MAX_ID_CHARS: usize = 128;
/// Largest integer a JavaScript client represents exactly (2^53 - 1).
pub const MAX_SAFE_INT: i64 = (1 << 53) - 1;
/// Longest `gameStartedElapsedMs` taken into account (30 days).
const MAX_ELAPSED_MS: f64 = 30.0 * 24.0 * 3600.0 * 1000.0;

/// One key of a body as sent: absent, `null`, or any JSON value. Reading it
/// never fails; its readers judge it with the field's name.
///
/// Hand-written, not serde's typed fields or adapters, because the original
/// application reads each key on its own, with rules and messages of its own:
/// a blank string counts as absent; the first present, non-blank spelling of a
/// field wins (`{"persona_name":"", "lanlan_name":"X"}` names `X`); a flag or
/// an integer may come as text; a mistyped key is `{ok:false,
/// reason:"invalid_body", error:"<key> must be a string"}` naming the key
/// sent; the page's own values are kept as sent. A typed field would refuse
/// the whole body with serde's message, and serde's `alias` would refuse a
/// body naming two spellings. So each spelling is its own `Field` (each named
/// in the schema through `#[schema(value_type = ..)]`), and the readers below
/// are the rules. Every `Field` is `#[serde(default)]` (absent) one by one: a
/// container-level `default` would make utoipa describe each field's
/// `Default` value.
#[derive(Debug, Clone, Default)]
pub struct Field(Option<Value>);

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Field(Some(v)))
    }
}

impl Field {
    /// A field of an object the body carries (`event.request_id`).
    pub fn within(object: &Map<String, Value>, key: &str) -> Field {
        Field(object.get(key).cloned())
    }

    /// The value as sent, `null` included (absent: `None`).
    pub fn sent(&self) -> Option<&Value> {
        self.0.as_ref()
    }

    /// The value, unless absent or `null`.
    pub fn get(&self) -> Option<&Value> {
        self.0.as_ref().filter(|v| !v.is_null())
    }

    /// The text when the value is one (another type: `None`).
    pub fn as_str(&self) -> Option<&str> {
        self.get().and_then(Value::as_str)
    }

    /// The boolean when the value is one (another type: `None`).
    pub fn as_bool(&self) -> Option<bool> {
        self.get().and_then(Value::as_bool)
    }

    /// The number when the value is one (another type: `None`).
    pub fn as_f64(&self) -> Option<f64> {
        self.get().and_then(Value::as_f64)
    }

    /// The object when the value is one (another type: `None`).
    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        self.get().and_then(Value::as_object)
    }

    /// The trimmed text; absent, `null` or blank is `None`; another type is
    /// `Err` (the caller names the failure).
    pub fn trimmed(&self) -> Result<Option<&str>, Mistyped> {
        match self.get() {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim()).filter(|t| !t.is_empty())),
            Some(_) => Err(Mistyped),
        }
    }

    /// A text field (see [`Field::trimmed`]): another type is `invalid_body`,
    /// "`name` must be a string".
    pub fn text(&self, name: &str) -> Result<Option<String>, Failure> {
        self.trimmed()
            .map(|t| t.map(str::to_string))
            .map_err(|_| invalid(format!("{name} must be a string")))
    }

    /// An id: a text field, or a number taken as its text.
    fn id(&self, name: &str) -> Result<Option<String>, Failure> {
        match self.get() {
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            _ => self.text(name),
        }
    }

    /// A flag: `true`/`false`, `1`/`0`, or the text `true|false|1|0|yes|no|on|off`
    /// (any case); absent or `null` gives `default`; anything else is
    /// `invalid_body`, "`name` must be a boolean".
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, Failure> {
        let flag = match self.get() {
            None => return Ok(default),
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Some(true),
                "false" | "0" | "no" | "off" => Some(false),
                _ => None,
            },
            Some(Value::Number(n)) => match n.as_i64() {
                Some(1) => Some(true),
                Some(0) => Some(false),
                _ => None,
            },
            Some(_) => None,
        };
        flag.ok_or_else(|| invalid(format!("{name} must be a boolean")))
    }

    /// An integer in `min..=max`: a JSON integer or a text holding one. Absent
    /// or `null` is `None`; anything else — a fraction, NaN, a value outside
    /// the range, an object — is `invalid_body` naming the field and its range.
    /// No conversion happens before the check.
    pub fn int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, Failure> {
        let n = match self.get() {
            None => return Ok(None),
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
            Some(_) => None,
        };
        match n {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(invalid(format!(
                "{name} must be an integer from {min} to {max}"
            ))),
        }
    }

    /// An object field: another type is `invalid_body`, "`name` must be an object".
    pub fn object(&self, name: &str) -> Result<Option<&Map<String, Value>>, Failure> {
        match self.get() {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(invalid(format!("{name} must be an object"))),
        }
    }
}

/// A field whose value has another type than its rule takes.
#[derive(Debug)]
pub struct Mistyped;

/// `invalid_body` with its `error` text.
pub fn invalid(error: impl Into<String>) -> Failure {
    Failure::new(Reason::InvalidBody).with("error", error.into())
}

/// The first of a field's spellings that gives a text (see [`Field::text`]):
/// one that is absent, `null` or blank is skipped, a mistyped one is refused
/// under its own name.
pub fn first_text(spellings: &[(&Field, &str)]) -> Result<Option<String>, Failure> {
    for (field, name) in spellings {
        if let Some(t) = field.text(name)? {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// The first spelling of a field that was sent, `null` included (the icebreaker's
/// free-text history reads it so).
pub fn first_sent<'a>(spellings: &[&'a Field]) -> Option<&'a Value> {
    spellings.iter().find_map(|f| f.sent())
}

/// An id of at most [`MAX_ID_CHARS`] characters from its spellings (numbers
/// as text when `numbers`), longer is `invalid_body`, "`name` is too long".
fn bounded_id(
    spellings: &[(&Field, &str)],
    numbers: bool,
    name: &str,
) -> Result<Option<String>, Failure> {
    let mut id = None;
    for (field, key) in spellings {
        let v = if numbers {
            field.id(key)?
        } else {
            field.text(key)?
        };
        if v.is_some() {
            id = v;
            break;
        }
    }
    if id
        .as_ref()
        .is_some_and(|v| v.chars().count() > MAX_ID_CHARS)
    {
        return Err(invalid(format!("{name} is too long")));
    }
    Ok(id)
}

/// The current character; `missing_persona_name` when there is none.
pub fn current_persona(st: &AppState) -> Result<String, Failure> {
    st.characters
        .resolve(None)
        .ok_or_else(|| Failure::new(Reason::MissingPersonaName))
}

/// The character a call names (required).
#[derive(Deserialize, ToSchema)]
pub struct BodyCharacter {
    /// The character (also `personaName` or `lanlan_name`: the first
    /// non-blank spelling is taken; at most 128 characters).
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    persona_name: Field,
    /// Another spelling of `persona_name`.
    #[serde(default, rename = "personaName")]
    #[schema(value_type = Option<String>)]
    persona_name_camel: Field,
    /// Another spelling of `persona_name`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    lanlan_name: Field,
}

impl BodyCharacter {
    /// The character named, if any.
    pub fn given(&self) -> Result<Option<String>, Failure> {
        persona_of(
            &self.persona_name,
            &self.persona_name_camel,
            &self.lanlan_name,
        )
    }

    /// The character named; `missing_persona_name` without one.
    pub fn name(&self) -> Result<String, Failure> {
        self.given()?
            .ok_or_else(|| Failure::new(Reason::MissingPersonaName))
    }
}

/// The character a call may name (the route says what stands in for none).
#[derive(Deserialize, ToSchema)]
pub struct BodyCharacterOptional {
    /// The character (optional: see the route; also `personaName` or
    /// `lanlan_name`: the first non-blank spelling is taken; at most 128 characters).
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    persona_name: Field,
    /// Another spelling of `persona_name`.
    #[serde(default, rename = "personaName")]
    #[schema(value_type = Option<String>)]
    persona_name_camel: Field,
    /// Another spelling of `persona_name`.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    lanlan_name: Field,
}

impl BodyCharacterOptional {
    /// The character named, if any.
    pub fn given(&self) -> Result<Option<String>, Failure> {
        persona_of(
            &self.persona_name,
            &self.persona_name_camel,
            &self.lanlan_name,
        )
    }

    /// The character named, where the route needs one: `missing_persona_name` without.
    pub fn name(&self) -> Result<String, Failure> {
        self.given()?
            .ok_or_else(|| Failure::new(Reason::MissingPersonaName))
    }

    /// The character named, else the current one; `missing_persona_name` with neither.
    pub fn or_current(&self, st: &AppState) -> Result<String, Failure> {
        match self.given()? {
            Some(p) => Ok(p),
            None => current_persona(st),
        }
    }
}

fn persona_of(main: &Field, camel: &Field, lanlan: &Field) -> Result<Option<String>, Failure> {
    bounded_id(
        &[
            (main, "persona_name"),
            (camel, "personaName"),
            (lanlan, "lanlan_name"),
        ],
        false,
        "persona_name",
    )
}

/// The session a call names (optional).
#[derive(Deserialize, ToSchema)]
pub struct BodySession {
    /// The round's session (also `sessionId`; a number is taken as its text;
    /// at most 128 characters). Without one, the active route's session.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    session_id: Field,
    /// Another spelling of `session_id`.
    #[serde(default, rename = "sessionId")]
    #[schema(value_type = Option<String>)]
    session_id_camel: Field,
}

impl BodySession {
    /// The session named, if any.
    pub fn id(&self) -> Result<Option<String>, Failure> {
        session_of(&self.session_id, &self.session_id_camel)
    }
}

/// The session a call names (required: `missing_session_id` without one).
#[derive(Deserialize, ToSchema)]
pub struct BodySessionRequired {
    /// The session (also `sessionId`; a number is taken as its text; at most
    /// 128 characters).
    #[schema(value_type = String, required = true)]
    #[serde(default)]
    session_id: Field,
    /// Another spelling of `session_id`.
    #[serde(default, rename = "sessionId")]
    #[schema(value_type = Option<String>)]
    session_id_camel: Field,
}

impl BodySessionRequired {
    /// The session named, if any (the caller answers its absence).
    pub fn id(&self) -> Result<Option<String>, Failure> {
        session_of(&self.session_id, &self.session_id_camel)
    }
}

fn session_of(main: &Field, camel: &Field) -> Result<Option<String>, Failure> {
    bounded_id(
        &[(main, "session_id"), (camel, "sessionId")],
        true,
        "session_id",
    )
}

/// The page's signals a route call may carry, camelCase or snake_case: each
/// is the first spelling whose value has the right type (others are ignored).
#[derive(Deserialize, ToSchema)]
pub struct PageSignals {
    /// `visible` or `hidden`.
    #[serde(default, rename = "visibilityState")]
    #[schema(value_type = Option<String>)]
    visibility_state_camel: Field,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    visibility_state: Field,
    #[serde(default, rename = "pageVisible")]
    #[schema(value_type = Option<bool>)]
    page_visible_camel: Field,
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    page_visible: Field,
    #[serde(default, rename = "gameStarted")]
    #[schema(value_type = Option<bool>)]
    game_started_camel: Field,
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    game_started: Field,
    /// 0 to 30 days in milliseconds (else ignored).
    #[serde(default, rename = "gameStartedElapsedMs")]
    #[schema(value_type = Option<f64>)]
    game_started_elapsed_ms_camel: Field,
    #[schema(value_type = Option<f64>)]
    #[serde(default)]
    game_started_elapsed_ms: Field,
    /// The page's own state (kept as sent).
    #[serde(default, rename = "currentState")]
    #[schema(value_type = Option<Object>)]
    current_state_camel: Field,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    current_state: Field,
    /// The page's final score (kept as sent).
    #[serde(default, rename = "finalScore")]
    #[schema(value_type = Option<Object>)]
    final_score_camel: Field,
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    final_score: Field,
}

impl PageSignals {
    /// The signals sent.
    pub fn signals(&self) -> Signals {
        let text = |a: &Field, b: &Field| {
            a.as_str()
                .or_else(|| b.as_str())
                .map(|v| v.trim().to_ascii_lowercase().chars().take(32).collect())
        };
        let object = |a: &Field, b: &Field| {
            a.as_object()
                .or_else(|| b.as_object())
                .map(|o| Value::Object(o.clone()))
        };
        Signals {
            visibility_state: text(&self.visibility_state_camel, &self.visibility_state),
            page_visible: self
                .page_visible_camel
                .as_bool()
                .or_else(|| self.page_visible.as_bool()),
            game_started: self
                .game_started_camel
                .as_bool()
                .or_else(|| self.game_started.as_bool()),
            game_started_elapsed_ms: self
                .game_started_elapsed_ms_camel
                .as_f64()
                .or_else(|| self.game_started_elapsed_ms.as_f64())
                // 0 to 30 days; anything else (NaN, negative, 1e308) is ignored
                // like a value of the wrong type.
                .filter(|v| v.is_finite() && (0.0..=MAX_ELAPSED_MS).contains(v)),
            current_state: object(&self.current_state_camel, &self.current_state),
            final_score: object(&self.final_score_camel, &self.final_score),
        }
    }
}

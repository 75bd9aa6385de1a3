//! The per-character routes of the original pages (`/api/characters/...` besides
//! core's own), on companiond's characters store (docs/frontend.md).
//!
//! Storage: user fields and the model binding (`model_type`, `live2d`, `vrm`, `mmd`,
//! `lighting`, ...; what `page_config` reads) are top-level keys of the profile;
//! settings of the original pages without a top-level home (`field_order`,
//! `mmd_settings`, `touch_set`, `language_preference`) live under the profile's
//! `_reserved` object, so they move with a rename and leave with a delete.

//!
//! By job: [`cards`] (the current character, create, save, delete, the master
//! profile and rename), [`settings`] (voice mode, MMD viewer, lighting, touch
//! reactions, reply language, voices), [`binding`] (the model bound to a
//! character) and [`onboarding`] (first-run onboarding, presets, card lists).

pub(crate) mod binding;
pub(crate) mod cards;
pub(crate) mod onboarding;
pub(crate) mod settings;

use axum::extract::{FromRequest, FromRequestParts, Path as UrlPath, Request};
use axum::response::{IntoResponse, Response};
pub(crate) use companiond_core::characters::{
    validate_name, CharacterError, NameRules, MASTER_DOC, SYSTEM_RESERVED,
};
use companiond_core::envelope::{BodyOf, BodyRejection};
use companiond_core::AppState;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Map, Value};

pub(crate) use crate::error::{Answer, FrontendError};

/// Profile keys owned by the system besides core's [`SYSTEM_RESERVED`] (never
/// replaced by a form save).
pub(crate) const MORE_RESERVED: &[&str] = &["avatar", "pngtuber", "name"];

/// Body keys a form save may set although they are reserved.
pub(crate) const FORM_SETTABLE: &[&str] = &["voice_id", "model_type"];

pub(crate) fn is_reserved(k: &str) -> bool {
    SYSTEM_RESERVED.contains(&k) || MORE_RESERVED.contains(&k) || k.starts_with("master_")
}

pub(crate) fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// The request of a per-character edit (`.../{name}...` with a JSON object
/// body parsed into `B`): the path's name, then the body, each refused as its
/// own extractor refuses it (`UrlPath`, then `B`'s [`BodyRejection`]: the
/// 413/422 `JsonBody` gives).
pub(crate) struct CharacterEdit<B> {
    pub name: String,
    pub body: B,
}

impl<B> FromRequest<AppState> for CharacterEdit<B>
where
    B: DeserializeOwned + BodyRejection<Error = Response>,
{
    type Rejection = Response;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let UrlPath(name) = UrlPath::<String>::from_request_parts(&mut parts, st)
            .await
            .map_err(IntoResponse::into_response)?;
        let body = BodyOf::<B>::read(body).await?;
        Ok(CharacterEdit { name, body })
    }
}

/// A body field as sent, for a handler that judges presence and type itself:
/// absent, `null`, a value of its type, or a value of another type.
#[derive(Debug, Default)]
pub(crate) enum Given<T> {
    #[default]
    Absent,
    Null,
    Is(T),
    Other,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Given<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Given::Null,
            v => serde_json::from_value(v).map_or(Given::Other, Given::Is),
        })
    }
}

impl<T> Given<T> {
    /// The key was sent (`null` too).
    pub(crate) fn is_given(&self) -> bool {
        !matches!(self, Given::Absent)
    }

    /// Sent with a value of another type than `T` (not `null`).
    pub(crate) fn is_other(&self) -> bool {
        matches!(self, Given::Other)
    }

    /// The value, when it has the type.
    pub(crate) fn value(&self) -> Option<&T> {
        match self {
            Given::Is(v) => Some(v),
            _ => None,
        }
    }
}

/// 400 `invalid_request` with `msg`.
pub(crate) fn bad(msg: impl Into<String>) -> FrontendError {
    FrontendError::BadRequest(msg.into())
}

/// The character `name` exists; else its 404.
pub(crate) fn existing(st: &AppState, name: &str) -> Answer<()> {
    if st.characters.exists(name) {
        Ok(())
    } else {
        Err(CharacterError::NotFound(name.to_string()).into())
    }
}

/// The profile of character `name`; else its 404.
pub(crate) fn profile_of(st: &AppState, name: &str) -> Answer<Value> {
    st.characters
        .profile(name)
        .map(companiond_core::characters::Profile::into_value)
        .ok_or_else(|| CharacterError::NotFound(name.to_string()).into())
}

/// Change one profile atomically; 404 when the character is missing.
pub(crate) async fn update_profile<R>(
    st: &AppState,
    name: &str,
    f: impl FnOnce(&mut Map<String, Value>) -> Result<R, CharacterError>,
) -> Result<R, CharacterError> {
    let name = name.to_string();
    st.characters
        .mutate(move |doc| {
            let Some(p) = doc.characters.get_mut(&name) else {
                return Err(CharacterError::NotFound(name));
            };
            if !p.is_object() {
                *p = json!({});
            }
            match p.as_object_mut() {
                Some(m) => f(m),
                None => Err(CharacterError::Storage("profile is not an object".into())),
            }
        })
        .await
}

pub(crate) fn reserved_obj(m: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let r = m.entry("_reserved").or_insert_with(|| json!({}));
    if !r.is_object() {
        *r = json!({});
    }
    match r {
        Value::Object(o) => o,
        _ => unreachable!("just made an object"),
    }
}

pub(crate) fn reserved_get(profile: &Value, key: &str) -> Option<Value> {
    profile.get("_reserved").and_then(|r| r.get(key)).cloned()
}

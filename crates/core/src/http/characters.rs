//! The characters routes: list, create, switch, delete (the rename route comes
//! with the memory family). The registry itself is `crate::characters`.

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::api::{Api, DocumentedError, ErrorDoc};
use super::envelope::{loose, ok_json, JsonBody, SuccessError};
use crate::characters::{original_profiles, CharacterError, NameError, MASTER_DOC};
use crate::state::AppState;

/// The answer of a refused registry operation (status and code by variant).
impl CharacterError {
    pub fn into_response(self) -> Response {
        match self {
            CharacterError::Invalid(e) => SuccessError::new(e.message())
                .code(e.code())
                .status(StatusCode::BAD_REQUEST),
            CharacterError::Exists(n) => {
                SuccessError::new(format!("character {n:?} already exists"))
                    .code("character_exists")
                    .status(StatusCode::CONFLICT)
            }
            CharacterError::NotFound(n) => {
                SuccessError::new(format!("character {n:?} does not exist"))
                    .code("character_not_found")
                    .status(StatusCode::NOT_FOUND)
            }
            CharacterError::LastCharacter => {
                SuccessError::new("the last character cannot be deleted")
                    .code("last_character")
                    .status(StatusCode::CONFLICT)
            }
            CharacterError::Storage(e) => crate::disk::storage_error(e),
        }
    }
}

impl IntoResponse for CharacterError {
    fn into_response(self) -> Response {
        CharacterError::into_response(self)
    }
}

/// Every answer of [`CharacterError`], read back from one sample per variant.
impl DocumentedError for CharacterError {
    fn answers() -> Vec<ErrorDoc> {
        let mut out: Vec<ErrorDoc> = NameError::ALL
            .iter()
            .map(|e| ErrorDoc::observed(e.message(), CharacterError::Invalid(*e)))
            .collect();
        out.extend([
            ErrorDoc::observed(
                "a character of that name exists",
                CharacterError::Exists("Mika".into()),
            ),
            ErrorDoc::observed(
                "no character of that name",
                CharacterError::NotFound("Nobody".into()),
            ),
            ErrorDoc::observed(
                "the last character cannot be deleted",
                CharacterError::LastCharacter,
            ),
            ErrorDoc::observed(
                "the characters file could not be written",
                CharacterError::Storage("disk full".into()),
            ),
        ]);
        out
    }
}

/// The body of a create: the name and the profile fields, stored as sent
/// (in the order sent; `_csrf_token` is dropped). A name that is not text is
/// missing (400 `empty`).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"name": "Mika", "model_type": "live2d", "voice": "soft"}))]
struct NewProfile {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, pattern = "\\S")]
    name: Option<String>,
    /// Profile fields, stored as sent.
    #[serde(flatten)]
    fields: Map<String, Value>,
}

/// `{name}`: which character.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"name": "Mika"}))]
struct NameBody {
    name: String,
}

/// A character's profile: its name and its open profile fields (the original
/// application's card fields, model binding, voice ... all kept as sent).
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"name": "Mika", "model_type": "live2d", "voice": "soft"}))]
struct Profile {
    name: String,
    /// Profile fields, stored as sent.
    #[serde(flatten)]
    fields: Map<String, Value>,
}

/// `GET /api/characters`: the characters and the current one, plus the
/// original application's characters document fields.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "current": "Companion",
    "characters": [{"name": "Companion"}], "主人": {}, "猫娘": {"Companion": {"model_type": "live2d"}},
    "当前猫娘": "Companion"}))]
struct CharacterList {
    success: bool,
    current: String,
    characters: Vec<Profile>,
    /// The master profile (the original application's `主人`).
    #[serde(rename = "主人")]
    #[schema(value_type = Object)]
    master: Value,
    /// Profiles by name without `name`, `model_type` defaulted to `live2d`.
    #[serde(rename = "猫娘")]
    #[schema(value_type = Object)]
    originals: Map<String, Value>,
    /// The current character (the original application's `当前猫娘`).
    #[serde(rename = "当前猫娘")]
    current_original: String,
}

/// `{success, name}`: the created character's name as stored (trimmed).
#[derive(Serialize, ToSchema)]
struct Created {
    success: bool,
    name: String,
}

/// `{success, current}`.
#[derive(Serialize, ToSchema)]
struct CurrentSet {
    success: bool,
    current: String,
}

/// `{success: true}`.
#[derive(Serialize, ToSchema)]
struct Done {
    success: bool,
}

async fn list(State(st): State<AppState>) -> Response {
    let doc = st.characters.snapshot();
    let characters: Vec<Profile> = doc
        .characters
        .iter()
        .map(|(name, profile)| {
            let mut fields = profile.as_object().cloned().unwrap_or_default();
            fields.remove("name");
            Profile {
                name: name.clone(),
                fields,
            }
        })
        .collect();
    let master = st
        .store
        .read::<Value>(MASTER_DOC)
        .await
        .ok()
        .flatten()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    ok_json(CharacterList {
        success: true,
        current: doc.current.clone(),
        characters,
        master,
        originals: original_profiles(&doc),
        current_original: doc.current.clone(),
    })
}

async fn create(State(st): State<AppState>, JsonBody(body, ..): JsonBody<NewProfile>) -> Response {
    let Some(name) = body.name else {
        return SuccessError::new("name is required")
            .code("empty")
            .status(StatusCode::BAD_REQUEST);
    };
    let mut profile = body.fields;
    profile.remove("_csrf_token");
    match st.characters.create(&name, profile).await {
        Ok(name) => {
            st.sessions.ensure(&name);
            ok_json(Created {
                success: true,
                name,
            })
        }
        Err(e) => e.into_response(),
    }
}

async fn set_current(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<NameBody>,
) -> Response {
    match st.characters.set_current(&body.name).await {
        Ok(current) => ok_json(CurrentSet {
            success: true,
            current,
        }),
        Err(e) => e.into_response(),
    }
}

async fn delete(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    // The character goes to the trash first (docs/data.md § Snapshots).
    match crate::snapshots::delete_to_trash(&st, &name).await {
        Ok(()) => {
            if let Some(m) = st.sessions.get(&name) {
                m.terminate(std::time::Duration::from_secs(3)).await;
            }
            st.sessions.remove(&name);
            ok_json(Done { success: true })
        }
        Err(e) => e.into_response(),
    }
}

/// The characters routes.
pub fn api(state: &AppState) -> Api {
    let api = Api::new(state, "characters")
        .about("The characters registry: list, create, switch, delete (rename is in memory); character cards: import, export, card image, greeting (docs/characters.md).")
        .get(
            "/api/characters",
            "list characters and the current one",
            list,
        )
        .id("list")
        .ok::<CharacterList>()
        .post("/api/characters/profile", "create a character", create)
        .id("create")
        .json_body::<NewProfile>()
        .ok::<Created>()
        .fails::<CharacterError>()
        .post(
            "/api/characters/current",
            "switch the current character",
            set_current,
        )
        .id("set_current")
        .json_body::<NameBody>()
        .ok::<CurrentSet>()
        .fails::<CharacterError>()
        .delete(
            "/api/characters/profile/{name}",
            "delete a character",
            delete,
        )
        .id("delete")
        .ok::<Done>()
        .fails::<CharacterError>();
    super::cards::routes(api)
}

//! The characters routes: list, create, switch, delete (the rename route comes
//! with the memory family). The registry itself is `crate::characters`.

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::api::Api;
use super::envelope::{ok_json, JsonBody, SuccessError};
use crate::characters::{original_profiles, CharacterError, MASTER_DOC};
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
            CharacterError::Storage(e) => SuccessError::new(e)
                .code("storage_error")
                .status(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }
}

impl IntoResponse for CharacterError {
    fn into_response(self) -> Response {
        CharacterError::into_response(self)
    }
}

#[derive(Deserialize)]
struct NameBody {
    name: String,
}

async fn list(State(st): State<AppState>) -> Response {
    let doc = st.characters.snapshot();
    let characters: Vec<Value> = doc
        .characters
        .iter()
        .map(|(name, profile)| {
            let mut m = profile.as_object().cloned().unwrap_or_default();
            m.insert("name".into(), Value::String(name.clone()));
            Value::Object(m)
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
    ok_json(json!({
        "success": true, "current": doc.current, "characters": characters,
        "主人": master, "猫娘": original_profiles(&doc), "当前猫娘": doc.current,
    }))
}

async fn create(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(name) = body.get("name").and_then(Value::as_str).map(str::to_string) else {
        return SuccessError::new("name is required")
            .code("empty")
            .status(StatusCode::BAD_REQUEST);
    };
    let mut profile = body;
    profile.remove("name");
    profile.remove("_csrf_token");
    match st.characters.create(&name, profile).await {
        Ok(name) => {
            st.sessions.ensure(&name);
            ok_json(json!({"success": true, "name": name}))
        }
        Err(e) => e.into_response(),
    }
}

async fn set_current(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<NameBody>,
) -> Response {
    match st.characters.set_current(&body.name).await {
        Ok(current) => ok_json(json!({"success": true, "current": current})),
        Err(e) => e.into_response(),
    }
}

async fn delete(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    match st.characters.delete(&name).await {
        Ok(()) => {
            if let Some(m) = st.sessions.get(&name) {
                m.terminate(std::time::Duration::from_secs(3)).await;
            }
            st.sessions.remove(&name);
            ok_json(json!({"success": true}))
        }
        Err(e) => e.into_response(),
    }
}

/// The characters routes.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "characters")
        .get(
            "/api/characters",
            "list characters and the current one",
            list,
        )
        .post("/api/characters/profile", "create a character", create)
        .post(
            "/api/characters/current",
            "switch the current character",
            set_current,
        )
        .delete(
            "/api/characters/profile/{name}",
            "delete a character",
            delete,
        )
}

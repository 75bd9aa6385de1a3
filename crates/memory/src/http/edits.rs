//! Long-term edits: forget and correct an entry.

use axum::extract::State;
use axum::Json;
use companiond_core::envelope::{loose, BodyOf};
use companiond_core::AppState;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::longterm::{self, Correction};

use super::{bad, body_str, Answer};

/// Longest corrected text.
const MAX_TEXT_CHARS: usize = 2000;

/// The body of `POST /api/memory/forget`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"character": "Companion", "id": "fact_1732540000000_ab12"}))]
pub(crate) struct ForgetBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    character: Option<String>,
    /// Id of a fact, reflection or persona entry.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    id: Option<String>,
}

/// The body of `POST /api/memory/correct`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"character": "Companion",
    "id": "fact_1732540000000_ab12", "text": "Likes green tea", "importance": 7}))]
pub(crate) struct CorrectBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    character: Option<String>,
    /// Id of a fact, reflection or persona entry.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    id: Option<String>,
    /// The corrected text.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 2000)]
    text: Option<String>,
    /// New importance of a fact.
    #[schema(minimum = 1, maximum = 10)]
    importance: Option<i64>,
    /// Whom the entry is about.
    entity: Option<Entity>,
}

/// Whom a memory entry is about.
#[derive(Deserialize, ToSchema)]
#[schema(as = MemoryEntity)]
#[allow(non_camel_case_types)]
pub(crate) enum Entity {
    master,
    neko,
    relationship,
}

impl Entity {
    fn name(&self) -> &'static str {
        match self {
            Entity::master => "master",
            Entity::neko => "neko",
            Entity::relationship => "relationship",
        }
    }
}

/// `POST /api/memory/forget` (`{character, id}`).
pub(crate) async fn forget(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<ForgetBody>,
) -> Answer<longterm::Forgotten> {
    let name = body_str(body.character, "character", 200)?;
    let id = body_str(body.id, "id", 200)?;
    longterm::forget(&st, &name, id).await.map(Json)
}

/// `POST /api/memory/correct` (`{character, id, text, importance?, entity?}`).
pub(crate) async fn correct(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<CorrectBody>,
) -> Answer<longterm::Corrected> {
    let name = body_str(body.character, "character", 200)?;
    let correction = Correction {
        id: body_str(body.id, "id", 200)?,
        text: body_str(body.text, "text", MAX_TEXT_CHARS)?,
        importance: match body.importance {
            None => None,
            Some(n @ 1..=10) => Some(n),
            Some(_) => return Err(bad("importance must be an integer from 1 to 10")),
        },
        entity: body.entity.map(|e| e.name().to_string()),
    };
    longterm::correct(&st, &name, correction).await.map(Json)
}

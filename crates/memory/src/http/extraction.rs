//! The long-term extraction: run it now, and how it fares.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{loose, no_store, BodyOf, QueryOf};
use companiond_core::{AppState, Ext};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::MemoryError;
use crate::longterm;
use crate::{extract, fence, MemoryRuntime};

use super::{body_str, character_param, Answer, CharacterQuery};

/// The body of `POST /api/memory/extract`.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"character": "Companion"}))]
pub(crate) struct ExtractBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 200)]
    character: Option<String>,
}

/// The answer of `POST /api/memory/extract`: what the extraction did.
#[derive(Serialize, ToSchema)]
pub(crate) struct Extracted {
    success: bool,
    character: String,
    #[serde(flatten)]
    outcome: extract::Outcome,
}

/// `POST /api/memory/extract` (`{character}`): `{success, character}` and the
/// extraction's outcome.
pub(crate) async fn extract_now(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<ExtractBody>,
) -> Answer<Extracted> {
    let name = body_str(body.character, "character", 200)?;
    fence::check(st.data_dir(), "extract", &format!("memory/{name}"))?;
    let outcome = extract::run_now(&st, &name).await?;
    Ok(Json(Extracted {
        success: true,
        character: name,
        outcome,
    }))
}

/// The answer of `GET /api/memory/extraction`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ExtractionStatus {
    success: bool,
    character: String,
    /// Whether the background extraction may run (both memory switches on).
    enabled: bool,
    /// Why it may not (`null` when enabled).
    disabled_reason: Option<String>,
    /// An extraction of this character runs right now.
    running: bool,
    #[serde(flatten)]
    health: extract::Health,
}

/// `GET /api/memory/extraction?character=`: how the character's background
/// extraction fares (failures, back-off, last error and success).
pub(crate) async fn extraction_status(
    State(st): State<AppState>,
    Ext(rt): Ext<MemoryRuntime>,
    QueryOf(q): QueryOf<CharacterQuery>,
) -> Response {
    let r = async {
        let name = character_param(&q.character)?;
        longterm::character(&st, &name)?;
        let disabled_reason = extract::allowed(&st).await.err();
        Ok::<_, MemoryError>(ExtractionStatus {
            success: true,
            enabled: disabled_reason.is_none(),
            disabled_reason,
            running: rt
                .tasks
                .is_running(&name, crate::tasks::TaskKind::Extraction),
            health: rt.extract.health(&name),
            character: name,
        })
    }
    .await;
    no_store(r.map(Json))
}

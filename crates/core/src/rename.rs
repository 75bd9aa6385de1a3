//! The character rename hook: the family that owns the rename transaction
//! (memory: configuration, memory storage and chat session together) installs
//! a [`Renamer`] in its `start()`; any other family renames a character
//! through [`rename_character`] without importing that family.
//!
//! Without an installed renamer the call fails with [`RenameFailure::Unavailable`].

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::AppState;

/// The rename transaction as a family provides it.
pub trait CharacterRename: Send + Sync {
    /// Rename `old` to `new`; `Ok` is the success body of the transaction.
    fn rename(&self, old: String, new: String) -> BoxFuture<'static, Result<Renamed, RenameError>>;
}

/// The success answer of a rename: either it ran (`changed`, with
/// `memory_renamed` and `memory_server_reloaded`), or the configuration
/// already held the new name (`already_renamed`, `exists_after`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"success": true, "changed": true, "memory_renamed": true,
    "memory_server_reloaded": true, "old_name": "Mika", "new_name": "Hana"}))]
pub struct Renamed {
    pub success: bool,
    pub changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already_renamed: Option<bool>,
    /// Whether the new name's memory storage exists (an earlier rename's result).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exists_after: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_renamed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_server_reloaded: Option<bool>,
    pub old_name: String,
    pub new_name: String,
}

/// The installed rename transaction (`state.provide(Arc::new(Renamer::new(..)))`).
pub struct Renamer(Arc<dyn CharacterRename>);

impl Renamer {
    pub fn new(rename: Arc<dyn CharacterRename>) -> Self {
        Renamer(rename)
    }
}

/// What kind of failure a rename met; the caller's error enum picks its
/// answer by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenameFailure {
    /// A name breaks the name rules (or both names are equal).
    Invalid,
    /// The character does not exist.
    NotFound,
    /// The rename cannot happen now or the destination is taken (fence, existing
    /// name, a half-done earlier rename, storage not writable).
    Conflict,
    /// An outside service failed.
    Upstream,
    /// Work of the character did not stop in time, or no family installed the
    /// rename transaction.
    Unavailable,
    /// The transaction failed (and says whether it was rolled back).
    Failed,
}

/// A failed rename: its kind, its message, the machine code and the further
/// fields the owning family reports with it (e.g. `rolled_back`).
#[derive(Debug)]
pub struct RenameError {
    pub kind: RenameFailure,
    pub message: String,
    pub code: Option<String>,
    pub fields: Map<String, Value>,
}

impl RenameError {
    /// No family installed the rename transaction.
    pub fn unavailable() -> Self {
        RenameError {
            kind: RenameFailure::Unavailable,
            message: "renaming a character is not available: the memory family is not running"
                .into(),
            code: Some("rename_unavailable".into()),
            fields: Map::new(),
        }
    }
}

impl std::fmt::Display for RenameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RenameError {}

/// Rename character `old` to `new` through the installed transaction.
pub async fn rename_character(
    state: &AppState,
    old: &str,
    new: &str,
) -> Result<Renamed, RenameError> {
    match state.provided::<Renamer>() {
        Some(r) => r.0.rename(old.to_string(), new.to_string()).await,
        None => Err(RenameError::unavailable()),
    }
}

//! The family's in-memory state: provided once in `start()`, reached through
//! `Ext<ConfigState>`.

use crate::catalog::CatalogCache;

/// What the configuration handlers share.
#[derive(Default)]
pub struct ConfigState {
    /// The provider catalog, parsed once per version of the bundle's file.
    pub catalog: CatalogCache,
}

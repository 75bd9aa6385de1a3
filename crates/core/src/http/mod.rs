//! The HTTP side of core: what handlers extract and how families reach their state.

mod ext;

pub use ext::Ext;

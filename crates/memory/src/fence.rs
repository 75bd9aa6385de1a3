//! The memory family's side of the write fence (`companiond_core::fence`):
//! every memory write checks it and answers 409 while it is up.

use std::path::Path;

use crate::error::MemoryError;

/// `Err(409)` while the fence is up.
pub fn check(data_dir: &Path, operation: &str, target: &str) -> Result<(), MemoryError> {
    let m = companiond_core::fence::mode(data_dir);
    if m.is_normal() {
        Ok(())
    } else {
        Err(MemoryError::Fence {
            mode: m.to_string(),
            operation: operation.to_string(),
            target: target.to_string(),
        })
    }
}

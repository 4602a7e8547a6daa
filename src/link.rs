//! Link the extension `_<name>_<backend>_<hash>.abi3.so` against torch (and cudart for CUDA).

use crate::error::Hint;

/// A linker failure.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("placeholder")]
    Placeholder,
}

impl Hint for LinkError {
    fn hint(&self) -> Option<String> {
        None
    }
}

//! Toolchain discovery: Python + torch facts, nvcc, the host C++ compiler, and preflight.

use crate::error::Hint;

/// A missing or unusable tool, with the command that fixes it.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("placeholder")]
    Placeholder,
}

impl Hint for ToolchainError {
    fn hint(&self) -> Option<String> {
        None
    }
}

//! Compile jobs: command construction (data), one runner (jobs limit, first failure stops the
//! rest), and the object cache keyed on source, headers, flags and compiler.

use crate::error::Hint;

/// A compiler failure, with the command and its diagnostics.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("placeholder")]
    Placeholder,
}

impl Hint for CompileError {
    fn hint(&self) -> Option<String> {
        None
    }
}

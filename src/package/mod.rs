//! Hub variant writer: generated files, metadata.json with digest, staged and renamed into place.

use crate::error::Hint;

/// A packaging failure.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("placeholder")]
    Placeholder,
}

impl Hint for PackageError {
    fn hint(&self) -> Option<String> {
        None
    }
}

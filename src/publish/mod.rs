//! Hub upload through the hf-hub crate: verify, diff against the branch, commit, card.

use crate::error::Hint;

/// A publish failure. Never contains the token.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("placeholder")]
    Placeholder,
}

impl Hint for PublishError {
    fn hint(&self) -> Option<String> {
        None
    }
}

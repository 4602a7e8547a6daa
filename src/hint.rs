//! The `hint:` line every error can offer. A leaf module: stages import it, it imports nothing.

/// Something every stage error can offer: what the user should do next.
pub trait Hint {
    /// A line for `hint:`, or `None` when there is nothing useful to add.
    fn hint(&self) -> Option<String>;
}

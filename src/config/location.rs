//! Where something is written in build.toml: the position every message and warning points at.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// A position in build.toml, printed `path:line:column` (1-based, columns in characters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Location {
    /// The manifest as the user named it (`build.toml`, `proj/build.toml`).
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

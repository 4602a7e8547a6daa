//! build.toml: the HF kernel-builder format (edition 5 and edition-less v4) plus kbuild's
//! `[kbuild]` extension, parsed strictly with spans and validated against the project tree.

mod model;

pub use model::*;

use std::path::Path;

use crate::error::Hint;

/// A build.toml problem, located at file:line:col where possible.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("placeholder")]
    Placeholder,
}

impl Hint for ConfigError {
    fn hint(&self) -> Option<String> {
        None
    }
}

/// Read and validate `<project_dir>/build.toml`.
pub fn load(project_dir: &Path) -> Result<Project, ConfigError> {
    let _ = project_dir;
    todo!("config helper implements this")
}

//! What the rules share: how they run (`CheckOptions`) and what they report (`Finding`).

use std::path::PathBuf;

use serde::Serialize;

use crate::package;

/// One violation: the rule, the file, what is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    /// Path in the variant (or the variant directory itself).
    pub file: String,
    pub message: String,
    pub fix: String,
}

/// Which rules run and how.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The manylinux policy for symbol versions (`manylinux_2_28`); `None` skips the rule.
    pub manylinux: Option<String>,
    /// Lists the cubins of a CUDA extension; `None` skips the `archs` rule.
    pub cuobjdump: Option<PathBuf>,
    /// Skip the extension rules for a `.so` that is not an ELF shared object (publish's
    /// default: the ABI cannot be evaluated there, and the digest already pins the file).
    pub lenient: bool,
    /// The cap on what an artifact or wheel may unpack to.
    pub unpack: package::UnpackLimits,
}

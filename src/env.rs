//! The one place kbuild reads its environment: clippy's `disallowed_methods` (clippy.toml)
//! keeps `std::env::var*` out of every other file, so what kbuild reads is found by looking for
//! the callers of these two. A leaf module.

use std::ffi::{OsStr, OsString};

/// `std::env::var`: the variable as UTF-8 text.
#[allow(
    clippy::disallowed_methods,
    reason = "the one seam for environment reads"
)]
pub fn var(name: impl AsRef<OsStr>) -> Result<String, std::env::VarError> {
    std::env::var(name)
}

/// `std::env::var_os`: the variable as it is.
#[allow(
    clippy::disallowed_methods,
    reason = "the one seam for environment reads"
)]
pub fn var_os(name: impl AsRef<OsStr>) -> Option<OsString> {
    std::env::var_os(name)
}

//! Why `kbuild check` could not look at its PATH at all (a variant it can read but that breaks
//! a rule is a finding, not an error).

use std::path::PathBuf;

use crate::hint::Hint;
use crate::package::PackageError;

/// What PATH may be, for the hints.
const PATH_FORMS: &str =
    "a build directory, a variant directory, an artifact (`.tar.gz`) or a wheel (`.whl`)";

/// `kbuild check` cannot read PATH.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("`{}` does not exist", path.display())]
    Missing { path: PathBuf },
    /// A directory that is no variant and holds none.
    #[error("no variant in `{}`", path.display())]
    NoVariants {
        path: PathBuf,
        /// Artifacts and wheels in it (checked one at a time), by name.
        archives: Vec<String>,
    },
    #[error(transparent)]
    Package(#[from] PackageError),
}

impl Hint for CheckError {
    fn hint(&self) -> Option<String> {
        match self {
            CheckError::NoVariants { path, archives } if !archives.is_empty() => Some(format!(
                "check one artifact or wheel at a time, e.g. `kbuild check {}`",
                path.join(&archives[0]).display()
            )),
            CheckError::Missing { .. } | CheckError::NoVariants { .. } => Some(format!(
                "build first (`kbuild build`), or pass PATH: {PATH_FORMS}"
            )),
            CheckError::Package(e) => e.hint(),
        }
    }
}
